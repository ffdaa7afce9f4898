"""Verifiers: score a chain step by step. Learned ones (ORM, PRM, Math-Shepherd PRM) and the rule's oracle.

Steps. An output (token ids after "=", as `generate` returns them) is read as a list of steps: each running sum of
the chain, then the answer. "S 8 9 6 A 6 </s>" has 4 steps (8, 9, 6 and the answer 6); "A 6 </s>" has one (the
answer); a chain cut short ("T 3 8") has the sums written so far (2 steps); junk ("</s>") has none. A step's
position is the token that writes it, so a verifier scores a partial chain as well as a finished one.

Interface (what search.py programs against):

    v.score_steps(digits_list, outputs) -> list[list[float]]
        one score in [0, 1] per step written (len == len(steps(output))), for each (prompt digits, output ids);
        a learned verifier reads each sequence once (batched) and returns its head's sigmoid at each step token.
    v.score(digits_list, outputs, agg="last"|"min"|"prod") -> np.ndarray (B,)
        the step scores aggregated (search-and-learn's utils/score.py `aggregate_scores`; Lightman et al. 2023
        use prod, Snell et al. 2024 and the HF blog use last); an output without steps scores 0.0.
    v.tokens(digits_list, outputs) -> int
        the verifier tokens a scoring call reads: sum over rows of PROMPT_LEN + len(output) (prompt and output,
        each row read once from its start, no KV cache kept between calls). The same count for every verifier,
        the oracle included (what a learned verifier would read), so budgets compare across verifiers.
    v.flops_per_token -> float
        2 * parameters for a learned verifier (Kaplan et al. 2020's forward cost), 0 for the oracle.
    v.kind -> "oracle" | "orm" | "prm" | "prm-mc"

OracleVerifier: the rule (task.check_chain's arithmetic): a step scores 1.0 when it equals the true running sum at
its place (the answer step: the true answer), else 0.0. With agg="min" an output scores 1.0 exactly when every step
it wrote is right.

Labels (what the learned verifiers train on, per step):
- "orm" (Cobbe et al. 2021, arXiv 2110.14168): every step gets the outcome, the final answer right or not;
- "prm" (Lightman et al. 2023, arXiv 2305.20050, with the rule as the labeller): the oracle's step labels;
- "prm-mc" (Math-Shepherd, Wang et al. 2023, arXiv 2312.08935): no step oracle; a step's label is the share of
  M completions, sampled by the thinker from the prefix ending at that step, that reach the right answer (soft
  estimation, trained with soft-label BCE).
"""
from __future__ import annotations

from typing import Literal

import numpy as np

from .task import DIGIT0, ID, PROMPT_LEN, chain_steps

Agg = Literal["last", "min", "prod"]
KINDS = ("orm", "prm", "prm-mc")

_A, _S, _T, _EOS = ID["A"], ID["S"], ID["T"], ID["</s>"]


def _is_digit(t: int) -> bool:
    return DIGIT0 <= t < DIGIT0 + 10


def steps(output: list[int]) -> list[tuple[int, int, bool]]:
    """The steps an output writes: [(index in output, digit, is_answer)], chain sums first, the answer last.

    Reads the template as task.parse does: a format token, then (S / T) the chain's digits, "A", the answer digit.
    """
    out: list[tuple[int, int, bool]] = []
    if not output:
        return out
    i = 1
    if output[0] in (_S, _T):
        while i < len(output) and _is_digit(output[i]):
            out.append((i, output[i] - DIGIT0, False))
            i += 1
        if i >= len(output) or output[i] != _A:
            return out
        i += 1
    elif output[0] != _A:
        return out
    if i < len(output) and _is_digit(output[i]):
        out.append((i, output[i] - DIGIT0, True))
    return out


def oracle_labels(digits: list[int], output: list[int]) -> list[float]:
    """1.0 / 0.0 per step: the chain's j-th sum equals the true running sum at its place in the output's format
    (a sum written past the chain's end is wrong), the answer step equals the true answer."""
    st = steps(output)
    fmt = {_S: "short", _T: "full"}.get(output[0]) if output else None
    want = [sum(digits[:i]) % 10 for i in chain_steps(len(digits), fmt)] if fmt else []
    answer = sum(digits) % 10
    lab = []
    for j, (_, d, is_answer) in enumerate(st):
        lab.append(float(d == answer) if is_answer else float(j < len(want) and d == want[j]))
    return lab


def outcome_label(digits: list[int], output: list[int]) -> float:
    """1.0 when the output's answer is right (ORM's label), else 0.0 (no answer counts as wrong)."""
    st = steps(output)
    return float(bool(st) and st[-1][2] and st[-1][1] == sum(digits) % 10)


def aggregate(step_scores: list[list[float]], agg: Agg = "last") -> np.ndarray:
    """Step scores -> one score per output: the last step's, the smallest, or the product. No steps: 0.0."""
    if agg not in ("last", "min", "prod"):
        raise ValueError(f"unknown aggregation {agg!r}: use last, min or prod")
    f = {"last": lambda s: s[-1], "min": min, "prod": lambda s: float(np.prod(s))}[agg]
    return np.array([float(f(s)) if len(s) else 0.0 for s in step_scores], dtype=np.float64)


def verifier_tokens(digits_list: list[list[int]], outputs: list[list[int]]) -> int:
    """Tokens a verifier reads to score these outputs: each row's prompt and output, once."""
    return sum(PROMPT_LEN + len(o) for o in outputs)


class OracleVerifier:
    """The rule as a verifier: 1.0 for a right step, 0.0 for a wrong one (the upper bound of any learned one)."""

    kind = "oracle"
    flops_per_token = 0.0

    def score_steps(self, digits_list: list[list[int]], outputs: list[list[int]]) -> list[list[float]]:
        return [oracle_labels(d, o) for d, o in zip(digits_list, outputs)]

    def score(self, digits_list: list[list[int]], outputs: list[list[int]], agg: Agg = "last") -> np.ndarray:
        return aggregate(self.score_steps(digits_list, outputs), agg)

    def tokens(self, digits_list: list[list[int]], outputs: list[list[int]]) -> int:
        return verifier_tokens(digits_list, outputs)
