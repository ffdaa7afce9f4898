"""Generation speed: reasonlab's decoder against the spec's `generate`, re-implemented as its baseline.

The baseline (`spec_generate` below) is the algorithm of the course module's `generate`
(/work/shared/seed/, section 3): at every step it rebuilds a right-padded batch of the rows still alive from
Python lists, runs the whole sequence through the model again, and reads each row's logits at its last real
position; finished rows drop out of the batch. Greedy outputs must agree with ours token for token (checked
before timing). Its sampled outputs cannot: it draws only for the rows still alive, ours for every row, so the
random streams differ; sampled mode compares speed only.

4096 prompts with k uniform in 2..8; forced-T greedy and free sampling at temperature 1 (target: >= 10x on
both). Reports sequences per second for both decoders and their ratio, best of `--repeats` runs, the two taking
turns; writes runs/bench/generation.txt. Uses the cached base model (trained if missing).

    python benchmarks/generation.py [--n 4096] [--repeats 3]
"""
from __future__ import annotations

import argparse
import json
import random

import torch
import torch.nn.functional as F
from common import best_times, clock_for, load_note, report

from reasonlab.core.sampling import generate
from reasonlab.core.task import ID, MAX_LEN, make_digits, prompt_ids


@torch.no_grad()
def spec_generate(model, prompts, gen=None, temperature=1.0, force=None, max_new=16):
    """The spec's decoding loop: full recomputation over the live rows at every step (see the module docstring)."""
    model.eval()
    pad, eos = ID["<pad>"], ID["</s>"]
    head = [ID[w] for w in force] if force else []
    rows = [list(p) + head for p in prompts]
    live = [True] * len(rows)
    for _ in range(max_new):
        idx = [i for i, ok in enumerate(live) if ok and len(rows[i]) < MAX_LEN]
        if not idx:
            break
        width = max(len(rows[i]) for i in idx)
        batch = torch.full((len(idx), width), pad, dtype=torch.long)
        for r, i in enumerate(idx):
            batch[r, :len(rows[i])] = torch.tensor(rows[i])
        logits, _ = model(batch)
        last = torch.stack([logits[r, len(rows[i]) - 1] for r, i in enumerate(idx)])
        if gen is None or temperature == 0:
            nxt = last.argmax(-1)
        else:
            nxt = torch.multinomial(F.softmax(last / temperature, -1), 1, generator=gen).squeeze(1)
        for r, i in enumerate(idx):
            tok = int(nxt[r])
            rows[i].append(tok)
            live[i] = tok != eos
        for i, row in enumerate(rows):
            if len(row) >= MAX_LEN:
                live[i] = False
    return [row[len(p):] for row, p in zip(rows, prompts)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--model", default="base-seed0", help="cached model name (trained if missing)")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall", help="cpu: this process's CPU time "
                    "(one thread only), for a machine shared with other work")
    ap.add_argument("--out", default="runs/bench/generation.txt", help="'' for none")
    args = ap.parse_args()
    from reasonlab.train.sft import base_cfg
    from reasonlab.train.zoo import get_model
    model = get_model(args.model, base_cfg(0), log=None)
    rng = random.Random(0)
    prompts = [prompt_ids(make_digits(rng, rng.randint(2, 8))) for _ in range(args.n)]
    rows = []
    for name, kw in [("forced T, greedy", dict(force=["T"], temperature=0.0)),
                     ("free, sampled T=1", dict(temperature=1.0))]:
        def run(decoder):
            gen = torch.Generator().manual_seed(0) if kw["temperature"] else None
            return decoder(model, prompts, gen, kw["temperature"], kw.get("force"))
        if not kw["temperature"]:
            assert run(generate) == run(spec_generate), "decoders disagree"
        fast, spec = best_times([lambda: run(generate), lambda: run(spec_generate)], args.repeats, clock_for(args.clock))
        rows.append({"mode": name, "reasonlab_seq_per_s": round(args.n / fast), "spec_seq_per_s": round(args.n / spec),
                     "reasonlab_s": round(fast, 3), "spec_s": round(spec, 3), "speedup": round(spec / fast, 2)})
    lines = [f"{'mode':<20}{'reasonlab seq/s':>16}{'spec seq/s':>12}{'speedup':>10}"]
    lines += [f"{r['mode']:<20}{r['reasonlab_seq_per_s']:>16}{r['spec_seq_per_s']:>12}{r['speedup']:>9}x" for r in rows]
    lines += [load_note(args.clock), json.dumps(rows)]
    report(lines, args.out)


if __name__ == "__main__":
    main()
