"""A task as a dataset: the lab's disjoint train / validation / test parts (`Task.draw`) as rows for TRL or verl.

TRL style: one row per problem with
    prompt   the prompt as words, "<s> 3 5 9 2 7 _ _ _ =" (the tokenizer adds nothing: it has no post-processor)
    task     the task's spec ("digits", "compose:n_f=4")
    problem  the problem as JSON (`Problem.to_json`: task, k, x, knobs), which the reward functions read
    digits   (the digits task only, as before tasks were named) the problem's digits
    k, answer
    direct, short, full   the right output in each format ("A 6 </s>", "S 8 9 6 A 6 </s>", ...)
    budget   (with budget="exact" or "max") the chain steps the prompt's budget token asks for, drawn uniformly
verl style (verl's RL dataset layout, docs "Prepare Data for Post-Training"): data_source, prompt as chat messages
(the exported tokenizer's chat template passes the text through), ability, reward_model {style, ground_truth: the
answer as the model writes it} and extra_info {split, index, task, problem[, digits], k[, budget]}, which
reasonlab.hf.rewards.compute_score reads.

The training part draws n problems per k with repeats (every k equally often, as the lab's RL loop draws them;
digits' k = 2 has only 50 training problems); validation and test hold distinct problems, at most n per k.
"""
from __future__ import annotations

import json
import random

from ..core.problems import problems_per_k
from ..tasks import FMT_NAMES, Problem, Task, get

SPLITS = {"train": "train", "validation": "val", "test": "test"}
"""Hugging Face's split names -> the lab's parts."""
DATA_SOURCE = "reasonlab/sum-mod-10"
"""verl's data_source of the digits task's rows (the name it had before tasks were named); another task's is
reasonlab/<its spec>."""
BUDGETS = (None, "exact", "max")


def as_task(task: str | Task) -> Task:
    return task if isinstance(task, Task) else get(task)


def data_source(task: str | Task) -> str:
    spec = as_task(task).spec
    return DATA_SOURCE if spec == "digits" else f"reasonlab/{spec}"


def words(ids: list[int], task: str | Task = "digits") -> str:
    """Token ids as the task's words (its largest vocabulary), space-separated."""
    vocab = as_task(task).l1_vocab
    return " ".join(vocab[i] for i in ids)


def prompt_of(task: Task, p: Problem, budget: str | None, b: int | None) -> list[int]:
    """The prompt's ids: plain, or with the budget token B<b> (exact) or M<b> (max) in place of "="."""
    if budget == "exact":
        return task.budget_prompt_ids(p, b)
    if budget == "max":
        return task.max_budget_prompt_ids(p, b)
    return task.prompt_ids(p)


def problem_json(p: Problem) -> str:
    return json.dumps(p.to_json(), sort_keys=True)


def rows(split: str, n: int, seed: int = 0, style: str = "trl", budget: str | None = None,
         k_range: tuple[int, int] | None = None, task: str | Task = "digits") -> list[dict]:
    """The rows of one split (train, validation or test) of `task`: n problems per k in k_range (None: the task's
    range; see the module docstring)."""
    if split not in SPLITS or style not in ("trl", "verl") or budget not in BUDGETS:
        raise ValueError(f"rows: split in {tuple(SPLITS)}, style trl or verl, budget None, 'exact' or 'max'; got "
                         f"{split!r}, {style!r}, {budget!r}")
    task = as_task(task)
    problems = problems_per_k(n, seed, task.ks(k_range), SPLITS[split], repeat=split == "train", task=task)
    rng = random.Random(f"budgets {seed} {split}")
    legacy = task.name == "digits"          # its rows keep their digits column, as before tasks were named
    out = []
    for i, p in enumerate(problems):
        b = rng.choice(task.budgets) if budget else None
        prompt = words(prompt_of(task, p, budget, b), task)
        answer = task.answer(p)
        extra = {"digits": list(p.x)} if legacy else {}
        if style == "trl":
            row = {"prompt": prompt, "task": task.spec, "problem": problem_json(p), **extra, "k": p.k,
                   "answer": answer, **{f: " ".join(task.solution(p, f)) for f in FMT_NAMES}}
            if budget:
                row["budget"] = b
        else:
            info = {"split": split, "index": i, "task": task.spec, "problem": problem_json(p), **extra, "k": p.k,
                    **({"budget": b} if budget else {})}
            row = {"data_source": data_source(task), "prompt": [{"role": "user", "content": prompt}],
                   "ability": "arithmetic" if legacy else task.name,
                   "reward_model": {"style": "rule", "ground_truth": " ".join(task.write_answer(p, answer))},
                   "extra_info": info}
        out.append(row)
    return out


def dataset(style: str = "trl", n_train: int = 1000, n_test: int = 100, seed: int = 0, budget: str | None = None,
            k_range: tuple[int, int] | None = None, task: str | Task = "digits"):
    """A datasets.DatasetDict of `task` with train (n_train per k), validation and test (n_test per k) in the given
    style, for k in k_range (RLConfig.k_range; None: the task's range). Needs the optional extra (`pip install
    'reasonlab[hf]'`)."""
    from datasets import Dataset, DatasetDict  # the optional extra, imported only here
    parts = {s: rows(s, n_train if s == "train" else n_test, seed, style, budget, k_range, task) for s in SPLITS}
    return DatasetDict({s: Dataset.from_list(r) for s, r in parts.items()})
