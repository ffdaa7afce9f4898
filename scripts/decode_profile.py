"""Where `generate`'s time goes on 4096 prompts: the whole call, its prefill
(sampling._prefill) and each decode step's forward (rows, positions filled, ms), from the fastest of `reps` calls;
then the profiler's top operators over one prefill.

    python scripts/decode_profile.py [T|free] [threads] [reps]
"""
import random
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

import reasonlab.core.sampling as S
from reasonlab.core import fast
from reasonlab.core.task import ID, make_digits, prompt_ids
from reasonlab.runner.executor import keep_freed_memory
from reasonlab.train.sft import base_cfg
from reasonlab.train.zoo import get_model

keep_freed_memory()
mode = sys.argv[1] if len(sys.argv) > 1 else "T"
torch.set_num_threads(int(sys.argv[2]) if len(sys.argv) > 2 else 2)
reps = int(sys.argv[3]) if len(sys.argv) > 3 else 5
model = get_model("base-seed0", base_cfg(0), log=None)
rng = random.Random(0)
prompts = [prompt_ids(make_digits(rng, rng.randint(2, 8))) for _ in range(4096)]
force = ["T"] if mode == "T" else None
record = []
prefill, forward = S._prefill, fast.forward


def timed_prefill(*args, **kwargs):
    t = time.perf_counter()
    out = prefill(*args, **kwargs)
    record.append(("prefill", time.perf_counter() - t))
    return out


def timed_forward(model, ids, *args, **kwargs):
    t = time.perf_counter()
    out = forward(model, ids, *args, **kwargs)
    cache = kwargs.get("cache")
    if cache is not None and ids.shape[1] == 1:   # a decode step
        record.append(("step", time.perf_counter() - t, ids.shape[0], cache.pos))
    return out


S._prefill, fast.forward = timed_prefill, timed_forward


def run():
    gen = torch.Generator().manual_seed(0) if mode != "T" else None
    return S.generate(model, prompts, gen, 0.0 if mode == "T" else 1.0, force)


run()
best = None
for _ in range(reps):
    record.clear()
    t = time.perf_counter()
    run()
    total = time.perf_counter() - t
    if best is None or total < best[0]:
        best = (total, list(record))
total, rec = best
steps = [r for r in rec if r[0] == "step"]
print(f"{mode}, {torch.get_num_threads()} threads: generate {total * 1e3:.0f} ms, prefill "
      f"{sum(r[1] for r in rec if r[0] == 'prefill') * 1e3:.0f} ms, {len(steps)} decode steps' forwards "
      f"{sum(r[1] for r in steps) * 1e3:.0f} ms")
for _, s, rows, pos in steps:
    print(f"  {rows} rows, {pos} positions: {s * 1e3:.1f} ms")
S._prefill, fast.forward = prefill, forward
seq = torch.tensor([p + [ID[w] for w in force or []] for p in prompts])
with torch.inference_mode(), profile(activities=[ProfilerActivity.CPU]) as prof:
    S._prefill(model, seq, lambda u: min(len(seq), 2 * u))
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=8))
