"""Thinking on a budget: the user sets it, the model learns to keep it (L1 / LCPO), compared with s1's forcing.

A budget model reads B<b> in place of "=" (Task.budget_prompt_ids): "think for b chain steps", b = 0..k_max. It starts
from the base model (the budget embeddings are copies of "="'s, so at step 0 it behaves exactly as the base model) and
is trained with GRPO (rl.train) on L1's rewards, one budget drawn uniformly per prompt:
    L1-Exact  r = c - alpha * |b - n|
    L1-Max    r = c * clip(alpha * (b - n) + delta, 0, 1)
with c = 1 for the right answer and n = the chain steps written (Aggarwal & Welleck 2025, arXiv 2503.04697, eqs. 1
and 3). What L1's code (cmu-l3/l1, `math_reward.py` and `scripts/train/run_l1_*.sh` at 93dd330) does:
    - Exact (`linear_reward=True`, `multiplier_reward=False`, alpha = 3e-4): the correctness plus
      `get_delta_score_linear` = -alpha |b - n|, for every sample, right or wrong: the paper's eq. 1, as here;
    - Max: `get_delta_score_linear_both` gives (clip(alpha (b - n), -1, 1) + 1) / 2, the paper's clip with
      delta = 0.5 and alpha halved; with `multiplier_reward` it multiplies the correctness (max(0, .) * c), as the
      paper's eq. 3 does and as here. The published `run_l1_max.sh` sets none of the reward flags, so as committed
      its reward is the correctness alone. The paper's Max run starts from the Exact checkpoint, on prompts of its
      own, as `train_recipe` does; experiments/l1.py starts every variant from the base model;
    - n counts the whole response in the code (thinking + solution); here n counts chain steps only,
      the response's frame (format token, "A", the answer, </s>) being fixed;
    - the budget is a number written in the prompt ("Think for N tokens."); here it is one token per budget.
Against it: s1 forcing (Muennighoff et al. 2025, arXiv 2501.19393) on the base model, a T chain cut after b steps
(tts.budget_hook), and the fixed formats A / S / T. An optional SFT warm start on budget-annotated chains (the
longest fixed format that fits the budget) measures whether RL needs one. `strides.classify_chain` names what a chain
does (its stride: digits summed per step), so the report can say what the model does with fewer steps than S needs.

The experiments that train and evaluate these models are `experiments/l1.py` (L1-Exact and L1-Max against s1
forcing) and `experiments/l1_recipe.py` (L1's own recipe); this module holds the algorithm: the budget model, L1's
rewards and draws, training, the evaluation passes that generate, and the stride of a chain.
"""
from __future__ import annotations

import copy
import random
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from .. import tasks
from ..core.model import GPT
from ..core.problems import as_task, problems_per_k
from ..core.sampling import generate, sample_tree
from ..core.seeds import hashed_seed
from ..tasks import IGNORE, Problem, Task, chain_steps
from ..tasks.records import EQ, PAD
from ..train.rl import RLConfig, every_n_steps, train
from ..train.sft import train_on_batches
from .config import L1
from .strides import classify_chain, stride_group
from .tts import budget_hook

# ---------------------------------------------------------------------------------------------------------------
# The budget model and L1's rewards.

def grow_vocab(model: GPT, size: int, new_rows: torch.Tensor) -> GPT:
    """The model with a vocabulary of `size`: its rows copied, the new embeddings `new_rows` ((size - V, d)), the new
    output rows copies of <pad>'s (never a target, so never written)."""
    c = model.cfg
    m = GPT(size, c.d_model, c.n_layers, c.n_heads, c.max_len).to(next(model.parameters()).device)
    sd = {k: v.clone() for k, v in model.state_dict().items()}
    V = c.vocab_size
    tok, head = m.tok.weight.detach().clone(), m.head.weight.detach().clone()
    tok[:V], head[:V] = sd["tok.weight"], sd["head.weight"]
    tok[V:] = new_rows
    head[V:] = sd["head.weight"][PAD]
    sd["tok.weight"], sd["head.weight"] = tok, head
    m.load_state_dict(sd)
    return m.eval()


def budget_model(base: GPT, task: str | Task = "digits") -> GPT:
    """The base model with the task's budget vocabulary: old rows copied; each B<b> embedding a copy of "="'s (so the
    model starts as the base model on every budget); the new output rows copies of <pad>'s (never a target, so never
    written)."""
    task = as_task(task)
    if base.cfg.vocab_size >= len(task.budget_vocab):
        return copy.deepcopy(base)
    c = base.cfg
    # B<b> = "=" + (b - 4)/4 * v, v a fixed random direction of norm 4 (a quarter of the embeddings' ~8 norm... times
    # two at the ends): Adam moves an embedding row by ~lr per coordinate and step, so copies of "=" stay within ~0.5
    # of each other over a whole run and the trained model ignored its budget (tried first: identical outputs at
    # every b); an ordinal offset the network can read from step 0 fixes that, at the price of a slightly perturbed
    # start (the rows B<b> near b = 4 are closest to the base model)
    g = torch.Generator().manual_seed(1234)
    v = torch.randn(c.d_model, generator=g)
    v = 4.0 * v / v.norm()
    eq = base.tok.weight.detach()[EQ]
    new = eq.expand(len(task.budget_vocab) - c.vocab_size, -1).clone()
    new[task.budget0 - c.vocab_size:] += torch.tensor([(b - 4) / 4 for b in task.budgets])[:, None] * v.to(new.device)
    return grow_vocab(base, len(task.budget_vocab), new)


def steps_of(parsed: dict) -> int:
    """Chain steps written: the running sums before "A" (0 for a direct answer or no format)."""
    return len(parsed["chain"])


def l1_exact(correct: float, budget: int, steps: int, alpha: float = L1.alpha) -> float:
    """L1-Exact (Aggarwal & Welleck 2025, eq. 1): r = c - alpha |b - n|."""
    return correct - alpha * abs(budget - steps)


def l1_max(correct: float, budget: int, steps: int, alpha: float = L1.alpha, delta: float = L1.delta) -> float:
    """L1-Max (eq. 3): r = c * clip(alpha (b - n) + delta, 0, 1): a right answer within budget pays, more so the
    more budget it leaves; one over budget by delta / alpha steps or more pays nothing."""
    return correct * min(1.0, max(0.0, alpha * (budget - steps) + delta))


def l1_reward(kind: str, correct: float, budget: int, steps: int, alpha: float, delta: float) -> float:
    """L1-Exact's reward (kind "exact") or L1-Max's (kind "max")."""
    return l1_exact(correct, budget, steps, alpha) if kind == "exact" else l1_max(correct, budget, steps, alpha, delta)


@dataclass(frozen=True)
class BudgetProblem(Problem):
    """A problem carrying the budget its prompt asks for (rl.train's problem_fn / prompt_fn / reward_fn see the
    problem only, so the budget rides along), and which reward its prompt asks for (L1's recipe mixes them)."""
    budget: int = 0
    kind: str = "exact"


def with_budget(p: Problem, budget: int, kind: str = "exact") -> BudgetProblem:
    return BudgetProblem(p.task, p.k, p.x, p.knobs, budget, kind)


def draw_problem(task: str | Task = "digits") -> Callable:
    """draw(rng, k): a train-part problem of size k and a budget drawn uniformly from the task's budgets, per prompt
    as in L1."""
    task = as_task(task)

    def draw(rng: random.Random, k: int) -> BudgetProblem:
        p = task.train_problem(rng, k)
        return with_budget(p, rng.choice(task.budgets))
    return draw


def reward_fn(kind: str, alpha: float, delta: float, log: dict | None = None) -> Callable:
    """(problem, parsed) -> L1 reward (kind "mixed": the reward each problem's prompt asks for); also adds the sample
    to `log` (budget -> running sums) when given."""
    def r(d: BudgetProblem, p: dict) -> float:
        c = float(tasks.task_of(d).correct(d, p))
        n, b = steps_of(p), d.budget
        if log is not None:
            s = log.setdefault(b, np.zeros(5))
            s += (1, n <= b, abs(n - b), c, tokens_used(p))
        return l1_reward(d.kind if kind == "mixed" else kind, c, b, n, alpha, delta)
    return r


def annotated_output(p: Problem, budget: int) -> list[str]:
    """The SFT warm start's target: the longest fixed format whose chain fits the budget (T, else S, else A)."""
    fmt = "full" if budget >= p.k else "short" if budget >= len(chain_steps(p.k, "short")) else "direct"
    return tasks.task_of(p).solution(p, fmt)


def sft_warm_start(model: GPT, steps: int, lr: float, seed: int, batch: int = 64, draw: Callable | None = None,
                   task: str | Task = "digits") -> list[dict]:
    """Supervised fine-tuning on budget prompts with annotated outputs (train.train_on_batches: warmup + cosine);
    `draw(rng, k)` draws each problem and its budget (default: draw_problem(task))."""
    task = as_task(task)
    draw = draw or draw_problem(task)
    rng = random.Random(hashed_seed("budget", seed, "sft"))

    def get_batch(step):
        seq = np.full((batch, task.max_len), PAD, dtype=np.int64)
        for i in range(batch):
            p = draw(rng, rng.randint(task.k_min, task.k_max))
            ids = task.budget_prompt_ids(p, p.budget) + [task.id[w] for w in annotated_output(p, p.budget)]
            seq[i, :len(ids)] = ids
        inp, tgt = torch.from_numpy(seq[:, :-1].copy()), torch.from_numpy(seq[:, 1:].copy())
        tgt[:, :task.prompt_len - 1] = IGNORE          # targets from "=" on (the format token is learned)
        tgt[tgt == PAD] = IGNORE
        return inp, tgt
    return train_on_batches(model, get_batch, steps, lr=lr, warmup=max(1, steps // 10), log=None)


def grpo_config(steps: int, seed: int, prompts_per_step: int, num_generations: int, learning_rate: float,
                beta: float, task: str = "digits") -> RLConfig:
    """GRPO's settings for a budget model's RL stage (rl.train logs nothing: the budget log is kept here)."""
    return RLConfig.preset("grpo", steps=steps, prompts_per_step=prompts_per_step, num_generations=num_generations,
                           learning_rate=learning_rate, beta=beta, seed=seed, log_every=0, task=task)


def train_variant(base: GPT, variant: str, seed: int, *, steps: int = 100,
                  prompts_per_step: int = L1.prompts_per_step, num_generations: int = L1.num_generations,
                  learning_rate: float = L1.learning_rate, beta: float = L1.beta, alpha: float = L1.alpha,
                  delta: float = L1.delta, sft_steps: int = 300, sft_learning_rate: float = L1.sft_learning_rate,
                  log_every: int = 10, progress: bool = False, task: str | Task = "digits") -> dict:
    """One budget model: (SFT warm start of sft_steps when the variant ends in "+sft",) GRPO for `steps` with the
    variant's L1 reward ("exact" or "max"), a budget drawn per prompt; returns the model, the per-budget training
    log (step 0: greedy before RL, then one record per log_every GRPO steps), the GRPO rewards and the seconds
    spent (SFT and RL, without evaluation)."""
    task = as_task(task)
    kind = variant.split("+")[0]
    t0 = time.perf_counter()
    policy = budget_model(base, task)
    sft = []
    if variant.endswith("+sft") and sft_steps:
        sft = sft_warm_start(policy, sft_steps, sft_learning_rate, seed, task=task)
    t_sft = time.perf_counter() - t0
    ref = copy.deepcopy(policy) if beta > 0 else None
    window: dict[int, np.ndarray] = {}
    logs: list[dict] = [{"step": 0, "by_budget": quick_adherence(policy, seed, task=task)}]

    def flush(rec, model):                # every log_every steps: the window's per-budget logs
        logs.append({"step": rec["step"], "by_budget": {b: cell(s) for b, s in sorted(window.items())}})
        window.clear()
    rcfg = grpo_config(steps, seed, prompts_per_step, num_generations, learning_rate, beta, task.spec)
    hist = train(policy, ref, rcfg, reward_fn=reward_fn(kind, alpha, delta, window), log=None,
                 progress=progress, callback=every_n_steps(log_every, flush), problem_fn=draw_problem(task),
                 prompt_fn=lambda d: task.budget_prompt_ids(d, d.budget))
    return {"model": policy, "logs": logs, "seconds": time.perf_counter() - t0, "sft_seconds": t_sft,
            "sft_loss": sft[-1]["loss"] if sft else None, "reward": [h.get("reward") for h in hist]}


def cell(s: np.ndarray) -> dict:
    """Running sums (n, within, |n - b|, correct, tokens) -> shares and means."""
    n = max(1.0, s[0])
    return {"n": int(s[0]), "within": s[1] / n, "abs_err": s[2] / n, "acc": s[3] / n, "tokens": s[4] / n}


def quick_adherence(model: GPT, seed: int, n: int = 8, task: str | Task = "digits") -> dict:
    """Greedy adherence per budget on a few problems per k from the val part (the training log's step 0)."""
    task = as_task(task)
    probs = problems_per_k(n, seed=hashed_seed("budget", seed, "adherence"), split="val", task=task)
    out = {}
    for b in task.budgets:
        s = np.zeros(5)
        for d, o in zip(probs, generate(model, [task.budget_prompt_ids(d, b) for d in probs])):
            p = task.parse(o)
            s += (1, steps_of(p) <= b, abs(steps_of(p) - b), task.correct(d, p), tokens_used(p))
        out[b] = cell(s)
    return out


# ---------------------------------------------------------------------------------------------------------------
# L1's own recipe (Aggarwal & Welleck 2025, section 3 and cmu-l3/l1's scripts): L1-Exact first, from a policy that
# already writes several lengths (here the SFT warm start: A, S or T by budget); L1-Max from the Exact checkpoint, on
# a 50/50 mix of Exact and Max prompts told apart by their tokens (B<b>, M<b>); budgets drawn from what a chain can
# reach (0..k steps for a problem of size k). Whether there is anything to learn is checked before each RL stage
# (`best_policies`).

def l1_model(model: GPT, task: str | Task = "digits") -> GPT:
    """A budget model with the task's L1 vocabulary: each M<b> embedding is B<b>'s plus one fixed random offset of
    norm 4 (copies alone would stay too close to be told apart, as budget_model's comment says of B<b>), its output
    row a copy of <pad>'s (never written)."""
    task = as_task(task)
    c = model.cfg
    if c.vocab_size != len(task.budget_vocab):
        raise ValueError(f"l1_model needs a budget model (vocabulary {len(task.budget_vocab)}), got {c.vocab_size}")
    u = torch.randn(c.d_model, generator=torch.Generator().manual_seed(4321))
    b_rows = model.tok.weight.detach()[task.budget0:task.budget0 + len(task.budgets)]
    return grow_vocab(model, len(task.l1_vocab), b_rows + (4.0 * u / u.norm()).to(b_rows.device))


def draw_reachable(kinds: tuple[str, ...] = ("exact",), task: str | Task = "digits") -> Callable:
    """draw(rng, k): a train-part problem of size k, a budget uniform in 0..k (a chain writes at most k states) and a
    prompt kind uniform over `kinds`."""
    task = as_task(task)

    def draw(rng: random.Random, k: int) -> BudgetProblem:
        p = task.train_problem(rng, k)
        budget = rng.randint(0, k)
        return with_budget(p, budget, rng.choice(kinds))
    return draw


def prompt_of(kind: str, p: Problem, budget: int) -> list[int]:
    """The prompt of each kind of L1 budget: B<b> ("exact": "exactly b steps") or M<b> ("max": "at most b")."""
    task = tasks.task_of(p)
    return task.budget_prompt_ids(p, budget) if kind == "exact" else task.max_budget_prompt_ids(p, budget)


def recipe_prompt(d: BudgetProblem) -> list[int]:
    return prompt_of(d.kind, d, d.budget)


def train_recipe(base: GPT, seed: int, *, exact_steps: int = 100, max_steps: int = 100,
                 prompts_per_step: int = L1.prompts_per_step, num_generations: int = L1.num_generations,
                 learning_rate: float = L1.learning_rate, beta: float = L1.beta, alpha: float = L1.alpha,
                 delta: float = L1.delta, sft_steps: int = 300, sft_learning_rate: float = L1.sft_learning_rate,
                 progress: bool = False, task: str | Task = "digits") -> dict:
    """SFT warm start (reachable budgets), L1-Exact GRPO for exact_steps, then L1-Max GRPO from the Exact
    checkpoint on mixed prompts for max_steps (a stage of 0 steps leaves its model as it starts). Returns the three
    models and the seconds."""
    task = as_task(task)
    t0 = time.perf_counter()
    policy = budget_model(base, task)
    sft_warm_start(policy, sft_steps, sft_learning_rate, seed, draw=draw_reachable(task=task), task=task)
    start = copy.deepcopy(policy)

    def grpo(model, steps, kinds, reward, run_seed):     # 0 steps: the model as it is
        if not steps:
            return
        rcfg = grpo_config(steps, run_seed, prompts_per_step, num_generations, learning_rate, beta, task.spec)
        train(model, copy.deepcopy(model) if beta > 0 else None, rcfg, log=None, progress=progress,
              reward_fn=reward_fn(reward, alpha, delta), problem_fn=draw_reachable(kinds, task),
              prompt_fn=recipe_prompt)
    grpo(policy, exact_steps, ("exact",), "exact", seed)
    exact = copy.deepcopy(policy)
    mixed = l1_model(policy, task)
    grpo(mixed, max_steps, ("exact", "max"), "mixed", hashed_seed("budget", seed, "max"))
    return {"start": start, "exact": exact, "max": mixed, "seconds": time.perf_counter() - t0}


def eval_recipe(model: GPT, problems: list[Problem], kind: str, alpha: float, delta: float) -> list[list[dict]]:
    """Greedy on `kind` prompts ("exact": B<b>, "max": M<b>) at every budget: [b][k - k_min] -> mean accuracy,
    chain steps and L1-Exact and L1-Max rewards (every k must be among the problems)."""
    task = tasks.of(problems)
    out = []
    for b in task.budgets:
        by_k: dict[int, list] = {}
        for d, o in zip(problems, generate(model, [prompt_of(kind, d, b) for d in problems])):
            p = task.parse(o)
            c, n = float(task.correct(d, p)), steps_of(p)
            by_k.setdefault(d.k, []).append((c, n, l1_exact(c, b, n, alpha), l1_max(c, b, n, alpha, delta)))
        out.append([dict(zip(("acc", "steps", "exact_r", "max_r"), np.mean(by_k[k], 0).tolist()))
                    for k in task.ks()])
    return out


def best_policies(options: list[list[tuple[float, float]]], kind: str, alpha: float, delta: float,
                  reachable: bool = True, task: str | Task = "digits") -> dict:
    """The expected L1 reward of the best budget-blind policy (one option per k, whatever the budget) and of the
    best budget-aware one (an option per k and budget), budgets uniform over 0..k (reachable) or all the task's.
    options[i]: the (accuracy, chain steps) a policy can choose from at k = k_min + i; an option's reward at budget b
    is taken at its mean steps (exact for a policy whose steps do not vary within a cell)."""
    task = as_task(task)
    blind, aware = [], []
    for i, opts in enumerate(options):
        bs = range(task.k_min + i + 1) if reachable else task.budgets
        r = np.array([[l1_reward(kind, a, b, n, alpha, delta) for b in bs] for a, n in opts])  # (options, budgets)
        blind.append(r.mean(1).max())
        aware.append(r.max(0).mean())
    return {"blind": float(np.mean(blind)), "aware": float(np.mean(aware))}


# ---------------------------------------------------------------------------------------------------------------
# Evaluation: every (budget, k) cell, for budget models, s1 forcing on the base model and the fixed formats.

def tokens_used(p: dict) -> int:
    """Tokens up to the answer and a closing </s> (chain steps + 3 + the answer's words, or 2 + the answer's words for
    a direct answer: digits' 4 and 3): s1 stops generating at the answer, so what a cut chain writes after it (the
    base model, forced to "A" mid-chain, often goes on) is not counted; the whole output when no answer was read."""
    if p["answer"] is None:
        return p["length"]
    return (1 if p["fmt"] == "direct" else len(p["chain"]) + 2) + p["answer_len"] + 1


def score(problems: list[Problem], outs: list[list[int]], b: int | None, keep_examples: int = 0) -> dict:
    """Per-k cells {acc, tokens, steps, within, abs_err, strides} for outputs at budget b (None: no budget)."""
    task = tasks.of(problems)
    by_k: dict[int, list] = {}
    for d, o in zip(problems, outs):
        by_k.setdefault(d.k, []).append((d, o, task.parse(o)))
    res = {}
    for k, rows in sorted(by_k.items()):
        n = len(rows)
        steps = [steps_of(p) for _, _, p in rows]
        labels = [classify_chain(d, p["chain"]) for d, _, p in rows]
        groups: dict[str, int] = {}
        for lab in labels:
            groups[stride_group(lab)] = groups.get(stride_group(lab), 0) + 1
        c = {"acc": sum(task.correct(d, p) for d, _, p in rows) / n,
             "tokens": sum(tokens_used(p) for _, _, p in rows) / n, "steps": sum(steps) / n,
             "strides": {g: v / n for g, v in groups.items()},
             "stride_labels": {lab: labels.count(lab) / n for lab in sorted(set(labels))}}
        if b is not None:
            c["within"] = sum(s <= b for s in steps) / n
            c["abs_err"] = sum(abs(s - b) for s in steps) / n
            c["acc_within"] = sum(task.correct(d, p) and s <= b for (d, _, p), s in zip(rows, steps)) / n
        if keep_examples:
            ex: dict[str, list] = {}
            for (d, o, p), lab in zip(rows, labels):
                g = stride_group(lab)
                if len(ex.setdefault(g, [])) < keep_examples:
                    words = " ".join(task.vocab[t] if t < len(task.vocab) else "?" for t in o)
                    answer = " ".join(task.write_answer(d, task.answer(d)))
                    ex[g].append(f"{task.show(d)} = {words}  ({lab}; answer {answer})")
            c["examples"] = ex
        res[k] = c
    return res


def eval_budget_model(model: GPT, problems: list[Problem], n_examples: int = 0) -> dict:
    """{b: {k: cell}}: greedy, with each budget token."""
    task = tasks.of(problems)
    out = {}
    for b in task.budgets:
        outs = generate(model, [task.prompt_ids(d) for d in problems], budget=b, task=task)
        out[b] = score(problems, outs, b, n_examples)
    return out


def eval_forcing(base: GPT, problems: list[Problem], fmt: str = "T") -> dict:
    """s1 budget forcing on the base model: a `fmt` chain, "A" forced after b steps (tts.budget_hook), greedy."""
    task = tasks.of(problems)
    out = {}
    for b in task.budgets:
        toks, _ = sample_tree(base, [task.prompt_ids(d) for d in problems], 1, None, 0.0, force=[fmt],
                              logit_hook=budget_hook(task, max_chain=b))
        out[b] = score(problems, toks.tolist(), b)
    return out


def eval_fixed(base: GPT, problems: list[Problem]) -> dict:
    """The fixed formats A / S / T on the base model (forced, greedy), no budget."""
    task = tasks.of(problems)
    return {f: score(problems, generate(base, [task.prompt_ids(d) for d in problems], force=[f]), None) for f in "AST"}


def eval_baselines(base: GPT, problems: list[Problem]) -> dict:
    """s1 forcing, the fixed formats and the base model's free choice (blind to the budget) on the test problems."""
    task = tasks.of(problems)
    free = generate(base, [task.prompt_ids(d) for d in problems])
    return {"forcing": eval_forcing(base, problems), "forcing_S": eval_forcing(base, problems, "S"),
            "fixed": eval_fixed(base, problems),
            "base_free": {b: score(problems, free, b) for b in task.budgets}}
