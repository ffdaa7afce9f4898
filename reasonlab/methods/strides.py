"""What a chain does: the unit steps it takes per written state (its stride), so that an output under a budget can be
named (T's stride 1, S's stride 2, a new stride >= 3, a chain cut short, irregular, wrong)."""
from __future__ import annotations

from .. import tasks
from ..tasks import Problem


def classify_chain(problem: Problem, chain: list[int]) -> str:
    """Name a chain by the unit steps it takes per written state: "none" (no chain), "stride s" (the states after
    every s-th step and after the last: s = 1 is T, 2 is S, s >= k one state, the last), "truncated s" (right states
    of stride s that stop before the last step), "irregular" (right states at positions of no single stride, ending
    at the last step) or "wrong". States take few values (digits' ten), so a chain can match a pattern by
    coincidence; the known chains come first (T, S, then T or S cut short) and only then new strides (3 up), so that
    "stride >= 3" is never a cut T or S chain whose values happen to match (a one-step T chain equals the total one
    time in ten in digits)."""
    if not chain:
        return "none"
    k = problem.k
    pref = tasks.task_of(problem).states(problem)
    strides = [[i for i in range(1, k + 1) if i % s == 0 or i == k] for s in range(1, k + 1)]
    full = lambda s: chain == [pref[i - 1] for i in strides[s - 1]]
    cut = lambda s: len(chain) < len(strides[s - 1]) and chain == [pref[i - 1] for i in strides[s - 1][:len(chain)]]
    order = [(1, full), (2, full), (1, cut), (2, cut)] + [(s, f) for f in (full, cut) for s in range(3, k + 1)]
    for s, test in order:
        if test(s):
            return f"stride {s}" if test is full else f"truncated {s}"
    # irregular: increasing positions i_1 < .. < i_m = k with chain[j] = pref[i_j - 1] (earliest match, greedy)
    at = 0
    for j, c in enumerate(chain):
        last = j == len(chain) - 1
        cand = [i for i in range(at + 1, k + 1) if pref[i - 1] == c and (not last or i == k)]
        if not cand:
            return "wrong"
        at = cand[0] if not last else k
    return "irregular"


STRIDE_GROUPS = ("none", "stride 1 (T)", "stride 2 (S)", "stride >= 3 (new)", "truncated", "irregular", "wrong")


def stride_group(label: str) -> str:
    """classify_chain's label -> one of STRIDE_GROUPS (for plots and tables)."""
    if label.startswith("stride"):
        s = int(label.split()[1])
        return STRIDE_GROUPS[s] if s <= 2 else STRIDE_GROUPS[3]
    return "truncated" if label.startswith("truncated") else label
