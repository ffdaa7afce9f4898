"""Time of the full search grid for one seed: verifiers trained (or loaded from the cache), best-of-N /
weighted / majority from one pool of 64 samples per problem, beam search and DVTS re-run for N = 1, 2, ..., 64,
with the learned PRM and the oracle, on validation and test problems. Prints the stage times and the headline.

    python benchmarks/search_grid.py [--thinker erring|base|quick] [--seed 0] [--n-test 100] [--n-val 50]
"""
from __future__ import annotations

import argparse
import json
import os
import time

from reasonlab.experiments import search as search_exp
from reasonlab.io.checkpoint import write_json
from reasonlab.methods.verifier import KINDS
from reasonlab.train.zoo import thinker_model


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--thinker", default="erring", choices=["erring", "base", "quick"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-test", type=int, default=100)
    ap.add_argument("--n-val", type=int, default=50)
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--out", default=None, help="also write seed<seed>.json (the grid's result) here")
    args = ap.parse_args()
    cfg = search_exp.Config(thinker=args.thinker, n_test=args.n_test, n_val=args.n_val)
    cfg.validate()
    thinker = thinker_model(cfg.thinker, args.seed, args.cache_dir)
    # verifiers first (cached after their first training), so the grid's time is the search alone
    learned, _, seconds = search_exp.verifiers(cfg, args.seed, thinker, args.cache_dir)
    t = time.perf_counter()
    res = search_exp.grid(cfg, args.seed, thinker, learned, {"verifiers": round(seconds, 1)})
    wall = time.perf_counter() - t
    if args.out:
        write_json(os.path.join(args.out, f"seed{args.seed}.json"), res)
    tm = res["timing"]
    print(f"search grid, seed {args.seed}, {args.thinker} thinker, {7 * (args.n_test + args.n_val)} problems, "
          f"N = 1..64, verifiers {', '.join(KINDS)} + oracle: {wall:.1f}s (limit 180 s; verifiers and their quality "
          f"in {seconds:.1f}s)")
    print(json.dumps({"grid_s": round(wall, 1), "timing": tm}))
    print(search_exp.headline([res], search_exp.search_claims([res])))


if __name__ == "__main__":
    main()
