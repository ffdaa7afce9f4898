"""add: two k-digit numbers, their sum written most significant digit first (Lee et al. 2023, "Teaching arithmetic
to small transformers"; k = 2..5 digits).

    <s> 3 5 7 1 4 2 _ .. _ =     A 0 6 8 8 </s>               473 + 215 = 688, written with k + 1 digits
    <s> 3 5 7 1 4 2 _ .. _ =     T 8c0 8c0 6c0 A 0 6 8 8 </s> one (digit, carry) step per column, lowest first

The prompt interleaves the two numbers column by column, lowest first (a1 b1 a2 b2 ..), so that column t's digits sit
a fixed distance before chain step t, as in the other tasks (Lee et al. write "a+b=" most significant digit first).
The chain is Lee et al.'s simplified scratchpad, one step per column, "A->d , C->c" written as one word "dcc": the
column's digit and its carry out. The answer is built from every step (digits read back in reverse, the last carry
first), not copied from the last: the task whose answer no single state gives. A direct answer partly works: a
shallow rule that looks one column down for the carry gets most of k = 2 right (Lee et al.; AdderBoard), and its
errors sit on long runs of carries.
"""
from __future__ import annotations

import random

from .base import Task
from .draws import product
from .records import Problem
from .registry import register

DIGITS = tuple(str(d) for d in range(10))
STEPS = tuple(f"{s % 10}c{s // 10}" for s in range(20))


class Add(Task):
    name = "add"
    summary = "the sum of two k-digit numbers, most significant digit first"
    state_name = "column (digit, carry)"
    state_short = "column"
    words = DIGITS + STEPS
    state_words = STEPS
    answer_words = DIGITS
    n_answers = None
    k_min, k_max, slots = 2, 5, 10         # k = 6..8 would need ~4x the base recipe's steps (docs/tasks.md)
    answer_len_max = 6
    recipe_steps = 3                        # at the digits recipe's 1,500, forced S stays under 0.9 at k = 4, 5

    def sample(self, rng: random.Random, k: int) -> tuple[int, ...]:
        return tuple(rng.randrange(10) for _ in range(2 * k))

    def k_of(self, x) -> int:
        return len(x) // 2

    def operands(self, p: Problem) -> tuple[int, int]:
        a, b = p.x[:p.k], p.x[p.k:]
        return int("".join(map(str, a))), int("".join(map(str, b)))

    def first_state(self, p: Problem) -> int:
        return 0

    def next_state(self, p: Problem, t: int, s: int) -> int:
        total = p.x[p.k - t] + p.x[2 * p.k - t] + s // 10      # column t (1 = the lowest): a_t + b_t + carry in
        return total % 10 + 10 * (total // 10)

    def answer_of(self, p: Problem, states: list[int]) -> int:
        return sum((s % 10) * 10 ** t for t, s in enumerate(states)) + (states[-1] // 10) * 10 ** len(states)

    def answer(self, p: Problem) -> int:
        a, b = self.operands(p)
        return a + b

    def answer_len(self, k: int) -> int:
        return k + 1

    def write_answer(self, p: Problem, answer: int) -> list[str]:
        return list(f"{answer:0{p.k + 1}d}")

    def read_answer(self, words: list[str]) -> int | None:
        return int("".join(words))

    def prompt_words(self, p: Problem) -> list[str]:
        cols = [w for t in range(1, p.k + 1) for w in (DIGITS[p.x[p.k - t]], DIGITS[p.x[2 * p.k - t]])]
        return cols + ["_"] * (self.slots - 2 * p.k)

    def read_prompt(self, words: list[str]) -> Problem:
        cols = [w for w in words if w != "_"]
        k = len(cols) // 2
        if (len(words) != self.slots or len(cols) % 2 or not all(w in DIGITS for w in cols)
                or "_" in words[:len(cols)] or not self.k_min <= k <= self.k_max):
            raise ValueError(f"not a prompt of the add task: {' '.join(words)!r:.60}")
        a = [int(cols[2 * (k - i)]) for i in range(1, k + 1)]      # back to the most significant digit first
        b = [int(cols[2 * (k - i) + 1]) for i in range(1, k + 1)]
        return self.problem(a + b)

    def show(self, p: Problem) -> str:
        a, b = p.x[:p.k], p.x[p.k:]
        return f"{''.join(map(str, a))} + {''.join(map(str, b))}"

    def support(self, k: int):
        return product(range(10), 2 * k)


register(Add)
