"""The lab's verifier half of the search unit (train and measure orm, prm and prm-mc on the erring thinker, one
thread, no verifier cache) with verifier.sample_outputs' memo on and off, alternating; checks that the measured
qualities are identical (docs/LOG.md, session 13).

    PYTHONPATH=. python experiments/verifier_samples.py [rounds] [seed]
"""
import json
import sys
import time

import torch

from reasonlab.methods import verifier as V
from reasonlab.runner.executor import keep_freed_memory
from reasonlab.train.zoo import get_erring_model

keep_freed_memory()
torch.set_num_threads(1)          # as in the lab's workers
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 1
seed = int(sys.argv[2]) if len(sys.argv) > 2 else 0
thinker, cfg = get_erring_model(seed, log=None), V.VerifierConfig()
memoised = V.sample_outputs


def unmemoised(*args):
    V._SAMPLED.clear()
    return memoised(*args)


seen = set()
for _ in range(rounds):
    for name, fn in (("memo off", unmemoised), ("memo on", memoised)):
        V.sample_outputs = fn
        V._SAMPLED.clear()
        t = time.perf_counter()
        q = {}
        for kind in V.KINDS:
            v = V.train_verifier(kind, thinker, seed, cfg, cache="", log=None)
            q[kind] = V.verifier_quality(v, thinker, seed, 100, cfg)
            print(f"  {name} {kind}: {v.meta['seconds']}", flush=True)
        print(f"{name}: {time.perf_counter() - t:.1f} s", flush=True)
        seen.add(json.dumps(q, sort_keys=True))
print("qualities identical:", len(seen) == 1)
