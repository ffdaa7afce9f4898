"""Where a GRPO step's time goes: cProfile over a 20-step run with the spec's defaults
from the seed-0 base model (after a 3-step warm-up run), the cumulative table's top rows: rollouts
(rl.sample_groups / sampling.tree_walk), the scoring forwards (sampling.logits_at), backward, clipping.

    python scripts/rl_step_profile.py [threads] [rows]
"""
import copy
import cProfile
import pstats
import sys
import time

import torch

from reasonlab.runner.executor import keep_freed_memory
from reasonlab.train.rl import RLConfig, train
from reasonlab.train.zoo import base_model

keep_freed_memory()
torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
ROWS = int(sys.argv[2]) if len(sys.argv) > 2 else 30
base = base_model(0)
train(copy.deepcopy(base), base, RLConfig(steps=3, seed=1), log=None)
policy = copy.deepcopy(base)
prof = cProfile.Profile()
t = time.perf_counter()
prof.enable()
train(policy, base, RLConfig(steps=20, seed=0), log=None)
prof.disable()
print(f"{torch.get_num_threads()} threads: 20 GRPO steps in {time.perf_counter() - t:.2f} s under cProfile")
pstats.Stats(prof).sort_stats("cumulative").print_stats(ROWS)
