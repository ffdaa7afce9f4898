"""RL from rule-based rewards: GRPO and its relatives in one flat loop.

One step (the loop in `train` below, top to bottom):
    sample     prompts_per_step problems x num_generations completions at temperature 1 (KV-cache decoding)
    verify     reward_fn(problem, task.parse(output)) for each completion: a rule, no reward model
    advantage  a baseline from the group (GRPO z-score, Dr. GRPO mean, RLOO leave-one-out, or none)
    loss       PPO-clipped ratio (token or sequence level) - beta * KL(pi || pi_ref) + entropy_coef * H(pi),
               aggregated over tokens
    step       Adam, gradient clipped, num_iterations times on the same samples
    log        one console line, one JSON line in metrics.jsonl
Every variant is a field of RLConfig; `RLConfig.preset(algo)` sets the fields that define a named algorithm.

Papers: GRPO (Shao et al. 2024, DeepSeekMath, arXiv 2402.03300), Dr. GRPO (Liu et al. 2025, arXiv 2503.20783),
DAPO (Yu et al. 2025, arXiv 2503.14476), RLOO (Ahmadian et al. 2024, arXiv 2402.14740), GSPO (Zheng et al. 2025,
arXiv 2507.18071), KL estimators k1/k2/k3 (Schulman 2020, "Approximating KL divergence").
"""
from __future__ import annotations

import os
import random
import sys
import time
from dataclasses import asdict
from typing import Callable, NamedTuple

import torch
import torch.nn.functional as F

from ..core.model import GPT
from ..core.optim import AdamW
from ..core.rewards import rule_reward
from ..core.sampling import generate_n, layout, logits_at
from ..io import runs
from ..io.checkpoint import check_finite
from ..io.runs import save_checkpoint
from ..tasks import Problem, get
from .config import ALGOS, Algo, RLConfig  # noqa: F401  (the loop's public names)
from .rl_log import Logbook, completion_table, step_record

# ---------------------------------------------------------------------------------------------------------------
# The math, each piece at the size of its formula.

def advantages(r: torch.Tensor, cfg: RLConfig) -> torch.Tensor:
    """(P, G) rewards -> (P, G) advantages, one per completion (broadcast over its tokens)."""
    G = r.shape[1]
    if cfg.advantage == "group":    # GRPO / REINFORCE with a mean baseline: the group mean
        a = r - r.mean(1, keepdim=True)
    elif cfg.advantage == "rloo":   # RLOO: mean of the other G-1 samples = G/(G-1) (r - mean)
        a = (r - r.mean(1, keepdim=True)) * G / (G - 1)
    else:                           # REINFORCE without a baseline (the spec's contrast): A = r
        a = r.clone()
    if cfg.scale_rewards == "group":  # GRPO's z-score; Dr. GRPO drops it (it over-weights too easy/hard problems)
        a = a / (r.std(1, keepdim=True) + 1e-4)
    elif cfg.scale_rewards == "batch":
        a = a / (r.std() + 1e-4)
    return a


def kl_terms(lp: torch.Tensor, ref_lp: torch.Tensor, logits: torch.Tensor | None, ref_logits: torch.Tensor | None,
             estimator: str) -> torch.Tensor:
    """Per-token KL(pi || pi_ref) estimate on sampled tokens; `exact` sums over the whole vocabulary."""
    if estimator == "exact":
        logp, ref_logp = F.log_softmax(logits, -1), F.log_softmax(ref_logits, -1)
        return (logp.exp() * (logp - ref_logp)).sum(-1)   # sum_v pi(v) log pi(v)/pi_ref(v)
    d = ref_lp - lp                                   # log(pi_ref / pi) at the sampled token
    if estimator == "k1":
        return -d                                     # unbiased, can be negative
    if estimator == "k2":
        return 0.5 * d ** 2                           # biased, low variance
    return torch.exp(d) - d - 1                       # k3: unbiased and >= 0 (DeepSeekMath's choice)


def entropy(logits: torch.Tensor) -> torch.Tensor:
    """Exact per-token entropy H(pi(.|prefix)) = -sum_v pi(v) log pi(v) over the whole vocabulary."""
    logp = F.log_softmax(logits, -1)
    return -(logp.exp() * logp).sum(-1)


def policy_loss_terms(lp, old_lp, adv, mask, cfg: RLConfig):
    """Per-token surrogate loss (B, L) and clip indicators. adv is (B,), one value per completion."""
    A = adv[:, None]
    if not cfg.clip:                                  # REINFORCE: -A log pi
        z = torch.zeros_like(lp, dtype=torch.bool)
        return -A * lp, z, z
    lo, hi = 1 - cfg.epsilon, 1 + (cfg.epsilon_high if cfg.epsilon_high is not None else cfg.epsilon)
    if cfg.importance_sampling_level == "sequence":   # GSPO: s_i = exp(mean_t log ratio), one ratio per completion
        n = mask.sum(1, keepdim=True).clamp(min=1)
        ratio = torch.exp(((lp - old_lp) * mask).sum(1, keepdim=True) / n).expand_as(lp)
    else:                                             # PPO/GRPO: a ratio per token
        ratio = torch.exp(lp - old_lp)
    loss = -torch.min(ratio * A, ratio.clamp(lo, hi) * A)
    # a token is clipped when the clamp bites in the direction the advantage pushes
    return loss, (ratio < lo) & (A < 0), (ratio > hi) & (A > 0)


def aggregate(per_tok: torch.Tensor, mask: torch.Tensor, n_seqs: int, n_tokens: int, cfg: RLConfig) -> torch.Tensor:
    """Sum of this micro-batch's share of the loss; the denominators are the whole batch's, so micro-batching
    leaves the gradient unchanged."""
    # GSPO's sequence ratio gives every token of a completion the same value; loss_type still says how the
    # tokens are weighted (TRL honours it too). Its preset keeps loss_type="grpo": the paper's (1/G) sum_i.
    if cfg.loss_type == "grpo":                                                 # mean_i (1/|o_i|) sum_t
        return ((per_tok * mask).sum(1) / mask.sum(1).clamp(min=1)).sum() / n_seqs
    if cfg.loss_type == "dapo":                                                 # sum_{i,t} / sum_i |o_i|
        return (per_tok * mask).sum() / n_tokens
    return (per_tok * mask).sum() / (n_seqs * get(cfg.task).max_out)             # Dr. GRPO: sum / (G * L_max)


# ---------------------------------------------------------------------------------------------------------------
# Sampling groups (with DAPO's dynamic sampling), metrics and checkpoints.

class Rollouts(NamedTuple):
    """One step's samples: P' problems (P' < prompts_per_step when dynamic sampling ran dry) x G completions."""
    problems: list[Problem]   # the problems
    outs: list[list[int]]     # P' * G completions, problem-major
    parsed: list[dict]        # parse() of each completion
    rewards: torch.Tensor     # (P', G)
    zero_std: float           # share of groups whose rewards all agree, as first sampled (no learning signal)
    forced: list[bool]        # completion forced to answer directly (force_direct)


def sample_groups(policy: GPT, rng: random.Random, gen: torch.Generator, cfg: RLConfig, reward_fn: Callable,
                  group_fn: Callable | None = None, step: int = 0, problem_fn: Callable | None = None,
                  prompt_fn: Callable | None = None) -> Rollouts:
    """prompts_per_step problems x num_generations completions, verified and rewarded.

    With dynamic_sampling, groups whose rewards all agree are dropped and new problems drawn, at most max_resample
    extra rounds; the step then trains on what it has (possibly nothing). A non-finite reward stops the run.
    """
    P, G = cfg.prompts_per_step, cfg.num_generations
    task = get(cfg.task)
    problem_fn, prompt_fn = problem_fn or task.train_problem, prompt_fn or task.prompt_ids
    problems, outs, parsed, rewards, forced = [], [], [], [], []
    zero_std = None
    for _ in range(1 + (cfg.max_resample if cfg.dynamic_sampling else 0)):
        drawn = [problem_fn(rng, rng.randint(*cfg.ks())) for _ in range(P - len(problems))]
        n_forced = round(G * cfg.force_direct)
        o = generate_n(policy, [prompt_fn(x) for x in drawn], G - n_forced, gen, cfg.temperature)
        if n_forced:   # the last n_forced samples of each group answer directly
            f = generate_n(policy, [prompt_fn(x) for x in drawn], n_forced, gen, cfg.temperature, force=["A"])
            o = [row for i in range(len(drawn)) for row in o[i * (G - n_forced):(i + 1) * (G - n_forced)]
                 + f[i * n_forced:(i + 1) * n_forced]]
        p = [task.parse(x) for x in o]
        r = torch.tensor([reward_fn(drawn[i // G], p[i]) for i in range(len(o))], dtype=torch.float32).view(-1, G)
        if group_fn is not None:   # rewards that need the whole group (Kimi length reward, ARM scaling)
            r = group_fn(r, [p[i * G:(i + 1) * G] for i in range(len(drawn))], step, cfg.steps)
        if not torch.isfinite(r).all():
            raise NonFiniteError(f"non-finite reward at step {step + 1}")
        flat = (r.max(1).values == r.min(1).values)
        zero_std = flat.float().mean().item() if zero_std is None else zero_std
        keep = (~flat).nonzero().flatten().tolist() if cfg.dynamic_sampling else range(len(drawn))
        for i in keep:
            problems.append(drawn[i])
            outs.extend(o[i * G:(i + 1) * G])
            forced.extend([False] * (G - n_forced) + [True] * n_forced)
            parsed.extend(p[i * G:(i + 1) * G])
            rewards.append(r[i])
        if len(problems) == P:
            break
    r = torch.stack(rewards) if rewards else torch.zeros(0, G)
    return Rollouts(problems, outs, parsed, r, zero_std, forced)


def forced_weights(forced: list[bool], cfg: RLConfig, L: int) -> torch.Tensor:
    """(B, L) weights of each completion's tokens in the policy loss: 1 for free completions; for forced-direct
    ones by cfg.forced_trains (all: every token; format: only the first, the forced "A"; answer: all but it)."""
    f = torch.tensor(forced, dtype=torch.float32)[:, None]
    first, rest = 1 - f * (cfg.forced_trains == "answer"), 1 - f * (cfg.forced_trains == "format")
    return torch.cat([first, rest.expand(-1, L - 1)], 1)


def save_state(stem: str, step: int, policy: GPT, ref: GPT | None, opt, rng: random.Random, gen: torch.Generator,
               cfg: RLConfig, hist: list[dict]) -> str:
    """Everything a bit-identical resume needs: weights, Adam moments, both RNG states, step, config, history.

    stem is <run_dir>/state: the checkpoint goes to <run_dir>/ckpt-<step>/state.* as one atomic unit
    (runs.save_checkpoint); returns its stem."""
    t = {f"policy.{k}": v for k, v in policy.state_dict().items()}
    if ref is not None:
        t.update({f"ref.{k}": v for k, v in ref.state_dict().items()})
    osd = opt.state_dict()
    for i, st in osd["state"].items():
        t.update({f"opt.{i}.{k}": (v if torch.is_tensor(v) else torch.tensor(v)) for k, v in st.items()})
    t["rng.torch"] = gen.get_state()
    meta = {"step": step, "config": asdict(cfg), "model": policy.config(), "param_groups": osd["param_groups"],
            "rng_python": rng.getstate(), "history": hist}
    return save_checkpoint(os.path.dirname(stem), step, t, meta)


def apply_state(t: dict, meta: dict, policy: GPT, ref: GPT | None, opt, rng: random.Random,
                gen: torch.Generator) -> tuple[int, list]:
    """Restore a checkpoint's tensors and metadata (verified by load_tensors) into the run's objects."""
    check_finite({k: v for k, v in t.items() if k.startswith("policy.")}, f"checkpoint at step {meta.get('step')}")
    policy.load_state_dict({k[7:]: v for k, v in t.items() if k.startswith("policy.")}, strict=True)
    if ref is not None and any(k.startswith("ref.") for k in t):
        ref.load_state_dict({k[4:]: v for k, v in t.items() if k.startswith("ref.")}, strict=True)
    state: dict[int, dict] = {}
    for k, v in t.items():
        if k.startswith("opt."):
            _, i, name = k.split(".", 2)
            state.setdefault(int(i), {})[name] = v
    opt.load_state_dict({"state": state, "param_groups": meta["param_groups"]})
    gen.set_state(t["rng.torch"])
    v, s, g = meta["rng_python"]
    rng.setstate((v, tuple(s), g))
    return meta["step"], meta["history"]


def all_finite(params: list[torch.Tensor]) -> bool:
    """No NaN or inf in any parameter: their total norm is finite (a NaN or inf anywhere makes it non-finite; so
    would values near 1e19, which no sane run reaches). 7x cheaper than isfinite over a concatenated copy."""
    return bool(torch.isfinite(torch.nn.utils.get_total_norm(params, foreach=True)))


class NonFiniteError(FloatingPointError):
    """A NaN or inf in rewards, loss or parameters; the message names the step."""


# ---------------------------------------------------------------------------------------------------------------
# The loop.

def train(policy: GPT, ref: GPT | None, cfg: RLConfig, reward_fn: Callable | None = None, run_dir: str | None = None,
          resume: bool = False, callback: Callable | None = None, log: Callable | None = print,
          progress: bool = False, group_fn: Callable | None = None, problem_fn: Callable | None = None,
          prompt_fn: Callable | None = None) -> list[dict]:
    """Run cfg.steps RL steps on `policy` (in place) against the frozen `ref`; returns one record per step.

    reward_fn(problem, parsed) -> float (default: the rule reward); group_fn(rewards (P, G), parses per group, step,
    steps) -> rewards reshapes them with the whole group in view. With run_dir: config.json, metrics.jsonl and
    a resumable checkpoint `state` (every cfg.checkpoint_every steps and at the end); resume=True continues it.
    callback(record, policy) runs after every step, skipped ones included. problem_fn(rng, k) -> problem and
    prompt_fn(problem) -> prompt ids replace the task's train_problem and prompt_ids (budget.py: a problem that
    carries a budget, and its prompt).
    The same step without the bookkeeping, line by line after the spec: `naive_steps` in benchmarks/rl_step.py.
    """
    cfg.validate()
    if cfg.beta > 0 and ref is None:
        raise ValueError("beta > 0 needs a reference model (or set beta=0)")
    reward_fn = reward_fn or (lambda d, p: rule_reward(d, p, cfg.format_bonus))
    task = get(cfg.task)
    prompt_fn = prompt_fn or task.prompt_ids
    params = list(policy.parameters())   # listed once: walking the module tree each step costs ~1 ms
    device = params[0].device
    rng = random.Random(cfg.seed)
    gen = torch.Generator(device=device).manual_seed(cfg.seed)
    opt = AdamW(params, lr=cfg.learning_rate)   # Adam (no weight decay), one fused kernel for all tensors
    G = cfg.num_generations
    stem = os.path.join(run_dir, "state") if run_dir else None
    start, hist, locked = 0, [], False
    if run_dir:   # locked, resumed from the newest complete checkpoint (or step 0), torn log line dropped: runs.py
        start, hist, locked = runs.open_run(run_dir, asdict(cfg), resume,
                                            lambda t, m: apply_state(t, m, policy, ref, opt, rng, gen), log)
    if not all_finite(params):
        raise NonFiniteError(f"non-finite parameters before step {start + 1}")
    book = Logbook(cfg, hist, run_dir, log, callback, start if progress else None,
                   save=lambda step: save_state(stem, step, policy, ref, opt, rng, gen, cfg, hist) if stem else None)
    for step in range(start, cfg.steps):
        t0 = time.perf_counter()
        # 1-2. sample and verify
        ro = sample_groups(policy, rng, gen, cfg, reward_fn, group_fn, step, problem_fn, prompt_fn)
        B = len(ro.outs)
        if B == 0:  # DAPO's dynamic sampling found no group with signal: no update, but the step counts and is logged
            book.end_step(step, {"step": step + 1, "skipped": True, "frac_reward_zero_std": ro.zero_std}, policy)
            continue
        prompts = [prompt_fn(d) for d in ro.problems for _ in range(G)]
        # 3. advantages
        adv = advantages(ro.rewards, cfg)                           # (P', G)
        A = adv.flatten().to(device)
        # 4. loss and update, num_iterations times on the same samples
        chunks = [slice(i, i + (cfg.micro_batch or B)) for i in range(0, B, cfg.micro_batch or B)]
        lays = [layout(prompts[sl], ro.outs[sl], G, device) for sl in chunks]   # shared by the reference and updates
        ref_logits = None
        if ref is not None:
            with torch.inference_mode():   # lighter than no_grad; cloned outside it, so backward may keep it
                ref_logits = [logits_at(ref, lay)[0] for lay in lays]
            ref_logits = [tempered(x.clone(), cfg) for x in ref_logits]
        n_tokens = sum(len(o) for o in ro.outs)
        old_logp: dict[int, torch.Tensor] = {}
        clip_lo = clip_hi = 0.0
        diag = {}
        for it in range(cfg.num_iterations):
            opt.zero_grad(set_to_none=True)
            loss_sum = 0.0
            for c, sl in enumerate(chunks):
                logits, tok, mask = logits_at(policy, lays[c])
                logits = tempered(logits, cfg)     # the distribution the rollouts were sampled from
                logp = F.log_softmax(logits, -1).gather(-1, tok[:, :, None]).squeeze(-1)
                if it == 0:
                    old_logp[c] = logp.detach()    # exactly on-policy: the first update's ratio is exactly 1
                per_tok, lo, hi = policy_loss_terms(logp, old_logp[c], A[sl], mask, cfg)
                if cfg.forced_trains != "all":   # forced rollouts teach the format choice only, or the answer only
                    per_tok = per_tok * forced_weights(ro.forced[sl], cfg, per_tok.shape[1]).to(device)
                ref_lg = ref_logits[c] if ref_logits is not None else None
                if cfg.beta > 0:
                    ref_logp = F.log_softmax(ref_lg, -1).gather(-1, tok[:, :, None]).squeeze(-1)
                    per_tok = per_tok + cfg.beta * kl_terms(logp, ref_logp, logits, ref_lg, cfg.kl_estimator)
                if cfg.entropy_coef > 0:         # the entropy bonus: exact H(pi(.|prefix)) per token (Cui et al. 2025)
                    per_tok = per_tok - cfg.entropy_coef * entropy(logits)
                loss = aggregate(per_tok, mask, B, n_tokens, cfg)
                if not torch.isfinite(loss):
                    raise NonFiniteError(f"non-finite loss at step {step + 1}")
                loss.backward()
                loss_sum += loss.item()
                m = mask.float()
                clip_lo += (lo.float() * m).sum().item() / n_tokens / cfg.num_iterations
                clip_hi += (hi.float() * m).sum().item() / n_tokens / cfg.num_iterations
                if it == 0:
                    with torch.no_grad():
                        accumulate_diagnostics(diag, logits, logp, tok, mask, ref_lg, cfg)
            gnorm = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip, foreach=True)
            opt.step()
        if not all_finite(params):
            raise NonFiniteError(f"non-finite parameters after step {step + 1}")
        # 5. log
        rec = step_record(step, ro, diag, n_tokens, clip_lo, clip_hi, gnorm, loss_sum, time.perf_counter() - t0)
        book.end_step(step, rec, policy, table=lambda: completion_table(task, ro.problems, ro.outs, ro.rewards, adv, G))
    book.close()
    if locked:
        runs.unlock(run_dir)
    policy.eval()
    return hist


def tempered(logits: torch.Tensor, cfg: RLConfig) -> torch.Tensor:
    """Logits of the sampling distribution: rollouts are drawn at cfg.temperature, so the ratio, the KL and the
    gradient use logits / temperature, as TRL does (a no-op at temperature 1)."""
    return logits if cfg.temperature == 1.0 else logits / cfg.temperature


def accumulate_diagnostics(diag: dict, logits, logp, tok, mask, ref_logits, cfg: RLConfig) -> None:
    """Token sums of entropy, the KL estimator and the exact KL (divided by the token count by the caller)."""
    m = mask.float()
    diag["entropy"] = diag.get("entropy", 0.0) + (entropy(logits) * m).sum().item()
    if ref_logits is not None:
        ref_logp = F.log_softmax(ref_logits, -1).gather(-1, tok[:, :, None]).squeeze(-1)
        est = "k3" if cfg.kl_estimator == "exact" else cfg.kl_estimator
        diag["kl"] = diag.get("kl", 0.0) + (kl_terms(logp, ref_logp, None, None, est) * m).sum().item()
        diag["kl_exact"] = diag.get("kl_exact", 0.0) + (kl_terms(logp, ref_logp, logits, ref_logits, "exact") * m).sum().item()


SPEC_DEFAULTS = {"beta": 0.04, "clip": 0.2, "inner": 2}   # rl_train's keyword defaults, as in the spec


def rl_train(policy: GPT, ref: GPT | None, steps: int, algo: str = "grpo", prompts_per_step: int = 16, group: int = 8,
             lr: float = 3e-5, beta: float = 0.04, clip: float = 0.2, inner: int = 2, seed: int = 0,
             k_range=None, callback: Callable | None = None, every: int = 0, log: Callable | None = None,
             progress: bool | None = None, **overrides) -> list[dict]:
    """The spec's entry point: GRPO (or another preset in ALGOS) for `steps` steps, policy updated in place.

    Returns one record per step with the spec's keys (step, reward, acc, length, share, kl) and more;
    callback(step, policy) runs every `every` steps. beta, clip (epsilon) and inner (num_iterations) left at the
    spec's defaults take the preset's values (DAPO and GSPO: no KL; the REINFORCE presets: no KL, no clip, one
    update); a value other than the default is applied, and a combination the preset cannot take (e.g.
    algo="reinforce", inner=2) is rejected by RLConfig.validate. For algo="reinforce" the spec's contrast holds:
    A = r, no clip, no KL, one update per batch. Extra keyword arguments are RLConfig fields (e.g.
    kl_estimator="exact", task="modprod"; run_dir is not one: use `train`). progress: a bar of the steps on stderr
    (None: where stderr is a terminal). k_range None: the task's whole range
    (the course module's 2..8 for digits).
    """
    kw = dict(steps=steps, prompts_per_step=prompts_per_step, num_generations=group, learning_rate=lr, seed=seed,
              k_range=None if k_range is None else tuple(k_range), log_every=0)
    for field, arg, v in (("beta", "beta", beta), ("epsilon", "clip", clip), ("num_iterations", "inner", inner)):
        if algo in ("grpo", "dr_grpo", "rloo") or v != SPEC_DEFAULTS[arg]:
            kw[field] = v
    cfg = RLConfig.preset(algo, **{**kw, **overrides})
    if not cfg.clip and clip != SPEC_DEFAULTS["clip"]:
        raise ValueError(f"rl_train: algo={algo!r} does not clip the ratio (plain policy gradient); clip={clip} "
                         "would be ignored")
    hook = None if callback is None else every_n_steps(every, lambda rec, pol: callback(rec["step"], pol))
    progress = sys.stderr.isatty() if progress is None else progress       # a long call shows its steps
    return train(policy, ref, cfg, callback=hook, log=log, progress=progress)


def every_n_steps(n: int, fn: Callable) -> Callable:
    """A train() callback that passes (record, policy) on to fn at the steps that are multiples of n (never when n
    is 0): the evaluation and logging hooks of the CLI, the lab and budget.py."""
    return lambda rec, pol: fn(rec, pol) if n and rec["step"] % n == 0 else None
