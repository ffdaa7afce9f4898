"""Training time of the budget models.

`python benchmarks/budget_train.py` trains every variant (methods.budget.train_variant at its defaults: the l1
experiment's training settings) on seed 0 and times it; `--from results/lab` instead tabulates the times the `l1`
experiment recorded for each seed of a lab run (train_seconds: SFT + GRPO, no evaluation). Writes
runs/bench/budget_train.{md,json}. Timings on a shared 2-core machine are noisy.
"""
import argparse
import glob
import os
import re
import time

from reasonlab.experiments.l1 import VARIANTS
from reasonlab.io.checkpoint import write_json, write_text
from reasonlab.io.report import md_table
from reasonlab.methods import budget
from reasonlab.runner.store import Store
from reasonlab.train.zoo import base_model

ap = argparse.ArgumentParser()
ap.add_argument("--from", dest="src", default=None, help="a lab run directory (its l1/seed<s>.json) to read times from")
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--out", default="runs/bench/budget_train")
args = ap.parse_args()

rows = []
if args.src:
    seeds = sorted({int(re.search(r"seed(\d+)", p).group(1)) for p in glob.glob(os.path.join(args.src, "l1", "seed*.json*"))})
    for s in seeds:
        r = Store(args.src).read("l1", s)["result"]
        for v, x in r["variants"].items():
            rows.append({"seed": r["seed"], "variant": v, "seconds": x["train_seconds"], "sft_seconds": x["sft_seconds"]})
else:
    base = base_model(args.seed)
    for v in VARIANTS:
        t = time.perf_counter()
        tr = budget.train_variant(base, v, args.seed)
        rows.append({"seed": args.seed, "variant": v, "seconds": round(time.perf_counter() - t, 1),
                     "sft_seconds": round(tr["sft_seconds"], 1)})
limit = 120.0
per_seed = {}
for r in rows:
    per_seed[r["seed"]] = per_seed.get(r["seed"], 0.0) + r["seconds"]
table = md_table(["seed", "variant", "training s (SFT + GRPO)", "of which SFT s", "<= 2 min"],
                 [[r["seed"], r["variant"], f"{r['seconds']:.1f}", f"{r['sft_seconds']:.1f}", r["seconds"] <= limit]
                  for r in rows])
md = table + "\n\nAll variants of a seed together: " + ", ".join(f"seed {s} {t:.0f} s" for s, t in sorted(per_seed.items())) + "\n"
write_text(args.out + ".md", md)
write_json(args.out + ".json", {"rows": rows, "limit_s": limit, "per_seed_total_s": per_seed,
                                "all_within_limit": all(r["seconds"] <= limit for r in rows)})
print(md)
