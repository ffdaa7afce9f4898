"""modprod: the product of k digits 0..6 mod 7, where a 0 absorbs (k = 2..8).

    <s> 3 5 0 2 6 _ _ _ =        A 0 </s>
    <s> 3 5 4 2 6 _ _ _ =        T 3 1 4 1 6 A 6 </s>     the running product mod 7 after every digit

The running product is the state and the answer is the last state, as in digits. What differs is that a direct answer
partly works, and where it does is known per instance: whenever a 0 is among the digits, the answer is 0 whatever the
rest. The other instances are the product of k digits 1..6 in the group of units mod 7 (cyclic of order 6): as
sensitive to every digit as digits' sum. So "think only when there is no 0" is a known per-instance policy, and the
knob `p_zero` sets the share of problems with a 0 (half by default, at every k): a blind "always 0" is right on that
share, a 0-detector that guesses otherwise on p_zero + (1 - p_zero) / 6.
"""
from __future__ import annotations

import random

from .base import Task
from .draws import product
from .records import Problem
from .registry import register

WORDS = tuple(str(d) for d in range(7))


class ModProd(Task):
    name = "modprod"
    summary = "the product of k digits 0..6 mod 7 (a 0 absorbs)"
    state_name = "running product"
    state_short = "product"
    words = WORDS
    state_words = WORDS
    answer_words = WORDS
    n_answers = 7
    k_min, k_max, slots = 2, 8, 8
    knob_defaults = {"p_zero": 0.5}
    uniform = False

    def check_knobs(self) -> None:
        if not 0.0 <= self.knobs["p_zero"] <= 1.0:
            raise ValueError(f"task modprod: p_zero must be in 0..1, got {self.knobs['p_zero']}")

    def sample(self, rng: random.Random, k: int) -> tuple[int, ...]:
        """With probability p_zero an instance uniform among those with a 0, else k digits uniform in 1..6."""
        if rng.random() < self.knobs["p_zero"]:
            while True:
                x = tuple(rng.randrange(7) for _ in range(k))
                if 0 in x:
                    return x
        return tuple(rng.randrange(1, 7) for _ in range(k))

    def first_state(self, p: Problem) -> int:
        return 1

    def next_state(self, p: Problem, t: int, s: int) -> int:
        return s * p.x[t - 1] % 7

    def support(self, k: int):
        return product(range(7), k)

    def possible(self, x) -> bool:
        """p_zero = 0 draws no instance with a 0, p_zero = 1 none without (the enumerated parts then hold only what
        the knobs can draw)."""
        p = self.knobs["p_zero"]
        return p not in (0.0, 1.0) or (0 in x) == (p == 1.0)

    def shortcut(self, p: Problem) -> bool:
        """Whether a direct rule is known to suffice on this instance: a 0 among the digits."""
        return 0 in p.x


register(ModProd)
