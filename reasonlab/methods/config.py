"""The methods' configs and their choices: torch-free, so that experiments' configs and validation can name them
without loading torch."""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Literal, get_args

from ..core.config import (
    STEPS_MAX,
    Count,
    Fraction,
    NonNegative,
    Positive,
    Sampled,
    Seed,
    Steps,
    Temperature,
    check_choices,
    check_numbers,
)


@dataclass
class StarConfig:
    rounds: Count = 3
    """self-improvement rounds"""
    problems: Count = 10_000
    """fresh problems sampled each round"""
    samples: Count = 4
    """outputs sampled per problem (STaR: 1 near-greedy; RFT / ReST-EM: many)"""
    temperature: Temperature = 1.0
    """sampling temperature (STaR: ~0; RFT / ReST-EM: 0.7; 1.0 explores the base model's 50/30/20 formats)"""
    force: Literal["A", "S", "T"] | None = None
    """sample with this format token forced ("T" or "S": STaR prompts for a rationale); None: the model picks"""
    filter: Literal["answer", "chain", "none"] = "answer"
    """answer: keep right answers in complete templates (STaR); chain: and every chain step checks (RFT's step
    check); none: every complete template, right or wrong (a control: fine-tuning on the model's own samples)"""
    cap: Count = 1
    """at most this many distinct kept outputs per problem (ReST-EM caps at 10)"""
    restart: bool = True
    """fine-tune from the base model each round (STaR, ReST-EM) rather than from the last round's model"""
    pool: bool = False
    """train on the kept data of all rounds so far rather than the last round's"""
    steps: Steps = 300
    """fine-tuning steps in round 1"""
    growth: Positive = 1.2
    """fine-tuning steps grow by this factor each round (STaR: +20 %)"""
    learning_rate: Positive = 1e-3
    """fine-tuning learning rate (warmup 30 steps, cosine)"""
    fixed_frac: Fraction = 0.8
    """share of each batch drawn from the kept data; the rest are fresh problems in `mix`"""
    mix: tuple[float, float, float] = (0.5, 0.3, 0.2)
    """A / S / T mix of the fresh problems: the base's own pre-training mix (few-chains start: (1, 0, 0), so no
    new worked chains enter through the fresh rows)"""
    rationalize: bool = False
    """STaR's rationalization: problems with no kept output are sampled again with the answer as a hint (the hint
    token replaces <s>; needs a base pre-trained with hints, e.g. `few_chains_cfg`); kept without the hint"""
    hint_frac: float = 0.1
    """with rationalize: share of fine-tuning's fresh rows that carry the hint, so the next round can still read it"""
    seed: Seed = 0
    """seeds the problems, the sampling and the fine-tuning"""

    def validate(self) -> None:
        check_choices(self, "STaR")
        check_numbers(self, "STaR")
        log_last = math.log(self.steps) + (self.rounds - 1) * math.log(self.growth)    # no float overflow
        if log_last > math.log(STEPS_MAX):
            raise ValueError(f"invalid STaR config: steps {self.steps} x growth {self.growth:g} ^ (rounds "
                             f"{self.rounds} - 1) = {math.exp(min(log_last, 700.0)):.3g} fine-tuning steps in the "
                             f"last round, more than {STEPS_MAX:,}")


Agg = Literal["last", "min", "prod"]


Kind = Literal["orm", "prm", "prm-mc"]
KINDS = get_args(Kind)


@dataclass
class VerifierConfig:
    kind: Kind = "prm"
    """label: orm = final answer right; prm = the rule's step labels; prm-mc = Math-Shepherd rollout shares"""
    n_train: Count = 600
    """training problems per k (k = 2..8), drawn outside the held-out quarter of problem space (sampling is cheap;
    with 300 per k the PRM overfits: lower training loss, lower held-out AUROC)"""
    formats: tuple[Literal["A", "S", "T"], ...] = ("S", "T", "A")
    """formats forced when sampling the training outputs (A: the verifier also sees direct answers)"""
    format_weights: tuple[float, ...] = (0.45, 0.45, 0.1)
    """share of the training problems sampled with each format"""
    samples: Count = 2
    """outputs sampled per training problem (temperature below): chains that err in different places"""
    temperature: Sampled = 1.0
    """the thinker's sampling temperature, for the training outputs and the Math-Shepherd rollouts"""
    rollouts: Count = 8
    """prm-mc: completions M sampled from each step's prefix (Math-Shepherd uses N = 8)"""
    mc_share: Fraction = 1.0
    """prm-mc: share of the training outputs that get rollout labels (rollouts cost M generations per step; 1: the
    same data as the oracle-label PRM, so the two compare label quality at equal data)"""
    steps: Steps = 300
    """AdamW steps"""
    batch: Count = 64
    """sequences per step (128 gives the same held-out step AUROC at more training time)"""
    learning_rate: Positive = 1e-3
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
        check_choices(self, "verifier")              # kind, head, init, each format: the choices in their types
        check_numbers(self, "verifier")              # n_train, samples, steps: the bounds in their types
        if len(self.formats) != len(self.format_weights):
            raise ValueError("invalid verifier config: formats and format_weights must pair up, one weight each")


@dataclass
class L1Fields:
    """L1's training as this lab runs it (Aggarwal & Welleck 2025: GRPO on its length rewards, an SFT warm start),
    declared once: the l1 and l1_recipe experiments' configs inherit these fields and methods.budget's training
    takes them as its defaults."""
    prompts_per_step: Count = 16
    """problems per GRPO step (each with its own budget and prompt kind)"""
    num_generations: Count = 8
    """samples per problem (the group)"""
    learning_rate: Positive = 1e-4
    """GRPO's Adam learning rate"""
    beta: NonNegative = 0.04
    """KL weight to the model each GRPO stage starts from"""
    alpha: NonNegative = 0.25
    """L1's length weight per chain step (both rewards): one step off the budget costs Exact 0.25; 0: the reward
    ignores the budget (l1's control arm, and its placebo's second arm, trained on draws of its own)"""
    delta: float = 0.5
    """L1-Max's offset: a chain exactly at the budget earns half the reward, one step under it three quarters"""
    sft_learning_rate: Positive = 3e-3
    """peak learning rate of the warm start"""

    def l1_fields(self) -> dict:
        """These fields' values, as keyword arguments of methods.budget's training."""
        return {f.name: getattr(self, f.name) for f in fields(L1Fields)}


L1 = L1Fields()
"""L1's defaults, the keyword defaults of methods.budget.train_variant and train_recipe"""
