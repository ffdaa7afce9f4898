"""Copy the lab's starting models from a model cache into the package (reasonlab/models/), after `make results`
and a quick lab at seeds 0 and 1 trained them: the five base models, the erring thinkers and the quick base models
of seeds 0 and 1 (the quick lab's default seed and the test suite's second), each with its recipe's key, so that the
lab loads them instead of training its own (train.zoo.shipped).

    python scripts/ship_models.py --cache /tmp/labcache
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys

from reasonlab.io.checkpoint import load_model
from reasonlab.train.zoo import SHIPPED

NAMES = [f"{kind}-seed{s}" for kind in ("base", "err") for s in range(5)] + [f"lab-quick-seed{s}" for s in range(2)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", required=True, help="the model cache that holds them")
    args = ap.parse_args()
    os.makedirs(SHIPPED, exist_ok=True)
    for name in NAMES:
        stem = os.path.join(args.cache, name)
        if not os.path.exists(stem + ".json"):
            print(f"{stem}.json: missing (run the lab with this cache first)", file=sys.stderr)
            return 2
        load_model(stem)                                   # a corrupt file stops here, before anything is copied
    for name in NAMES:
        for ext in (".safetensors", ".json"):
            shutil.copyfile(os.path.join(args.cache, name + ext), os.path.join(SHIPPED, name + ext))
    print(f"shipped {len(NAMES)} models to {SHIPPED}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
