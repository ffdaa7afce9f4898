"""The problems: the parts of the problem space, the named evaluation sets, and drawing.

A problem is its digits (k = K_MIN..K_MAX of them). Every problem belongs to one part, a fixed function of its
digits (a hash), so sets drawn from different parts are disjoint whatever the seeds:

    train   half of the space   everything trained draws its problems here (the base recipe, RL, STaR, budgets,
                                verifiers: `train_digits`, `train_rows`)
    val     a quarter           selection: stopping tests, hyper-parameters, compute-optimal choices
    test    a quarter           scoring: each (experiment, seed) draws its own (`test_problems`)

Evaluation sets never repeat a problem: where a k has no more problems than asked for (k = 2 has 100 in all, 25 of
them in "test"), the draw is that whole k, in a seeded order, and the set is smaller than asked. Training data may
repeat problems (`repeat=True`).
"""
from __future__ import annotations

import functools
import hashlib
import itertools
import random

import numpy as np

from .task import K_MAX, K_MIN, make_digits

PARTS = {"train": (0.0, 0.5), "val": (0.5, 0.75), "test": (0.75, 1.0)}
ENUMERATE_UP_TO = 4
"""k up to this many digits is enumerated (10 ** k problems): draws there are exact samples without replacement."""

TEST_SEED = 12345   # `reasonlab eval`'s default test draw (one model, one table)
PROBE_SEED = 999    # "probe": RL's greedy checks during training (time to solve), never reported as a final score
GATE_SEED = 31337   # "gate": the base recipe's stopping tests, drawn from the "val" part only


def _unit(digits) -> float:
    return int.from_bytes(hashlib.sha256(bytes([len(digits)] + list(digits))).digest()[:8], "big") / 2 ** 64


def _part(u: float) -> str:
    return next(p for p, (lo, hi) in PARTS.items() if lo <= u < hi)


@functools.lru_cache(maxsize=None)
def _ranked(k: int) -> dict[tuple[int, ...], str]:
    """An enumerated k's parts by rank of the hash, so each part holds exactly its share (a hash threshold gives
    14 "val" problems of 100 at k = 2)."""
    order = sorted(itertools.product(range(10), repeat=k), key=_unit)
    return {d: _part(i / len(order)) for i, d in enumerate(order)}


def part_of(digits) -> str:
    """The part ("train", "val" or "test") a problem belongs to, a fixed function of its digits: by rank of a hash
    where k is enumerated (exact shares), by the hash's value beyond."""
    if len(digits) <= ENUMERATE_UP_TO:
        return _ranked(len(digits))[tuple(digits)]
    return _part(_unit(digits))


@functools.lru_cache(maxsize=None)
def _space(k: int, part: str | None) -> tuple[tuple[int, ...], ...]:
    return tuple(d for d, p in _ranked(k).items() if part is None or p == part)


def problems_per_k(n: int, seed: int = 0, ks=range(K_MIN, K_MAX + 1), split: str | None = None,
                   repeat: bool = False) -> list[list[int]]:
    """Up to n distinct problems for each k, from random.Random(seed), from one part of the space (`split`: "train",
    "val", "test"; None: all of it). Small k are enumerated, so a k with fewer than n problems gives them all.
    repeat=True draws n with replacement (training data)."""
    if split is not None and split not in PARTS:
        raise ValueError(f"split must be one of {', '.join(PARTS)} or None, got {split!r}")
    rng = random.Random(seed)
    out = []
    for k in ks:
        if k <= ENUMERATE_UP_TO:
            space = _space(k, split)
            picks = [rng.randrange(len(space)) for _ in range(n)] if repeat else rng.sample(range(len(space)), min(n, len(space)))
            out += [list(space[i]) for i in picks]
            continue
        got, seen = [], set()
        while len(got) < n:
            d = make_digits(rng, k)
            if (split is not None and part_of(d) != split) or (not repeat and tuple(d) in seen):
                continue
            seen.add(tuple(d))
            got.append(d)
        out += got
    return out


def test_problems(n: int, exp: str, seed: int, ks=range(K_MIN, K_MAX + 1)) -> list[list[int]]:
    """The test problems one (experiment, seed) is scored on: up to n per k from the test part, drawn with a seed of
    the experiment and the seed's own, so that each seed scores its own draw and an interval over seeds covers the
    sampling of problems. A k whose test part holds no more than n problems (k = 2: 25, k = 3: 250) is enumerated
    whole: every seed scores that k's whole test population."""
    return problems_per_k(n, seed=f"{exp}-test-{seed}", ks=ks, split="test")


def train_digits(rng: random.Random, k: int) -> list[int]:
    """k digits drawn uniformly from the train part (a problem of another part is drawn again): what RL, STaR and
    the budget models train on, so that no trained problem is ever a selection or test problem."""
    while True:
        d = make_digits(rng, k)
        if part_of(d) == "train":
            return d


@functools.lru_cache(maxsize=None)
def _train_table(k: int) -> np.ndarray:
    """(10 ** k,) bool: problem i (its digits read as a base-10 number) is in the train part."""
    out = np.zeros(10 ** k, dtype=bool)
    for d, part in _ranked(k).items():
        out[int("".join(map(str, d)))] = part == "train"
    return out


def in_train(digits: np.ndarray, k: np.ndarray) -> np.ndarray:
    """(B,) whether each row's first k digits (digits (B, K_MAX), k (B,)) are a train-part problem: a table lookup
    where k is enumerated, the hash beyond."""
    out = np.zeros(len(k), dtype=bool)
    for kk in np.unique(k):
        rows = np.nonzero(k == kk)[0]
        if kk <= ENUMERATE_UP_TO:
            idx = (digits[rows, :kk] * 10 ** np.arange(kk - 1, -1, -1)).sum(1)
            out[rows] = _train_table(int(kk))[idx]
        else:
            out[rows] = [_part(_unit(d)) == "train" for d in digits[rows, :kk].tolist()]
    return out

