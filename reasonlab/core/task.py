"""The task: sum of k digits mod 10, and the three ways of writing the answer.

After the prompt "<s> d1 .. dk _ .. _ =" the model writes a format token, then:
    A (direct): "A ans </s>"
    S (short):  "S c2 c4 .. A ans </s>"   a running sum after every second digit (and after the last)
    T (full):   "T c1 c2 .. ck A ans </s>" a running sum after every digit
The prompt always has K_MAX digit slots, so the t-th digit is always the same distance back from
the t-th chain step (the spec's note 2: without this the small model often failed to learn).
"""
from __future__ import annotations

import random

VOCAB = ["<pad>", "<s>", "</s>", "=", "A", "S", "T", "_"] + [str(i) for i in range(10)]
ID = {w: i for i, w in enumerate(VOCAB)}
DIGIT0 = ID["0"]
# The one table of formats; every other mapping derives from it. Its order (direct, short, full) is the order of
# every `mix` and of the format index 0/1/2 in pools.
FORMAT_TABLE = (
    # name     token  label              plot colour
    ("direct", "A",   "A (direct)",      "#4C72B0"),
    ("short",  "S",   "S (short chain)", "#DD8452"),
    ("full",   "T",   "T (full chain)",  "#55A868"),
)
FORMATS = {name: tok for name, tok, _, _ in FORMAT_TABLE}   # format name -> control token
FMT_OF = {tok: name for name, tok in FORMATS.items()}       # control token -> format name
FMT_NAMES = tuple(FORMATS)
FMT_INDEX = {name: i for i, name in enumerate(FMT_NAMES)}
FMT_LABEL = {name: label for name, _, label, _ in FORMAT_TABLE}
FMT_COLOR = {name: colour for name, _, _, colour in FORMAT_TABLE}
FREE_COLOR = "#8172B3"   # free generation (the model picks the format) in plots
K_MIN, K_MAX = 2, 8
MAX_LEN = 24
IGNORE = -100
PROMPT_LEN = K_MAX + 2  # <s>, K_MAX slots, "="
MAX_OUT = MAX_LEN - PROMPT_LEN  # the longest output after "=" (14 tokens; Dr. GRPO's constant normaliser)
# STaR's rationalization hint (off unless a model is pre-trained with hints): the token H<a> takes the place of <s>,
# "the answer is a". Same length and positions as the plain prompt; the vocabulary grows by these ten only in
# models trained with a hint share (train.py's hint_frac), so the spec's vocabulary and prompts stay as they are.
HINT0 = len(VOCAB)
HINT_VOCAB = VOCAB + [f"H{d}" for d in range(10)]


def format_name(x: str) -> str:
    """A format given as its token (A, S, T) or its name (direct, short, full) -> its name."""
    if x in FORMATS:
        return x
    if x in FMT_OF:
        return FMT_OF[x]
    raise ValueError(f"unknown format {x!r}: use A, S or T (or direct, short, full)")


def make_digits(rng: random.Random, k: int) -> list[int]:
    """k uniform digits drawn from a `random.Random`."""
    return [rng.randrange(10) for _ in range(k)]


def chain_steps(k: int, fmt: str) -> list[int]:
    """1-based digit counts after which the chain writes a running sum (empty for "direct")."""
    if fmt == "direct":
        return []
    step = 1 if fmt == "full" else 2
    return [i for i in range(1, k + 1) if i % step == 0 or i == k]


def solution(digits: list[int], fmt: str) -> list[str]:
    """The correct output after "=", as words: e.g. [3,5,9,2,7], "short" -> S 8 9 6 A 6 </s>."""
    answer = sum(digits) % 10
    if fmt == "direct":
        return ["A", str(answer), "</s>"]
    chain = [str(sum(digits[:i]) % 10) for i in chain_steps(len(digits), fmt)]
    return [FORMATS[fmt], *chain, "A", str(answer), "</s>"]


def prompt_ids(digits: list[int]) -> list[int]:
    """<s>, the digits, "_" up to K_MAX slots, "="."""
    return [ID["<s>"]] + [DIGIT0 + d for d in digits] + [ID["_"]] * (K_MAX - len(digits)) + [ID["="]]


def hint_prompt_ids(digits: list[int]) -> list[int]:
    """The prompt with <s> replaced by the answer's hint token (for models with HINT_VOCAB)."""
    return [HINT0 + sum(digits) % 10] + prompt_ids(digits)[1:]


def encode(digits: list[int], fmt: str) -> tuple[list[int], int]:
    """Full sequence ids, and the index from which targets count (the "=", so the format token is learned)."""
    p = prompt_ids(digits)
    return p + [ID[w] for w in solution(digits, fmt)], len(p) - 1


def parse(out_ids: list[int]) -> dict:
    """Read what the model wrote after "=".

    Returns {"fmt": "direct"|"short"|"full"|None, "chain": [int], "answer": int|None, "ok": bool,
    "length": tokens up to and including the first </s>, "answer_end": tokens up to the end of the answer (its
    </s> included when it follows; `length` when no answer was read)}. `ok` means the whole template holds: format
    token, digits, "A", one digit, "</s>", and a chain exactly when the format is not direct. An answer
    is read even when the template is broken after it (no </s>, junk). Never raises: ids outside the
    vocabulary read as an unknown word.
    """
    words = [VOCAB[i] if 0 <= i < len(VOCAB) else "?" for i in out_ids]
    if "</s>" in words:
        words = words[:words.index("</s>") + 1]
    res = {"fmt": None, "chain": [], "answer": None, "ok": False, "length": len(words), "answer_end": len(words)}
    if not words or words[0] not in FMT_OF:
        return res
    res["fmt"] = FMT_OF[words[0]]
    i = 1
    if res["fmt"] != "direct":  # "A" is both the direct format token and the answer marker
        while i < len(words) and words[i].isdigit():
            res["chain"].append(int(words[i]))
            i += 1
        if i >= len(words) or words[i] != "A":
            return res
        i += 1
    if i < len(words) and words[i].isdigit():
        res["answer"] = int(words[i])
        closed = i + 1 < len(words) and words[i + 1] == "</s>"
        res["answer_end"] = i + 1 + closed
        res["ok"] = closed and (res["fmt"] == "direct") == (not res["chain"])
    return res


def check_chain(digits: list[int], parsed: dict) -> bool | None:
    """Process verifier: every running sum right and the answer equal to the last one.

    Needs only the problem, not the answer key. None for a direct answer (nothing to check),
    False for a broken template.
    """
    if parsed["fmt"] is None or not parsed["ok"]:
        return False
    if parsed["fmt"] == "direct":
        return None
    want = [sum(digits[:i]) % 10 for i in chain_steps(len(digits), parsed["fmt"])]
    return parsed["chain"] == want and parsed["answer"] == sum(digits) % 10


# Thinking on a budget (L1, Aggarwal & Welleck 2025, arXiv 2503.04697): the token B<b> takes the place of "=", "think
# for b chain steps" (b = running sums written before "A", 0..K_MAX). Steps, not tokens: every output is its steps plus
# a fixed frame (A: 3 tokens, a chain: steps + 4), so a token budget would only rename these numbers. Appended after the
# hint tokens, so ids stay unique; only budget models (vocab_size >= len(BUDGET_VOCAB), budget.py) read them, and the
# spec's vocabulary, prompts and cached models stay as they are. Same length and positions as the plain prompt.
BUDGETS = tuple(range(K_MAX + 1))
BUDGET0 = len(HINT_VOCAB)
BUDGET_VOCAB = HINT_VOCAB + [f"B{b}" for b in BUDGETS]


def budget_prompt_ids(digits: list[int], budget: int) -> list[int]:
    """The prompt with "=" replaced by the budget token B<budget> (for models with BUDGET_VOCAB). At the last prompt
    position the budget sits in the residual stream that predicts the format token: with B<b> at <s>'s place the
    model never learned to read it (the first position is an attention sink; budget.py, tried first)."""
    return with_budget(prompt_ids(digits), budget)


# L1-Max's budget tokens M<b> ("at most b chain steps"), after the B<b>: only the models of L1's recipe read them
# (budget.l1_model), so that one model tells an exact budget from a maximum, as L1's two prompt wordings do.
MAX_BUDGET0 = len(BUDGET_VOCAB)
L1_VOCAB = BUDGET_VOCAB + [f"M{b}" for b in BUDGETS]


def max_budget_prompt_ids(digits: list[int], budget: int) -> list[int]:
    """The prompt with "=" replaced by the maximum-budget token M<budget> (for models with L1_VOCAB)."""
    return budget_prompt_ids(digits, budget)[:-1] + [MAX_BUDGET0 + budget]


def with_budget(prompt: list[int], budget: int) -> list[int]:
    """A prompt (ids ending with "=") with its "=" replaced by B<budget>; a budget outside 0..8 raises ValueError."""
    if budget not in BUDGETS:
        raise ValueError(f"budget {budget!r} must be an integer in {BUDGETS[0]}..{BUDGETS[-1]} (chain steps)")
    return prompt[:-1] + [BUDGET0 + budget]
