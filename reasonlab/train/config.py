"""The RL loop's config: torch-free, so that the command line can offer its fields without loading torch."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from ..core.config import (
    Count,
    Count0,
    Every,
    NonNegative,
    Positive,
    Sampled,
    Seed,
    Share0,
    Steps,
    check_choices,
    check_numbers,
)
from ..tasks import get

Algo = Literal["grpo", "dr_grpo", "dapo", "rloo", "reinforce", "reinforce_baseline", "gspo"]


ALGOS = get_args(Algo)


@dataclass
class RLConfig:
    task: str = "digits"
    """the task (a registered name, knobs after colons: "compose:n_f=3"; `reasonlab tasks` lists them)"""
    algo: Algo = "grpo"
    """name of the preset the other fields came from (grpo, dr_grpo, dapo, rloo, reinforce, reinforce_baseline, gspo)"""
    steps: Steps = 100
    """optimizer rounds (each: sample, verify, num_iterations updates)"""
    prompts_per_step: Count = 16
    """problems per step"""
    num_generations: Count = 8
    """completions per problem: the group (TRL's num_generations; the spec's `group`)"""
    learning_rate: Positive = 3e-5
    """Adam learning rate, constant"""
    beta: NonNegative = 0.04
    """KL penalty weight; 0 skips the reference model entirely"""
    entropy_coef: NonNegative = 0.0
    """entropy bonus: the loss term -entropy_coef * H(pi(.|prefix)) per token, exact over the vocabulary (Cui et al.
    2025, arXiv 2505.22617: 1e-4 and 1e-3 did little, 5e-3 was stable but no better, 1e-2 made entropy explode)"""
    kl_estimator: Literal["k1", "k2", "k3", "exact"] = "k3"
    """per-token KL in the loss: k1 = log pi/pi_ref, k2 = (log ratio)^2 / 2, k3 = r - log r - 1 (DeepSeekMath), exact = full-vocabulary KL"""
    epsilon: Positive = 0.2
    """lower clip: the ratio is clipped to [1 - epsilon, 1 + epsilon_high]"""
    epsilon_high: Positive | None = None
    """upper clip (DAPO's clip-higher: 0.28); None means epsilon"""
    clip: bool = True
    """use the PPO clipped ratio; False gives the plain policy gradient -A * log pi (REINFORCE)"""
    num_iterations: Count = 2
    """updates on each batch of samples (the spec's `inner`); the first has ratio exactly 1"""
    advantage: Literal["group", "rloo", "none"] = "group"
    """baseline: group = r - mean(group) (GRPO), rloo = r - mean(others) (RLOO), none = raw reward (REINFORCE)"""
    scale_rewards: Literal["group", "batch", "none"] = "group"
    """divide the advantage by the group's std (group, GRPO), the batch's std (batch), or not (none, Dr. GRPO)"""
    loss_type: Literal["grpo", "dapo", "dr_grpo"] = "grpo"
    """aggregation: grpo = mean over sequences of token means; dapo = mean over all tokens; dr_grpo = sum / (G * the task's longest output)"""
    importance_sampling_level: Literal["token", "sequence"] = "token"
    """token ratios (PPO/GRPO) or one sequence ratio exp(mean log ratio) per completion (GSPO)"""
    dynamic_sampling: bool = False
    """DAPO: drop groups whose rewards all agree (no signal) and sample new problems in their place"""
    max_resample: Count0 = 4
    """cap on extra sampling rounds per step when dynamic_sampling is on"""
    temperature: Sampled = 1.0
    """sampling temperature of the rollouts"""
    force_direct: Share0 = 0.0
    """share of each group's samples whose format token is forced to A (AdaptThink's forced no-thinking rollouts;
    here without its importance-sampling correction)"""
    forced_trains: Literal["all", "format", "answer"] = "all"
    """what the policy-gradient term takes from forced-direct rollouts: all their tokens, only the forced "A" (the
    format choice: is answering directly worth it on this problem?), or only the answer tokens (the format's
    reward signal then comes from the policy's own choices alone); the KL penalty still covers every token"""
    grad_clip: Positive = 1.0
    """max gradient norm"""
    micro_batch: Count0 = 0
    """completions per backward pass (0: all at once); the gradient does not depend on it"""
    seed: Seed = 0
    """seeds the problems and the sampling"""
    k_range: tuple[int, int] | None = None
    """problem sizes drawn, uniformly (None: the task's whole range)"""
    format_bonus: float = 0.1
    """the rule reward's bonus for a complete template"""
    log_every: Every = 1
    """console line every N steps (metrics.jsonl gets every step)"""
    table_every: Every = 0
    """print a table of prompts, completions, rewards and advantages every N steps (0: never)"""
    checkpoint_every: Every = 0
    """write a resumable checkpoint every N steps into the run directory (0: only at the end)"""

    @staticmethod
    def preset(algo: str, **overrides) -> "RLConfig":
        """The fields that make a named algorithm; overrides win."""
        if algo not in ALGOS:
            raise ValueError(f"unknown algo {algo!r}: choose from {', '.join(ALGOS)}")
        p = {
            "grpo": {},
            "dr_grpo": dict(scale_rewards="none", loss_type="dr_grpo"),
            "dapo": dict(epsilon_high=0.28, dynamic_sampling=True, loss_type="dapo", beta=0.0),
            "rloo": dict(advantage="rloo", scale_rewards="none"),
            "reinforce": dict(advantage="none", scale_rewards="none", clip=False, beta=0.0, num_iterations=1),
            "reinforce_baseline": dict(advantage="group", scale_rewards="none", clip=False, beta=0.0, num_iterations=1),
            "gspo": dict(importance_sampling_level="sequence", epsilon=3e-4, epsilon_high=4e-4, beta=0.0),
        }[algo]
        cfg = RLConfig(algo=algo, **{**p, **overrides})
        cfg.validate()
        return cfg

    def ks(self) -> tuple[int, int]:
        """The sizes drawn: k_range, or the task's whole range."""
        if self.k_range is not None:
            return tuple(self.k_range)
        task = get(self.task)
        return task.k_min, task.k_max

    def validate(self) -> None:
        """Reject invalid values and combinations with a message naming the field."""
        def bad(msg):
            raise ValueError(f"invalid RL config: {msg}")
        check_choices(self, "RL")
        check_numbers(self, "RL")
        if self.advantage in ("group", "rloo") and self.num_generations < 2:
            bad(f"advantage={self.advantage!r} needs num_generations >= 2 (a group baseline of one sample is the sample)")
        if self.scale_rewards == "group" and self.num_generations < 2:
            bad("scale_rewards='group' needs num_generations >= 2")
        if self.dynamic_sampling and self.num_generations < 2:
            bad("dynamic_sampling needs num_generations >= 2")
        if not self.clip and self.num_iterations > 1:
            bad("clip=False (plain policy gradient) with num_iterations > 1 reuses stale samples without a ratio; "
                "use num_iterations=1 or clip=True")
        if self.importance_sampling_level == "sequence" and not self.clip:
            bad("importance_sampling_level='sequence' (GSPO) needs clip=True")
        try:
            task = get(self.task)
        except ValueError as e:
            bad(str(e))
        lo, hi = self.ks()
        if not task.k_min <= lo <= hi <= task.k_max:
            bad(f"k_range {self.k_range} must lie within {task.k_min}..{task.k_max} (task {task.name})")
        if self.forced_trains != "all" and round(self.num_generations * self.force_direct) < 1:
            bad(f"forced_trains={self.forced_trains!r} needs force_direct > 0 with at least one forced rollout per "
                f"group (num_generations * force_direct = {self.num_generations * self.force_direct:g})")
        if self.forced_trains != "all" and self.importance_sampling_level == "sequence":
            bad("forced_trains with importance_sampling_level='sequence' (GSPO): one ratio per sequence mixes the "
                "masked tokens back in")
