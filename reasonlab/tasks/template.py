"""A template task: copy this file, rename the class and its `name`, write your rule, and run
`reasonlab lab --quick --task-file my_task.py --tasks my_task` (docs/your_task.md).

maxdigit: the largest of k digits (k = 2..8). The state is the largest digit so far and the answer is the last state.
A direct answer should work at every k (the maximum is insensitive: most digits can change without moving it), so
this is a "thinking should not pay" control beside digits, where a direct answer is at chance.

What a task says (everything else, the formats, parsing, checking, corruption, parts and draws, is derived by
`tasks.base.Task`):
    words, state_words, answer_words   its vocabulary, after the shared specials
    k_min, k_max, slots                the sizes it draws and the prompt's fixed width
    sample(rng, k)                     one instance (small ints) under self.knobs
    first_state, next_state            the rule, one unit step at a time
    answer_of (default: the last state), write_answer / read_answer / answer_len (default: one answer word)
    prompt_words, read_prompt          how a problem is written in the prompt, and read back (default: each
                                       value v as words[v], "_" after them, as here)
    support(k)                         every instance of size k, where they are few (exact parts and populations)
The self-test every task passes is tests/tasks/test_tasks.py (parametrized over the registry).
"""
from __future__ import annotations

import random

from reasonlab.tasks import Problem, Task, product, register

DIGITS = tuple(str(d) for d in range(10))


class MaxDigit(Task):
    name = "maxdigit"
    summary = "the largest of k digits"
    words = DIGITS
    state_words = DIGITS
    k_min, k_max, slots = 2, 8, 8

    def sample(self, rng: random.Random, k: int) -> tuple[int, ...]:
        return tuple(rng.randrange(10) for _ in range(k))

    def first_state(self, p: Problem) -> int:
        return 0

    def next_state(self, p: Problem, t: int, s: int) -> int:
        return max(s, p.x[t - 1])

    def support(self, k: int):
        return product(range(10), k)


register(MaxDigit)
