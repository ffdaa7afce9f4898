"""Rewards: pure functions of (digits, parsed output) -> float. No reward model, so nothing to hack."""
from __future__ import annotations


def rule_reward(digits: list[int], parsed: dict, format_bonus: float = 0.1) -> float:
    """R1-Zero's rule reward: 1 for the right answer, plus format_bonus when the whole template holds."""
    r = 1.0 if parsed["answer"] == sum(digits) % 10 else 0.0
    return r + (format_bonus if parsed["ok"] else 0.0)
