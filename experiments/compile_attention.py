"""The decode step's attention (model._decode_attention) under torch.compile against eager (docs/LOG.md, session 16).

Eager writes two (pos, rows, H, D) products, each as large as the keys, and reduces them; inductor may fuse the
products into their sums. Compiled once with a dynamic shape; prints the first call's time (the compile), the
largest difference from eager, and the median ms of each over 40 calls, at the shapes of 4096 forced-T prompts
(3457 and 1162 distinct rows), of free generation (4096 rows) and of RL's rollouts (128 rows).

    PYTHONPATH=. python experiments/compile_attention.py [threads]
"""
import sys
import time

import torch

from reasonlab.runner.executor import keep_freed_memory
from reasonlab.core.model import _decode_attention

keep_freed_memory()
torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
compiled = torch.compile(_decode_attention, dynamic=True, fullgraph=True)


def median_ms(f, n: int = 40) -> float:
    for _ in range(3):
        f()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return sorted(times)[n // 2] * 1e3


print(f"{torch.get_num_threads()} threads")
with torch.inference_mode():
    for rows, pos in ((3457, 12), (3457, 20), (1162, 21), (4096, 11), (128, 14)):
        kt, vt, q = torch.randn(pos, rows, 4, 16), torch.randn(pos, rows, 4, 16), torch.randn(rows, 4, 16)
        t = time.perf_counter()
        out = compiled(q, kt, vt)
        first = time.perf_counter() - t
        err = (out - _decode_attention(q, kt, vt)).abs().max().item()
        print(f"{rows} rows, {pos} positions: first call {first:.1f} s, max difference {err:.1e}, eager "
              f"{median_ms(lambda: _decode_attention(q, kt, vt)):.2f} ms, compiled {median_ms(lambda: compiled(q, kt, vt)):.2f} ms")
