"""Time of the full search grid for one seed: verifiers trained (or loaded from the cache), best-of-N /
weighted / majority from one pool of 64 samples per problem, beam search and DVTS re-run for N = 1, 2, ..., 64,
with the learned PRM and the oracle, on validation and test problems. Prints the stage times and the headline.

    python benchmarks/search_grid.py [--thinker erring|base|quick] [--seed 0] [--n-test 100] [--n-val 50]
"""
from __future__ import annotations

import argparse
import json
import time

from reasonlab.experiments import search as search_exp
from reasonlab.methods import search
from reasonlab.methods.verifier import KINDS


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--thinker", default="erring", choices=["erring", "base", "quick"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-test", type=int, default=100)
    ap.add_argument("--n-val", type=int, default=50)
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--out", default=None, help="also write seed<seed>.json here")
    args = ap.parse_args()
    cfg = search.SearchConfig(thinker=args.thinker, n_test=args.n_test, n_val=args.n_val)
    # verifiers first (cached after their first training), so the grid's time is the search alone
    search.run(search.SearchConfig(thinker=args.thinker, n_test=1, n_val=1, n_max=1, methods=("bon",)), args.seed,
               cache=args.cache_dir, log=None)
    t = time.perf_counter()
    res = search.run(cfg, args.seed, out=args.out, cache=args.cache_dir, log=None)
    wall = time.perf_counter() - t
    tm = res["timing"]
    print(f"search grid, seed {args.seed}, {args.thinker} thinker, {7 * (args.n_test + args.n_val)} problems, "
          f"N = 1..64, verifiers {', '.join(KINDS)} + oracle: {wall:.1f}s (limit 180 s; verifiers loaded in "
          f"{tm['verifiers']:.1f}s)")
    print(json.dumps({"grid_s": round(wall, 1), "timing": tm}))
    print(search_exp.headline([res]))


if __name__ == "__main__":
    main()
