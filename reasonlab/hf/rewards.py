"""The lab's rewards in the signatures of the RL libraries people use: TRL, verl and OpenRLHF.

Every adapter reads the problem from the row (the `problem` column's JSON, `Problem.to_json`; the digits task's rows
may give their `digits` instead), parses what the model wrote with that problem's task (Task.parse) and scores it
with the lab's own functions (core.rewards, Task.check_chain, methods.budget's L1 rewards), so a reward here is the
reward the lab's RL loop gives, for any task.

    rule       R1-Zero's rule: 1 for the right answer + 0.1 for a complete template (core.rewards.rule_reward)
    correct    1 for the right answer
    template   1 when the whole template holds (format token, chain, "A", the answer, </s>)
    chain      the process check: 1 when every chain state is right, 0 when one is not or the template is
               broken, None for a direct answer (nothing to check; TRL leaves such a completion out of that reward)
    l1_exact   L1-Exact, c - alpha |b - n|, with the row's budget b (Aggarwal & Welleck 2025, eq. 1)
    l1_max     L1-Max, c * clip(alpha (b - n) + delta, 0, 1) (eq. 3)

TRL (trl 1.16.0, GRPOTrainer._calculate_rewards) calls a reward function with prompts, completions (text),
completion_ids and every dataset column but prompt, as keyword lists. Its completions are decoded with special
tokens skipped, so </s> is gone from the text (trl#2897): the functions here read completion_ids, which keep the
first </s>; the `*_text` variants read the text and take an output without </s> as ended there. For digits, at
max_completion_length <= 14 (its max_out) no output can be cut off right after a complete answer, so both agree on
what TRL samples (tested); elsewhere prefer the ids.
verl calls compute_score(data_source, solution_str, ground_truth, extra_info) on text decoded the same way, the
problem in extra_info; OpenRLHF calls reward_func(queries, prompts, labels) with queries = prompt + response text,
the problem read from the prompt by the task the reward function was made for (openrlhf_reward(kind, task)).
"""
from __future__ import annotations

import json
import random
from typing import Callable

import torch

from ..core import rewards as core
from ..methods.budget import l1_reward, steps_of
from ..tasks import Problem, Task, get, problems_of, task_of

KINDS = ("rule", "correct", "template", "chain", "l1_exact", "l1_max")
EOS_WORD = "</s>"
_WORD_IDS: dict[str, dict[str, int]] = {}


def as_task(task: str | Task) -> Task:
    return task if isinstance(task, Task) else get(task)


def word_ids(task: str | Task = "digits") -> dict[str, int]:
    """word -> id over the task's largest vocabulary (its words, hints, budget tokens)."""
    t = as_task(task)
    if t.spec not in _WORD_IDS:
        _WORD_IDS[t.spec] = {w: i for i, w in enumerate(t.l1_vocab)}
    return _WORD_IDS[t.spec]


def as_problem(x) -> Problem:
    """A problem as a row gives it: a Problem, its JSON text or the dict `Problem.to_json` writes."""
    if isinstance(x, Problem):
        return x
    return Problem.from_json(json.loads(x) if isinstance(x, (str, bytes)) else x)


def row_problems(problem, digits, who: str) -> list[Problem]:
    """The rows' problems: the `problem` column, or the digits task's `digits` column."""
    if problem is not None:
        return [as_problem(x) for x in problem]
    if digits is not None:
        return problems_of([[int(d) for d in x] for x in digits])
    raise ValueError(f"{who}: the dataset has no `problem` column (nor the digits task's `digits`): use "
                     "reasonlab.hf.dataset()")


PARAMS = {"format_bonus", "alpha", "delta"}
"""the rewards' parameters (score's keywords): the rule reward's format bonus, L1's alpha and delta"""


def score(kind: str, problem: Problem, parsed: dict, budget: int | None = None, format_bonus: float = 0.1,
          alpha: float = 0.25, delta: float = 0.5) -> float | None:
    """One output's reward of this kind (see the module docstring); the one place a kind is dispatched."""
    if kind == "rule":
        return core.rule_reward(problem, parsed, format_bonus)
    if kind == "correct":
        return core.correct(problem, parsed)
    if kind == "template":
        return float(parsed["ok"])
    if kind == "chain":
        ok = task_of(problem).check_chain(problem, parsed)
        return None if ok is None else float(ok)
    if kind in ("l1_exact", "l1_max"):
        if budget is None:
            raise ValueError(f"the {kind} reward needs each row's budget (a `budget` column: dataset(budget=...))")
        return l1_reward(kind[3:], core.correct(problem, parsed), int(budget), steps_of(parsed), alpha, delta)
    raise ValueError(f"unknown reward {kind!r}: choose from {', '.join(KINDS)}")


def parse_text(text: str, task: str | Task = "digits") -> dict:
    """Task.parse of an output given as words ("S 8 9 6 A 6"), which ends at its </s> or, without one, at its last
    word (decoders that skip special tokens drop it). <pad> and <s> words are skipped; unknown words read as such."""
    t = as_task(task)
    ids_of = word_ids(t)
    words = [w for w in text.split() if w not in ("<pad>", "<s>")]
    ids = [ids_of.get(w, -1) for w in words]
    return t.parse(ids if EOS_WORD in words else ids + [ids_of[EOS_WORD]])


def read_prompt(text: str, task: str | Task = "digits") -> tuple[Problem, int | None]:
    """The problem (Task.read_prompt) and the budget (None without a budget token) of a prompt of `task` written as
    words; ValueError if it is not one of the task's prompts."""
    t = as_task(task)
    words = text.split()
    if words[:1] == ["<s>"] or (words[:1] and words[0] in t.hint_vocab[t.hint0:]):
        words = words[1:]
    if len(words) != t.slots + 1:
        raise ValueError(f"not a prompt of the {t.name} task: {text!r:.60}")
    last = words[-1]
    budgets = {**dict(zip(t.budget_vocab[t.budget0:], t.budgets)), **dict(zip(t.l1_vocab[t.max_budget0:], t.budgets))}
    if last != "=" and last not in budgets:
        raise ValueError(f"not a prompt of the {t.name} task (it ends with {last!r:.12}): {text!r:.60}")
    return t.read_prompt(words[:-1]), budgets.get(last)


def right_answer(p: Problem, label) -> bool:
    """Whether a label (a ground truth) is the problem's answer: as the model writes it, or as a number."""
    task = task_of(p)
    answer = task.answer(p)
    return str(label).strip() in (" ".join(task.write_answer(p, answer)), str(answer))


def check_kind(kind: str, params: dict, task: str | Task = "digits") -> None:
    """Score one output of a drawn problem: an unknown kind or parameter fails when the function is made, not
    mid-training."""
    t = as_task(task)
    score(kind, t.train_problem(random.Random(0), t.k_min), t.parse([]), budget=0, **params)


# ---------------------------------------------------------------------------------------------------------------
# TRL: f(prompts, completions, completion_ids, **columns) -> list[float | None]

def trl_reward(kind: str, text: bool = False, **params) -> Callable:
    """A TRL reward function of this kind, reading completion_ids (text=False) or the completions' text. It needs
    the dataset's `problem` column (the digits task's rows may give `digits` instead; `budget` for L1's rewards);
    each row is parsed and scored by its problem's task. params: format_bonus, alpha, delta."""
    check_kind(kind, params)

    def reward(prompts=None, completions=None, completion_ids=None, problem=None, digits=None, budget=None,
               **columns):
        probs = row_problems(problem, digits, name)
        if text:
            outs = [parse_text(c, task_of(p)) for c, p in zip(completions, probs)]
        else:
            outs = [task_of(p).parse(list(c)) for c, p in zip(completion_ids, probs)]
        budgets = budget if budget is not None else [None] * len(outs)
        return [score(kind, p, o, b, **params) for p, o, b in zip(probs, outs, budgets)]
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
    """verl's custom reward function (`custom_reward_function.path` = `reasonlab/hf/verl_reward.py`, which verl can
    load as a lone file, `name` = compute_score;
    `reward_kwargs` may set reward and its params). The problem comes from extra_info (our parquet rows carry its
    JSON, `problem`; the digits task's rows also its `digits`), and the output is parsed by its task; ground_truth
    is checked against it. A chain reward of a direct answer is 0 here (verl wants a number)."""
    unknown = sorted(set(params) - PARAMS)
    if unknown:                                 # a typo in reward_kwargs: name it, not a TypeError deep inside
        raise ValueError(f"compute_score: unknown reward_kwargs {', '.join(unknown)}: choose from reward, "
                         f"{', '.join(sorted(PARAMS))}")
    info = extra_info or {}
    if info.get("problem") is None and info.get("digits") is None:
        raise ValueError("compute_score needs extra_info['problem'] (rows from `reasonlab export dataset --style "
                         "verl`)")
    p = row_problems(None if info.get("problem") is None else [info["problem"]],
                     None if info.get("digits") is None else [info["digits"]], "compute_score")[0]
    if not right_answer(p, ground_truth):
        raise ValueError(f"ground_truth {ground_truth!r} is not the answer of {task_of(p).show(p)!r}")
    value = score(reward, p, parse_text(solution_str, task_of(p)), info.get("budget"), **params)
    return 0.0 if value is None else float(value)


# ---------------------------------------------------------------------------------------------------------------
# OpenRLHF: reward_func(queries, prompts, labels, **kw) -> {"rewards", "scores", "extra_logs"}

def openrlhf_reward(kind: str = "rule", task: str | Task = "digits", **params) -> Callable:
    """An OpenRLHF reward function for `task` (`--remote_rm_url file.py`, where file.py holds `reward_func =
    openrlhf_reward()`, or openrlhf_reward("rule", "compose:n_f=4"); `--label_key answer`). Everything is read from
    the prompt (its problem, by the task's read_prompt, and its budget token) and the query's words after it; a
    label, when given, must be the prompt's answer. rewards feed the advantage; scores (correctness, 0/1) feed
    OpenRLHF's dynamic filtering; extra_logs holds per-sample correctness and template."""
    t = as_task(task)
    check_kind(kind, params, t)

    def reward_func(queries, prompts, labels=None, **kw):
        rewards, scores, templates = [], [], []
        for i, (query, prompt) in enumerate(zip(queries, prompts)):
            problem, budget = read_prompt(prompt, t)
            if labels is not None and labels[i] is not None and not right_answer(problem, labels[i]):
                raise ValueError(f"label {labels[i]!r} is not the answer of the prompt {prompt!r}")
            p = parse_text(response_words(query, prompt), t)
            value = score(kind, problem, p, budget, **params)
            rewards.append(0.0 if value is None else value)
            scores.append(core.correct(problem, p))
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
