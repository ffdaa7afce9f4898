"""RL results for the README: GRPO vs the spec's REINFORCE (no baseline) vs Dr. GRPO, from the base model, 3 seeds.

For each algorithm and seed: the base model of that seed (cached), RL with the spec's defaults (16 problems x 8
samples, lr 3e-5, beta 0.04, clip 0.2, 2 inner updates) unless flags say otherwise, a greedy evaluation on 100
problems per k every --eval-every steps (time-to-solve = first evaluation with accuracy >= 0.99; seconds count
training only), and a final greedy evaluation on 500 problems per k.

    python experiments/rl_results.py --seeds 0 1 2 --algos grpo reinforce dr_grpo --steps 200
Writes results/rl/{summary.json, table.md, curves.png, formats_<algo>.png}.
"""
from __future__ import annotations

import argparse
import json
import os

from reasonlab.checkpoint import write_json, write_text
from reasonlab.lab import rl_run
from reasonlab.report import plot_format_share, plot_rl_runs, rl_table
from reasonlab.train import base_model


def one_run(algo: str, seed: int, steps: int, every: int, lr: float | None) -> dict:
    base = base_model(seed, log=None)
    return rl_run(base, algo, seed, steps, every, lr=lr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--algos", nargs="+", default=["grpo", "reinforce", "dr_grpo"])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--lr", type=float, default=None, help="override every algorithm's learning rate")
    ap.add_argument("--out", default="results/rl")
    args = ap.parse_args()
    runs = []
    for algo in args.algos:
        for seed in args.seeds:
            r = one_run(algo, seed, args.steps, args.eval_every, args.lr)
            runs.append(r)
            print(json.dumps({k: v for k, v in r.items() if k not in ("hist", "curve", "share_by_k")}), flush=True)
    os.makedirs(args.out, exist_ok=True)
    write_json(os.path.join(args.out, "summary.json"), [{k: v for k, v in r.items() if k != "hist"} for r in runs])
    md = rl_table(runs)
    write_text(os.path.join(args.out, "table.md"), md + "\n")
    print(md)
    plot_rl_runs({a: [r["hist"] for r in runs if r["algo"] == a] for a in args.algos}, os.path.join(args.out, "curves.png"),
                 "RL from the base model (mean over seeds; band = min..max)")
    for a in args.algos:
        plot_format_share(next(r["hist"] for r in runs if r["algo"] == a), os.path.join(args.out, f"formats_{a}.png"),
                          f"{a}, seed {args.seeds[0]}")


if __name__ == "__main__":
    main()
