"""Where a base recipe's steps go: train phases given as JSON and print, every `every` steps, the bar's three parts
on 100 problems per k (min over k of greedy forced S and T accuracy, S per k, forced A at k = 2). docs/LOG.md,
session 12, has the runs behind "Where the base recipe's 1900 steps go".

A spec is {"phases": [{"mix": [A, S, T], "steps": n, "batch": 64, "k": [2, 8], "lr": multiplier, "warmup": 30},
...], "lr": peak, "every": 100, "threads": n, "init": path, "save": path, "global": false}: each phase its own
warmup + cosine (as train.pretrain), or with "global" one schedule over all phases; init / save a state dict
(torch.save, for probing phases from a saved model; never used for the cache).

    PYTHONPATH=. python experiments/recipe_probe.py 4 '{"phases": [{"mix": [0, 0, 1], "steps": 500}]}'
"""
import json
import sys
import time

import numpy as np
import torch

from reasonlab.core.evaluate import evaluate, problems_per_k
from reasonlab.train.sft import build_model, make_sequences, split_targets, train_on_batches

seed, spec = int(sys.argv[1]), json.loads(sys.argv[2])
every, lr0 = spec.get("every", 100), spec.get("lr", 3e-3)
if "threads" in spec:
    torch.set_num_threads(spec["threads"])
probs, k2 = problems_per_k(100, 777), problems_per_k(200, 777, ks=[2])
model = build_model(seed)
if spec.get("init"):
    model.load_state_dict(torch.load(spec["init"], weights_only=True))
rng = np.random.default_rng(seed * 1_000_003)
t0, spent, hit = time.perf_counter(), [0.0], [None]


def check(step: int) -> None:
    """Print the bar's parts; evaluation time is not training time."""
    t = time.perf_counter()
    per_k = {f: evaluate(model, probs, force=[f])["per_k"] for f in "ST"}
    a2 = evaluate(model, k2, force=["A"])["acc"]
    spent[0] += time.perf_counter() - t
    s_min, t_min = (min(v["acc"] for v in per_k[f].values()) for f in "ST")
    ok = s_min >= 0.99 and t_min >= 0.99 and a2 >= 0.99
    trained = t - t0 - (spent[0] - (time.perf_counter() - t))
    if ok and hit[0] is None:
        hit[0] = (step, round(trained, 1))
    print(f"{step:5d} {trained:6.1f}s  S min {s_min:.2f} [" + " ".join(f"{v['acc']:.2f}" for v in per_k["S"].values())
          + f"]  T min {t_min:.2f}  A2 {a2:.2f}{'  BAR' if ok else ''}", flush=True)
    model.train()


def batch(ph: dict):
    return split_targets(make_sequences(rng, ph.get("batch", 64), ph["mix"], ph.get("k", [2, 8])))


phases = spec["phases"]
if spec.get("global"):   # one warmup + cosine over every phase
    bounds = np.cumsum([ph["steps"] for ph in phases])

    def get_batch(step):
        if step and step % every == 0:
            check(step)
        return batch(phases[int(np.searchsorted(bounds, step, side="right"))])
    train_on_batches(model, get_batch, int(bounds[-1]), lr=lr0, warmup=30, log=None)
    check(int(bounds[-1]))
else:
    done = 0
    for ph in phases:
        def get_batch(step, ph=ph, done=done):
            if step and (done + step) % every == 0:
                check(done + step)
            return batch(ph)
        train_on_batches(model, get_batch, ph["steps"], lr=lr0 * ph.get("lr", 1.0),
                         warmup=min(ph.get("warmup", 30), ph["steps"]), log=None)
        done += ph["steps"]
        check(done)
if spec.get("save"):
    torch.save(model.state_dict(), spec["save"])
print("train s", round(time.perf_counter() - t0 - spent[0], 1), "bar met at (step, s)", hit[0])
