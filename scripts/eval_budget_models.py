"""Evaluate saved budget models on fresh problems at every budget b = 0..8, apart from the run that trained them.

    reasonlab l1 --seeds 0 1 2 3 4
    python scripts/eval_budget_models.py [--cache-dir DIR] [--n-test 200] [--seed 4242] [--out runs/independent_eval.json]

Reads every budget model the `l1` experiment saved in the model cache (l1-<variant>-seed<s>, `experiments.l1.model_name`;
the control arm is the variant <first>-alpha0; quick runs' models are l1-quick-<variant>-seed<s> and count as
variants of their own), draws n test problems per k with a seed of its own (one draw for every model: the run
scored each seed on its own draw, `test_problems(n_test, "l1", seed)`), decodes greedily with each budget token and
prints, per variant, the chain steps written, the share within budget and the accuracy at each b (mean over k and
seeds, and the spread over seeds of "reads its budget": steps at b = 8 minus steps at b = 0). Writes the numbers
to --out.
"""
from __future__ import annotations

import argparse
import glob
import os
import re
import sys

import numpy as np

from reasonlab.core.problems import problems_per_k
from reasonlab.core.task import BUDGETS
from reasonlab.io.checkpoint import load_model, write_json
from reasonlab.io.files import cache_dir
from reasonlab.methods.budget import eval_budget_model

NAME = re.compile(r"l1-(.+)-seed(\d+)\.safetensors")
"""experiments.l1.model_name's names: the variant ("+" as "-") and the seed"""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cache-dir", default=None, help="the model cache (default $REASONLAB_CACHE or ~/.cache/reasonlab)")
    p.add_argument("--n-test", type=int, default=200, help="test problems per k")
    p.add_argument("--seed", type=int, default=4242, help="the fresh test problems' seed")
    p.add_argument("--out", default="runs/independent_eval.json", help="where the numbers go (JSON)")
    a = p.parse_args(argv)
    cache = cache_dir(a.cache_dir)
    files = sorted(f for f in glob.glob(os.path.join(glob.escape(cache), "l1-*-seed*.safetensors"))
                   if NAME.fullmatch(os.path.basename(f)))
    if not files or a.n_test < 1:
        print(f"eval_budget_models: no l1-*-seed*.safetensors in {cache} (run `reasonlab l1` first; or --n-test < 1)",
              file=sys.stderr)
        return 2
    probs = problems_per_k(a.n_test, seed=a.seed, split="test")
    out: dict = {}
    for f in files:
        variant, seed = NAME.fullmatch(os.path.basename(f)).groups()
        model, _ = load_model(f[:-len(".safetensors")])
        ev = eval_budget_model(model.eval(), probs)
        out.setdefault(variant, {})[int(seed)] = {b: {key: float(np.mean([c[key] for c in ev[b].values()]))
                                                      for key in ("steps", "within", "acc")} for b in BUDGETS}
    for variant, seeds in out.items():
        reads = [s[8]["steps"] - s[0]["steps"] for s in seeds.values()]
        print(f"{variant} ({len(seeds)} seeds): reads its budget (steps at b = 8 - b = 0) "
              f"{np.mean(reads):.3f} (per seed {', '.join(f'{x:.2f}' for x in reads)})")
        print("  b      " + " ".join(f"{b:>6}" for b in BUDGETS))
        for key in ("steps", "within", "acc"):
            print(f"  {key:6} " + " ".join(f"{np.mean([s[b][key] for s in seeds.values()]):6.3f}" for b in BUDGETS))
    write_json(a.out, {"n_test": a.n_test, "seed": a.seed, "cache": cache, "variants": out})
    return 0


if __name__ == "__main__":
    sys.exit(main())
