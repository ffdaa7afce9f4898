"""8. Thinking on a budget: L1-Max trained by GRPO, with and without a supervised warm start, against s1 forcing."""
from __future__ import annotations

from dataclasses import dataclass

from .. import budget
from . import Experiment, register


@dataclass
class Config:
    variants: tuple[str, ...] = ("max", "max+sft")
    """budget models trained (see budget.VARIANTS): the lab runs the pair that asks whether RL alone learns to
    read the budget; `reasonlab budget` runs all four"""
    steps: int = 100
    """GRPO steps per budget model"""
    sft_steps: int = 300
    """warm-start steps of the +sft budget models"""
    eval_n: int = 100
    """greedy test problems per k and budget"""

    def validate(self) -> None:
        bad = [v for v in self.variants if v not in budget.VARIANTS]
        if bad:
            raise ValueError(f"unknown budget variant {bad[0]!r}: choose from {', '.join(budget.VARIANTS)}")


def run(cfg: Config, seed: int, env) -> dict:
    bc = budget.BudgetConfig(variants=tuple(cfg.variants), steps=cfg.steps, sft_steps=cfg.sft_steps,
                             eval_n=cfg.eval_n, log_every=max(1, cfg.steps // 5))
    return budget.run(bc, seed, base=env.base(seed), log=None, progress=True)


def claims(rs: list[dict]) -> list[dict]:
    return budget.findings(rs)


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    md, head = budget.render(rs, out, prefix="l1")
    return [(md.replace("## Thinking on a budget", "## 8. Thinking on a budget", 1), head)]


register(Experiment("l1", Config, run, claims, render, quick=Config(steps=4, sft_steps=10, eval_n=8), run_cost=21,
                    render_cost=3.0))
