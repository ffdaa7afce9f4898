"""transformers loads an export offline, without remote code, and computes what we compute: the logits (eager and
sdpa attention), greedy generation token for token, and the tokenizer both ways."""
import random

import pytest
import torch

from reasonlab import tasks
from reasonlab.core import fast
from reasonlab.core.problems import problems_per_k
from reasonlab.core.sampling import generate
from reasonlab.core.task import (
    BUDGETS,
    ID,
    L1_VOCAB,
    budget_prompt_ids,
    hint_prompt_ids,
    make_digits,
    max_budget_prompt_ids,
    prompt_ids,
    solution,
)
from reasonlab.hf.export import export_hf
from reasonlab.methods.budget import budget_model, l1_model
from reasonlab.tasks import FMT_NAMES
from reasonlab.train.sft import build_model

from .hfkit import need

transformers = need("transformers")
EOS = ID["</s>"]


def words(ids):
    return " ".join(L1_VOCAB[i] for i in ids)


def sequences(n: int, seed: int = 0) -> torch.Tensor:
    """n full sequences the lab writes (prompt + a right output in a random format), right-padded to 24."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        d = make_digits(rng, rng.randint(2, 8))
        s = prompt_ids(d) + [ID[w] for w in solution(d, rng.choice(FMT_NAMES))]
        rows.append(s + [ID["<pad>"]] * (24 - len(s)))
    return torch.tensor(rows)


@pytest.fixture(scope="module")
def hf_model(base_dir):
    def load(attn="sdpa", dtype=torch.float32):
        return transformers.AutoModelForCausalLM.from_pretrained(base_dir, attn_implementation=attn, dtype=dtype,
                                                                 local_files_only=True).eval()
    return load


def test_loads_as_gpt2_without_remote_code(hf_model, base_dir):
    m = hf_model()
    assert type(m).__name__ == "GPT2LMHeadModel" and m.config.activation_function == "gelu"
    assert m.config.tie_word_embeddings is False and m.lm_head.bias is None
    assert m.transformer.wte.weight.data_ptr() != m.lm_head.weight.data_ptr()
    assert m.generation_config.eos_token_id == EOS and m.generation_config.pad_token_id == 0


def test_generate_gives_no_warning_with_or_without_max_new_tokens(hf_model, recwarn, caplog):
    """The generation config sets max_new_tokens (not max_length), so a caller's own replaces it silently."""
    m, x = hf_model(), torch.tensor([prompt_ids([3, 5, 9, 2, 7])])
    for kw in ({}, {"max_new_tokens": 4}):
        out = m.generate(x, attention_mask=torch.ones_like(x), **kw)
        assert out.shape[1] <= x.shape[1] + kw.get("max_new_tokens", 24)
    said = [str(w.message) for w in recwarn] + [r.getMessage() for r in caplog.records]
    assert not any("max_length" in s or "max_new_tokens" in s for s in said), said


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_logits_equal_ours(shipped, hf_model, attn):
    """float32, within 1e-5: transformers' sdpa runs the kernel our forward runs, its eager attention
    (softmax(q k^T / sqrt(D)) written out) the batched matmuls of our training path (core.fast.logits_at); each
    equals its counterpart (to the bit here). Across the two paths the rounding differs by about 2e-5 (printed).
    float64: the same function to 1e-10."""
    ours = shipped["base-seed0"]
    ids = sequences(500)
    every = torch.ones_like(ids, dtype=torch.bool)
    with torch.no_grad():
        theirs = hf_model(attn)(ids).logits
        mine = ours(ids)[0] if attn == "sdpa" else fast.logits_at(ours, ids, every).reshape(theirs.shape)
        diff = (theirs - mine).abs()
        assert diff.max() <= 1e-5
        across = float((theirs - (fast.logits_at(ours, ids, every).reshape(theirs.shape) if attn == "sdpa"
                                  else ours(ids)[0])).abs().max())
        theirs64 = hf_model(attn, torch.float64)(ids).logits
        mine64 = ours.double()(ids)[0]
        ours.float()
    assert (theirs64 - mine64).abs().max() <= 1e-10
    print(f"{attn}: max |logit difference| float32 {diff.max():.2e} against our {attn} path ({across:.2e} against "
          f"the other), float64 {(theirs64 - mine64).abs().max():.1e}")


def ours_bmm_gap(model, ids) -> float:
    """The largest difference between our forward's logits (SDPA) and GPT.logits_at's (the training path's batched
    matmuls), every position."""
    every = torch.ones_like(ids, dtype=torch.bool)
    return float((fast.logits_at(model, ids, every) - model(ids)[0].reshape(-1, model.cfg.vocab_size)).abs().max())


def test_greedy_generate_equals_ours_on_1000_prompts(shipped, hf_model):
    """Token for token, transformers' generate (KV cache, greedy, stopping at </s>) against ours, for the base model
    (direct answers) and forced chains."""
    model = hf_model()
    rng = random.Random(1)
    digits = [make_digits(rng, rng.randint(2, 8)) for _ in range(1000)]
    for force in (None, ["T"]):
        prompts = [prompt_ids(d) + ([ID[force[0]]] if force else []) for d in digits]
        x = torch.tensor(prompts)
        with torch.no_grad():
            out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=24 - x.shape[1],
                                 do_sample=False)
        theirs = [(row[:row.index(EOS) + 1] if EOS in row else row) for row in out[:, x.shape[1]:].tolist()]
        ours = generate(shipped["base-seed0"], [prompt_ids(d) for d in digits], None, 0.0, force)
        ours = [o[1:] if force else o for o in ours]
        agree = sum(a == b for a, b in zip(theirs, ours))
        assert agree == 1000, f"{1000 - agree} of 1000 differ (force {force})"


def test_tokenizer_round_trips_every_prompt_and_output(shipped, tmp_path, base_dir):
    """Every kind of prompt (plain, hint, budget, maximum budget) and every right output, for the 46-word tokenizer;
    the 18-word one through AutoTokenizer too. Decoding with special tokens skipped (TRL, verl) drops </s> only."""
    l1_dir = export_hf(l1_model(budget_model(shipped["base-seed0"])), str(tmp_path / "l1"))
    for d, vocab in ((base_dir, 18), (l1_dir, 46)):
        tok = transformers.AutoTokenizer.from_pretrained(d, local_files_only=True)
        assert isinstance(tok, transformers.PreTrainedTokenizerFast) and len(tok) == vocab
        assert (tok.bos_token_id, tok.eos_token_id, tok.pad_token_id, tok.padding_side) == (1, 2, 0, "left")
        texts = []
        for digits in (list(p.x) for p in problems_per_k(30, seed=3)):
            ps = [prompt_ids(digits)] + ([hint_prompt_ids(digits)] + [budget_prompt_ids(digits, b) for b in BUDGETS]
                                         + [max_budget_prompt_ids(digits, b) for b in BUDGETS] if vocab == 46 else [])
            outs = [[ID[w] for w in solution(digits, f)] for f in FMT_NAMES]
            texts += [(words(p), p) for p in ps] + [(words(o), o) for o in outs]
        for text, ids in texts:
            assert tok(text)["input_ids"] == ids
            assert tok.decode(ids) == text
            assert tok.decode(ids, skip_special_tokens=True) == text.removesuffix(" </s>").removeprefix("<s> ")
        batch = tok([texts[0][0], "A 6 </s>"], padding=True)["input_ids"]
        assert batch[1] == [0] * 7 + [ID["A"], ID["6"], EOS]   # left padding, for generation
        msg = [{"role": "user", "content": texts[0][0]}]
        assert tok.apply_chat_template(msg, tokenize=True, add_generation_prompt=True, return_dict=True)[
            "input_ids"] == texts[0][1]


@pytest.mark.parametrize("name", tasks.names())
def test_a_model_of_every_task_computes_the_same_in_transformers(tmp_path, name):
    """An untrained model of each task (its own words and positions), exported: transformers' logits equal ours on
    the task's sequences, greedy generation equals ours token for token (free and with a forced chain), and the
    tokenizer writes the task's prompts and outputs as our ids."""
    task = tasks.get(name)
    ours = build_model(0, task=task).eval()
    d = export_hf(ours, str(tmp_path / name), task=task)
    model = transformers.AutoModelForCausalLM.from_pretrained(d, local_files_only=True).eval()
    tok = transformers.AutoTokenizer.from_pretrained(d, local_files_only=True)
    assert model.config.reasonlab_task == task.spec and len(tok) == len(task.vocab)
    probs = task.draw(6, seed=5, part="test")
    rng = random.Random(2)
    seqs = [task.encode(p, rng.choice(FMT_NAMES))[0] for p in probs]
    ids = torch.tensor([s + [task.id["<pad>"]] * (task.max_len - len(s)) for s in seqs])
    with torch.no_grad():
        assert (model(ids).logits - ours(ids)[0]).abs().max() <= 1e-5
    for force in (None, ["T"]):
        prompts = [task.prompt_ids(p) + ([task.id[force[0]]] if force else []) for p in probs]
        x = torch.tensor(prompts)
        with torch.no_grad():
            out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=task.max_len - x.shape[1],
                                 do_sample=False)
        theirs = [(row[:row.index(EOS) + 1] if EOS in row else row) for row in out[:, x.shape[1]:].tolist()]
        mine = generate(ours, [task.prompt_ids(p) for p in probs], None, 0.0, force)
        assert theirs == [o[1:] if force else o for o in mine], force
    for p, s in zip(probs, seqs):
        text = " ".join(task.vocab[i] for i in s)
        assert tok(text)["input_ids"] == s and tok.decode(s) == text
