"""Adaptive thinking: RL with length- and cost-aware rewards, so the model thinks only where thinking pays.

Each method is a reward (and, for some, a group reshaping or forced direct rollouts) plugged into the one RL loop
(`rl.train`); everything else is shared: GRPO, lr 1e-4, 200 steps, 16 x 8 samples, a quarter of each group forced
to answer directly so that "A" keeps being tried (plain GRPO stops sampling it within ~10 steps: ARM's format
collapse). `thinkless_fmt` forces half of each group and lets those rollouts train only their "A" (is a
direct answer worth it on this problem?), not the answer itself. The result is the accuracy / mean-tokens plane,
with the fixed formats and the Pareto front.
"""
from __future__ import annotations

import copy
import functools
import time

import numpy as np
import torch

from ..core import rewards
from ..core.evaluate import evaluate
from ..core.model import GPT
from ..core.pool import sample_pool
from ..core.problems import TEST_SEED, problems_per_k
from ..core.task import FMT_NAMES
from ..stats.summary import mean_std, pareto
from ..train.rl import RLConfig, train
from . import tts
from .config import ADAPTIVE_METHODS as METHODS
from .config import adaptive_fields


def method_parts(name: str, ref_acc: dict | None = None) -> tuple:
    """(reward_fn, group_fn, RLConfig fields) for a method name: the fields set the forced-direct rollouts."""
    q = adaptive_fields(name)
    if name == "grpo":                                 # the rule reward: thinking is free
        return rewards.rule_reward, None, q
    if name.startswith("cost"):                        # Arora & Zanette style token cost, alpha swept
        return functools.partial(rewards.token_cost_reward, alpha=float(name[4:])), None, q
    if name == "kimi":                                 # Kimi k1.5 group length reward on top of correctness
        return rewards.correct, rewards.kimi_length_reward, q
    if name == "thinkless":                            # per-format values, wrong = -1
        return rewards.format_reward, None, q
    if name == "thinkless_fmt":                        # the same, half forced, and forced rollouts train only their
        return rewards.format_reward, None, q          # "A": where A pays
    if name == "arm":                                  # ARM: rare formats scaled up early in training
        return rewards.correct, rewards.arm_format_scaling, q
    if name == "adaptthink":                           # AdaptThink: c - ref accuracy + delta * no-thinking, half forced
        return functools.partial(rewards.adaptthink_reward, ref_acc=ref_acc), None, q
    raise ValueError(f"unknown method {name!r}: choose from {', '.join(METHODS)}")


def reference_accuracy(model: GPT, n: int = 200, seed: int = 3) -> dict:
    """The base model's sampled accuracy per k when it thinks (forced S): AdaptThink's reference."""
    gen = torch.Generator(device=next(model.parameters()).device).manual_seed(seed)
    r = evaluate(model, problems_per_k(n, seed=seed), gen=gen, temperature=1.0, force=["S"])
    return {k: v["acc"] for k, v in r["per_k"].items()}


def point(model: GPT, problems, force=None) -> dict:
    """Greedy accuracy, mean generated tokens, and format share per k."""
    r = evaluate(model, problems, force=force)
    return {"acc": r["acc"], "tokens": r["length"], "acc_by_k": {k: v["acc"] for k, v in r["per_k"].items()},
            "share_by_k": {k: v["share"] for k, v in r["per_k"].items()},
            "tokens_by_k": {k: v["length"] for k, v in r["per_k"].items()},
            "n_by_k": {k: sum(len(d) == k for d in problems) for k in r["per_k"]}}


def run_method(base: GPT, name: str, seed: int, steps: int = 200, lr: float = 1e-4, n_eval: int = 300,
               ref_acc: dict | None = None, beta: float = 0.04, progress: bool = False, **overrides) -> dict:
    """Train a copy of `base` with one method's reward and evaluate it; overrides are RLConfig fields."""
    reward_fn, group_fn, fields = method_parts(name, ref_acc)
    cfg = RLConfig.preset("grpo", **{**dict(steps=steps, learning_rate=lr, seed=seed, log_every=0, beta=beta), **fields,
                                     **overrides})
    policy = copy.deepcopy(base)
    t = time.perf_counter()
    hist = train(policy, copy.deepcopy(base), cfg, reward_fn=reward_fn, group_fn=group_fn, log=None, progress=progress)
    probs = problems_per_k(n_eval, seed=TEST_SEED)
    out = point(policy, probs)
    out["direct_acc_by_k"] = point(policy, probs, force=["A"])["acc_by_k"]   # how far direct answering was pushed
    return {"method": name, "seed": seed, "seconds": round(time.perf_counter() - t, 1), **out,
            "share_direct_over_steps": [h["share"]["direct"] for h in hist if "share" in h]}


def fixed_points(bases: list[GPT], n_eval: int = 300) -> dict:
    """Always-A / always-S / always-T (forced, greedy): accuracy, tokens and accuracy per k, mean over the bases."""
    probs = problems_per_k(n_eval, seed=TEST_SEED)
    return mean_points([{f: point(b, probs, force=[f]) for f in ("A", "S", "T")} for b in bases])


def mean_points(per_base: list[dict]) -> dict:
    """{format: {acc, tokens, acc_by_k}}, one such dict per base model -> their mean."""
    return {f: {"acc": float(np.mean([p[f]["acc"] for p in per_base])),
                "tokens": float(np.mean([p[f]["tokens"] for p in per_base])),
                **{key: {k: float(np.mean([p[f][key][k] for p in per_base])) for k in per_base[0][f][key]}
                   for key in ("acc_by_k", "tokens_by_k", "n_by_k") if key in per_base[0][f]}}
            for f in per_base[0]}


def best_fixed_per_k(fixed: dict, tol: float = 0.005) -> dict:
    """The control for adaptive thinking: per k, the fixed format with the best accuracy (within tol of it, the
    cheapest), as one policy: {acc, tokens, per_k: {k: format}}, weighted by the problems per k."""
    ks = list(fixed["A"]["acc_by_k"])
    pick = {}
    for k in ks:
        best = max(fixed[f]["acc_by_k"][k] for f in fixed)
        pick[k] = min((f for f in fixed if fixed[f]["acc_by_k"][k] >= best - tol), key=lambda f: fixed[f]["tokens_by_k"][k])
    n = {k: fixed["A"]["n_by_k"][k] for k in ks}
    tot = sum(n.values())
    return {"acc": sum(n[k] * fixed[pick[k]]["acc_by_k"][k] for k in ks) / tot,
            "tokens": sum(n[k] * fixed[pick[k]]["tokens_by_k"][k] for k in ks) / tot, "per_k": pick}


def tts_points(base: GPT, n: int = 300) -> dict:
    """Two test-time-compute points for the plane: maj@8 of direct answers and maj@4 of short chains, on the
    methods' and fixed formats' problems (the test set), so the whole table compares on one set."""
    probs = problems_per_k(n, seed=TEST_SEED)
    out = {}
    for f, N in (("A", 8), ("S", 4)):
        pool = sample_pool(base, probs, N, force=[f], seed=1)
        out[f"{f} maj@{N}"] = {"acc": float(tts.majority(pool, N).mean()), "tokens": tts.tokens(pool, N)}
    return out


def summarize(runs: list[dict], fixed: dict) -> dict:
    """Mean +- std over seeds per method, and which methods sit on the front against the fixed formats."""
    out = {}
    for m in dict.fromkeys(r["method"] for r in runs):
        rs = [r for r in runs if r["method"] == m]
        ks = list(rs[0]["share_by_k"])
        out[m] = {"acc": mean_std([r["acc"] for r in rs]), "tokens": mean_std([r["tokens"] for r in rs]),
                  "share_by_k": {k: {f: float(np.mean([r["share_by_k"][k][f] for r in rs])) for f in FMT_NAMES} for k in ks},
                  "acc_by_k": {k: float(np.mean([r["acc_by_k"][k] for r in rs])) for k in ks},
                  "direct_acc_by_k": {k: float(np.mean([r["direct_acc_by_k"][k] for r in rs])) for k in ks}}
    names = list(out) + [f"always {f}" for f in fixed]
    pts = [(out[m]["tokens"][0], out[m]["acc"][0]) for m in out] + [(fixed[f]["tokens"], fixed[f]["acc"]) for f in fixed]
    front = set(pareto(pts))
    for i, n in enumerate(names):
        if n in out:
            out[n]["on_front"] = i in front
            s = fixed.get("S")
            out[n]["beats_always_S"] = bool(s and out[n]["acc"][0] >= s["acc"] - 1e-9 and out[n]["tokens"][0] < s["tokens"])
    return out
