"""Speed of one supervised training step at batch 64 (the base recipe's), against the step as it was before.

The baseline is the plain step: forward over the whole padded (64, 23) batch with its loss, SDPA attention,
AdamW over foreach kernels, foreach clipping. Ours is `train_on_batches` itself (fast.loss: only what the counted
targets need; bmm attention; fused AdamW), bookkeeping included. Both train fresh seed-0 models on the same
pre-built batches of the base recipe's phase 2 (S and T, k = 2..8); each side runs `--steps` steps, best of
`--repeats` runs, the two taking turns. Writes runs/bench/train_step.txt.

    python benchmarks/train_step.py [--steps 50] [--repeats 5] [--threads N]
"""
from __future__ import annotations

import argparse
import json

import numpy as np
import torch
from common import best_times, clock_for, load_note, report

from reasonlab.core.task import K_MAX, K_MIN
from reasonlab.train.sft import build_model, make_sequences, split_targets, train_on_batches


def plain_steps(batches, lr=3e-3):
    model = build_model(0)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.0, foreach=True)
    for inp, tgt in batches:
        _, loss = model(inp, tgt)
        loss.item()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        opt.step()


def our_steps(batches, lr=3e-3):
    train_on_batches(build_model(0), lambda s: batches[s], len(batches), lr=lr, log=None)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall", help="cpu: this process's CPU time "
                    "(one thread only), for a machine shared with other work")
    ap.add_argument("--out", default="runs/bench/train_step.txt", help="'' for none")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    batches = [split_targets(make_sequences(rng, args.batch, (0.0, 0.8, 0.2), (K_MIN, K_MAX))) for _ in range(args.steps)]
    ours, plain = (t / args.steps for t in best_times([lambda: our_steps(batches), lambda: plain_steps(batches)],
                                                      args.repeats, clock_for(args.clock)))
    lines = [f"training step, batch {args.batch}: reasonlab {ours * 1000:.1f} ms | plain {plain * 1000:.1f} ms | "
             f"speedup {plain / ours:.2f}x", load_note(args.clock),
             json.dumps({"reasonlab_s_per_step": round(ours, 4), "plain_s_per_step": round(plain, 4),
                         "speedup": round(plain / ours, 2)})]
    report(lines, args.out)


if __name__ == "__main__":
    main()
