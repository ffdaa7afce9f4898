"""RLConfig as TRL's GRPOConfig: the config under which TRL's GRPOTrainer takes the steps our loop takes.

RLConfig's knob names follow GRPOConfig's, and where both have a knob the math is the same (trl 1.16.0,
trainer/grpo_trainer.py: `_generate_and_score_completions` for the advantages, `_compute_loss` for the loss):
advantages (r - group mean) / (std + 1e-4) per group, per batch or unscaled; the clipped token (or sequence)
ratio; beta times the k3 KL estimate per token; logits divided by the temperature; grpo = mean of per-sequence
token means, dapo = one mean over all tokens, dr_grpo = sum / (B * max_completion_length). tests/hf replays one TRL
step with our loss code and compares the weight updates.

What changes from TRL's defaults: loss_type, beta and num_iterations are ours (TRL: dapo, 0, 1);
max_completion_length is the task's longest output, `task.max_out` (digits: the 14 tokens after the prompt; TRL:
512, past the position table); bf16 and gradient checkpointing are off; the learning rate is constant, with no
warm-up and no weight decay (our Adam), the gradient clipped at grad_clip. One TRL step is one generation batch of prompts_per_step x num_generations completions and one
optimizer update, so steps x num_iterations optimizer steps make our run.

What TRL cannot express is refused with one line: no clip (plain REINFORCE), RLOO's leave-one-out baseline or no
baseline at all, DAPO's dynamic sampling, a KL estimator other than k3, forced direct rollouts, and an entropy bonus
outside the dapo loss (TRL's bonus is one mean over tokens whatever the loss type).
"""
from __future__ import annotations

from ..tasks import get
from ..train.config import RLConfig


def refusal(cfg: RLConfig) -> str | None:
    """Why TRL's GRPOTrainer cannot train as cfg does, or None."""
    if not cfg.clip:
        return ("clip=False (plain policy gradient): TRL always clips the ratio; with num_iterations=1 the clipped "
                "loss has the same gradient, so set clip=True")
    if cfg.advantage == "rloo":
        return "advantage='rloo': TRL's GRPOTrainer has no leave-one-out baseline (trl.RLOOTrainer is another trainer)"
    if cfg.advantage == "none":
        return "advantage='none' (REINFORCE without a baseline): TRL always subtracts the group mean"
    if cfg.dynamic_sampling:
        return "dynamic_sampling: TRL does not resample groups whose rewards all agree (set dynamic_sampling=False)"
    if cfg.beta > 0 and cfg.kl_estimator != "k3":
        return f"kl_estimator={cfg.kl_estimator!r}: TRL's KL term is k3"
    if cfg.force_direct > 0:
        return "force_direct: TRL samples every completion freely (no forced format tokens)"
    if cfg.entropy_coef > 0 and cfg.loss_type != "dapo":
        return (f"entropy_coef with loss_type={cfg.loss_type!r}: TRL's entropy bonus is a mean over all tokens, ours is "
                "aggregated as the loss is; they agree only for loss_type='dapo'")
    if cfg.importance_sampling_level == "sequence" and cfg.loss_type != "grpo":
        return "importance_sampling_level='sequence' needs loss_type='grpo' (GSPO's setup; TRL warns otherwise)"
    return None


def grpo_kwargs(cfg: RLConfig, output_dir: str) -> dict:
    """The keyword arguments of trl.GRPOConfig that train as cfg does (ValueError, one line, where TRL cannot).
    Needs no TRL; the dataset (task, k_range) and the reward (format_bonus) are the caller's:
    reasonlab.hf.dataset(task=cfg.task, k_range=cfg.k_range) and reasonlab.hf.rewards.trl_reward("rule",
    format_bonus=cfg.format_bonus)."""
    cfg.validate()
    why = refusal(cfg)
    if why:
        raise ValueError(f"TRL cannot train this RL config: {why}")
    return dict(
        output_dir=output_dir, seed=cfg.seed, report_to="none", logging_steps=max(1, cfg.log_every),
        save_strategy="steps" if cfg.checkpoint_every else "no", save_steps=cfg.checkpoint_every or 500,
        # one generation batch per optimizer round: P problems x G completions, updated num_iterations times
        per_device_train_batch_size=cfg.prompts_per_step * cfg.num_generations, gradient_accumulation_steps=1,
        num_generations=cfg.num_generations, max_steps=cfg.steps * cfg.num_iterations,
        num_iterations=cfg.num_iterations, max_completion_length=get(cfg.task).max_out, temperature=cfg.temperature,
        top_p=1.0, top_k=0,
        # the loss
        loss_type=cfg.loss_type, scale_rewards=cfg.scale_rewards, beta=cfg.beta, epsilon=cfg.epsilon,
        epsilon_high=cfg.epsilon_high, importance_sampling_level=cfg.importance_sampling_level,
        entropy_coef=cfg.entropy_coef, mask_truncated_completions=False,
        use_bias_correction_kl=False,   # TRL's default multiplies k3 by the ratio (DeepSeek-V3.2); ours is GRPO's
        # the optimizer: Adam without weight decay at a constant rate, the gradient norm clipped
        learning_rate=cfg.learning_rate, lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0,
        optim="adamw_torch", max_grad_norm=cfg.grad_clip,
        # TRL's defaults that differ from ours: bf16 and gradient checkpointing on
        bf16=False, fp16=False, activation_checkpointing=False,   # (gradient_checkpointing, its old name)
    )


def grpo_config(cfg: RLConfig, output_dir: str = "runs/trl", **overrides):
    """trl.GRPOConfig(**grpo_kwargs(cfg, output_dir), **overrides). Needs the optional extra."""
    from trl import GRPOConfig  # the optional extra, imported only here
    kw = grpo_kwargs(cfg, output_dir)
    kw.update(overrides)
    return GRPOConfig(**kw)
