"""The methods' configs and their choices: torch-free, so that the command line can offer their fields without loading
torch."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..core.config import check_choices, check_numbers

ADAPTIVE_RL = {"thinkless_fmt": dict(force_direct=0.5, forced_trains="format"), "adaptthink": dict(force_direct=0.5)}
"""The RL fields an adaptive method sets; the others force a quarter of each group to answer directly, so that A
keeps being tried."""


def adaptive_fields(method: str) -> dict:
    return dict(ADAPTIVE_RL.get(method, dict(force_direct=0.25)))


ADAPTIVE_METHODS = ("grpo", "cost0.3", "cost0.6", "cost1.0", "kimi", "thinkless", "thinkless_fmt", "arm", "adaptthink")


@dataclass
class StarConfig:
    rounds: int = 3
    """self-improvement rounds"""
    problems: int = 10_000
    """fresh problems sampled each round"""
    samples: int = 4
    """outputs sampled per problem (STaR: 1 near-greedy; RFT / ReST-EM: many)"""
    temperature: float = 1.0
    """sampling temperature (STaR: ~0; RFT / ReST-EM: 0.7; 1.0 explores the base model's 50/30/20 formats)"""
    force: Literal["A", "S", "T"] | None = None
    """sample with this format token forced ("T" or "S": STaR prompts for a rationale); None: the model picks"""
    filter: Literal["answer", "chain", "none"] = "answer"
    """answer: keep right answers in complete templates (STaR); chain: and every chain step checks (RFT's step
    check); none: every complete template, right or wrong (a control: fine-tuning on the model's own samples)"""
    cap: int = 1
    """at most this many distinct kept outputs per problem (ReST-EM caps at 10)"""
    restart: bool = True
    """fine-tune from the base model each round (STaR, ReST-EM) rather than from the last round's model"""
    pool: bool = False
    """train on the kept data of all rounds so far rather than the last round's"""
    steps: int = 300
    """fine-tuning steps in round 1"""
    growth: float = 1.2
    """fine-tuning steps grow by this factor each round (STaR: +20 %)"""
    lr: float = 1e-3
    """fine-tuning learning rate (warmup 30 steps, cosine)"""
    fixed_frac: float = 0.8
    """share of each batch drawn from the kept data; the rest are fresh problems in `mix`"""
    mix: tuple[float, float, float] = (0.5, 0.3, 0.2)
    """A / S / T mix of the fresh problems: the base's own pre-training mix (few-chains start: (1, 0, 0), so no
    new worked chains enter through the fresh rows)"""
    rationalize: bool = False
    """STaR's rationalization: problems with no kept output are sampled again with the answer as a hint (the hint
    token replaces <s>; needs a base pre-trained with hints, e.g. `few_chains_cfg`); kept without the hint"""
    hint_frac: float = 0.1
    """with rationalize: share of fine-tuning's fresh rows that carry the hint, so the next round can still read it"""
    seed: int = 0
    """seeds the problems, the sampling and the fine-tuning"""
    eval_n: int = 300
    """greedy test problems per k for each round's evaluation (free, and forced A, S, T)"""

    def validate(self) -> None:
        check_choices(self, "STaR")
        check_numbers(self, "STaR")
        for name in ("rounds", "problems", "samples", "cap", "steps", "eval_n"):
            if getattr(self, name) < 1:
                raise ValueError(f"invalid STaR config: {name} must be >= 1")
        if not 0.0 < self.fixed_frac <= 1.0 or self.temperature < 0 or self.growth <= 0:
            raise ValueError("invalid STaR config: fixed_frac in (0, 1], temperature >= 0, growth > 0")


Agg = Literal["last", "min", "prod"]


KINDS = ("orm", "prm", "prm-mc")


@dataclass
class VerifierConfig:
    kind: Literal["orm", "prm", "prm-mc"] = "prm"
    """label: orm = final answer right; prm = the rule's step labels; prm-mc = Math-Shepherd rollout shares"""
    n_per_k: int = 600
    """training problems per k (k = 2..8), drawn outside the held-out quarter of problem space (sampling is cheap;
    with 300 per k the PRM overfits: lower training loss, lower held-out AUROC)"""
    formats: tuple[str, ...] = ("S", "T", "A")
    """formats forced when sampling the training outputs (A: the verifier also sees direct answers)"""
    format_weights: tuple[float, ...] = (0.45, 0.45, 0.1)
    """share of the training problems sampled with each format"""
    samples: int = 2
    """outputs sampled per training problem (temperature below): chains that err in different places"""
    temperature: float = 1.0
    """the thinker's sampling temperature, for the training outputs and the Math-Shepherd rollouts"""
    rollouts: int = 8
    """prm-mc: completions M sampled from each step's prefix (Math-Shepherd uses N = 8)"""
    mc_share: float = 1.0
    """prm-mc: share of the training outputs that get rollout labels (rollouts cost M generations per step; 1: the
    same data as the oracle-label PRM, so the two compare label quality at equal data)"""
    steps: int = 300
    """AdamW steps"""
    batch: int = 64
    """sequences per step (128 gives the same held-out step AUROC at more training time)"""
    lr: float = 1e-3
    """peak learning rate (warmup 20 steps, cosine to 0.1 x); 3e-3 overfits"""
    head: Literal["token", "scalar"] = "token"
    """token: the head scores the token a step writes from the state before it (one logit per vocabulary entry,
    the written token's is read: a Q-value head, as in DQN), initialised from the thinker's LM head, so training
    starts from what the thinker expected there; scalar: Linear(d, 1) read at the step's own token, new (its step
    AUROC is lower and varies more by seed)"""
    init: Literal["thinker", "base", "scratch"] = "thinker"
    """start from the thinker's weights (a reward model is initialised from the policy, as in Lightman et al.
    and Math-Shepherd), from the standard base model of the same seed (a stronger backbone than the generator, as
    the HF blog's 8B PRM guiding a 1B model), or from scratch (see `head` for the head's start)"""

    def validate(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"invalid verifier kind {self.kind!r}: use orm, prm or prm-mc")
        if self.head not in ("token", "scalar"):
            raise ValueError(f"invalid verifier head {self.head!r}: use token or scalar")
        if self.init not in ("thinker", "base", "scratch"):
            raise ValueError(f"invalid verifier init {self.init!r}: use thinker, base or scratch")
        if len(self.formats) != len(self.format_weights) or any(f not in ("A", "S", "T") for f in self.formats):
            raise ValueError("invalid verifier formats: A, S or T, one weight each")
        for name in ("n_per_k", "samples", "rollouts", "steps", "batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"invalid verifier config: {name} must be >= 1")
        if self.lr <= 0 or self.temperature <= 0 or not 0 < self.mc_share <= 1:
            raise ValueError("invalid verifier config: lr > 0, temperature > 0, mc_share in (0, 1]")


Variant = Literal["exact", "max", "exact+sft", "max+sft"]
VARIANTS = ("exact", "max", "exact+sft", "max+sft")


@dataclass
class BudgetConfig:
    variants: tuple[Variant, ...] = ("exact", "max", "exact+sft", "max+sft")
    """trained budget models: L1-Exact, L1-Max, each optionally after an SFT warm start on budget-annotated chains"""
    steps: int = 100
    """GRPO steps per variant"""
    prompts_per_step: int = 16
    """problems per GRPO step (each with its own budget)"""
    num_generations: int = 8
    """samples per problem (the group)"""
    learning_rate: float = 1e-4
    """Adam learning rate"""
    beta: float = 0.04
    """KL weight to the starting model"""
    alpha: float = 0.25
    """L1's length weight per chain step (both rewards): one step off the budget costs Exact 0.25"""
    delta: float = 0.5
    """L1-Max's offset: a chain exactly at the budget earns half the reward, one step under it three quarters"""
    sft_steps: int = 300
    """supervised steps of the warm start (variants ending in +sft)"""
    sft_lr: float = 3e-3
    """peak learning rate of the warm start"""
    log_every: int = 10
    """per-budget training log: one record per this many GRPO steps"""
    eval_n: int = 100
    """greedy test problems per k (each evaluated at every budget)"""
    eval_seed: int = 777
    """seed of the test problems (training draws its own from the run's seed; no selection set is used: alpha and
    delta are fixed in advance, on L1's scale)"""
    n_examples: int = 3
    """example outputs kept per (variant, stride class) for b < ceil(k/2)"""
    out: str | None = None
    """write <out>/seed<s>.json when set"""

    def validate(self) -> None:
        check_numbers(self, "budget")
        for v in self.variants:
            if v not in VARIANTS:
                raise ValueError(f"unknown budget variant {v!r}: choose from {', '.join(VARIANTS)}")
        if not self.variants:
            raise ValueError("budget: at least one variant")
        for name in ("steps", "prompts_per_step", "num_generations", "eval_n", "log_every", "n_examples"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"budget: {name} must be a positive integer, got {getattr(self, name)!r}")
        if self.sft_steps < 0 or self.alpha <= 0 or self.beta < 0 or self.learning_rate <= 0 or self.sft_lr <= 0:
            raise ValueError("budget: sft_steps >= 0, alpha > 0, beta >= 0 and learning rates > 0")
        if self.num_generations < 2:
            raise ValueError("budget: GRPO needs num_generations >= 2")


BUDGET_QUICK = dict(steps=4, sft_steps=10, eval_n=8, log_every=2)
