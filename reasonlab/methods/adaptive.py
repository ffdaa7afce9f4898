"""Adaptive thinking: RL with length- and cost-aware rewards, so the model thinks only where thinking pays.

Each method is a reward (and, for some, a group reshaping or forced direct rollouts) plugged into the one RL loop
(`rl.train`): GRPO with a quarter of each group forced to answer directly so that "A" keeps being tried (plain GRPO
stops sampling it within a few steps: ARM's format collapse). `thinkless_fmt` forces half of each group and lets those
rollouts train only their "A" (is a direct answer worth it on this problem?), not the answer itself.
"""
from __future__ import annotations

import functools
from typing import Literal, get_args

import torch

from ..core import rewards
from ..core.evaluate import evaluate
from ..core.model import GPT
from ..core.problems import problems_per_k

Method = Literal["grpo", "cost0.3", "cost0.6", "cost1.0", "kimi", "thinkless", "thinkless_fmt", "arm", "adaptthink"]
METHODS = get_args(Method)

RL_FIELDS = {"thinkless_fmt": dict(force_direct=0.5, forced_trains="format"), "adaptthink": dict(force_direct=0.5)}
"""The RL fields an adaptive method sets; the others force a quarter of each group to answer directly, so that A
keeps being tried."""


def method_parts(name: str, ref_acc: dict | None = None) -> tuple:
    """(reward_fn, group_fn, RLConfig fields) for a method name: the fields set the forced-direct rollouts."""
    q = dict(RL_FIELDS.get(name, dict(force_direct=0.25)))
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


def reference_accuracy(model: GPT, n: int = 200, seed: int = 3, task="digits") -> dict:
    """The base model's sampled accuracy per k when it thinks (forced S), on train-part problems (it is part of the
    reward): AdaptThink's reference."""
    gen = torch.Generator(device=next(model.parameters()).device).manual_seed(seed)
    r = evaluate(model, problems_per_k(n, seed=seed, split="train", task=task), gen=gen, temperature=1.0, force=["S"])
    return {k: v["acc"] for k, v in r["per_k"].items()}
