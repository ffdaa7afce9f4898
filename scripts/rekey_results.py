"""Carry a lab's stored results across the renaming of config fields (docs/names.md), without rerunning them.

A record's key fingerprints its config by field name, so renaming a field (eval_n -> n_test, ...) changes every key
and the lab would rerun what it has. This script recomputes, for each record, the key it would have had under the
old names; only where that equals the stored key (the record was computed with exactly these values) does it write
the record again under the new key, with the config the result echoes renamed too. Anything else is left alone
and reruns.

    python scripts/rekey_results.py results/lab results/lab/placebo
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict

from reasonlab import __version__
from reasonlab import experiments as X
from reasonlab.io.checkpoint import CACHE_VERSION, cache_key, fingerprint
from reasonlab.runner import lab, units
from reasonlab.runner.config import LabConfig, split_group
from reasonlab.runner.executor import ExecConfig
from reasonlab.runner.store import Store
from reasonlab.train.sft import base_cfg

# new name -> old name, per experiment's Config and per config class in an experiment's `depends`
RENAMED = {
    **{e: {"n_test": "n"} for e in ("base", "budgets", "faithful", "passk", "my_idea")},
    "sampling": {"n_problems": "n"},
    "labels": {"n_test": "n", "n_train": "prm_n"},
    "voting": {"n_test": "n", "n_train": "verifier_n"},
    "star": {"n_test": "eval_n"},
    "rl": {"n_test": "eval_n", "n_probe": "probe_n"},
    "entropy": {"n_probe": "probe_n"},
    "kl": {"n_test": "eval_n", "n_probe": "probe_n", "n_seq": "seq_n"},
    "adaptive": {"n_test": "eval_n", "n_val": "select_n", "learning_rate": "lr"},
    "l1": {"n_test": "eval_n", "sft_learning_rate": "sft_lr"},
    "l1_recipe": {"n_test": "eval_n", "sft_learning_rate": "sft_lr"},
}
DEPENDS = {"verifier": {"n_train": "n_per_k", "learning_rate": "lr"}, "star": {"learning_rate": "lr"}}
RESULT_KEYS = {"labels": {"n_train": "prm_n"}}
"""keys of a result (not its "config" echo) that were renamed with their field"""


def old(d: dict, names: dict) -> dict:
    return {names.get(k, k): v for k, v in d.items()}


def keys(exp: str, seed: int, cfg: LabConfig, group: str) -> tuple[str, str]:
    """(the key under the new names, the key the same unit had under the old ones)."""
    config = cfg.config_of(group)
    e = X.get(exp)
    base = cache_key(base_cfg(seed, cfg.quick, task=units.task_of(config)))
    deps = e.depends(config) if e.depends else {}
    parts = dict(exp=exp, seed=seed, config=asdict(config), base=base, **deps)
    was = {**parts, "config": old(parts["config"], RENAMED.get(exp, {})),
           **{k: old(v, DEPENDS[k]) for k, v in deps.items() if k in DEPENDS}}
    return lab.unit_key(group, seed, cfg), fingerprint({**was, "version": __version__, "cache_version": CACHE_VERSION})


def renamed_result(exp: str, result: dict) -> dict:
    out = dict(result)
    for new, was in RESULT_KEYS.get(exp, {}).items():
        if was in out:
            out[new] = out.pop(was)
    if isinstance(out.get("config"), dict):
        back = {v: k for k, v in RENAMED.get(exp, {}).items()}
        out["config"] = {back.get(k, k): v for k, v in out["config"].items()}
    return out


def lab_config(root: str) -> LabConfig:
    with open(os.path.join(root, "config.json"), encoding="utf-8") as f:
        c = json.load(f)
    return LabConfig(**{**c, "seeds": tuple(c["seeds"]), "tasks": tuple(c.get("tasks", ())), "configs": {},
                        "only": tuple(c.get("only", ())), "experiment": (), "task_file": (),
                        "execution": ExecConfig(**c["execution"])})


def rekey(root: str, log=print) -> tuple[int, int, int]:
    """(records rekeyed, already current, left to rerun) under one lab's run directory."""
    cfg, store = lab_config(root), Store(root, packed=True)
    done = same = left = 0
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "logs" and not os.path.isfile(os.path.join(dirpath, d, "config.json")))
        seeds = sorted({int(f[4:].split(".")[0]) for f in files if f.startswith("seed") and ".json" in f})
        group = os.path.relpath(dirpath, root)
        if not seeds:
            continue
        exp, _ = split_group(group)
        if exp not in X.names():
            continue
        for s in seeds:
            rec = store.read(group, s)
            new, was = keys(exp, s, cfg, group)
            if rec["key"] == new:
                same += 1
            elif rec["key"] == was:
                store.write(group, s, new, rec["seconds"], renamed_result(exp, rec["result"]))
                done += 1
            else:
                left += 1
                log(f"  {group} seed {s}: key matches neither name set; it reruns")
    return done, same, left


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("roots", nargs="+", help="lab run directories (each with its config.json)")
    a = p.parse_args(argv)
    for root in a.roots:
        if not os.path.isfile(os.path.join(root, "config.json")):
            print(f"rekey_results: {root} has no config.json (not a lab's run directory)", file=sys.stderr)
            return 2
    for root in a.roots:
        done, same, left = rekey(root)
        print(f"{root}: {done} rekeyed, {same} already current, {left} left to rerun")
    return 0


if __name__ == "__main__":
    sys.exit(main())
