"""Generation speed: the KV-cache decoder against the naive full-recompute decoder, in the same run.

4096 prompts with k uniform in 2..8; forced-T greedy and free sampling at temperature 1. Reports sequences per
second for both decoders and their ratio (target: >= 5x on forced T). Uses the cached base model when there is
one (its outputs have realistic lengths), else an untrained model.

    python benchmarks/generation.py [--n 4096] [--repeats 3]
"""
from __future__ import annotations

import argparse
import json
import random

import torch

from common import best_times
from reasonlab.sampling import generate, generate_naive
from reasonlab.task import make_digits, prompt_ids


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--model", default="base-seed0", help="cached model name (trained if missing)")
    args = ap.parse_args()
    from reasonlab.checkpoint import get_model
    from reasonlab.train import base_cfg
    model = get_model(args.model, base_cfg(0), log=None)
    rng = random.Random(0)
    prompts = [prompt_ids(make_digits(rng, rng.randint(2, 8))) for _ in range(args.n)]
    rows = []
    for name, kw in [("forced T, greedy", dict(force=["T"], temperature=0.0)),
                     ("free, sampled T=1", dict(temperature=1.0))]:
        def run(decoder):
            gen = torch.Generator().manual_seed(0) if kw["temperature"] else None
            return decoder(model, prompts, gen, kw["temperature"], kw.get("force"))
        assert run(generate) == run(generate_naive), "decoders disagree"
        fast, naive = best_times([lambda: run(generate), lambda: run(generate_naive)], args.repeats)
        rows.append({"mode": name, "kv_cache_seq_per_s": round(args.n / fast), "naive_seq_per_s": round(args.n / naive),
                     "speedup": round(naive / fast, 2)})
    print(f"{'mode':<20}{'kv-cache seq/s':>16}{'naive seq/s':>14}{'speedup':>10}")
    for r in rows:
        print(f"{r['mode']:<20}{r['kv_cache_seq_per_s']:>16}{r['naive_seq_per_s']:>14}{r['speedup']:>9}x")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
