"""Exact probabilities by teacher forcing.

Each format has exactly one right output (`Task.solution`), so the chance that one free sample is right in format f
is the probability of that one output, read in a single forward pass: p_f(x) = prod_t pi(y*_t | x, y*_<t). The
chance of a right answer in N independent samples is then 1 - (1 - p(x))^N, exactly, with no sampling.
"""
from __future__ import annotations

import numpy as np
import torch

from .. import tasks
from ..tasks import FMT_NAMES, Problem
from .model import GPT
from .sampling import output_logits


@torch.inference_mode()
def right_probs(model: GPT, problems: list[Problem], temperature: float = 1.0, batch: int = 2048) -> np.ndarray:
    """(n, 3) probability that one sample at `temperature` is the right output in each format (direct, short,
    full: the order of FMT_NAMES), the format token included."""
    problems = tasks.problems_of(problems)
    task = tasks.of(problems)
    cols = []
    for fmt in FMT_NAMES:
        lp = []
        for i in range(0, len(problems), batch):
            ps = problems[i:i + batch]
            out = [[task.id[w] for w in task.solution(p, fmt)] for p in ps]
            lp.append(_logprob(model, [task.prompt_ids(p) for p in ps], out, temperature))
        cols.append(np.concatenate(lp))
    return np.exp(np.stack(cols, 1))


def _logprob(model: GPT, prompts, outputs, temperature: float) -> np.ndarray:
    """Each output's log-probability at `temperature` (the sampling distribution: logits / temperature)."""
    lg, tok, mask = output_logits(model, prompts, outputs)
    lp = torch.log_softmax(lg.float() / temperature, -1).gather(-1, tok[:, :, None]).squeeze(-1) * mask
    return lp.sum(1).double().cpu().numpy()


def pass_exact(p: np.ndarray, N: int) -> np.ndarray:
    """Exact pass@N of a sampler that is right with probability p per sample: 1 - (1 - p)^N (stable for tiny p)."""
    return -np.expm1(N * np.log1p(-np.clip(p, 0.0, 1.0 - 1e-16)))
