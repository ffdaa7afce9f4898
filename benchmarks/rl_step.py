"""Speed of one GRPO step (16 prompts x 8 samples, 2 inner updates, beta 0.04) against a naive step.

The naive step is the spec's algorithm written plainly: generation that re-runs the whole sequence for every new
token and rebuilds the batch from Python lists, log-probs gathered one sequence at a time, and separate forward
passes for the old and reference log-probs. Both start from the same base model; each is timed over `--steps`
consecutive steps (best of `--repeats` runs, the two taking turns) in the same process.

    python benchmarks/rl_step.py [--steps 5] [--repeats 3]
"""
from __future__ import annotations

import argparse
import copy
import json
import random

import torch
import torch.nn.functional as F
from common import best_times, clock_for, load_note, report

from reasonlab.core.rewards import rule_reward
from reasonlab.core.task import ID, MAX_LEN, make_digits, parse, prompt_ids
from reasonlab.train.rl import RLConfig, train
from reasonlab.train.zoo import base_model


@torch.no_grad()
def naive_generate(model, prompts, gen, temperature=1.0, max_new=16):
    seqs = [list(p) for p in prompts]
    done = [False] * len(seqs)
    for _ in range(max_new):
        alive = [i for i in range(len(seqs)) if not done[i] and len(seqs[i]) < MAX_LEN]
        if not alive:
            break
        T = max(len(seqs[i]) for i in alive)
        ids = torch.full((len(alive), T), ID["<pad>"], dtype=torch.long)
        for r, i in enumerate(alive):
            ids[r, :len(seqs[i])] = torch.tensor(seqs[i])
        logits, _ = model(ids)
        last = torch.stack([logits[r, len(seqs[i]) - 1] for r, i in enumerate(alive)])
        nxt = torch.multinomial(F.softmax(last / temperature, -1), 1, generator=gen).squeeze(1)
        for r, i in enumerate(alive):
            seqs[i].append(int(nxt[r]))
            done[i] = done[i] or int(nxt[r]) == ID["</s>"] or len(seqs[i]) >= MAX_LEN
    return [s[len(p):] for s, p in zip(seqs, prompts)]


def naive_logprobs(model, prompts, outputs):
    full = [p + o for p, o in zip(prompts, outputs)]
    T = max(len(s) for s in full)
    ids = torch.full((len(full), T), ID["<pad>"], dtype=torch.long)
    for b, s in enumerate(full):
        ids[b, :len(s)] = torch.tensor(s)
    logits, _ = model(ids[:, :-1])
    lp = F.log_softmax(logits, -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    L = max(len(o) for o in outputs)
    out, mask = torch.zeros(len(full), L), torch.zeros(len(full), L)
    for b, (p, o) in enumerate(zip(prompts, outputs)):
        out[b, :len(o)] = lp[b, len(p) - 1:len(p) - 1 + len(o)]
        mask[b, :len(o)] = 1
    return out, mask


def naive_steps(policy, ref, steps, P=16, G=8, lr=3e-5, beta=0.04, clip=0.2, inner=2, seed=0):
    rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(policy.parameters(), lr=lr)
    for _ in range(steps):
        probs = [make_digits(rng, rng.randint(2, 8)) for _ in range(P)]
        prompts = [prompt_ids(d) for d in probs for _ in range(G)]
        digits = [d for d in probs for _ in range(G)]
        outs = naive_generate(policy, prompts, gen)
        r = torch.tensor([rule_reward(d, parse(o)) for d, o in zip(digits, outs)]).view(P, G)
        A = ((r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-4)).view(-1)
        with torch.no_grad():
            old_lp, mask = naive_logprobs(policy, prompts, outs)
            ref_lp, _ = naive_logprobs(ref, prompts, outs)
        for _ in range(inner):
            lp, _ = naive_logprobs(policy, prompts, outs)
            ratio = torch.exp(lp - old_lp)
            surr = torch.min(ratio * A[:, None], torch.clamp(ratio, 1 - clip, 1 + clip) * A[:, None])
            kl = torch.exp(ref_lp - lp) - (ref_lp - lp) - 1
            loss = -(((surr - beta * kl) * mask).sum(1) / mask.sum(1)).mean()
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
            opt.step()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--long", type=int, default=100, help="steps of the run whose mean step time is reported "
                    "(0: skip it); the median over its first 10 steps too")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall", help="cpu: this process's CPU time "
                    "(one thread only), for a machine shared with other work")
    ap.add_argument("--out", default="runs/bench/rl_step.txt", help="'' for none")
    args = ap.parse_args()
    clock = clock_for(args.clock)
    base = base_model(0, log=None)
    cfg = RLConfig.preset("grpo", steps=args.steps, log_every=0)
    fast, naive = (t / args.steps for t in best_times([lambda: train(copy.deepcopy(base), base, cfg, log=None),
                                                       lambda: naive_steps(copy.deepcopy(base), base, args.steps)],
                                                      args.repeats, clock))
    lines = [f"GRPO step (16 x 8, 2 inner), {args.steps} steps from the base model: reasonlab {fast * 1000:.1f} ms | "
             f"naive {naive * 1000:.1f} ms | speedup {naive / fast:.2f}x"]
    summary = {"reasonlab_s_per_step": round(fast, 4), "naive_s_per_step": round(naive, 4),
               "speedup": round(naive / fast, 2)}
    if args.long:
        # one run of the spec's defaults, each step timed on its own (the step's own clock: sampling to update)
        times = []
        last = [clock()]

        def tick(rec, policy):
            now = clock()
            times.append(now - last[0])
            last[0] = now
        train(copy.deepcopy(base), base, RLConfig.preset("grpo", steps=args.long, log_every=0), log=None,
              callback=tick)
        first = sorted(times[:10])
        median10 = (first[(len(first) - 1) // 2] + first[len(first) // 2]) / 2
        mean = sum(times) / len(times)
        lines.append(f"GRPO run of {args.long} steps: median of the first 10 steps {median10 * 1000:.1f} ms, "
                     f"mean {mean * 1000:.1f} ms")
        summary.update(median_first10_s=round(median10, 4), mean_s=round(mean, 4), run_steps=args.long)
    lines += [load_note(args.clock), json.dumps(summary)]
    report(lines, args.out)


if __name__ == "__main__":
    main()
