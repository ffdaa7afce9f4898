"""Training time of the budget models.

`python benchmarks/budget_train.py` trains every default variant on seed 0 and times it; `--from runs/budget`
instead tabulates the times `reasonlab budget` recorded for each seed (train_seconds: SFT + GRPO, no evaluation).
Writes runs/bench/budget_train.{md,json}. Timings on a shared 2-core machine are noisy.
"""
import argparse
import glob
import json
import os
import time

from reasonlab.io.checkpoint import write_json, write_text
from reasonlab.methods import budget
from reasonlab.train.sft import BASE_CFG
from reasonlab.train.zoo import get_model

ap = argparse.ArgumentParser()
ap.add_argument("--from", dest="src", default=None, help="a `reasonlab budget` output folder to read times from")
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--out", default="runs/bench/budget_train")
args = ap.parse_args()

rows = []
if args.src:
    for p in sorted(glob.glob(os.path.join(args.src, "seed*.json"))):
        with open(p) as f:
            r = json.load(f)
        for v, x in r["variants"].items():
            rows.append({"seed": r["seed"], "variant": v, "seconds": x["train_seconds"], "sft_seconds": x["sft_seconds"]})
else:
    cfg = budget.BudgetConfig()
    base = get_model(f"base-seed{args.seed}", dict(BASE_CFG, seed=args.seed))
    for v in cfg.variants:
        t = time.perf_counter()
        tr = budget.train_variant(base, v, cfg, args.seed)
        rows.append({"seed": args.seed, "variant": v, "seconds": round(time.perf_counter() - t, 1),
                     "sft_seconds": round(tr["sft_seconds"], 1)})
limit = 120.0
lines = ["| seed | variant | training s (SFT + GRPO) | of which SFT s | <= 2 min |", "|---|---|---|---|---|"]
lines += [f"| {r['seed']} | {r['variant']} | {r['seconds']:.1f} | {r['sft_seconds']:.1f} | {r['seconds'] <= limit} |"
          for r in rows]
per_seed = {}
for r in rows:
    per_seed[r["seed"]] = per_seed.get(r["seed"], 0.0) + r["seconds"]
lines += ["", "All variants of a seed together: " + ", ".join(f"seed {s} {t:.0f} s" for s, t in sorted(per_seed.items()))]
md = "\n".join(lines) + "\n"
write_text(args.out + ".md", md)
write_json(args.out + ".json", {"rows": rows, "limit_s": limit, "per_seed_total_s": per_seed,
                                "all_within_limit": all(r["seconds"] <= limit for r in rows)})
print(md)
