"""Export and import: bitwise round trips for every model the lab makes, and an untrusted directory refused line by
line before anything is loaded. Only safetensors and JSON are needed here (tokenizers for one test)."""
import json
import os
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from reasonlab import tasks
from reasonlab.core.task import BUDGET_VOCAB, HINT_VOCAB, L1_VOCAB, VOCAB
from reasonlab.hf.export import (
    FILES,
    TASK_KEY,
    HFImportError,
    export_hf,
    from_hf_state,
    hf_shapes,
    import_hf,
    to_hf_state,
    tokenizer_json,
    vocab_sizes,
    vocab_words,
)
from reasonlab.methods.budget import budget_model, grow_vocab, l1_model
from reasonlab.train.sft import build_model

from .hfkit import need


def same_weights(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_every_shipped_model_round_trips_bitwise(shipped, tmp_path):
    assert {"base-seed0", "err-seed0"} <= set(shipped) and len(shipped) >= 10
    for name, model in shipped.items():
        d = export_hf(model, str(tmp_path / name))
        assert sorted(os.listdir(d)) == sorted(FILES)
        back, info = import_hf(d)
        assert same_weights(model, back), name
        assert info["vocab_size"] == 18 and info["dtype"] == "F32" and info["task"] == "digits"


@pytest.mark.parametrize("size", [18, 28, 37, 46])
def test_each_vocabulary_round_trips_bitwise(shipped, tmp_path, size):
    """The hint (28), budget (37: budget.budget_model) and L1 (46: budget.l1_model) vocabularies; the tokenizer holds
    their words."""
    base = shipped["base-seed0"]
    model = {18: base, 28: None, 37: budget_model(base), 46: None}[size]
    if size == 28:
        model = grow_vocab(base, len(HINT_VOCAB), torch.randn(10, 64, generator=torch.Generator().manual_seed(0)))
    if size == 46:
        model = l1_model(budget_model(base))
    assert model.cfg.vocab_size == size
    d = export_hf(model, str(tmp_path / "m"))
    back, _ = import_hf(d)
    assert same_weights(model, back)
    with open(os.path.join(d, "tokenizer.json")) as f:
        vocab = json.load(f)["model"]["vocab"]
    words = {18: VOCAB, 28: HINT_VOCAB, 37: BUDGET_VOCAB, 46: L1_VOCAB}[size]
    assert vocab == {w: i for i, w in enumerate(words)}


def test_the_mapping_transposes_conv1d_weights_only(shipped):
    model = shipped["base-seed0"]
    hf = to_hf_state(model)
    cfg = dict(model.config())
    assert {k: tuple(v.shape) for k, v in hf.items()} == hf_shapes(cfg)
    assert torch.equal(hf["transformer.h.0.attn.c_attn.weight"], model.blocks[0].attn.qkv.weight.t())
    assert torch.equal(hf["lm_head.weight"], model.head.weight)     # nn.Linear in GPT-2 too: not transposed
    back = from_hf_state(hf, cfg["n_layers"])
    assert all(torch.equal(back[k], v) for k, v in model.state_dict().items())


def test_tokenizer_json_is_what_tokenizers_writes():
    tokenizers = need("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({w: i for i, w in enumerate(VOCAB)}, unk_token=None))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens(["<pad>", "<s>", "</s>"])
    assert json.loads(tok.to_str()) == tokenizer_json(VOCAB)
    ours = tokenizers.Tokenizer.from_str(json.dumps(tokenizer_json(L1_VOCAB)))
    assert ours.encode("<s> 3 5 _ B4").ids == [1, 11, 13, 7, 32]


@pytest.mark.parametrize("head", ["token", "scalar"])
def test_verifiers_do_not_export(shipped, tmp_path, head):
    from reasonlab.methods.verifier import build_net
    with pytest.raises(ValueError, match="verifiers do not export"):
        export_hf(build_net(shipped["base-seed0"], head=head), str(tmp_path / "v"))
    assert not os.path.exists(tmp_path / "v")


def test_vocab_words_refuses_other_sizes():
    with pytest.raises(ValueError, match="none of the lab's"):
        vocab_words(20)
    assert vocab_sizes("digits") == (18, 28, 37, 46)


def task_models(name: str):
    """A small untrained model of the task in each of its vocabulary layouts (words, + hints, + budgets, + L1's)."""
    task = tasks.get(name)
    base = build_model(0, task=task)
    hint = build_model(1, len(task.hint_vocab), task=task)
    budget = budget_model(base, task)
    return {len(task.vocab): base, len(task.hint_vocab): hint, len(task.budget_vocab): budget,
            len(task.l1_vocab): l1_model(budget, task)}


@pytest.mark.parametrize("name", tasks.names())
def test_a_model_of_every_task_round_trips_bitwise(tmp_path, name):
    """Each vocabulary layout of each task: the tokenizer holds the task's words in that layout, config.json names
    the task, and the import knows it from there."""
    task = tasks.get(name)
    models = task_models(name)
    assert tuple(sorted(models)) == vocab_sizes(task)
    for size, model in models.items():
        d = export_hf(model, str(tmp_path / f"m{size}"), task=name)
        cfg = json.loads(open(os.path.join(d, "config.json")).read())
        assert cfg[TASK_KEY] == task.spec and cfg["n_positions"] == task.max_len == model.cfg.max_len
        with open(os.path.join(d, "tokenizer.json")) as f:
            assert json.load(f)["model"]["vocab"] == {w: i for i, w in enumerate(task.l1_vocab[:size])}
        assert json.loads(open(os.path.join(d, "generation_config.json")).read())["max_new_tokens"] == task.max_out
        back, info = import_hf(d)
        assert same_weights(model, back) and info["task"] == task.spec and info["vocab_size"] == size
        assert same_weights(import_hf(d, task=name)[0], model)


def test_the_task_travels_with_its_knobs_and_another_task_is_refused(tmp_path):
    d = export_hf(build_model(0, task="compose"), str(tmp_path / "c"), task="compose:n_f=5")
    assert import_hf(d)[1]["task"] == "compose:n_f=5"
    assert import_hf(d, task="compose:n_f=2")[1]["task"] == "compose:n_f=2"    # knobs change the draws, not the rule
    with pytest.raises(HFImportError, match="holds a model of task compose:n_f=5 .*, not of task digits$"):
        import_hf(d, task="digits")
    with pytest.raises(ValueError, match="28 positions, the digits task's sequences take 24"):
        export_hf(build_model(0, 18, task="add"), str(tmp_path / "a"), task="digits")   # 18 words, 28 positions
    with pytest.raises(ValueError, match="none of the lab's for task modprod"):
        export_hf(build_model(0), str(tmp_path / "m"), task="modprod")     # 18 words: digits', not modprod's 15
    assert not os.path.exists(tmp_path / "a") and not os.path.exists(tmp_path / "m")


def test_an_export_without_its_task_is_read_as_digits_unless_told(tmp_path):
    """A directory whose config.json names no task (an export from before tasks were named) holds a digits model;
    --task says otherwise, and the task's vocabulary is what is checked."""
    d = tmp_path / "m"
    model = build_model(0, task="modprod")
    export_hf(model, str(d), task="modprod")
    edit_json(d / "config.json", **{TASK_KEY: None})
    with pytest.raises(HFImportError, match=r"vocab_size = 15, none of the lab's vocabularies of the digits task "
                                            r"\(18, 28, 37, 46\)"):
        import_hf(str(d))
    back, info = import_hf(str(d), task="modprod")
    assert same_weights(back, model) and info["task"] == "modprod"
    edit_json(d / "config.json", **{TASK_KEY: "nope"})
    with pytest.raises(HFImportError, match="reasonlab_task = 'nope': unknown task"):
        import_hf(str(d))


def test_a_vocabulary_mismatch_says_which_side_is_expected(good):
    vocab = {w: i for i, w in enumerate(VOCAB)}
    edit_json(good / "tokenizer.json", model={"type": "WordLevel", "vocab": dict(vocab, A=5, S=4)})
    with pytest.raises(HFImportError, match="not the lab's 18 words of the digits task \\(differs at 'A' id 5 in the "
                                            "file, id 4 expected; 'S' id 4 in the file, id 5 expected\\)"):
        import_hf(str(good))
    edit_json(good / "tokenizer.json", model={"type": "WordLevel", "vocab": dict(vocab, f9=18)})
    with pytest.raises(HFImportError, match="'f9' id 18 in the file, no word of the task's expected"):
        import_hf(str(good))


# ---------------------------------------------------------------------------------------------------------------
# Export: whole or nothing.

def test_export_replaces_an_earlier_export_and_refuses_other_directories(shipped, tmp_path):
    d = str(tmp_path / "x")
    export_hf(shipped["base-seed0"], d, card="one")
    export_hf(shipped["base-seed1"], d, card="two")
    assert open(os.path.join(d, "README.md")).read() == "two"
    assert same_weights(import_hf(d)[0], shipped["base-seed1"])
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="holds other files"):
        export_hf(shipped["base-seed0"], str(other))
    assert os.listdir(other) == ["notes.txt"]
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".tmp")]


def test_a_failed_export_leaves_the_earlier_one(shipped, tmp_path, monkeypatch):
    d = str(tmp_path / "x")
    export_hf(shipped["base-seed0"], d)
    monkeypatch.setattr("reasonlab.hf.export.os.replace", lambda *a: (_ for _ in ()).throw(OSError(28, "No space")))
    with pytest.raises(OSError):
        export_hf(shipped["base-seed1"], d)
    monkeypatch.undo()
    assert same_weights(import_hf(d)[0], shipped["base-seed0"])
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".tmp")]


# ---------------------------------------------------------------------------------------------------------------
# Import: untrusted input.

@pytest.fixture
def good(base_dir, tmp_path):
    d = tmp_path / "d"
    shutil.copytree(base_dir, d)
    return d


def edit_json(path, **changes):
    obj = json.loads(path.read_text())
    for k, v in changes.items():
        if v is None:
            obj.pop(k, None)
        else:
            obj[k] = v
    path.write_text(json.dumps(obj))


def edit_weights(d, fn):
    state = load_file(str(d / "model.safetensors"))
    save_file(fn(state), str(d / "model.safetensors"), metadata={"format": "pt"})


@pytest.mark.parametrize("spoil,msg", [
    (lambda d: (d / "model.safetensors").unlink(), "has no model.safetensors"),
    (lambda d: ((d / "model.safetensors").rename(d / "pytorch_model.bin")), "holds only pytorch_model.bin"),
    (lambda d: ((d / "model.safetensors").unlink(), (d / "model.safetensors.index.json").write_text("{}")),
     "sharded"),
    (lambda d: (d / "config.json").unlink(), "has no config.json"),
    (lambda d: (d / "config.json").write_text("{not json"), "unreadable"),
    (lambda d: edit_json(d / "config.json", auto_map={"AutoModelForCausalLM": "m.M"}), "custom code"),
    (lambda d: edit_json(d / "config.json", model_type="llama"), "model_type"),
    (lambda d: edit_json(d / "config.json", architectures=["LlamaForCausalLM"]), "architectures"),
    (lambda d: edit_json(d / "config.json", activation_function=None), "gelu_new"),
    (lambda d: edit_json(d / "config.json", tie_word_embeddings=True), "tie_word_embeddings"),
    (lambda d: edit_json(d / "config.json", layer_norm_epsilon=1e-6), "layer_norm_epsilon"),
    (lambda d: edit_json(d / "config.json", n_embd=8192), "n_embd"),
    (lambda d: edit_json(d / "config.json", n_layer=10**6), "n_layer"),
    (lambda d: edit_json(d / "config.json", n_head=3), "not divisible"),
    (lambda d: edit_json(d / "config.json", n_positions=1024), "n_positions"),
    (lambda d: edit_json(d / "config.json", vocab_size=50257), "vocab_size"),
    (lambda d: edit_json(d / "config.json", n_inner=100), "n_inner"),
    (lambda d: (d / "tokenizer.json").unlink(), "has no tokenizer.json"),
    (lambda d: edit_json(d / "tokenizer.json", model={"type": "BPE", "vocab": {}}), "not a word-level"),
    (lambda d: edit_json(d / "tokenizer.json", model={"type": "WordLevel", "vocab": dict(
        {w: i for i, w in enumerate(VOCAB)}, **{"A": 5, "S": 4})}), "not the lab's 18 words"),
    (lambda d: edit_weights(d, lambda s: {k: v for k, v in s.items() if k != "lm_head.weight"}), "lacks lm_head"),
    (lambda d: edit_weights(d, lambda s: dict(s, extra=torch.zeros(1))), "unexpected tensor"),
    (lambda d: edit_weights(d, lambda s: dict(s, **{"transformer.wpe.weight": torch.zeros(24, 32)})), "wpe.weight"),
    (lambda d: edit_weights(d, lambda s: dict(s, **{"transformer.wte.weight": s["transformer.wte.weight"].t()
                                                    .contiguous()})), "wte.weight"),
    (lambda d: edit_weights(d, lambda s: {k: v.to(torch.int32) for k, v in s.items()}), "dtype I32"),
    (lambda d: edit_weights(d, lambda s: dict(s, **{"lm_head.weight": s["lm_head.weight"] * float("nan")})),
     "non-finite"),
    (lambda d: (d / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{junk"), "not a readable"),
])
def test_import_refuses_with_one_line(good, spoil, msg):
    spoil(good)
    with pytest.raises(ValueError, match=msg) as e:
        import_hf(str(good))
    assert "\n" not in str(e.value)


def test_import_never_unpickles(good, monkeypatch):
    """A directory with both a pickle and safetensors: only the safetensors are read."""
    import pickle
    (good / "pytorch_model.bin").write_bytes(pickle.dumps({"x": 1}))
    monkeypatch.setattr(pickle, "load", lambda *a, **k: pytest.fail("unpickled"))
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("torch.load called"))
    import_hf(str(good))


def test_import_accepts_half_precision_and_old_mask_buffers(good, shipped):
    """bf16 weights (a run with TRL's default bf16=True) are read as float32; transformers < 4.31 saved the causal
    mask buffers attn.bias and attn.masked_bias, which are skipped (c_attn.bias is not one of them)."""
    edit_weights(good, lambda s: {**{k: v.to(torch.bfloat16) for k, v in s.items()},
                                  "transformer.h.0.attn.bias": torch.ones(1, 1, 24, 24),
                                  "transformer.h.0.attn.masked_bias": torch.tensor(-1e4)})
    model, info = import_hf(str(good))
    assert info["dtype"] == "BF16" and next(model.parameters()).dtype == torch.float32
    want = shipped["base-seed0"].state_dict()["blocks.0.attn.qkv.bias"].to(torch.bfloat16).float()
    assert torch.equal(model.state_dict()["blocks.0.attn.qkv.bias"], want)
    edit_weights(good, lambda s: dict(s, **{"lm_head.weight": s["lm_head.weight"].float()}))
    with pytest.raises(HFImportError, match="dtype BF16, F32"):   # one dtype throughout
        import_hf(str(good))
