"""Time of the default test-time-compute grid: 3 forced formats x k = 2..8 x 2000 problems x N = 64 samples
(2.7 million samples), pooled, parsed, verified and aggregated, against flat sampling (`generate_n`, the prompt's
KV cache shared by its N samples but every row decoded) measured on a slice in the same run and scaled up.

    python benchmarks/tts_grid.py [--n-per-k 2000] [--slice 100]
"""
from __future__ import annotations

import argparse
import json
import time

import torch

from reasonlab.core.problems import problems_per_k
from reasonlab.core.sampling import generate_n
from reasonlab.core.task import parse, prompt_ids
from reasonlab.experiments import sampling
from reasonlab.train.zoo import base_model


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n-per-k", type=int, default=2000)
    ap.add_argument("--n-max", type=int, default=64)
    ap.add_argument("--slice", type=int, default=100, help="problems per k for the flat-sampling baseline")
    args = ap.parse_args()
    cfg = sampling.Config(n=args.n_per_k, n_max=args.n_max)
    cfg.validate()
    model = base_model(0, log=None)
    t = time.perf_counter()
    res = sampling.grid(model, cfg, seed=0)
    grid = time.perf_counter() - t
    probs = problems_per_k(args.slice, seed=1)
    t = time.perf_counter()
    for f in ("A", "S", "T"):
        outs = generate_n(model, [prompt_ids(d) for d in probs], args.n_max, torch.Generator().manual_seed(0), 1.0, [f])
        [parse(o) for o in outs]
    flat = (time.perf_counter() - t) * args.n_per_k / args.slice
    print(f"grid (3 formats x 7 k x {args.n_per_k} problems x N = {args.n_max}): {grid:.1f}s "
          f"(sampling {sum(v for k, v in res['timing'].items() if k.startswith('sample_')):.1f}s); flat sampling of the "
          f"same pools, extrapolated from {args.slice} problems per k: {flat:.0f}s; speedup {flat / grid:.1f}x")
    print(json.dumps({"grid_s": round(grid, 1), "flat_s_extrapolated": round(flat, 1), "speedup": round(flat / grid, 1),
                      "timing": res["timing"]}))


if __name__ == "__main__":
    main()
