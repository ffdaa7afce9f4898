"""The lab's rewards in the signatures of the RL libraries people use: TRL, verl and OpenRLHF.

Every adapter parses what the model wrote (task.parse) and scores it with the lab's own functions (core.rewards,
task.check_chain, methods.budget's L1 rewards), so a reward here is the reward the lab's RL loop gives.

    rule       R1-Zero's rule: 1 for the right answer + 0.1 for a complete template (core.rewards.rule_reward)
    correct    1 for the right answer
    template   1 when the whole template holds (format token, chain, "A", the answer, </s>)
    chain      the process check: 1 when every running sum is right, 0 when one is not or the template is
               broken, None for a direct answer (nothing to check; TRL leaves such a completion out of that reward)
    l1_exact   L1-Exact, c - alpha |b - n|, with the row's budget b (Aggarwal & Welleck 2025, eq. 1)
    l1_max     L1-Max, c * clip(alpha (b - n) + delta, 0, 1) (eq. 3)

TRL (trl 1.16.0, GRPOTrainer._calculate_rewards) calls a reward function with prompts, completions (text),
completion_ids and every dataset column but prompt, as keyword lists. Its completions are decoded with special
tokens skipped, so </s> is gone from the text (trl#2897): the functions here read completion_ids, which keep the
first </s>; the `*_text` variants read the text and take an output without </s> as ended there. At
max_completion_length <= 14 no output can be cut off right after a complete answer, so both agree on what TRL
samples (tested); elsewhere prefer the ids.
verl calls compute_score(data_source, solution_str, ground_truth, extra_info) on text decoded the same way;
OpenRLHF calls reward_func(queries, prompts, labels) with queries = prompt + response text.
"""
from __future__ import annotations

from typing import Callable

import torch

from ..core import rewards as core
from ..core.task import K_MAX, L1_VOCAB, check_chain, parse
from ..methods.budget import l1_reward, steps_of

KINDS = ("rule", "correct", "template", "chain", "l1_exact", "l1_max")
WORD_ID = {w: i for i, w in enumerate(L1_VOCAB)}
EOS_WORD = "</s>"


def score(kind: str, digits: list[int], parsed: dict, budget: int | None = None, format_bonus: float = 0.1,
          alpha: float = 0.25, delta: float = 0.5) -> float | None:
    """One output's reward of this kind (see the module docstring); the one place a kind is dispatched."""
    if kind == "rule":
        return core.rule_reward(digits, parsed, format_bonus)
    if kind == "correct":
        return core.correct(digits, parsed)
    if kind == "template":
        return float(parsed["ok"])
    if kind == "chain":
        ok = check_chain(digits, parsed)
        return None if ok is None else float(ok)
    if kind in ("l1_exact", "l1_max"):
        if budget is None:
            raise ValueError(f"the {kind} reward needs each row's budget (a `budget` column: dataset(budget=...))")
        return l1_reward(kind[3:], core.correct(digits, parsed), int(budget), steps_of(parsed), alpha, delta)
    raise ValueError(f"unknown reward {kind!r}: choose from {', '.join(KINDS)}")


def parse_text(text: str) -> dict:
    """parse() of an output given as words ("S 8 9 6 A 6"), which ends at its </s> or, without one, at its last
    word (decoders that skip special tokens drop it). <pad> and <s> words are skipped; unknown words read as such."""
    words = [w for w in text.split() if w not in ("<pad>", "<s>")]
    ids = [WORD_ID.get(w, -1) for w in words]
    return parse(ids if EOS_WORD in words else ids + [WORD_ID[EOS_WORD]])


def read_prompt(text: str) -> tuple[list[int], int | None]:
    """The digits and the budget (None without a budget token) of a prompt written as words; ValueError if it is
    not one of the lab's prompts."""
    words = text.split()
    if words[:1] == ["<s>"] or (words and words[0].startswith("H")):
        words = words[1:]
    if len(words) != K_MAX + 1 or not all(w.isdigit() or w == "_" for w in words[:-1]):
        raise ValueError(f"not a prompt of the task: {text!r:.60}")
    digits = [int(w) for w in words[:-1] if w != "_"]
    last = words[-1]
    budget = int(last[1:]) if last[:1] in ("B", "M") and last[1:].isdigit() else None
    if last != "=" and budget is None:
        raise ValueError(f"not a prompt of the task (it ends with {last!r:.12}): {text!r:.60}")
    return digits, budget


# ---------------------------------------------------------------------------------------------------------------
# TRL: f(prompts, completions, completion_ids, **columns) -> list[float | None]

def trl_reward(kind: str, text: bool = False, **params) -> Callable:
    """A TRL reward function of this kind, reading completion_ids (text=False) or the completions' text. It needs
    the dataset's `digits` column (and `budget` for L1's rewards); params: format_bonus, alpha, delta."""
    score(kind, [0, 0], parse([]), budget=0, **params)   # an unknown kind or parameter fails here, not mid-training

    def reward(prompts=None, completions=None, completion_ids=None, digits=None, budget=None, **columns):
        if digits is None:
            raise ValueError(f"{name}: the dataset has no `digits` column (use reasonlab.hf.dataset())")
        outs = [parse_text(c) for c in completions] if text else [parse(list(c)) for c in completion_ids]
        budgets = budget if budget is not None else [None] * len(outs)
        return [score(kind, d, p, b, **params) for d, p, b in zip(digits, outs, budgets)]
    name = f"{kind}_reward" + ("_text" if text else "")
    reward.__name__ = reward.__qualname__ = name    # TRL logs each reward under its function's name
    return reward


rule_reward = trl_reward("rule")
correct_reward = trl_reward("correct")
template_reward = trl_reward("template")
chain_reward = trl_reward("chain")
l1_exact_reward = trl_reward("l1_exact")
l1_max_reward = trl_reward("l1_max")
rule_reward_text = trl_reward("rule", text=True)
correct_reward_text = trl_reward("correct", text=True)
template_reward_text = trl_reward("template", text=True)
chain_reward_text = trl_reward("chain", text=True)
l1_exact_reward_text = trl_reward("l1_exact", text=True)
l1_max_reward_text = trl_reward("l1_max", text=True)


# ---------------------------------------------------------------------------------------------------------------
# verl: compute_score(data_source, solution_str, ground_truth, extra_info=None) -> float

def compute_score(data_source, solution_str: str, ground_truth, extra_info: dict | None = None, reward: str = "rule",
                  **params) -> float:
    """verl's custom reward function (`custom_reward_function.path` = this file's path, `name` = compute_score;
    `reward_kwargs` may set reward and its params). The problem's digits come from extra_info (our parquet rows
    carry them); ground_truth is checked against them. A chain reward of a direct answer is 0 here (verl wants a
    number)."""
    info = extra_info or {}
    if info.get("digits") is None:
        raise ValueError("compute_score needs extra_info['digits'] (rows from `reasonlab export dataset --style verl`)")
    digits = [int(d) for d in info["digits"]]
    if str(ground_truth) != str(sum(digits) % 10):
        raise ValueError(f"ground_truth {ground_truth!r} is not the answer of {digits}")
    value = score(reward, digits, parse_text(solution_str), info.get("budget"), **params)
    return 0.0 if value is None else float(value)


# ---------------------------------------------------------------------------------------------------------------
# OpenRLHF: reward_func(queries, prompts, labels, **kw) -> {"rewards", "scores", "extra_logs"}

def openrlhf_reward(kind: str = "rule", **params) -> Callable:
    """An OpenRLHF reward function (`--remote_rm_url file.py`, where file.py holds `reward_func = openrlhf_reward()`;
    `--label_key answer`). Everything is read from the prompt (its digits, its budget token) and the query's words
    after it; a label, when given, must be the prompt's answer. rewards feed the advantage; scores (correctness,
    0/1) feed OpenRLHF's dynamic filtering; extra_logs holds per-sample correctness and template."""
    score(kind, [0, 0], parse([]), budget=0, **params)

    def reward_func(queries, prompts, labels=None, **kw):
        rewards, scores, templates = [], [], []
        for i, (query, prompt) in enumerate(zip(queries, prompts)):
            digits, budget = read_prompt(prompt)
            if labels is not None and labels[i] is not None and str(labels[i]) != str(sum(digits) % 10):
                raise ValueError(f"label {labels[i]!r} is not the answer of the prompt {prompt!r}")
            p = parse_text(response_words(query, prompt))
            value = score(kind, digits, p, budget, **params)
            rewards.append(0.0 if value is None else value)
            scores.append(core.correct(digits, p))
            templates.append(float(p["ok"]))
        as_t = lambda xs: torch.tensor(xs, dtype=torch.float32)   # noqa: E731
        return {"rewards": as_t(rewards), "scores": as_t(scores),
                "extra_logs": {"correct": as_t(scores), "template": as_t(templates)}}
    reward_func.__name__ = f"{kind}_reward_func"
    return reward_func


def response_words(query: str, prompt: str) -> str:
    """The words of query after the prompt's (the query may have kept or dropped <s> and padding)."""
    q = [w for w in query.split() if w != "<pad>"]
    p = [w for w in prompt.split() if w != "<pad>"]
    for head in (p, [w for w in p if w != "<s>"]):
        if q[:len(head)] == head:
            return " ".join(q[len(head):])
    raise ValueError(f"query {query!r:.60} does not start with its prompt {prompt!r:.60}")


reward_func = openrlhf_reward("rule")
