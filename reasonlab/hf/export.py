"""The lab's GPT as a Hugging Face directory and back, with safetensors and JSON alone (no transformers needed).

The model is GPT-2's architecture with two switches (core/model.py): exact GELU (`activation_function: "gelu"`;
GPT-2's default `gelu_new` is the tanh approximation) and an untied head without bias (`tie_word_embeddings:
false`); dropout is 0. So `GPT2LMHeadModel` holds it without remote code. Names and layouts follow transformers'
GPT-2 (models/gpt2/modeling_gpt2.py, 5.25.0): its Conv1D stores a linear map as (in, out), the transpose of
nn.Linear's (out, in), and c_attn's output is [q | k | v], each split by head, as our fused qkv is.

    tok  -> transformer.wte          blocks.i.ln1/ln2  -> transformer.h.i.ln_1/ln_2
    pos  -> transformer.wpe          blocks.i.attn.qkv -> transformer.h.i.attn.c_attn   (transposed)
    ln_f -> transformer.ln_f         blocks.i.attn.proj-> transformer.h.i.attn.c_proj   (transposed)
    head -> lm_head                  blocks.i.mlp.0/2  -> transformer.h.i.mlp.c_fc/c_proj (transposed)

The tokenizer is word-level: tokenizers' WordLevel model over the task's words in its vocabulary layout (the
vocabularies nest: `task.vocab`, `hint_vocab` with STaR's hint tokens, `budget_vocab` with the budget tokens,
`l1_vocab` with L1's maximum-budget tokens; digits' are 18, 28, 37 and 46 words), split on whitespace, with <pad>,
<s>, </s> as special tokens and no post-processor (every prompt already starts with <s>). tokenizer.json is
written as the JSON tokenizers 0.23 serializes (checked against it in tests/hf). config.json names the task
(`reasonlab_task`: its spec), so that `import_hf` knows the vocabulary and the positions to expect; a directory
without it holds a digits model (the exports before tasks were named).

A directory from elsewhere is untrusted input: `import_hf` reads config.json, tokenizer.json and model.safetensors
only (never a pickle, never code), checks the architecture, the sizes, the vocabulary and every tensor's name,
shape and dtype from the safetensors header before it reads any tensor, and refuses anything else with one line.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import stat
import tempfile

import torch
from safetensors import safe_open
from safetensors.torch import save as save_bytes

from ..core.model import GPT
from ..io.checkpoint import MAX_FILE_BYTES, MODEL_BOUNDS, check_finite, umask
from ..tasks import Task, get
from ..tasks.records import BOS, EOS, EQ, PAD

TASK_KEY = "reasonlab_task"
"""config.json's key naming the model's task (its spec)."""
MAX_JSON_BYTES = 1 << 20   # config.json and tokenizer.json of a 46-word model are a few KB
WEIGHTS = "model.safetensors"
PICKLES = ("pytorch_model.bin", "pytorch_model.bin.index.json", "tf_model.h5", "flax_model.msgpack", "model.ckpt.index")
FILES = ("config.json", "generation_config.json", WEIGHTS, "tokenizer.json", "tokenizer_config.json",
         "special_tokens_map.json", "README.md")
"""What an export writes; a directory holding anything else is not overwritten."""
CHAT_TEMPLATE = "{% for message in messages %}{{ message['content'] }}{% endfor %}"
"""The messages' text as it is: verl and TRL's conversational path apply a chat template to `prompt` messages."""


class HFImportError(ValueError):
    """A directory that is not a model the lab can load (reported as one line, exit code 2)."""


def as_task(task: str | Task) -> Task:
    return task if isinstance(task, Task) else get(task)


def vocab_sizes(task: str | Task = "digits") -> tuple[int, ...]:
    """The sizes of a task's vocabularies, each a prefix of the next: its words, + hints, + budgets, + L1's maximum
    budgets (a task without hint tokens has one size fewer)."""
    t = as_task(task)
    return tuple(sorted({len(t.vocab), len(t.hint_vocab), len(t.budget_vocab), len(t.l1_vocab)}))


def vocab_words(vocab_size: int, task: str | Task = "digits") -> list[str]:
    """The words of the task's vocabulary of this size, id order."""
    t = as_task(task)
    if vocab_size not in vocab_sizes(t):
        raise ValueError(f"vocabulary of {vocab_size} tokens is none of the lab's for task {t.spec} "
                         f"({', '.join(map(str, vocab_sizes(t)))})")
    return t.l1_vocab[:vocab_size]


# ---------------------------------------------------------------------------------------------------------------
# Config, weights, tokenizer.

def hf_config(model: GPT, task: str | Task = "digits") -> dict:
    """config.json: GPT2LMHeadModel with our sizes and the two switches; dropout 0 (TRL trains in train mode); the
    task's spec under TASK_KEY (transformers keeps an unknown key as an attribute of the config)."""
    c = model.cfg
    return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": c.vocab_size,
            "n_positions": c.max_len, "n_embd": c.d_model, "n_layer": c.n_layers, "n_head": c.n_heads,
            "n_inner": None, "activation_function": "gelu", "resid_pdrop": 0.0, "embd_pdrop": 0.0,
            "attn_pdrop": 0.0, "layer_norm_epsilon": 1e-5, "initializer_range": 0.02, "scale_attn_weights": True,
            "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False, "use_cache": True,
            "bos_token_id": BOS, "eos_token_id": EOS, "pad_token_id": PAD,
            "tie_word_embeddings": False, "dtype": "float32", TASK_KEY: as_task(task).spec}


def generation_config(task: str | Task = "digits") -> dict:
    """generation_config.json: greedy, ending at </s> or after the task's longest output (max_new_tokens: a caller's
    own max_new_tokens then replaces it without transformers' warning about max_length set too)."""
    return {"bos_token_id": BOS, "eos_token_id": EOS, "pad_token_id": PAD, "do_sample": False,
            "max_new_tokens": as_task(task).max_out}


def _renames(n_layers: int) -> list[tuple[str, str, bool]]:
    """(our name, transformers' name, transposed) for every tensor."""
    out = [("tok.weight", "transformer.wte.weight", False), ("pos.weight", "transformer.wpe.weight", False)]
    for i in range(n_layers):
        b, h = f"blocks.{i}.", f"transformer.h.{i}."
        for ours, theirs, t in (("ln1", "ln_1", False), ("ln2", "ln_2", False), ("attn.qkv", "attn.c_attn", True),
                                ("attn.proj", "attn.c_proj", True), ("mlp.0", "mlp.c_fc", True),
                                ("mlp.2", "mlp.c_proj", True)):
            out += [(f"{b}{ours}.weight", f"{h}{theirs}.weight", t), (f"{b}{ours}.bias", f"{h}{theirs}.bias", False)]
    return out + [("ln_f.weight", "transformer.ln_f.weight", False), ("ln_f.bias", "transformer.ln_f.bias", False),
                  ("head.weight", "lm_head.weight", False)]


def to_hf_state(model: GPT) -> dict[str, torch.Tensor]:
    """Our state dict under transformers' GPT-2 names, Conv1D weights transposed to (in, out)."""
    sd = model.state_dict()
    return {theirs: (sd[ours].t() if t else sd[ours]).detach().cpu().contiguous()
            for ours, theirs, t in _renames(model.cfg.n_layers)}


def from_hf_state(state: dict[str, torch.Tensor], n_layers: int) -> dict[str, torch.Tensor]:
    """The inverse of to_hf_state."""
    return {ours: (state[theirs].t() if t else state[theirs]).contiguous() for ours, theirs, t in _renames(n_layers)}


def hf_shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    """transformers' name -> shape for a GPT config (ours: vocab_size, d_model, n_layers, max_len)."""
    V, C, T = cfg["vocab_size"], cfg["d_model"], cfg["max_len"]
    out = {"transformer.wte.weight": (V, C), "transformer.wpe.weight": (T, C), "transformer.ln_f.weight": (C,),
           "transformer.ln_f.bias": (C,), "lm_head.weight": (V, C)}
    for i in range(cfg["n_layers"]):
        h = f"transformer.h.{i}."
        out.update({h + "ln_1.weight": (C,), h + "ln_1.bias": (C,), h + "ln_2.weight": (C,), h + "ln_2.bias": (C,),
                    h + "attn.c_attn.weight": (C, 3 * C), h + "attn.c_attn.bias": (3 * C,),
                    h + "attn.c_proj.weight": (C, C), h + "attn.c_proj.bias": (C,),
                    h + "mlp.c_fc.weight": (C, 4 * C), h + "mlp.c_fc.bias": (4 * C,),
                    h + "mlp.c_proj.weight": (4 * C, C), h + "mlp.c_proj.bias": (C,)})
    return out


def tokenizer_json(words: list[str]) -> dict:
    """tokenizer.json as tokenizers serializes a WordLevel model with a WhitespaceSplit pre-tokenizer, the three
    special tokens added and no post-processor, normalizer or decoder (decoding joins words with spaces)."""
    special = [{"id": words.index(w), "content": w, "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": False, "special": True} for w in ("<pad>", "<s>", "</s>")]
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": special, "normalizer": None,
            "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None, "decoder": None,
            "model": {"type": "WordLevel", "vocab": {w: i for i, w in enumerate(words)}, "unk_token": "<unk>"}}


def tokenizer_config(task: str | Task = "digits") -> dict:
    """tokenizer_config.json: PreTrainedTokenizerFast named, or AutoTokenizer would take GPT-2's BPE tokenizer for a
    gpt2 model; left padding for generation; no cleanup of spaces (it would join "A ." style punctuation)."""
    return {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
            "pad_token": "<pad>", "padding_side": "left", "model_max_length": as_task(task).max_len,
            "clean_up_tokenization_spaces": False, "chat_template": CHAT_TEMPLATE}


def special_tokens_map() -> dict:
    return {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>"}


# ---------------------------------------------------------------------------------------------------------------
# Export.

def export_hf(model: GPT, directory: str, card: str = "", task: str | Task = "digits") -> str:
    """Write `model`, a model of `task`, as a Hugging Face directory: config (naming the task), generation config,
    model.safetensors, tokenizer files (the task's words) and the model card `card` (README.md). Written whole or
    not at all (replace_dir); returns its absolute path. Only the lab's language models export: a verifier's head
    (with a bias, or a scalar) has no GPT-2 counterpart."""
    task = as_task(task)
    words = vocab_words(model.cfg.vocab_size, task)
    if model.cfg.max_len != task.max_len:
        raise ValueError(f"export: the model has {model.cfg.max_len} positions, the {task.spec} task's sequences take "
                         f"{task.max_len}: not a model of this task")
    extra = sorted(set(model.state_dict()) - {ours for ours, _, _ in _renames(model.cfg.n_layers)})
    if extra or tuple(model.head.weight.shape) != (model.cfg.vocab_size, model.cfg.d_model):
        raise ValueError(f"export: not a language model of the lab ({', '.join(extra) or 'its head'} has no place in "
                         "GPT2LMHeadModel): verifiers do not export")
    files = {"config.json": _json(hf_config(model, task)), "generation_config.json": _json(generation_config(task)),
             WEIGHTS: save_bytes(to_hf_state(model), metadata={"format": "pt"}),
             "tokenizer.json": _json(tokenizer_json(words)), "tokenizer_config.json": _json(tokenizer_config(task)),
             "special_tokens_map.json": _json(special_tokens_map()), "README.md": card.encode()}

    def write(tmp: str) -> None:
        for name, data in files.items():
            with open(os.path.join(tmp, name), "wb") as f:
                f.write(data)
            os.chmod(os.path.join(tmp, name), 0o666 & ~umask())
    return replace_dir(directory, FILES, write)


def check_target(target: str, allowed) -> str:
    """The absolute path of a directory an export may write: new, empty, or holding only names in `allowed` (an
    earlier export of the same kind, which is replaced); ValueError otherwise, before any work."""
    target = os.path.abspath(os.path.expanduser(target))
    if os.path.lexists(target) and not os.path.isdir(target):
        raise ValueError(f"export: {target} exists and is not a directory")
    if os.path.isdir(target):
        other = sorted(set(os.listdir(target)) - set(allowed))
        if other:
            raise ValueError(f"export: {target} holds other files ({', '.join(other[:3])}): give a new or empty "
                             "directory")
    return target


def replace_dir(directory: str, allowed, write) -> str:
    """write(tmp) fills a temporary directory beside `directory`, which is then renamed into place (an earlier
    export there is moved aside first and removed after): a failure at any point leaves nothing behind."""
    target = check_target(directory, allowed)
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(dir=parent, prefix=".tmp-export-")
    old = None
    try:
        os.chmod(tmp, 0o777 & ~umask())
        write(tmp)
        if os.path.isdir(target):
            old = tempfile.mkdtemp(dir=parent, prefix=".tmp-old-")
            os.replace(target, os.path.join(old, "x"))
        os.replace(tmp, target)
    except BaseException:
        if old and not os.path.exists(target):   # the earlier export goes back where it was
            os.replace(os.path.join(old, "x"), target)
        for d in (tmp, old):
            if d:
                shutil.rmtree(d, ignore_errors=True)
        raise
    if old:
        shutil.rmtree(old)
    return target


def _json(obj) -> bytes:
    return (json.dumps(obj, indent=2) + "\n").encode()


# ---------------------------------------------------------------------------------------------------------------
# Import: untrusted input, checked before anything is loaded.

def import_hf(directory: str, task: str | Task | None = None) -> tuple[GPT, dict]:
    """A GPT from a Hugging Face directory (an export of ours, trained elsewhere, e.g. by TRL), and what was read:
    {"source", "vocab_size", "dtype", "task"}. The task is the one config.json names; `task`, when given, must be
    that one, its knobs aside (and stands for it where config.json names none; digits where neither does). HFImportError, one line,
    for anything that is not a GPT-2 of the lab's shape and the task's vocabulary in safetensors; nothing is
    unpickled and no code in the directory runs."""
    d = os.path.abspath(directory)
    if not os.path.isdir(d):
        raise HFImportError(f"import: {d} is not a directory")
    names = set(os.listdir(d))
    if WEIGHTS not in names:
        if "model.safetensors.index.json" in names:
            raise HFImportError(f"import: {d} holds sharded weights; the lab's models fit one model.safetensors")
        pickled = sorted(names & set(PICKLES))
        if pickled:
            raise HFImportError(f"import: {d} holds only {pickled[0]} (pickled or another framework's weights), "
                                "which is never loaded: save it with safetensors (save_pretrained's default)")
        raise HFImportError(f"import: {d} has no {WEIGHTS}")
    hf = _read_json(d, "config.json")
    task = config_task(hf, d, task)
    cfg = check_hf_config(hf, d, task)
    check_vocab(_read_json(d, "tokenizer.json"), cfg["vocab_size"], d, task)
    state, dtype = read_weights(os.path.join(d, WEIGHTS), cfg)
    check_finite(state, f"import: {d}")
    model = GPT(**cfg)
    model.load_state_dict(from_hf_state(state, cfg["n_layers"]), strict=True)
    with torch.no_grad():
        logits, _ = model.eval()(torch.tensor([[BOS, EQ]]))
    if not bool(torch.isfinite(logits).all()):
        raise HFImportError(f"import: {d} gives non-finite logits")
    return model, {"source": d, "vocab_size": cfg["vocab_size"], "dtype": dtype, "task": task.spec}


def config_task(hf: dict, d: str, task: str | Task | None = None) -> Task:
    """The model's task: `task` where given, which must be the one config.json names (TASK_KEY) where it names one
    (HFImportError, one line; its knobs may differ: they change the problems drawn, not the rule); else the one
    config.json names; digits where neither says."""
    named = hf.get(TASK_KEY)
    if named is not None:
        try:
            if not isinstance(named, str):
                raise ValueError("not a string")
            named = get(named)
        except ValueError as e:
            raise HFImportError(f"import: {d}/config.json: {TASK_KEY} = {named!r:.40}: {' '.join(str(e).split())}"
                                ) from None
    wanted = None if task is None else as_task(task)
    if named is not None and wanted is not None and named.name != wanted.name:
        raise HFImportError(f"import: {d} holds a model of task {named.spec} (its config.json's {TASK_KEY}), not of "
                            f"task {wanted.spec}")
    return wanted or named or get("digits")


def _read_json(d: str, name: str) -> dict:
    path = os.path.join(d, name)
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise HFImportError(f"import: {path} is not a regular file")
        if st.st_size > MAX_JSON_BYTES:
            raise HFImportError(f"import: {path} is larger than {MAX_JSON_BYTES >> 10} KiB")
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
    except FileNotFoundError:
        raise HFImportError(f"import: {d} has no {name}") from None
    except (OSError, ValueError) as e:
        if isinstance(e, HFImportError):
            raise
        raise HFImportError(f"import: {path} is unreadable: {type(e).__name__}: {' '.join(str(e).split())}") from None
    if not isinstance(obj, dict):
        raise HFImportError(f"import: {path} is not a JSON object")
    return obj


# What a GPT-2 config must say for our forward pass to be its forward pass (absent keys take GPT2Config's defaults,
# transformers 5.25.0, so an absent activation_function is the tanh GELU and is refused).
ARCH = {"model_type": "gpt2", "activation_function": "gelu", "layer_norm_epsilon": 1e-5, "scale_attn_weights": True,
        "scale_attn_by_inverse_layer_idx": False, "tie_word_embeddings": False, "add_cross_attention": False}
GPT2_DEFAULTS = {"activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "scale_attn_weights": True,
                 "scale_attn_by_inverse_layer_idx": False, "tie_word_embeddings": True, "add_cross_attention": False,
                 "n_inner": None}


def check_hf_config(hf: dict, d: str, task: str | Task = "digits") -> dict:
    """config.json -> our GPT config for a model of `task`, or HFImportError naming what does not fit."""
    task = as_task(task)
    def bad(msg):
        raise HFImportError(f"import: {d}/config.json: {msg}")
    if "auto_map" in hf:
        bad("it names custom code (auto_map), which the lab never runs")
    archs = hf.get("architectures") or ["GPT2LMHeadModel"]
    if archs != ["GPT2LMHeadModel"]:
        bad(f"architectures {archs!r:.80}, expected ['GPT2LMHeadModel']")
    for key, want in ARCH.items():
        got = hf.get(key, GPT2_DEFAULTS.get(key))
        if isinstance(want, float):
            ok = isinstance(got, (int, float)) and math.isclose(got, want, rel_tol=1e-9)
        else:
            ok = got == want
        if not ok:
            bad(f"{key} = {got!r:.40}, the lab's model needs {want!r}")
    cfg = {}
    for ours, theirs in (("vocab_size", "vocab_size"), ("d_model", "n_embd"), ("n_layers", "n_layer"),
                         ("n_heads", "n_head"), ("max_len", "n_positions")):
        v, (lo, hi) = hf.get(theirs), MODEL_BOUNDS[ours]
        if type(v) is not int or not lo <= v <= hi:
            bad(f"{theirs} = {v!r:.40} (must be an integer in {lo}..{hi})")
        cfg[ours] = v
    if cfg["d_model"] % cfg["n_heads"]:
        bad(f"n_embd = {cfg['d_model']} is not divisible by n_head = {cfg['n_heads']}")
    if hf.get("n_inner") not in (None, 4 * cfg["d_model"]):
        bad(f"n_inner = {hf.get('n_inner')!r:.40}, the lab's MLP is 4 x n_embd")
    if cfg["max_len"] != task.max_len:
        bad(f"n_positions = {cfg['max_len']}, the {task.spec} task's sequences take {task.max_len}")
    if cfg["vocab_size"] not in vocab_sizes(task):
        bad(f"vocab_size = {cfg['vocab_size']}, none of the lab's vocabularies of the {task.spec} task "
            f"({', '.join(map(str, vocab_sizes(task)))})")
    return cfg


def check_vocab(tok: dict, vocab_size: int, d: str, task: str | Task = "digits") -> None:
    """tokenizer.json must be a WordLevel model whose words and ids are the task's, in order."""
    task = as_task(task)
    model = tok.get("model")
    if not isinstance(model, dict) or model.get("type") != "WordLevel" or not isinstance(model.get("vocab"), dict):
        raise HFImportError(f"import: {d}/tokenizer.json is not a word-level tokenizer")
    want = {w: i for i, w in enumerate(vocab_words(vocab_size, task))}
    got = model["vocab"]
    if got != want:
        diff = []
        for w in sorted(set(got) | set(want), key=lambda w: (want.get(w, len(want)), w)):
            if w not in got or w not in want or got[w] != want[w]:
                here = f"id {got[w]!r:.8}" if w in got else "absent"
                there = f"id {want[w]}" if w in want else "no word of the task's"
                diff.append(f"{w!r:.12} {here} in the file, {there} expected")
        raise HFImportError(f"import: {d}/tokenizer.json's vocabulary is not the lab's {vocab_size} words of the "
                            f"{task.spec} task (differs at {'; '.join(diff[:3])})")


FLOAT_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
IGNORED = re.compile(r"transformer\.h\.\d+\.attn\.(masked_)?bias")
"""GPT-2's causal-mask buffers, which transformers before 4.31 saved with the weights: not parameters, skipped."""


def read_weights(path: str, cfg: dict) -> tuple[dict[str, torch.Tensor], str]:
    """The tensors of model.safetensors as float32, after checking every name, shape and dtype in its header
    (nothing is read before that). Returns them and the dtype they were stored in."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise HFImportError(f"import: {path} is unreadable: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise HFImportError(f"import: {path} is not a regular file")
    if st.st_size > MAX_FILE_BYTES:
        raise HFImportError(f"import: {path} is larger than {MAX_FILE_BYTES >> 30} GiB")
    want = hf_shapes(cfg)
    try:
        with safe_open(path, framework="pt") as f:
            keys = [k for k in f.keys() if not IGNORED.fullmatch(k)]
            missing, extra = sorted(set(want) - set(keys)), sorted(set(keys) - set(want))
            if missing or extra:
                what = f"lacks {missing[0]}" if missing else f"has an unexpected tensor {extra[0]!r:.60}"
                raise HFImportError(f"import: {path} {what} ({len(missing)} missing, {len(extra)} unexpected)")
            dtypes = set()
            for k in keys:
                sl = f.get_slice(k)
                if tuple(sl.get_shape()) != want[k]:
                    raise HFImportError(f"import: {path}: {k} is {tuple(sl.get_shape())}, the config needs {want[k]}")
                dtypes.add(sl.get_dtype())
            if not dtypes <= set(FLOAT_DTYPES) or len(dtypes) > 1:
                raise HFImportError(f"import: {path} holds tensors of dtype {', '.join(sorted(dtypes))}; "
                                    f"expected one of {', '.join(FLOAT_DTYPES)}")
            state = {k: f.get_tensor(k).to(torch.float32) for k in keys}
    except HFImportError:
        raise
    except Exception as e:   # safetensors' own errors (a bad header, a truncated file): all mean "unreadable"
        raise HFImportError(f"import: {path} is not a readable safetensors file: {type(e).__name__}: "
                            f"{' '.join(str(e).split())[:200]}") from None
    return state, dtypes.pop()
