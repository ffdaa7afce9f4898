"""The parts of a task's problem space and the draws from them, the same for every task: a mixin of `Task`.

Every instance belongs to train, val or test by a hash of the instance, so sets drawn from different parts are
disjoint whatever the seeds and knobs. A draw has a stream of its own per (task, knobs, part, k, seed); a small k (at
most ENUMERATE_MAX instances) is enumerated, and a part no larger than the set asked for is taken whole."""
from __future__ import annotations

import functools
import hashlib
import itertools
import random
from typing import Iterable, Iterator

from .records import FMT_NAMES, PAD, PARTS, Problem

ENUMERATE_MAX = 10_000
"""A k whose instances number at most this many is enumerated: its parts hold exact shares (by rank of the hash) and
its draws are exact samples without replacement."""
DRAW_MISSES = 10_000
"""Draws in a row that bring no new instance of the part after which a draw stops short of n: the knobs can draw no
more there (compose's default n_f = 3 has 810 instances at k = 4, about 200 in "test")."""


class Draws:
    """What `Task` derives for the parts and draws from the task's `sample`, `support`, `possible` and `k_of`."""


    def unit(self, x: tuple[int, ...]) -> float:
        """A fixed number in [0, 1) per instance, from a hash of the task's name and the instance."""
        key = f"{self.name}|{','.join(map(str, x))}".encode()
        return int.from_bytes(hashlib.sha256(key).digest()[:8], "big") / 2 ** 64

    def enumerable(self, k: int) -> bool:
        return _ranked(type(self), k) is not None

    def part_of(self, p) -> str:
        """The part ("train", "val" or "test") a problem (or an instance) belongs to: a fixed function of the
        instance, by rank of its hash where k is enumerated (exact shares), by the hash's value beyond."""
        x = p.x if isinstance(p, Problem) else tuple(p)
        ranked = _ranked(type(self), self.k_of(x))
        return ranked[x] if ranked is not None else _part(self.unit(x))

    def space(self, k: int, part: str | None) -> tuple[tuple[int, ...], ...]:
        """An enumerated k's instances of one part (None: all) that the knobs can draw, in rank order."""
        ranked = _ranked(type(self), k)
        if ranked is None:
            raise ValueError(f"k = {k} of task {self.name} is not enumerated")
        return tuple(x for x, q in ranked.items() if (part is None or q == part) and self.possible(x))

    def streams(self, seed, part: str | None, ks) -> Iterator[tuple[int, random.Random]]:
        """(k, the random stream of its draw) for each k: a stream of its own per (task, knobs, part, k, seed), so
        that a set's problems of one k do not move when other k are added or removed."""
        for k in ks:
            yield k, random.Random(f"{self.spec}|{part}|{k}|{seed}")

    def draw(self, n: int, seed=0, ks=None, part: str | None = None, repeat: bool = False) -> list[Problem]:
        """Up to n problems of each k (default: the task's range) from one part (None: all of it), each k from a
        stream of its own (`stream`). Without `repeat` a set never repeats a problem: an enumerated k whose part
        holds no more than n problems gives it whole, in a seeded order, and beyond enumeration a part of which the
        knobs draw fewer than n gives what DRAW_MISSES draws in a row did not add to. repeat=True draws n with
        replacement (training data)."""
        if part is not None and part not in PARTS:
            raise ValueError(f"split must be one of {', '.join(PARTS)} or None, got {part!r}")
        out: list[Problem] = []
        for k, rng in self.streams(seed, part, self.ks() if ks is None else ks):
            if self.enumerable(k) and (self.uniform or (not repeat and len(self.space(k, part)) <= n)):
                space = self.space(k, part)
                if repeat:
                    picks = [rng.randrange(len(space)) for _ in range(n)]
                else:
                    picks = rng.sample(range(len(space)), min(n, len(space)))
                out += [self.problem(space[i], k) for i in picks]
                continue
            got, seen, misses = [], set(), 0
            while len(got) < n and misses < DRAW_MISSES:
                x = self.sample(rng, k)
                if (part is not None and self.part_of(x) != part) or (not repeat and x in seen):
                    misses += 1
                    continue
                misses = 0
                seen.add(x)
                got.append(self.problem(x, k))
            out += got
        return out

    def train_problem(self, rng: random.Random, k: int) -> Problem:
        """One problem of size k from the train part (an instance of another part is drawn again): what RL, STaR and
        the budget models train on."""
        while True:
            x = self.sample(rng, k)
            if self.part_of(x) == "train":
                return self.problem(x, k)

    def sequences(self, rng, batch: int, mix=(0.5, 0.3, 0.2), k_range=None):
        """(batch, max_len) int64 training sequences, pad-filled: fresh train-part problems, k uniform in k_range and
        the format drawn by `mix` (A / S / T shares), from a numpy Generator. A task may replace it by a vectorised
        version (digits does, drawing the same batches as the course module's loop)."""
        import numpy as np  # the tasks import without numpy (the command line checks configs with them)
        lo, hi = k_range or (self.k_min, self.k_max)
        p = [m / sum(mix) for m in mix]
        ks = rng.integers(lo, hi + 1, size=batch)
        fmts = rng.choice(3, size=batch, p=p)
        py = random.Random(int(rng.integers(0, 2 ** 63)))
        out = np.full((batch, self.max_len), PAD, dtype=np.int64)
        for i, (k, f) in enumerate(zip(ks.tolist(), fmts.tolist())):
            ids = self.encode(self.train_problem(py, k), FMT_NAMES[f])[0]
            out[i, :len(ids)] = ids
        return out

    def prompt_answers(self, seq) -> list[int]:
        """The answer of each row of a (B, T) id array that starts with a prompt (STaR's hint tokens need it)."""
        return [self.answer(self.read_prompt([self.vocab[t] for t in row[1:self.prompt_len - 1]])) for row in seq.tolist()]

    def chance(self, k: int) -> float:
        """The accuracy of the best blind guess at size k under the knobs: the commonest answer's share (exact where
        k is enumerated and uniform, else over a fixed draw of 20,000; computed once per task and k)."""
        if k not in self._chance:
            self._chance[k] = self._blind_guess(k)
        return self._chance[k]

    def _blind_guess(self, k: int) -> float:
        if self.enumerable(k) and self.uniform:
            xs = self.space(k, None)
        else:
            rng = random.Random(f"{self.spec}|chance|{k}")
            xs = [self.sample(rng, k) for _ in range(20_000)]
        counts: dict[int, int] = {}
        for x in xs:
            a = self.answer(self.problem(x, k))
            counts[a] = counts.get(a, 0) + 1
        return max(counts.values()) / len(xs)


def _part(u: float) -> str:
    return next(q for q, (lo, hi) in PARTS.items() if lo <= u < hi)


@functools.lru_cache(maxsize=None)
def _ranked(cls: type, k: int) -> dict[tuple[int, ...], str] | None:
    """An enumerated k's parts by rank of the hash, so that each part holds exactly its share (a hash threshold gives
    14 "val" problems of 100 at k = 2); None when the task does not enumerate k."""
    task = cls()
    xs = task.support(k)
    if xs is None:
        return None
    order = sorted(xs, key=task.unit)
    return {x: _part(i / len(order)) for i, x in enumerate(order)}


def product(values: Iterable[int], k: int, limit: int = ENUMERATE_MAX) -> Iterator[tuple[int, ...]] | None:
    """All k-tuples over `values` (a support helper), or None when they number more than `limit`."""
    values = list(values)
    return itertools.product(values, repeat=k) if len(values) ** k <= limit else None
