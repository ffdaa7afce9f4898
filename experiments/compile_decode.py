"""A fixed-shape decode step under torch.compile against the eager cached forward (issue 19's lever; docs/LOG.md,
session 13). The step is written functionally: LayerNorm, linears, the elementwise attention over every cache
position with a mask, and the new key and value returned rather than written into the cache (a compiled graph that
mutates its input copies the whole cache back). 12 decode steps after a 10-token prompt, `rows` rows; the two (and
the uncompiled functional step) take turns in one process; prints the compile time and ms per decode step.

    PYTHONPATH=. python experiments/compile_decode.py [rows] [static|dynamic]
"""
import sys
import time

import torch
import torch.nn.functional as F

from reasonlab.train.zoo import get_model
from reasonlab.runner.executor import keep_freed_memory
from reasonlab.core.model import KVCache
from reasonlab.train.sft import base_cfg

keep_freed_memory()
rows = int(sys.argv[1]) if len(sys.argv) > 1 else 128
dynamic = len(sys.argv) > 2 and sys.argv[2] == "dynamic"
model = get_model("base-seed0", base_cfg(0), log=None).eval()
C, H, T = model.cfg.d_model, model.cfg.n_heads, model.cfg.max_len
D = C // H


def step(tok, pos, kv):
    """tok (B,), pos 0-d, kv (L, 2, T, B, H, D) holding positions < pos -> logits (B, V), new keys and values
    (L, 2, B, H, D) of position pos."""
    x = model.tok(tok) + model.pos(pos)[None]
    past = (torch.arange(T) < pos)[:, None, None]
    new = []
    for i, blk in enumerate(model.blocks):
        a, m = blk.attn, blk.mlp
        qkv = F.linear(F.layer_norm(x, (C,), blk.ln1.weight, blk.ln1.bias), a.qkv.weight, a.qkv.bias).view(-1, 3, H, D)
        q, k, v = qkv.unbind(1)
        new.append(torch.stack([k, v]))
        s = ((kv[i, 0] * q).sum(-1) * D ** -0.5).masked_fill(~past, float("-inf"))       # (T, B, H)
        p = torch.cat([s, (k * q).sum(-1)[None] * D ** -0.5]).softmax(0)
        y = ((p[:-1, ..., None] * kv[i, 1]).sum(0) + p[-1][..., None] * v).reshape(-1, C)
        x = x + F.linear(y, a.proj.weight, a.proj.bias)
        h = F.layer_norm(x, (C,), blk.ln2.weight, blk.ln2.bias)
        x = x + F.linear(F.gelu(F.linear(h, m[0].weight, m[0].bias)), m[2].weight, m[2].bias)
    return F.linear(F.layer_norm(x, (C,), model.ln_f.weight, model.ln_f.bias), model.head.weight), torch.stack(new)


torch.manual_seed(0)
prompt, toks = torch.randint(1, 17, (rows, 10)), torch.randint(1, 17, (rows, 12))
with torch.no_grad():
    cache = KVCache(model.cfg, rows)
    model(prompt, cache=cache)
    kv = cache.kv.clone()

    def eager():
        c = KVCache(model.cfg, rows)
        c.kv.copy_(kv)
        c.pos = 10
        return [model(toks[:, t:t + 1], cache=c)[0][:, -1] for t in range(12)]

    def functional(f):
        k2, out = kv.clone(), []
        for t in range(12):
            logits, new = f(toks[:, t], torch.tensor(10 + t), k2)
            k2[:, :, 10 + t] = new
            out.append(logits)
        return out

    ref = eager()
    t0 = time.perf_counter()
    compiled = torch.compile(step, fullgraph=True, dynamic=dynamic)
    out = functional(compiled)
    print(f"{rows} rows, {'dynamic' if dynamic else 'static'} shapes: compile + first run {time.perf_counter() - t0:.1f} s, "
          f"logits within {max((a - b).abs().max().item() for a, b in zip(ref, out)):.1e} of eager")
    for _ in range(4):
        res = {}
        for name, f in [("eager", eager), ("functional", lambda: functional(step)), ("compiled", lambda: functional(compiled))]:
            t = time.perf_counter()
            for _ in range(10):
                f()
            res[name] = round((time.perf_counter() - t) / 120 * 1e3, 2)
        print(res, "ms per decode step", flush=True)
