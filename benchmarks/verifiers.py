"""Verifier quality: ORM, PRM (oracle step labels) and PRM (Math-Shepherd rollout labels) trained on the erring
thinker's samples, measured against the oracle on held-out problems, seeds 0-2.

Writes runs/bench/verifiers/seed<s>.json (the search experiment's quality record), runs/bench/verifiers/
verifier_quality.png and runs/bench/verifiers.md (the search experiment's verifiers section), and prints the
per-kind training times.

    python benchmarks/verifiers.py --seeds 0 1 2 [--thinker erring|base]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from reasonlab.experiments import search as search_exp  # noqa: E402
from reasonlab.io.checkpoint import write_json, write_text  # noqa: E402
from reasonlab.train.zoo import thinker_model  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--thinker", choices=["erring", "base"], default="erring")
    ap.add_argument("--out", default="runs/bench/verifiers")
    ap.add_argument("--render-only", action="store_true", help="rebuild the .md and plot from <out>/seed<s>.json")
    a = ap.parse_args()
    cfg = search_exp.Config(thinker=a.thinker)
    results = []
    for s in a.seeds if a.render_only else []:
        with open(os.path.join(a.out, f"seed{s}.json")) as f:
            results.append(json.load(f))
    for s in [] if a.render_only else a.seeds:
        _, r, _ = search_exp.verifiers(cfg, s, thinker_model(cfg.thinker, s), None)
        write_json(os.path.join(a.out, f"seed{s}.json"), r)
        results.append(r)
        print(f"seed {s}: " + "; ".join(f"{k} train {v['train']['seconds']['total']:.1f}s "
                                        f"(sample {v['train']['seconds']['sample']:.1f}, label "
                                        f"{v['train']['seconds']['label']:.1f}, fit {v['train']['seconds']['fit']:.1f})"
                                        for k, v in r["kinds"].items()), flush=True)
    md = search_exp.verifiers_page(results, a.out)
    write_text(a.out + ".md", md)
    print(md)


if __name__ == "__main__":
    main()
