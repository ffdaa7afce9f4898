"""The model card (README.md) of an exported model: what it is, its task, how it was trained, its accuracy."""
from __future__ import annotations

import json
import random

from ..core.evaluate import eval_table, format_table
from ..core.model import GPT
from ..core.problems import TEST_SEED
from ..tasks import FMT_NAMES, Task, get

FORMAT_NOTE = {"direct": "direct", "short": "short chain: the state after every second step and the last",
               "full": "full chain: the state after every step"}


def vocab_note(task: Task, size: int) -> str:
    """What a vocabulary of this size holds, in words (the task's layout: words, hints, budgets, L1's budgets)."""
    b, m = f"B0..B{task.budgets[-1]}", f"M0..M{task.budgets[-1]}"
    head = "the task's words, the hint tokens and" if task.n_hints else "the task's words and"
    notes = {len(task.l1_vocab): f"{head} the budget tokens {b} and {m} (L1-Exact and L1-Max)",
             len(task.budget_vocab): f"{head} the budget tokens {b} (L1-Exact's \"think for b steps\")",
             len(task.hint_vocab): f"the task's words and STaR's {task.n_hints} hint tokens H0..H{task.n_hints - 1}",
             len(task.vocab): f"the task's {len(task.vocab)} words"}       # later keys win where sizes agree
    return notes.get(size, f"{size} words")


def example(task: Task):
    """A problem to show: one of size k_min + 3 (at most k_max), drawn from a fixed seed."""
    k = min(task.k_max, task.k_min + 3)
    return task.problem(task.sample(random.Random(0), k), k)


def model_card(model: GPT, name: str, source: str, training: dict | None = None, n: int = 200,
               task: str | Task = "digits") -> str:
    """README.md for an exported model of `task`. source says where it came from in a sentence; training is its
    recipe or checkpoint metadata (shown as JSON); n > 0 adds the greedy accuracy table on n test problems per k."""
    task = task if isinstance(task, Task) else get(task)
    c = model.cfg
    params = sum(p.numel() for p in model.parameters())
    p = example(task)
    prompt = " ".join(task.vocab[i] for i in task.prompt_ids(p))
    outs = {f: " ".join(task.solution(p, f)) for f in FMT_NAMES}
    w1, w2 = max(len(prompt), len("prompt")) + 3, max(len(o) for o in outs.values()) + 3
    lines = ["---", "library_name: transformers", "pipeline_tag: text-generation",
             f"tags: [reasonlab, gpt2, chain-of-thought, {task.name}]", "---", "", f"# {name}", "",
             f"A {params:,}-parameter GPT-2 (d = {c.d_model}, {c.n_layers} layers, {c.n_heads} heads, {c.max_len} "
             f"positions; vocabulary: {vocab_note(task, c.vocab_size)}) from reasonlab, a "
             "laptop-scale lab for reasoning models. It is GPT-2's architecture with exact GELU and an untied head "
             "without bias, so `GPT2LMHeadModel` loads it; the tokenizer is word-level.", "",
             "## Task", "",
             f"{task.summary[:1].upper() + task.summary[1:]} (the reasonlab task `{task.spec}`, k = {task.k_min}.."
             f"{task.k_max}; config.json names it as `reasonlab_task`). After the prompt the model picks a format and "
             f"writes (here {task.show(p)}):", "",
             "```", f"{'prompt':<{w1}}output",
             *(f"{prompt:<{w1}}{outs[f]:<{w2}}{FORMAT_NOTE[f]}" for f in FMT_NAMES), "```",
             "", "## Use", "", "```python", "from transformers import AutoModelForCausalLM, AutoTokenizer",
             "tok = AutoTokenizer.from_pretrained(path)", "model = AutoModelForCausalLM.from_pretrained(path)",
             f'ids = tok("{prompt}", return_tensors="pt").input_ids',
             f"out = model.generate(ids, max_new_tokens={task.max_out})   # greedy, stops at </s>",
             "print(tok.decode(out[0, ids.shape[1]:]))", "```", "",
             "`reasonlab import hf PATH` brings a copy trained elsewhere back into the lab (`reasonlab eval "
             "--checkpoint`).", "", "## Training", "", source]
    if training:
        text = json.dumps(training, sort_keys=True)
        lines += ["", "```json", text if len(text) <= 3000 else text[:3000] + " ...", "```"]
    if n > 0:
        table = format_table(eval_table(model, n, seed=TEST_SEED, task=task))
        lines += ["", "## Accuracy", "",
                  f"Greedy, {n} problems per k (the lab's test draw, seed {TEST_SEED}); free: the model picks the "
                  "format; A, S, T: the format token forced.", "", "```", table, "```"]
    return "\n".join(lines) + "\n"
