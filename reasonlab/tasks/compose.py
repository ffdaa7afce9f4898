"""compose: apply k permutations of ten symbols in turn, drawn from a fixed pool of n_f (Ramesh et al. 2024,
"Compositional capabilities of autoregressive transformers", ICML; k = 2..8).

    <s> 4 f1 f0 f1 _ _ _ _ _ =      T 7 2 9 A 9 </s>     the symbol after each permutation: f1(4) = 7, f0(7) = 2, ...

The prompt is a start symbol and the permutations' names; the state is the current symbol and the answer the last.
The pool is POOL_MAX fixed random permutations (drawn once from a fixed seed); the knob n_f uses the first n_f, so a
problem means the same whatever n_f. A direct answer has to compose k lookups in one forward pass, or remember the
composed permutation (n_f ** k of them, 10 * n_f ** k cases): it can work at small k and fails at large k, where the
chain's one lookup per step still works; n_f moves the crossover. Ramesh et al.'s `direct` switch is our A against
T; their model (nanoGPT, 2 layers, 120 dims) is our size. Unlike theirs, a prompt here names the permutations with
one word each (theirs are task tokens too) and the parts split instances by a hash, not whole compositions.
"""
from __future__ import annotations

import random

from .base import Task
from .draws import product
from .records import Problem
from .registry import register

POOL_MAX = 8
SYMBOLS = tuple(str(s) for s in range(10))
NAMES = tuple(f"f{i}" for i in range(POOL_MAX))


def _pool() -> tuple[tuple[int, ...], ...]:
    """POOL_MAX distinct permutations of 0..9 without a fixed point, from a fixed seed."""
    rng, out = random.Random("reasonlab compose pool"), []
    while len(out) < POOL_MAX:
        perm = list(range(10))
        rng.shuffle(perm)
        if all(perm[i] != i for i in range(10)) and tuple(perm) not in out:
            out.append(tuple(perm))
    return tuple(out)


POOL = _pool()


class Compose(Task):
    name = "compose"
    summary = "k permutations of ten symbols applied in turn, from a pool of n_f"
    state_name = "symbol"
    state_short = "symbol"
    words = SYMBOLS + NAMES
    state_words = SYMBOLS
    answer_words = SYMBOLS
    k_min, k_max, slots = 2, 8, 9
    knob_defaults = {"n_f": 3}

    def check_knobs(self) -> None:
        if not 1 <= self.knobs["n_f"] <= POOL_MAX:
            raise ValueError(f"task compose: n_f must be in 1..{POOL_MAX}, got {self.knobs['n_f']}")

    def sample(self, rng: random.Random, k: int) -> tuple[int, ...]:
        return (rng.randrange(10),) + tuple(rng.randrange(self.knobs["n_f"]) for _ in range(k))

    def k_of(self, x) -> int:
        return len(x) - 1

    def first_state(self, p: Problem) -> int:
        return p.x[0]

    def next_state(self, p: Problem, t: int, s: int) -> int:
        return POOL[p.x[t]][s]

    def prompt_words(self, p: Problem) -> list[str]:
        return [SYMBOLS[p.x[0]]] + [NAMES[f] for f in p.x[1:]] + ["_"] * (self.slots - 1 - p.k)

    def read_prompt(self, words: list[str]) -> Problem:
        fs = [w for w in words[1:] if w != "_"]
        if (len(words) != self.slots or words[0] not in SYMBOLS or not all(w in NAMES for w in fs)
                or "_" in words[1:1 + len(fs)] or not self.k_min <= len(fs) <= self.k_max):
            raise ValueError(f"not a prompt of the compose task: {' '.join(words)!r:.60}")
        return self.problem([SYMBOLS.index(words[0])] + [NAMES.index(w) for w in fs])

    def show(self, p: Problem) -> str:
        return f"{p.x[0]} then " + " ".join(NAMES[f] for f in p.x[1:])

    def support(self, k: int):
        if 10 * POOL_MAX ** k > 10_000:
            return None
        return ((s,) + fs for s in range(10) for fs in product(range(POOL_MAX), k))

    def possible(self, x) -> bool:
        return all(f < self.knobs["n_f"] for f in x[1:])


register(Compose)
