"""Three attention variants for decoding, measured against today's code and dropped (docs/LOG.md, session 14).

1. chunk: a decode step's elementwise attention (model._decode_attention) over more than 1024 rows taken 512 rows
   at a time, so that its (pos, rows, H, D) product, as large as the keys it reads, stays in cache;
2. (op alone) the decode step's attention as two bmm over rows, each row's heads in one GEMM against a
   block-diagonal query (4x the FLOPs, read straight from the time-major cache);
3. bmm: a prefill block after a shared prompt head (T > 1 queries against the cache, with a mask) through two
   batched GEMMs over the materialised scores instead of SDPA's flash kernel.

Prints each variant's op alone (median of 40, shapes of 4096 forced-T prompts: 3457 distinct rows, 12 and 20
positions; a 512-row prefill chunk of 7 queries against 11 keys), then `generate` on 4096 prompts (forced T greedy,
free sampled) with the four combinations taking turns in one process, best and median of `reps`. The variants are
patched in here; the package keeps the plain versions.

    PYTHONPATH=. python experiments/decode_attention.py [threads] [reps]

With REASONLAB_MALLOC=default glibc keeps its own allocator settings (executor.keep_freed_memory).
"""
import random
import sys
import time
import types

import torch
import torch.nn.functional as F

import reasonlab.core.model as M
from reasonlab.train.zoo import get_model
from reasonlab.runner.executor import keep_freed_memory
from reasonlab.core.sampling import generate
from reasonlab.core.task import make_digits, prompt_ids
from reasonlab.train.sft import base_cfg

keep_freed_memory()
torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
REPS = int(sys.argv[2]) if len(sys.argv) > 2 else 9
CHUNK = 512
plain_decode = M._decode_attention


def chunked_decode(q, kt, vt):
    """model._decode_attention, CHUNK rows at a time above 2 * CHUNK rows."""
    B = q.shape[0]
    if B <= 2 * CHUNK:
        return plain_decode(q, kt, vt)
    out = q.new_empty(q.shape)
    for a in range(0, B, CHUNK):
        out[a:a + CHUNK] = plain_decode(q[a:a + CHUNK], kt[:, a:a + CHUNK], vt[:, a:a + CHUNK])
    return out


def blockdiag_decode(q, kt, vt):
    """model._decode_attention as two bmm over the B rows: (B, H, C) block-diagonal queries (head h's q in its D
    slots) against the (B, pos, C) keys, read from the time-major cache with a stride; the output's diagonal blocks."""
    B, H, D = q.shape
    pos, C = kt.shape[0], H * D
    K, V = kt.reshape(pos, B, C).transpose(0, 1), vt.reshape(pos, B, C).transpose(0, 1)
    Q = (q[:, :, None, :] * torch.eye(H)[None, :, :, None]).reshape(B, H, C)
    o = torch.bmm(torch.bmm(Q, K.transpose(1, 2)).mul_(D ** -0.5).softmax(-1), V)      # (B, H, C)
    return o.view(B, H, H, D).diagonal(0, 1, 2).permute(0, 2, 1)


def bmm_block(q, k, v, attn_mask):
    """Attention of T queries (B, H, T, D) against keys and values (B, H, pos, D) with an additive (T, pos) mask."""
    s = torch.matmul(q, k.transpose(-1, -2)).mul_(q.shape[-1] ** -0.5).add_(attn_mask)
    return torch.matmul(s.softmax(-1), v)


def sdpa(q, k, v, attn_mask=None, is_causal=False):
    """F.scaled_dot_product_attention, but a masked block of several queries goes to bmm_block."""
    if attn_mask is not None and q.shape[2] > 1:
        return bmm_block(q, k, v, attn_mask)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal)


def use(variant: str) -> None:
    M._decode_attention = chunked_decode if "chunk" in variant else plain_decode
    M.F = types.SimpleNamespace(scaled_dot_product_attention=sdpa) if "bmm" in variant else F


def median_ms(f, n: int = 40) -> float:
    for _ in range(5):
        f()
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return sorted(ts)[n // 2] * 1e3


def ops() -> None:
    H, D, B = 4, 16, 3457
    for pos in (12, 20):
        kt, vt, q = torch.randn(pos, B, H, D), torch.randn(pos, B, H, D), torch.randn(B, H, D)
        assert torch.allclose(blockdiag_decode(q, kt, vt), plain_decode(q, kt, vt), atol=1e-5)
        print(f"decode attention, {B} rows, {pos} positions: plain {median_ms(lambda: plain_decode(q, kt, vt)):.2f} ms, "
              f"chunked {median_ms(lambda: chunked_decode(q, kt, vt)):.2f} ms, "
              f"block-diagonal bmm {median_ms(lambda: blockdiag_decode(q, kt, vt)):.2f} ms")
    q, k, v = torch.randn(512, H, 7, D), torch.randn(512, H, 11, D), torch.randn(512, H, 11, D)
    mask = M.additive(torch.arange(11)[None, :] <= torch.arange(4, 11)[:, None])
    print(f"prefill block, 512 rows, 7 queries x 11 keys: SDPA "
          f"{median_ms(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)):.2f} ms, "
          f"bmm {median_ms(lambda: bmm_block(q, k, v, mask)):.2f} ms")


def end_to_end() -> None:
    model = get_model("base-seed0", base_cfg(0), log=None)
    rng = random.Random(0)
    prompts = [prompt_ids(make_digits(rng, rng.randint(2, 8))) for _ in range(4096)]
    modes = {"forced T": lambda: generate(model, prompts, None, 0.0, ["T"]),
             "free": lambda: generate(model, prompts, torch.Generator().manual_seed(0), 1.0)}
    variants = ["plain", "chunk", "bmm", "chunk+bmm"]
    outs = {}
    for v in variants:
        use(v)
        outs[v] = modes["forced T"]()
    print("forced-T outputs equal across variants:", all(o == outs["plain"] for o in outs.values()))
    times = {(v, m): [] for v in variants for m in modes}
    for _ in range(REPS):
        for v in variants:
            use(v)
            for m, f in modes.items():
                t = time.perf_counter()
                f()
                times[v, m].append(time.perf_counter() - t)
    use("plain")
    for v in variants:
        print(f"{v:<10}" + "  ".join(f"{m}: best {min(times[v, m]) * 1e3:.0f} median "
                                     f"{sorted(times[v, m])[REPS // 2] * 1e3:.0f} ms" for m in modes))


if __name__ == "__main__":
    print(f"{torch.get_num_threads()} threads")
    ops()
    end_to_end()
