"""Time of one STaR round on 10,000 problems (sample 4 outputs each at temperature 1, verify and filter, fine-tune
300 steps from the base), against the same round with flat sampling (`generate_n`: every row decoded, the
prompt's KV cache shared) and one `parse` per row, measured in the same run. Fine-tuning goes to a fresh
temporary cache, so it is really trained.

    python benchmarks/star_round.py [--problems 10000] [--seed 0]
"""
from __future__ import annotations

import argparse
import json
import random
import tempfile
import time

import torch

from reasonlab.core.sampling import generate_n
from reasonlab.core.task import K_MAX, K_MIN, make_digits, parse, prompt_ids
from reasonlab.experiments.star import star_rounds
from reasonlab.methods.config import StarConfig
from reasonlab.train.sft import base_name
from reasonlab.train.zoo import base_model


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    base = base_model(args.seed, log=None)
    cfg = StarConfig(rounds=1, problems=args.problems, seed=args.seed)
    with tempfile.TemporaryDirectory() as cache:
        t = time.perf_counter()
        hist = star_rounds(base, base_name(args.seed), cfg, n_test=300, cache=cache)
        total = time.perf_counter() - t
    r = hist[1]
    rng = random.Random(args.seed)
    probs = [make_digits(rng, rng.randint(K_MIN, K_MAX)) for _ in range(args.problems)]
    t = time.perf_counter()
    outs = generate_n(base, [prompt_ids(d) for d in probs], cfg.samples, torch.Generator().manual_seed(0), 1.0)
    [parse(o) for o in outs]
    flat = time.perf_counter() - t
    print(f"STaR round on {args.problems} problems: {r['round_s']:.1f}s (sampling + filtering {r['sample_s']:.1f}s, "
          f"fine-tuning {r['steps']} steps {r['round_s'] - r['sample_s']:.1f}s; evaluation after it not counted; "
          f"{total:.1f}s with it); flat sampling + parsing alone: {flat:.1f}s, "
          f"{flat / r['sample_s']:.1f}x the tree sampler's sampling + filtering")
    print(json.dumps({"round_s": r["round_s"], "sample_s": r["sample_s"], "flat_sample_s": round(flat, 2),
                      "free_acc_after": r["free"], "used": r["used"]}))


if __name__ == "__main__":
    main()
