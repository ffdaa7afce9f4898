"""Several models as one batched model: E base-recipe models trained as one ensemble, every
linear a baddbmm over the model axis, against E training steps of our single-model step, taking turns.

The ensemble holds each parameter stacked over the E models (E, ...), runs a padded (E, 64, 23) batch (one base-recipe
batch per model) through bmm-shaped layers, and sums the models' mean losses, so each model's gradient is its own;
clipping is per model. Its loss at the start equals the sum of the single models' fast.loss (checked before timing).
A measurement, not a trainer: the lab trains each seed's model alone (docs/history.md: it does not pay).

    python benchmarks/ensemble_step.py [--models 3] [--steps 30] [--repeats 3] [--threads N]
"""
from __future__ import annotations

import argparse
import json

import numpy as np
import torch
import torch.nn.functional as F
from common import best_times, load_note, report

from reasonlab.core import fast
from reasonlab.core.task import K_MAX, K_MIN
from reasonlab.train.sft import AdamW, build_model, make_sequences, split_targets, train_on_batches


class Ensemble:
    """E GPTs of one shape as stacked parameters; loss(inp, tgt) on (E, B, T) batches."""

    def __init__(self, models):
        cfg = models[0].cfg
        self.E, self.L, self.H, self.C = len(models), cfg.n_layers, cfg.n_heads, cfg.d_model
        named = [dict(m.named_parameters()) for m in models]
        self.p = {n: torch.stack([d[n].detach() for d in named]).requires_grad_(True) for n in named[0]}

    def lin(self, x, name, bias=True):       # x (E, N, in) @ W (E, out, in)^T + b (E, out)
        w = self.p[name + ".weight"].transpose(1, 2)
        return torch.baddbmm(self.p[name + ".bias"][:, None], x, w) if bias else torch.bmm(x, w)

    def ln(self, x, name):
        return F.layer_norm(x, x.shape[-1:]) * self.p[name + ".weight"][:, None] + self.p[name + ".bias"][:, None]

    def loss(self, inp, tgt):
        E, B, T = inp.shape
        H, C, p = self.H, self.C, self.p
        x = (p["tok.weight"][torch.arange(E)[:, None, None], inp] + p["pos.weight"][:, None, :T]).reshape(E, B * T, C)
        causal = torch.full((T, T), float("-inf")).triu(1).expand(E * B * H, T, T)
        for i in range(self.L):
            b = f"blocks.{i}."
            qkv = self.lin(self.ln(x, b + "ln1"), b + "attn.qkv").view(E, B, T, 3, H, C // H).permute(3, 0, 1, 4, 2, 5)
            q, k, v = qkv.reshape(3, E * B * H, T, C // H)
            s = torch.baddbmm(causal, q, k.transpose(1, 2), alpha=(C // H) ** -0.5)
            y = s.softmax(-1).bmm(v).view(E, B, H, T, C // H).permute(0, 1, 3, 2, 4).reshape(E, B * T, C)
            x = x + self.lin(y, b + "attn.proj")
            x = x + self.lin(F.gelu(self.lin(self.ln(x, b + "ln2"), b + "mlp.0")), b + "mlp.2")
        logits = self.lin(self.ln(x, "ln_f"), "head", bias=False)
        ce = F.cross_entropy(logits.reshape(E * B * T, -1), tgt.reshape(-1), reduction="none").view(E, -1)
        return (ce.sum(1) / (tgt.reshape(E, -1) != -100).sum(1)).sum()


def ensemble_steps(models, batches, lr=3e-3):
    ens = Ensemble(models)
    params = list(ens.p.values())
    opt = AdamW(params, lr=lr, betas=(0.9, 0.98))
    for per_model in batches:
        loss = ens.loss(torch.stack([b[0] for b in per_model]), torch.stack([b[1] for b in per_model]))
        loss.item()
        opt.zero_grad()
        loss.backward()
        norms = torch.stack([p.grad.reshape(ens.E, -1).norm(dim=1) for p in params]).norm(dim=0)   # per model
        scale = (1.0 / (norms + 1e-6)).clamp(max=1.0)
        for p in params:
            p.grad.mul_(scale.view(-1, *[1] * (p.dim() - 1)))
        opt.step()


def single_steps(models, batches, lr=3e-3):
    for e, m in enumerate(models):
        train_on_batches(m, lambda s: batches[s][e], len(batches), lr=lr, log=None)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", type=int, default=3)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--out", default="runs/bench/ensemble_step.txt", help="'' for none")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    batches = [[split_targets(make_sequences(rng, 64, (0.0, 0.8, 0.2), (K_MIN, K_MAX))) for _ in range(args.models)]
               for _ in range(args.steps)]
    fresh = lambda: [build_model(s) for s in range(args.models)]   # noqa: E731
    with torch.no_grad():
        ms, first = fresh(), batches[0]
        ens = Ensemble(ms).loss(torch.stack([b[0] for b in first]), torch.stack([b[1] for b in first]))
        single = sum(fast.loss(m, *b) for m, b in zip(ms, first))
        assert torch.allclose(ens, single, rtol=1e-5), (float(ens), float(single))
    te, ts = (t / args.steps for t in best_times([lambda: ensemble_steps(fresh(), batches),
                                                  lambda: single_steps(fresh(), batches)], args.repeats))
    lines = [f"{args.models} models, batch 64 each: ensemble step {te * 1000:.1f} ms | {args.models} single steps "
             f"{ts * 1000:.1f} ms | ensemble speedup {ts / te:.2f}x", load_note(),
             json.dumps({"models": args.models, "ensemble_s_per_step": round(te, 4), "single_s_per_step": round(ts, 4),
                         "speedup": round(ts / te, 2)})]
    report(lines, args.out)


if __name__ == "__main__":
    main()
