"""RL results: GRPO vs the spec's REINFORCE (no baseline) vs REINFORCE with a baseline vs Dr. GRPO, from the base
model, 3 seeds: the lab's RL experiment (lab.rl_run) at other sizes, rendered by the lab's protocol (lab.render).

For each algorithm and seed: the base model of that seed (cached), RL with the spec's defaults (16 problems x 8
samples, lr 3e-5, beta 0.04, clip 0.2, 2 inner updates) unless flags say otherwise, a greedy evaluation on the probe
set every --eval-every steps (time-to-solve = first evaluation with accuracy >= 0.99; seconds count training
only), and a final greedy evaluation on the test set.

    python experiments/rl_results.py --seeds 0 1 2 --algos grpo reinforce reinforce_baseline dr_grpo --steps 100
Writes results/rl/{seed<s>.json, report.md, report.html, rl/curves.png, rl/formats_<algo>.png}.
"""
from __future__ import annotations

import argparse
import json
import os

from reasonlab.io.checkpoint import write_json
from reasonlab.cli import write_page
from reasonlab.lab import rl_run
from reasonlab.train.zoo import base_model


def one_run(algo: str, seed: int, steps: int, every: int, lr: float | None) -> dict:
    base = base_model(seed, log=None)
    return rl_run(base, algo, seed, steps, every, lr=lr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--algos", nargs="+", default=["grpo", "reinforce", "reinforce_baseline", "dr_grpo"])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--lr", type=float, default=None, help="override every algorithm's learning rate")
    ap.add_argument("--out", default="results/rl")
    args = ap.parse_args()
    rs = []
    for seed in args.seeds:
        rs.append({a: one_run(a, seed, args.steps, args.eval_every, args.lr) for a in args.algos})
        for r in rs[-1].values():
            print(json.dumps({k: v for k, v in r.items() if k not in ("hist", "curve", "share_by_k")}), flush=True)
        write_json(os.path.join(args.out, f"seed{seed}.json"), {"config": vars(args), "result": rs[-1]})
    write_page(args.out, "RL results", ["rl"], rs)


if __name__ == "__main__":
    main()
