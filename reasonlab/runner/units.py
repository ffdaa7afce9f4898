"""Running (experiment, config, seed) units into the result store: the engine under the lab and sweeps.

An arm is one experiment with one config, stored as a group of the store (the lab: <out>/<experiment>/, a
sweep: <out>/cells/<cell>/); it runs once per seed. A unit whose key is unchanged is read back, not rerun. The
seeds' base models are units of their own, queued first; each seed's units queue behind the models trained before
its own, so no worker waits on a model's lock while other work is left.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from typing import Any, Callable

from .. import experiments as X
from .. import tasks as T
from ..core.config import Seed, make
from ..io.checkpoint import cache_key
from ..io.files import resolve
from ..train.sft import base_cfg, base_name
from ..train.zoo import model_in_cache
from .executor import ExecConfig, Unit, run_units
from .store import Store
from .store import unit_key as store_key


@dataclass(frozen=True)
class Arm:
    group: str
    """where its results go in the store"""
    exp: str
    """the experiment"""
    config: Any
    """its Config"""
    seeds: tuple[Seed, ...] = ()
    """the seeds it runs (none: the run's)"""


def checkpoint_key(checkpoint: str) -> dict:
    """What a result started from a checkpoint depends on: the hash of its tensor bytes (from its metadata)."""
    with open(resolve(checkpoint) + ".json", encoding="utf-8") as f:
        return {"checkpoint_sha256": json.load(f).get("sha256")}


def unit_key(exp: str, seed: int, config, quick: bool = False, checkpoint: str | None = None) -> str:
    """What decides whether a finished result can be reused: the experiment and its config (its task among it), the
    seed, the starting model (the base model's recipe, or the checkpoint's weights), what else the experiment depends
    on, the version of its streams, the package and cache versions."""
    e = X.get(exp)
    base = checkpoint_key(checkpoint) if checkpoint else cache_key(base_cfg(seed, quick, task=task_of(config)))
    return store_key(exp=exp, seed=seed, config=asdict(config), base=base, **(e.depends(config) if e.depends else {}),
                     **({"streams": e.streams} if e.streams else {}))


def task_of(config) -> str:
    """The task a config runs on (an experiment's Config without a task field: digits)."""
    return getattr(config, "task", "digits")


def lab_base(env: X.Env, seed: int, task: str = "digits", task_files: tuple = ()) -> dict:
    """A unit that puts the seed's base model for a task into the cache (trained under a lock, or found there)."""
    for path in task_files:
        T.load_file(path)
    env.base(seed, task)
    return {"seed": seed, "task": task}


def lab_unit(exp: str, seed: int, config: dict, env: X.Env, plugins: tuple = (), task_files: tuple = ()) -> dict:
    """One (experiment, seed) unit, in whichever process runs it: the experiment and the task files looked up (their
    files loaded there too), its config rebuilt, its run."""
    for path in task_files:
        T.load_file(path)
    if exp not in X.names():
        X.load_plugins(plugins)
    e = X.get(exp)
    return e.run(make(e.Config, config), seed, env)


def longest_first(cost: str) -> list[str]:
    """The registered experiments by cost, longest first (ties: the report's order)."""
    return sorted(X.names(), key=lambda n: -getattr(X.get(n), cost))


def execute(arms: list[Arm], seeds, env: X.Env, execution: ExecConfig, store: Store, logs: str, fresh: bool = False,
            plugins: tuple = (), log: Callable = print, task_files: tuple = ()) -> tuple[dict, dict]:
    """Run (or reuse) every arm for every seed on `execution`, each result written to the store as it arrives.
    Returns ({unit id: seconds}, {unit id: error} of the units that still failed after their retries)."""
    units, where = [], {}
    for i, arm in enumerate(arms):
        e = X.get(arm.exp)
        for seed in arm.seeds or seeds:
            key = unit_key(arm.exp, seed, arm.config, env.quick, env.checkpoint)
            tag = f"[{i + 1}/{len(arms)}] {arm.group}, seed {seed}"
            if not fresh and store.reusable(arm.group, seed, key, e.check_result, log):
                log(f"{tag}: finished earlier, reused ({store.path(arm.group, seed)})")
                continue
            uid = f"{arm.group}/seed{seed}"
            units.append(Unit(uid, lab_unit, dict(exp=arm.exp, seed=seed, config=asdict(arm.config), env=env,
                                                  plugins=plugins, task_files=task_files),
                              log=os.path.join(logs, f"{uid.replace('/', '-')}.log")))
            where[uid] = (tag, arm.group, seed, key)
    bases = base_units(units, env, execution, logs, task_files)
    timing: dict[str, float] = {}

    def on_start(u: Unit, attempt: int) -> None:
        if u.uid in where:
            log(f"{where[u.uid][0]} ..." + (f" (attempt {attempt})" if attempt > 1 else ""))

    def on_done(u: Unit, res: dict, secs: float) -> None:
        timing[u.uid] = round(secs, 1)
        if u.uid in where:                      # else a base model: in the cache now
            _, group, seed, key = where[u.uid]
            store.write(group, seed, key, secs, res)
            log(f"    {u.uid} done in {secs:.1f}s")
    outcomes = run_units(bases + units, execution, on_done=on_done, log=log, on_start=on_start)
    if bases:
        timing["base models"] = round(sum(timing.get(u.uid, 0.0) for u in bases), 1)
    # a base model that failed resurfaces in its seed's units (each tries to train it again)
    failed = {uid: o.error for uid, o in outcomes.items() if not o.ok and uid in where}
    return timing, failed


def base_units(units: list[Unit], env: X.Env, execution: ExecConfig, logs: str, task_files: tuple = ()) -> list[Unit]:
    """The base models (seed, task) the units need and the cache lacks, one unit each (none with a checkpoint); the
    units are sorted so that a seed's wait behind its model's training costs no worker time, longest experiments
    first."""
    def need(u: Unit) -> tuple[int, str]:
        return u.kwargs["seed"], u.kwargs["config"].get("task", "digits")
    needed = {need(u) for u in units if X.get(u.kwargs["exp"]).uses_base}
    missing = [] if env.checkpoint else sorted(
        (s, t) for s, t in needed
        if not model_in_cache(base_name(s, env.quick, t), base_cfg(s, env.quick, task=t), env.cache))
    wave = {st: i // max(1, execution.workers) for i, st in enumerate(missing)}   # which round of training has it
    order = {name: i for i, name in enumerate(longest_first("run_cost"))}
    units.sort(key=lambda u: (wave.get(need(u), 0), order[u.kwargs["exp"]]))
    def uid(s: int, t: str) -> str:                   # base-model/seed0 (digits), base-model/modprod/seed0
        return "base-model/" + ("" if t == "digits" else t.replace(":", ",") + "/") + f"seed{s}"
    return [Unit(uid(s, t), lab_base, dict(env=env, seed=s, task=t, task_files=task_files),
                 log=os.path.join(logs, uid(s, t).replace("/", "-") + ".log")) for s, t in missing]
