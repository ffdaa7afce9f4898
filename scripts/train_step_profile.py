"""Where a training step's time goes against what its linears must take: the machine's
sgemm rate (2048^2 and the step's own (1100, 64) x (64, 256)), the GEMM FLOPs of fast.loss's step on batches of 64
(positions run and counted), ms a step, and the profiler's table over 40 steps.

    python scripts/train_step_profile.py [threads] [mix A,S,T]
"""
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

from reasonlab.core import fast
from reasonlab.runner.executor import keep_freed_memory
from reasonlab.train.sft import AdamW, batch_fn, build_model

keep_freed_memory()
torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
mix = tuple(float(x) for x in sys.argv[2].split(",")) if len(sys.argv) > 2 else (0.2, 0.6, 0.2)


def rate(m: int, k: int, n: int, reps: int = 20) -> float:
    a, b = torch.randn(m, k), torch.randn(k, n)
    best = min((lambda t: (a @ b, time.perf_counter() - t)[1])(time.perf_counter()) for _ in range(reps))
    return 2 * m * k * n / best / 1e9


print(f"{torch.get_num_threads()} threads: sgemm {rate(2048, 2048, 2048, 3):.1f} GFLOP/s at 2048^2, "
      f"{rate(1100, 64, 256):.1f} at (1100, 64) x (64, 256)")
model = build_model(0)
batches = [batch_fn(i, 64, mix=mix) for i in range(50)]
d, V = model.cfg.d_model, model.cfg.vocab_size
run = cnt = 0
for _, y in batches:
    counted = y != -100
    run += int((counted.flip(1).cumsum(1).flip(1) > 0).sum())
    cnt += int(counted.sum())
run, cnt = run / len(batches), cnt / len(batches)
block = 2 * (d * 3 * d + d * d + d * 4 * d + 4 * d * d)          # forward FLOPs a position of a whole block
last = 2 * d * 3 * d * run + (block - 2 * d * 3 * d) * cnt       # the last block past attention at counted positions
flops = 3 * ((model.cfg.n_layers - 1) * block * run + last + 2 * d * V * cnt)   # forward + backward
print(f"positions run {run:.0f}, counted {cnt:.0f}: linears {flops / 1e9:.2f} GFLOP a step")
params = list(model.parameters())
opt = AdamW(params, lr=1e-3)


def step(b):
    loss = fast.loss(model, *b)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
    opt.step()


for b in batches[:10]:
    step(b)
t = time.perf_counter()
for b in batches[10:]:
    step(b)
print(f"{(time.perf_counter() - t) / 40 * 1e3:.1f} ms a step")
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for b in batches[10:]:
        step(b)
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))
