"""The erring thinker: test-time search and learned verifiers need a thinker whose chains err, and the base model's
are ~100 % right. This one is the base model reading its task's words through noise: Gaussian noise on the
embeddings of the task's words (the prompt's and the chain's own states alike: digits' ten digits), one direction
per seed, scaled so that greedy forced S at k = 8 is right on a set share of probe problems. A chain reads more
words the larger k is, so it errs more often as k grows, in S and (on most seeds) in T."""
from __future__ import annotations

import numpy as np
import torch

from ..core.evaluate import evaluate
from ..core.model import GPT
from ..core.problems import as_task, problems_per_k
from ..tasks import Task

ERR_CFG = {"phases": [], "misread": {"format": "S", "k": 8, "acc": 0.45, "n": 300, "probe_seed": 4321, "iters": 12}}
"""The erring thinker: the seed's base model (pretrain's init) with misread words; sigma is found by bisection
(`iters` halvings of [0, 1], of [0, 4] where 1 does not reach the target) so that greedy forced `format` at k = `k`
is right on `acc` of `n` probe problems (drawn with probe_seed, not evaluate's; on another task `acc` is at least
its chance + 0.1, `reachable`). benchmarks/erring_thinker.py measures its per-k accuracies."""


def word_rows(task: str | Task) -> slice:
    """The rows of the token embedding that hold the task's own words (after the shared specials)."""
    ids = as_task(task).task_ids()
    return slice(ids[0], ids[-1] + 1)


def reachable(m: dict, task: str | Task) -> dict:
    """A misreading target the task's noise can reach: the recipe's accuracy, or the task's chance at that k + 0.1
    where higher (modprod's noise only brings a model down to its blind-guess rate, which is above the recipe's
    target at its largest k). Digits: the recipe's target stands."""
    return dict(m, acc=max(m["acc"], round(as_task(task).chance(m["k"]) + 0.1, 4)))


def misread(model: GPT, sigma: float, seed: int, task: str | Task = "digits") -> GPT:
    """Add sigma x (the task's word embeddings' std) x a fixed Gaussian direction (drawn from `seed`) to the rows of
    the task's words in the token embedding, in place."""
    emb = model.tok.weight.data
    rows = word_rows(task)
    z = torch.randn(rows.stop - rows.start, emb.shape[1], generator=torch.Generator().manual_seed(seed)).to(emb.device)
    emb[rows] += sigma * emb[rows].std() * z
    return model


def calibrate_misread(model: GPT, m: dict, seed: int | list[int], task: str | Task = "digits",
                      tops: tuple[float, ...] = (1.0,)) -> float:
    """The sigma (in [0, top], top the first of `tops` whose accuracy is below the target) at which misread(model,
    sigma, seed) is right on m["acc"] of the probe, on average over the directions when `seed` is several (the
    per-sample thinker's draws): bisection, keeping the larger sigma whose accuracy is still >= acc. Leaves `model`
    as it was."""
    probe = problems_per_k(m["n"], seed=m["probe_seed"], ks=[m["k"]], split="val", task=task)   # a selection: val
    clean = model.tok.weight.data.clone()
    seeds = [seed] if isinstance(seed, int) else list(seed)

    def acc_at(sigma: float) -> float:
        accs = []
        for s in seeds:
            try:
                accs.append(evaluate(misread(model, sigma, s, task), probe, force=[m["format"]])["acc"])
            finally:
                model.tok.weight.data.copy_(clean)
        return np.mean(accs)
    top = next((t for t in tops if acc_at(t) < m["acc"]), None)
    if top is None:
        raise ValueError(f"misread: even sigma = {tops[-1]:g} leaves forced {m['format']} at k = {m['k']} right on "
                         f">= {m['acc']} of the probe; the noise cannot reach the target")
    lo, hi = 0.0, top
    for _ in range(m["iters"]):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if acc_at(mid) >= m["acc"] else (lo, mid)
    return lo
