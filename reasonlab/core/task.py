"""The course module's task API: the digits task (tasks/digits.py) under the names and signatures reason_lab.py
gives it, a problem being its list of digits. `import reasonlab as R` reads these; the lab's own code takes any
task's problems (tasks/) and never imports the digit names below.

    <s> 3 5 9 2 7 _ _ _ =          A 6 </s>                direct: answer at once
    <s> 3 5 9 2 7 _ _ _ =          S 8 9 6 A 6 </s>        short: running sum after digits 2, 4, 5
    <s> 3 5 9 2 7 _ _ _ =          T 3 8 7 9 6 A 6 </s>    full: running sum after every digit
"""
from __future__ import annotations

import random

from ..tasks import FORMATS, IGNORE, chain_steps, format_name, get  # noqa: F401  (the course module's names)

DIGITS = get("digits")
VOCAB = DIGITS.vocab
ID = DIGITS.id
DIGIT0 = ID["0"]
K_MIN, K_MAX = DIGITS.k_min, DIGITS.k_max
MAX_LEN = DIGITS.max_len
PROMPT_LEN = DIGITS.prompt_len
MAX_OUT = DIGITS.max_out
HINT0, HINT_VOCAB = DIGITS.hint0, DIGITS.hint_vocab
BUDGETS, BUDGET0, BUDGET_VOCAB = DIGITS.budgets, DIGITS.budget0, DIGITS.budget_vocab
MAX_BUDGET0, L1_VOCAB = DIGITS.max_budget0, DIGITS.l1_vocab


def make_digits(rng: random.Random, k: int) -> list[int]:
    """k uniform digits drawn from a `random.Random`."""
    return list(DIGITS.sample(rng, k))


def solution(digits: list[int], fmt: str) -> list[str]:
    """The correct output after "=", as words: e.g. [3,5,9,2,7], "short" -> S 8 9 6 A 6 </s>."""
    return DIGITS.solution(DIGITS.problem(digits), fmt)


def prompt_ids(digits: list[int]) -> list[int]:
    """<s>, the digits, "_" up to K_MAX slots, "="."""
    return DIGITS.prompt_ids(DIGITS.problem(digits))


def hint_prompt_ids(digits: list[int]) -> list[int]:
    """The prompt with <s> replaced by the answer's hint token (for models with HINT_VOCAB)."""
    return DIGITS.hint_prompt_ids(DIGITS.problem(digits))


def encode(digits: list[int], fmt: str) -> tuple[list[int], int]:
    """Full sequence ids, and the index from which targets count (the "=", so the format token is learned)."""
    return DIGITS.encode(DIGITS.problem(digits), fmt)


def parse(out_ids: list[int]) -> dict:
    """Read what the model wrote after "=" (tasks.base.Task.parse): {"fmt", "chain", "answer", "ok", "length",
    "answer_end", "answer_len"}."""
    return DIGITS.parse(out_ids)


def check_chain(digits: list[int], parsed: dict) -> bool | None:
    """Process verifier: every running sum right and the answer equal to the last one. None for a direct answer,
    False for a broken template."""
    return DIGITS.check_chain(DIGITS.problem(digits), parsed)


def budget_prompt_ids(digits: list[int], budget: int) -> list[int]:
    """The prompt with "=" replaced by the budget token B<budget> (for models with BUDGET_VOCAB)."""
    return DIGITS.budget_prompt_ids(DIGITS.problem(digits), budget)


def max_budget_prompt_ids(digits: list[int], budget: int) -> list[int]:
    """The prompt with "=" replaced by the maximum-budget token M<budget> (for models with L1_VOCAB)."""
    return DIGITS.max_budget_prompt_ids(DIGITS.problem(digits), budget)


def with_budget(prompt: list[int], budget: int) -> list[int]:
    """A prompt (ids ending with "=") with its "=" replaced by B<budget>; a budget outside 0..8 raises ValueError."""
    return DIGITS.with_budget(prompt, budget)
