"""The task as a dataset: the lab's disjoint train / validation / test parts (core.problems) as rows for TRL or verl.

TRL style: one row per problem with
    prompt   the prompt as words, "<s> 3 5 9 2 7 _ _ _ =" (the tokenizer adds nothing: it has no post-processor)
    digits, k, answer
    direct, short, full   the right output in each format ("A 6 </s>", "S 8 9 6 A 6 </s>", ...)
    budget   (with budget="exact" or "max") the chain steps the prompt's budget token asks for, drawn uniformly
verl style (verl's RL dataset layout, docs "Prepare Data for Post-Training"): data_source, prompt as chat messages
(the exported tokenizer's chat template passes the text through), ability, reward_model {style, ground_truth} and
extra_info {split, index, digits, k[, budget]}, which reasonlab.hf.rewards.compute_score reads.

The training part draws n problems per k with repeats (every k equally often, as the lab's RL loop draws them; k = 2
has only 50 training problems); validation and test hold distinct problems, at most n per k.
"""
from __future__ import annotations

import random

from ..core.problems import problems_per_k
from ..core.task import (
    BUDGETS,
    FMT_NAMES,
    K_MAX,
    K_MIN,
    L1_VOCAB,
    budget_prompt_ids,
    max_budget_prompt_ids,
    prompt_ids,
    solution,
)

SPLITS = {"train": "train", "validation": "val", "test": "test"}
"""Hugging Face's split names -> the lab's parts."""
DATA_SOURCE = "reasonlab/sum-mod-10"
PROMPTS = {None: prompt_ids, "exact": budget_prompt_ids, "max": max_budget_prompt_ids}


def words(ids: list[int]) -> str:
    return " ".join(L1_VOCAB[i] for i in ids)


def rows(split: str, n: int, seed: int = 0, style: str = "trl", budget: str | None = None,
         k_range: tuple[int, int] = (K_MIN, K_MAX)) -> list[dict]:
    """The rows of one split (train, validation or test): n problems per k in k_range (see the module docstring)."""
    if split not in SPLITS or style not in ("trl", "verl") or budget not in PROMPTS:
        raise ValueError(f"rows: split in {tuple(SPLITS)}, style trl or verl, budget None, 'exact' or 'max'; got "
                         f"{split!r}, {style!r}, {budget!r}")
    problems = problems_per_k(n, seed, range(k_range[0], k_range[1] + 1), SPLITS[split], repeat=split == "train")
    rng = random.Random(f"budgets {seed} {split}")
    out = []
    for i, d in enumerate(problems):
        b = rng.choice(BUDGETS) if budget else None
        prompt = words(PROMPTS[budget](d, b) if budget else prompt_ids(d))
        if style == "trl":
            row = {"prompt": prompt, "digits": d, "k": len(d), "answer": sum(d) % 10,
                   **{f: " ".join(solution(d, f)) for f in FMT_NAMES}}
            if budget:
                row["budget"] = b
        else:
            info = {"split": split, "index": i, "digits": d, "k": len(d), **({"budget": b} if budget else {})}
            row = {"data_source": DATA_SOURCE, "prompt": [{"role": "user", "content": prompt}],
                   "ability": "arithmetic", "reward_model": {"style": "rule", "ground_truth": str(sum(d) % 10)},
                   "extra_info": info}
        out.append(row)
    return out


def dataset(style: str = "trl", n_train: int = 1000, n_eval: int = 100, seed: int = 0, budget: str | None = None,
            k_range: tuple[int, int] = (K_MIN, K_MAX)):
    """A datasets.DatasetDict with train (n_train per k), validation and test (n_eval per k) in the given style, for
    k in k_range (RLConfig.k_range). Needs the optional extra (`pip install 'reasonlab[hf]'`)."""
    from datasets import Dataset, DatasetDict  # the optional extra, imported only here
    parts = {s: rows(s, n_train if s == "train" else n_eval, seed, style, budget, k_range) for s in SPLITS}
    return DatasetDict({s: Dataset.from_list(r) for s, r in parts.items()})

