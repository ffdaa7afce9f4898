"""The methods' configs and their choices: torch-free, so that the command line can offer their fields without loading
torch."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from ..core.config import NS, STEPS_MAX, check_choices, check_numbers


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

    def validate(self) -> None:
        check_choices(self, "STaR")
        check_numbers(self, "STaR")
        for name in ("rounds", "problems", "samples", "cap", "steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"invalid STaR config: {name} must be >= 1")
        if not 0.0 < self.fixed_frac <= 1.0 or self.temperature < 0 or self.growth <= 0:
            raise ValueError("invalid STaR config: fixed_frac in (0, 1], temperature >= 0, growth > 0")
        log_last = math.log(self.steps) + (self.rounds - 1) * math.log(self.growth)    # no float overflow
        if log_last > math.log(STEPS_MAX):
            raise ValueError(f"invalid STaR config: steps {self.steps} x growth {self.growth:g} ^ (rounds "
                             f"{self.rounds} - 1) = {math.exp(min(log_last, 700.0)):.3g} fine-tuning steps in the "
                             f"last round, more than {STEPS_MAX:,}")


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


@dataclass
class VerifierExpConfig:
    kinds: tuple[str, ...] = KINDS
    """verifiers to train and measure"""
    thinker: Literal["erring", "base"] = "erring"
    """whose samples the verifiers learn from and are tested on"""
    n_test_per_k: int = 100
    """held-out problems per k for the quality check (the held-out quarter of problem space)"""
    verifier: VerifierConfig = field(default_factory=VerifierConfig)
    """training settings shared by the kinds (its `kind` field is overridden per kind)"""
    out: str = "runs/verifier"
    """where run() writes seed<s>.json and render() its plots"""
    cache: str | None = None
    """model cache (None: $REASONLAB_CACHE or ~/.cache/reasonlab)"""


SEARCH_METHODS = ("bon", "weighted", "beam", "beam_dedup", "dvts")


@dataclass
class SearchConfig:
    thinker: Literal["erring", "base", "quick"] = "erring"
    """the generator: the erring thinker (train.get_erring_model), the standard base model (the contrast), or the
    lab's quick base model (train.QUICK_CFG: its S chains err; for tests and quick runs)"""
    force: Literal["S", "T"] = "S"
    """the chain format every method writes (forced as the first token)"""
    n_val: int = 50
    """validation problems per k (strategy selection)"""
    n_test: int = 100
    """test problems per k (every reported number); disjoint from validation and from every verifier's training"""
    n_max: int = 64
    """largest N; N runs over 1, 2, 4, ... up to it"""
    width: int = 4
    """M, the beam width (expansions per beam per step) of beam search and DVTS (min(M, N) where N < M)"""
    temperature: float = 1.0
    """sampling temperature of every method"""
    agg: Literal["last", "min", "prod"] = "min"
    """how an output's step scores become one score, in every method (search-and-learn's agg_strategy; its default
    is "last": "min" makes the oracle's score the process check, task.check_chain)"""
    verifiers: tuple[str, ...] = ("orm", "prm", "prm-mc")
    """learned verifiers (verifier.KINDS); the oracle always runs too"""
    search_verifiers: tuple[str, ...] = ("prm", "oracle")
    """verifiers that guide beam search and DVTS (each costs a search per N)"""
    methods: tuple[str, ...] = SEARCH_METHODS
    """search methods to run (bon, weighted, beam, dvts); greedy and majority always run"""
    quick_verifiers: bool = False
    """train the verifiers small (tests and quick runs: the numbers mean little)"""

    def validate(self) -> None:
        if self.thinker not in ("erring", "base", "quick"):
            raise ValueError(f"invalid thinker {self.thinker!r}: use erring, base or quick")
        if self.force not in ("S", "T"):
            raise ValueError(f"invalid search format {self.force!r}: use S or T (a chain to search over)")
        if self.n_max not in NS:
            raise ValueError(f"invalid n_max {self.n_max}: use one of {', '.join(map(str, NS))}")
        if self.width < 1 or self.width & (self.width - 1):
            raise ValueError(f"invalid width {self.width}: a power of two >= 1")
        if self.n_val < 1 or self.n_test < 1:
            raise ValueError("n_val and n_test must be >= 1")
        if self.temperature <= 0:
            raise ValueError("temperature must be > 0 (search samples)")
        if self.agg not in ("last", "min", "prod"):
            raise ValueError(f"invalid aggregation {self.agg!r}: use last, min or prod")
        for v in self.verifiers:
            if v not in KINDS:
                raise ValueError(f"unknown verifier {v!r}: use {', '.join(KINDS)}")
        for v in self.search_verifiers:
            if v not in (*self.verifiers, "oracle"):
                raise ValueError(f"search verifier {v!r} must be oracle or one of --verifiers")
        for m in self.methods:
            if m not in SEARCH_METHODS:
                raise ValueError(f"unknown search method {m!r}: use {', '.join(SEARCH_METHODS)}")

    @property
    def Ns(self) -> tuple[int, ...]:
        return tuple(n for n in NS if n <= self.n_max)
