"""A training step under torch.compile against GPT.loss's eager step (docs/LOG.md, session 16).

GPT.loss skips what no counted target needs, which takes data-dependent shapes (nonzero) that a compiled graph
cannot hold. The compiled step therefore runs the plain padded forward, model(ids, targets)[1], on the base recipe's
fixed (64, 23) batches: one static shape, compiled once with inductor (fullgraph), forward and backward fused by
AOTAutograd. Prints the compile time and the loss of both paths on the first batch, then the median ms of a whole
step (loss, backward, clipping, AdamW) over `steps` batches for GPT.loss, the compiled padded step and the eager
padded step, taking turns for `rounds` rounds.

    PYTHONPATH=. python experiments/compile_train_step.py [threads] [rounds] [steps]
"""
import sys
import time

import torch

from reasonlab.runner.executor import keep_freed_memory
from reasonlab.train.sft import AdamW, batch_fn, build_model

keep_freed_memory()
torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 4
STEPS = int(sys.argv[3]) if len(sys.argv) > 3 else 40
batches = [batch_fn(i, 64, mix=(0, 0.8, 0.2)) for i in range(60)]   # the S/T phase's batches
eager, compiled = build_model(0), build_model(0)
compiled.load_state_dict(eager.state_dict())

t = time.perf_counter()
padded = torch.compile(lambda ids, tgt: compiled(ids, tgt)[1], fullgraph=True, dynamic=False)
x, y = batches[0]
loss = padded(x, y)
loss.backward()
print(f"{torch.get_num_threads()} threads: compiled in {time.perf_counter() - t:.1f} s; first loss: GPT.loss "
      f"{eager.loss(x, y).item():.6f}, compiled padded {loss.item():.6f}")


def median_step_ms(model, loss_fn) -> float:
    params = list(model.parameters())
    opt = AdamW(params, lr=1e-3)
    times = []
    for i in range(STEPS):
        x, y = batches[i % len(batches)]
        t = time.perf_counter()
        loss = loss_fn(x, y)
        loss.item()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
        opt.step()
        times.append(time.perf_counter() - t)
    return sorted(times)[STEPS // 2] * 1e3


for r in range(ROUNDS):
    a = median_step_ms(eager, eager.loss)
    b = median_step_ms(compiled, padded)
    c = median_step_ms(eager, lambda x, y: eager(x, y)[1])
    print(f"round {r}: GPT.loss {a:.1f} ms | compiled padded {b:.1f} ms | eager padded {c:.1f} ms")
