"""A toy experiment for the registry's and sweeps' tests: no model, one number per seed, each run noted in
$TOY_MARKER. $TOY_FAIL: a run whose offset is that value raises; Config.die: a directory where each (offset, seed)
kills its own process the first time it runs (a worker dying mid-unit; a field, so that Ray workers see it)."""
import os
import signal
import time
from dataclasses import dataclass

from reasonlab.experiments import Experiment, register
from reasonlab.stats.findings import seed_check, verdict_line


@dataclass
class Config:
    offset: float = 0.5
    """added to every seed's value"""
    sleep: float = 0.0
    """seconds each run sleeps first (a unit that is still running when a test stops the driver)"""
    die: str | None = None
    """a directory: each (offset, seed) kills its own process the first time it runs, leaving a mark there"""


def run(cfg: Config, seed: int, env) -> dict:
    time.sleep(cfg.sleep or float(os.environ.get("TOY_SLEEP", 0)))
    if os.environ.get("TOY_FAIL") and float(os.environ["TOY_FAIL"]) == cfg.offset:
        raise RuntimeError(f"toy boom at offset {cfg.offset}")
    if cfg.die:
        mark = os.path.join(cfg.die, f"{cfg.offset}-{seed}")
        if not os.path.exists(mark):
            open(mark, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get("TOY_MARKER"):
        with open(os.environ["TOY_MARKER"], "a") as f:
            f.write(f"{seed} {os.getpid()}\n")
    return {"value": cfg.offset + 0.01 * seed, "pid": os.getpid()}


def claims(rs: list[dict]) -> list[dict]:
    return [seed_check("toy", "The toy value is above zero", "value", [r["value"] for r in rs], 0.0)]


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    return [(f"## Toy: a value per seed\n\n{verdict_line(claims(rs)[0])}\n", "toy headline")]


def check(result) -> None:
    if not isinstance(result.get("value"), float):
        raise ValueError("a toy result needs a float value")


register(Experiment("toy", Config, run, claims, render, uses_base=False, check=check))
