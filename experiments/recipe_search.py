"""The base-recipe search of session 15 (docs/LOG.md): recipes from experiments/recipe_search.json trained per seed,
two at a time on one thread each, printing the bar's parts every 100 steps (min over k of greedy forced S and T on 100
problems per k, S per k, forced A at k = 2 on 200) and, at the end, the bar on 500 per k (evaluate.eval_table) with
free generation's format shares. Logs go to --logs/<name>.s<seed>.log; one summary line per run is printed.

A recipe is {"phases": [...], "lr": 3e-3, "sched": ..., "decay": 300, "gate_n": 100}, one AdamW for the whole run
(train.pretrain's keep_optimizer), batches of 64 unless a phase says "batch". A phase is {"steps": n, "mix": [A, S, T],
"k": [lo, hi]} or {"steps", "parts": [{"mix", "k", "frac"}, ...]} (each part that share of the batch, the first
filling the rest), with "lr" (a multiplier), "warmup" (30) and, per phase:
  "sched": "cos" (warmup + cosine over the phase, or over a run of phases marked "cont": true), "const" (warmup, then
  the peak), "decay" (cosine from the peak to a tenth, no warmup); "until": {"S", "T", "A2", "min", "max"}: the
  phase runs at most "max" steps and stops at the first test (every 100 steps from "min") at which forced S and T
  reach S / T at every k and forced A at k = 2 reaches A2, on gate_n validation problems per k (seed 31337);
or, for the whole recipe, "sched": "cos" (one warmup + cosine) or "wsd" (warmup, the peak, a cosine decay over the
last "decay" steps to a tenth).

    PYTHONPATH=. python experiments/recipe_search.py i1 g2 --seeds 0 1 2 3 4
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))


def train_one(seed: int, spec: dict) -> None:
    import numpy as np
    import torch

    from reasonlab.core.evaluate import eval_table, evaluate, passes_bar, problems_per_k
    from reasonlab.train.sft import AdamW, build_model, lr_at, make_sequences, split_targets
    lr0, phases = spec.get("lr", 3e-3), spec["phases"]
    probs, k2 = problems_per_k(100, 777), problems_per_k(200, 777, ks=[2])
    gn = spec.get("gate_n", 100)
    gate_p, gate_k2 = problems_per_k(gn, 31337, split="val"), problems_per_k(gn, 31337, ks=[2], split="val")
    model = build_model(seed)
    params = list(model.parameters())
    opt = AdamW(params, lr=lr0, betas=(0.9, 0.98))
    rng = np.random.default_rng(seed * 1_000_003)   # train.pretrain's stream
    t0, spent, hit = time.perf_counter(), [0.0], [None]

    def bar_parts(pp, kk):
        per_k = {f: evaluate(model, pp, force=[f])["per_k"] for f in "ST"}
        return per_k, evaluate(model, kk, force=["A"])["acc"]

    def check(step):   # evaluation time is not training time
        t = time.perf_counter()
        per_k, a2 = bar_parts(probs, k2)
        spent[0] += time.perf_counter() - t
        s_min, t_min = (min(v["acc"] for v in per_k[f].values()) for f in "ST")
        ok = s_min >= 0.99 and t_min >= 0.99 and a2 >= 0.99
        if ok and hit[0] is None:
            hit[0] = (step, round(t - t0 - (spent[0] - (time.perf_counter() - t)), 1))
        print(f"{step:5d} {t - t0 - spent[0]:6.1f}s  S min {s_min:.2f} ["
              + " ".join(f"{v['acc']:.2f}" for v in per_k["S"].values())
              + f"]  T min {t_min:.2f}  A2 {a2:.2f}{'  BAR' if ok else ''}", flush=True)
        model.train()

    def gate(g):       # a gated phase's test: training time
        per_k, a2 = bar_parts(gate_p, gate_k2)
        model.train()
        s_min, t_min = (min(v["acc"] for v in per_k[f].values()) for f in "ST")
        return s_min >= g.get("S", 0) and t_min >= g.get("T", 0) and a2 >= g.get("A2", 0)

    def batch(ph):
        B = ph.get("batch", spec.get("batch", 64))
        parts = ph.get("parts") or [{"mix": ph["mix"], "k": ph.get("k", [2, 8]), "frac": 1.0}]
        n = [int(round(B * p["frac"])) for p in parts]
        n[0] += B - sum(n)
        return split_targets(np.concatenate([make_sequences(rng, m, p["mix"], p.get("k", [2, 8]))
                                             for m, p in zip(n, parts) if m]))

    total = sum(ph.get("steps") or ph["until"]["max"] for ph in phases)

    def lr_global(step):   # the whole recipe's schedule ("sched" at the top level)
        mult = phases[phase_at[0]].get("lr", 1.0)
        if spec["sched"] == "cos":
            return lr_at(step, total, lr0, 30) * mult
        d, lo = spec.get("decay", 300), spec.get("min", 0.1)
        if step < 30:
            return lr0 * (step + 1) / 30 * mult
        if step < total - d:
            return lr0 * mult
        return lr0 * mult * (lo + (1 - lo) * 0.5 * (1 + math.cos(math.pi * (step - (total - d)) / d)))

    def lr_phase(i, s, steps):
        ph, mult = phases[i], phases[i].get("lr", 1.0)
        sched = ph.get("sched", "cos")
        if sched == "const":
            return lr0 * mult * min(1.0, (s + 1) / 30)
        if sched == "decay":
            return lr0 * mult * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * s / steps)))
        j, k = i, i                        # "cont": one warmup + cosine over a run of phases
        while j > 0 and phases[j].get("cont"):
            j -= 1
        while k + 1 < len(phases) and phases[k + 1].get("cont"):
            k += 1
        start = sum(p["steps"] for p in phases[j:i])
        length = sum(p["steps"] for p in phases[j:k + 1])
        return lr_at(start + s, length, lr0 * mult, min(phases[j].get("warmup", 30), length))

    step, phase_at = 0, [0]
    model.train()
    for i, ph in enumerate(phases):
        phase_at[0] = i
        g = ph.get("until")
        steps = g["max"] if g else ph["steps"]
        for s in range(steps):
            opt.param_groups[0]["lr"] = lr_global(step) if spec.get("sched") in ("cos", "wsd") else lr_phase(i, s, steps)
            inp, tgt = batch(ph)
            loss = model.loss(inp, tgt)
            loss.item()
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
            opt.step()
            step += 1
            if step % 100 == 0:
                check(step)
            if g and s + 1 >= g.get("min", 0) and (s + 1) % 100 == 0 and gate(g):
                print(f"  gate passed after {s + 1} steps of this phase", flush=True)
                break
    if step % 100:
        check(step)
    model.eval()
    tab = eval_table(model, 500)
    print("final passes", passes_bar(tab), "S", [round(v["acc"], 3) for v in tab["S"]["per_k"].values()],
          "T min", min(v["acc"] for v in tab["T"]["per_k"].values()), "A2", tab["A"]["per_k"][2]["acc"],
          "free share", {k: round(v, 2) for k, v in tab["free"]["share"].items()})
    print("train s", round(time.perf_counter() - t0 - spent[0], 1), "steps", step, "bar met at (step, s)", hit[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="+", help="recipes of experiments/recipe_search.json")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--jobs", type=int, default=2, help="runs at a time, one thread each")
    ap.add_argument("--logs", default="runs/recipe_search")
    ap.add_argument("--one", nargs=2, metavar=("SEED", "NAME"), help=argparse.SUPPRESS)   # a worker process
    args = ap.parse_args()
    recipes = json.load(open(os.path.join(HERE, "recipe_search.json")))
    if args.one:
        return train_one(int(args.one[0]), recipes[args.one[1]])
    unknown = [n for n in args.names if n not in recipes]
    if unknown:
        sys.exit(f"unknown recipe(s) {unknown}; known: {list(recipes)}")
    os.makedirs(args.logs, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1")

    def run(job):
        name, seed = job
        with open(os.path.join(args.logs, f"{name}.s{seed}.log"), "w") as f:
            subprocess.run([sys.executable, __file__, "x", "--one", str(seed), name], stdout=f,
                           stderr=subprocess.STDOUT, env=env, check=False)
    jobs = [(n, s) for n in args.names for s in args.seeds]
    with ThreadPoolExecutor(args.jobs) as ex:
        list(ex.map(run, jobs))
    for name, seed in jobs:
        lines = open(os.path.join(args.logs, f"{name}.s{seed}.log")).read().splitlines()
        print(f"{name} s{seed}: {lines[-1]} | {lines[-2] if len(lines) > 1 else ''}")


if __name__ == "__main__":
    main()
