"""`--report-to tensorboard`: TensorBoard event files per RL run, from the RL loop's own metrics records.

rl.train appends one record per step to its history (and to metrics.jsonl); this module turns records into
scalars under TRL's names (transformers' `rewrite_logs` puts training scalars under train/, evaluations under
eval/), so `tensorboard --logdir <dir>` shows reasonlab runs beside TRL ones. It never touches the loop:
`reasonlab train` follows metrics.jsonl from the train callback (live), the lab and sweeps write each run's file
when the run's result reaches the driver (so cluster workers need no shared log directory).

Needs the `tensorboard` package (`pip install 'reasonlab[ray]'` or `pip install tensorboard`); imported lazily.
"""
from __future__ import annotations

import json
import os
import shutil

REPORT_TO = ("none", "tensorboard")

# metrics record key -> TensorBoard tag (TRL's GRPO names where TRL has one)
TAGS = {"reward": "train/reward", "reward_std": "train/reward_std", "acc": "train/accuracy",
        "frac_reward_zero_std": "train/frac_reward_zero_std", "kl": "train/kl", "kl_exact": "train/kl_exact",
        "entropy": "train/entropy", "length": "train/completions/mean_length",
        "length_min": "train/completions/min_length", "length_max": "train/completions/max_length",
        "clip_low": "train/clip_ratio/low_mean", "clip_high": "train/clip_ratio/high_mean",
        "grad_norm": "train/grad_norm", "step_time": "train/step_time", "tokens_per_s": "train/tokens_per_s"}


def check(report_to: str) -> None:
    """Fail fast (before any training) on an unknown target or a missing tensorboard package."""
    if report_to not in REPORT_TO:
        raise ValueError(f"unknown --report-to {report_to!r}: choose from {', '.join(REPORT_TO)}")
    if report_to == "tensorboard":
        try:
            from torch.utils.tensorboard import SummaryWriter  # noqa: F401
        except ImportError:
            raise ValueError("--report-to tensorboard needs the tensorboard package: pip install tensorboard") from None


def scalars(rec: dict) -> dict[str, float]:
    """The TensorBoard scalars of one metrics record (format shares as train/share/<format>)."""
    out = {tag: float(rec[k]) for k, tag in TAGS.items() if isinstance(rec.get(k), (int, float))}
    for f, v in (rec.get("share") or {}).items():
        out[f"train/share/{f}"] = float(v)
    return out


class Writer:
    """A SummaryWriter for one run directory; add(record) logs a metrics record at its step."""

    def __init__(self, log_dir: str, fresh: bool = True):
        from torch.utils.tensorboard import SummaryWriter
        if fresh and os.path.isdir(log_dir):
            shutil.rmtree(log_dir)     # a rerun (retry, --fresh) replaces the curves instead of doubling them
        self.w = SummaryWriter(log_dir, flush_secs=10)

    def add(self, rec: dict, prefix: str = "") -> None:
        for tag, v in scalars(rec).items():
            self.w.add_scalar(prefix + tag, v, rec["step"])

    def add_eval(self, step: int, values: dict) -> None:
        for k, v in values.items():
            if isinstance(v, (int, float)):
                self.w.add_scalar(f"eval/{k}", float(v), step)

    def close(self) -> None:
        self.w.close()           # flushes: SummaryWriter's own flush interval is longer than a short run


def write_run(log_dir: str, hist: list[dict], evals: list[dict] | None = None, hparams: dict | None = None) -> str:
    """Write one RL run (its metrics records, optional greedy evaluations {step, acc, ...}) as a fresh event file."""
    w = Writer(log_dir)
    for rec in hist:
        if "step" in rec:
            w.add(rec)
    for e in evals or []:
        w.add_eval(e["step"], {k: v for k, v in e.items() if k != "step"})
    if hparams:
        w.w.add_text("config", "    " + json.dumps(hparams, sort_keys=True, default=str), 0)
    w.close()
    return log_dir


class JsonlFollower:
    """Live logging for `reasonlab train`: called from the train callback, it reads the lines metrics.jsonl gained
    since the last call and logs them."""

    def __init__(self, run_dir: str, log_dir: str, fresh: bool = True):
        self.path = os.path.join(run_dir, "metrics.jsonl")
        self.w = Writer(log_dir, fresh=fresh)
        self.seen = 0

    def __call__(self) -> None:
        if not os.path.exists(self.path):
            return
        with open(self.path) as f:
            lines = [line for line in f if line.strip()]
        for line in lines[self.seen:]:
            self.w.add(json.loads(line))
        self.seen = len(lines)
        self.w.w.flush()

    def close(self) -> None:
        self()
        self.w.close()


def write_lab(out: str, results: dict) -> list[str]:
    """The lab's RL runs (experiment rl: each algorithm and seed; adaptive: the direct share per step) as event
    files under <out>/tensorboard/."""
    dirs = []
    for r in results.get("rl", {}).get("results", []):
        for algo, run in r.items():
            if isinstance(run, dict) and "hist" in run:
                dirs.append(write_run(os.path.join(out, "tensorboard", "rl", algo, f"seed{run['seed']}"), run["hist"],
                                      run.get("curve")))
    for r in results.get("adaptive", {}).get("results", []):
        for run in r.get("runs", []):
            hist = [{"step": i + 1, "share": {"direct": s}} for i, s in enumerate(run.get("share_direct_over_steps", []))]
            dirs.append(write_run(os.path.join(out, "tensorboard", "adaptive", run["method"], f"seed{run['seed']}"), hist))
    return dirs
