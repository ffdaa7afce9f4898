"""The model card (README.md) of an exported model: what it is, its task, how it was trained, its accuracy."""
from __future__ import annotations

import json

from ..core.evaluate import eval_table, format_table
from ..core.model import GPT
from ..core.problems import TEST_SEED

VOCAB_NOTE = {18: "the task's 18 words", 28: "the task's words and STaR's ten hint tokens H0..H9",
              37: "the task's words, the hint tokens and the budget tokens B0..B8 (L1-Exact's \"think for b steps\")",
              46: "the task's words, the hint tokens and the budget tokens B0..B8 and M0..M8 (L1-Exact and L1-Max)"}


def model_card(model: GPT, name: str, source: str, training: dict | None = None, n: int = 200) -> str:
    """README.md for an exported model. source says where it came from in a sentence; training is its recipe or
    checkpoint metadata (shown as JSON); n > 0 adds the greedy accuracy table on n test problems per k."""
    c = model.cfg
    params = sum(p.numel() for p in model.parameters())
    lines = ["---", "library_name: transformers", "pipeline_tag: text-generation",
             "tags: [reasonlab, gpt2, arithmetic, chain-of-thought]", "---", "", f"# {name}", "",
             f"A {params:,}-parameter GPT-2 (d = {c.d_model}, {c.n_layers} layers, {c.n_heads} heads, {c.max_len} "
             f"positions; vocabulary: {VOCAB_NOTE.get(c.vocab_size, f'{c.vocab_size} words')}) from reasonlab, a "
             "laptop-scale lab for reasoning models. It is GPT-2's architecture with exact GELU and an untied head "
             "without bias, so `GPT2LMHeadModel` loads it; the tokenizer is word-level.", "",
             "## Task", "",
             "The sum of k digits mod 10 (k = 2..8). After the prompt the model picks a format and writes:", "",
             "```", "prompt                      output", "<s> 3 5 9 2 7 _ _ _ =       A 6 </s>                 direct",
             "<s> 3 5 9 2 7 _ _ _ =       S 8 9 6 A 6 </s>         short chain: running sum every two digits",
             "<s> 3 5 9 2 7 _ _ _ =       T 3 8 7 9 6 A 6 </s>     full chain: running sum after every digit", "```",
             "", "## Use", "", "```python", "from transformers import AutoModelForCausalLM, AutoTokenizer",
             "tok = AutoTokenizer.from_pretrained(path)", "model = AutoModelForCausalLM.from_pretrained(path)",
             'ids = tok("<s> 3 5 9 2 7 _ _ _ =", return_tensors="pt").input_ids',
             "out = model.generate(ids, max_new_tokens=14)   # greedy, stops at </s>",
             "print(tok.decode(out[0, ids.shape[1]:]))", "```", "",
             "`reasonlab import hf PATH` brings a copy trained elsewhere back into the lab (`reasonlab eval "
             "--checkpoint`).", "", "## Training", "", source]
    if training:
        text = json.dumps(training, sort_keys=True)
        lines += ["", "```json", text if len(text) <= 3000 else text[:3000] + " ...", "```"]
    if n > 0:
        table = format_table(eval_table(model, n, seed=TEST_SEED))
        lines += ["", "## Accuracy", "",
                  f"Greedy, {n} problems per k (the lab's test draw, seed {TEST_SEED}); free: the model picks the "
                  "format; A, S, T: the format token forced.", "", "```", table, "```"]
    return "\n".join(lines) + "\n"
