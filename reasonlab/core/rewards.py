"""Rewards: pure functions of (problem, parsed output) -> float, for every task (a problem may be given as the course
module's list of digits), and one placebo that reads neither (`random_reward`). No reward model, so nothing to
hack."""
from __future__ import annotations

import math
import random
from typing import Callable

import torch

from ..tasks import Problem, problem_of, task_of


def rule_reward(problem: Problem | list[int], parsed: dict, format_bonus: float = 0.1) -> float:
    """R1-Zero's rule reward: 1 for the right answer, plus format_bonus when the whole template holds."""
    return correct(problem, parsed) + (format_bonus if parsed["ok"] else 0.0)


def correct(problem: Problem | list[int], parsed: dict) -> float:
    """1 for the right answer, else 0."""
    p = problem_of(problem)
    return 1.0 if task_of(p).correct(p, parsed) else 0.0


def random_reward(seed: int, gamma: float = 0.5) -> Callable[[Problem, dict], float]:
    """A spurious reward (Shao et al. 2025, "Spurious Rewards: Rethinking Training Signals in RLVR", arXiv
    2506.10947, their random reward): 1 with probability gamma, else 0, drawn independently of the problem and the
    output from a stream of its own (seeded here, so a run is reproducible). RL on it keeps its procedure and loses
    the reward's information: the placebo of a claim about what the reward teaches."""
    rng = random.Random(seed)
    return lambda problem, parsed: 1.0 if rng.random() < gamma else 0.0


# ---------------------------------------------------------------------------------------------------------------
# Length- and cost-aware rewards (adaptive thinking). Per-sample rewards are functions of (problem, parsed);
# group rewards reshape a (P, G) reward tensor with the group's parses (they need the other samples).


def token_cost_reward(problem: Problem, parsed: dict, alpha: float = 0.2) -> float:
    """Correctness discounted by length, c * (1 - alpha * n / the task's longest output) (Arora & Zanette 2025, arXiv
    2502.04463, with a fixed length scale instead of their per-prompt standardisation). alpha = 0 is the plain
    accuracy reward."""
    p = problem_of(problem)
    return correct(p, parsed) * (1.0 - alpha * parsed["length"] / task_of(p).max_out)


def format_reward(problem: Problem, parsed: dict, values=(1.0, 0.75, 0.5), wrong: float = -1.0) -> float:
    """Thinkless (Fang et al. 2025, arXiv 2505.13379): a right answer is worth more the less it thought
    (A / S / T = 1 / 0.75 / 0.5); a wrong one costs `wrong`."""
    if not correct(problem, parsed):
        return wrong
    return {"direct": values[0], "short": values[1], "full": values[2]}.get(parsed["fmt"], wrong)


def overlong_reward(problem: Problem, parsed: dict, max_len: int | None = None, buffer: int = 4) -> float:
    """DAPO's soft overlong punishment (arXiv 2503.14476) added to correctness: 0 up to max_len - buffer, then a
    linear ramp to -1 at max_len (None: the task's longest output); an output cut at max_len without a complete
    template is truncated: -1."""
    p = problem_of(problem)
    max_len = task_of(p).max_out if max_len is None else max_len
    n = parsed["length"]
    truncated = n >= max_len and not parsed["ok"]
    pen = 0.0 if n <= max_len - buffer else ((max_len - buffer) - n) / buffer
    return correct(p, parsed) + (-1.0 if truncated else pen)


def adaptthink_reward(problem: Problem, parsed: dict, ref_acc: dict, delta: float = 0.05) -> float:
    """AdaptThink (Zhang et al. 2025, arXiv 2505.13417): c - mean reference accuracy on this difficulty
    + delta for not thinking. ref_acc maps k to the reference model's accuracy when it thinks."""
    p = problem_of(problem)
    return correct(p, parsed) - ref_acc[p.k] + (delta if parsed["fmt"] == "direct" else 0.0)


def kimi_length_reward(r, parsed_groups, step: int = 0, steps: int = 1, weight: float = 0.5):
    """Kimi k1.5 (arXiv 2501.12599, 2.3.3): within a group, lam = 0.5 - (n - n_min) / (n_max - n_min); a right
    sample gets + weight * lam, a wrong one + weight * min(0, lam); nothing when all lengths agree.
    r: (P, G) correctness rewards; parsed_groups: P lists of G parses."""
    out = r.clone()
    for i, ps in enumerate(parsed_groups):
        n = torch.tensor([p["length"] for p in ps], dtype=torch.float32)
        if n.max() == n.min():
            continue
        lam = 0.5 - (n - n.min()) / (n.max() - n.min())
        out[i] += weight * torch.where(r[i] > 0, lam, lam.clamp(max=0.0))
    return out


def arm_format_scaling(r, parsed_groups, step: int, steps: int):
    """ARM's Ada-GRPO (Wu et al. 2025, arXiv 2505.20258): scale each reward by alpha = (G / F) * decay, where F is how
    many samples in the group used that format and decay = F/G + (1 - F/G)(1 + cos(pi t / T)) / 2 fades the bonus
    for rare formats over training, so GRPO does not collapse onto one format early."""
    out = r.clone()
    G = r.shape[1]
    for i, ps in enumerate(parsed_groups):
        counts = {}
        for p in ps:
            counts[p["fmt"]] = counts.get(p["fmt"], 0) + 1
        for j, p in enumerate(ps):
            F = counts[p["fmt"]]
            decay = F / G + 0.5 * (1 - F / G) * (1 + math.cos(math.pi * step / max(1, steps)))
            out[i, j] = r[i, j] * (G / F) * decay
    return out
