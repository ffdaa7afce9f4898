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

The tokenizer is word-level: tokenizers' WordLevel model over the lab's words (the vocabularies nest: 18, 28 with
the hint tokens, 37 with the budget tokens, 46 with L1's maximum-budget tokens), split on whitespace, with <pad>,
<s>, </s> as special tokens and no post-processor (every prompt already starts with <s>). tokenizer.json is
written as the JSON tokenizers 0.23 serializes (checked against it in tests/hf).

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
from ..core.task import ID, L1_VOCAB, MAX_LEN
from ..io.checkpoint import MAX_FILE_BYTES, MODEL_BOUNDS, check_finite, umask

VOCAB_SIZES = (18, 28, 37, 46)
"""The lab's vocabularies, each a prefix of the next (task.py): plain, + hints, + budgets, + L1's maximum budgets."""
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


def vocab_words(vocab_size: int) -> list[str]:
    """The words of the lab's vocabulary of this size, id order."""
    if vocab_size not in VOCAB_SIZES:
        raise ValueError(f"vocabulary of {vocab_size} tokens is none of the lab's ({', '.join(map(str, VOCAB_SIZES))})")
    return L1_VOCAB[:vocab_size]


# ---------------------------------------------------------------------------------------------------------------
# Config, weights, tokenizer.

def hf_config(model: GPT) -> dict:
    """config.json: GPT2LMHeadModel with our sizes and the two switches; dropout 0 (TRL trains in train mode)."""
    c = model.cfg
    return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": c.vocab_size,
            "n_positions": c.max_len, "n_embd": c.d_model, "n_layer": c.n_layers, "n_head": c.n_heads,
            "n_inner": None, "activation_function": "gelu", "resid_pdrop": 0.0, "embd_pdrop": 0.0,
            "attn_pdrop": 0.0, "layer_norm_epsilon": 1e-5, "initializer_range": 0.02, "scale_attn_weights": True,
            "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False, "use_cache": True,
            "bos_token_id": ID["<s>"], "eos_token_id": ID["</s>"], "pad_token_id": ID["<pad>"],
            "tie_word_embeddings": False, "dtype": "float32"}


def generation_config() -> dict:
    """generation_config.json: greedy, ending at </s> or at the position table's end."""
    return {"bos_token_id": ID["<s>"], "eos_token_id": ID["</s>"], "pad_token_id": ID["<pad>"], "do_sample": False,
            "max_length": MAX_LEN}


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
    special = [{"id": ID[w], "content": w, "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": False, "special": True} for w in ("<pad>", "<s>", "</s>")]
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": special, "normalizer": None,
            "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None, "decoder": None,
            "model": {"type": "WordLevel", "vocab": {w: i for i, w in enumerate(words)}, "unk_token": "<unk>"}}


def tokenizer_config() -> dict:
    """tokenizer_config.json: PreTrainedTokenizerFast named, or AutoTokenizer would take GPT-2's BPE tokenizer for a
    gpt2 model; left padding for generation; no cleanup of spaces (it would join "A ." style punctuation)."""
    return {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
            "pad_token": "<pad>", "padding_side": "left", "model_max_length": MAX_LEN,
            "clean_up_tokenization_spaces": False, "chat_template": CHAT_TEMPLATE}


def special_tokens_map() -> dict:
    return {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>"}


# ---------------------------------------------------------------------------------------------------------------
# Export.

def export_hf(model: GPT, directory: str, card: str = "") -> str:
    """Write `model` as a Hugging Face directory: config, generation config, model.safetensors, tokenizer files and
    the model card `card` (README.md). Written whole or not at all (replace_dir); returns its absolute path.
    Only the lab's language models export: a verifier's head (with a bias, or a scalar) has no GPT-2 counterpart."""
    words = vocab_words(model.cfg.vocab_size)
    extra = sorted(set(model.state_dict()) - {ours for ours, _, _ in _renames(model.cfg.n_layers)})
    if extra or tuple(model.head.weight.shape) != (model.cfg.vocab_size, model.cfg.d_model):
        raise ValueError(f"export: not a language model of the lab ({', '.join(extra) or 'its head'} has no place in "
                         "GPT2LMHeadModel): verifiers do not export")
    files = {"config.json": _json(hf_config(model)), "generation_config.json": _json(generation_config()),
             WEIGHTS: save_bytes(to_hf_state(model), metadata={"format": "pt"}),
             "tokenizer.json": _json(tokenizer_json(words)), "tokenizer_config.json": _json(tokenizer_config()),
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

def import_hf(directory: str) -> tuple[GPT, dict]:
    """A GPT from a Hugging Face directory (an export of ours, trained elsewhere, e.g. by TRL), and what was read:
    {"source", "vocab_size", "dtype"}. HFImportError, one line, for anything that is not a GPT-2 of the lab's shape
    and vocabulary in safetensors; nothing is unpickled and no code in the directory runs."""
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
    cfg = check_hf_config(_read_json(d, "config.json"), d)
    check_vocab(_read_json(d, "tokenizer.json"), cfg["vocab_size"], d)
    state, dtype = read_weights(os.path.join(d, WEIGHTS), cfg)
    check_finite(state, f"import: {d}")
    model = GPT(**cfg)
    model.load_state_dict(from_hf_state(state, cfg["n_layers"]), strict=True)
    with torch.no_grad():
        logits, _ = model.eval()(torch.tensor([[ID["<s>"], ID["="]]]))
    if not bool(torch.isfinite(logits).all()):
        raise HFImportError(f"import: {d} gives non-finite logits")
    return model, {"source": d, "vocab_size": cfg["vocab_size"], "dtype": dtype}


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


def check_hf_config(hf: dict, d: str) -> dict:
    """config.json -> our GPT config, or HFImportError naming what does not fit."""
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
    if cfg["max_len"] != MAX_LEN:
        bad(f"n_positions = {cfg['max_len']}, the lab's sequences take {MAX_LEN}")
    if cfg["vocab_size"] not in VOCAB_SIZES:
        bad(f"vocab_size = {cfg['vocab_size']}, none of the lab's vocabularies ({', '.join(map(str, VOCAB_SIZES))})")
    return cfg


def check_vocab(tok: dict, vocab_size: int, d: str) -> None:
    """tokenizer.json must be a WordLevel model whose words and ids are the lab's, in order."""
    model = tok.get("model")
    if not isinstance(model, dict) or model.get("type") != "WordLevel" or not isinstance(model.get("vocab"), dict):
        raise HFImportError(f"import: {d}/tokenizer.json is not a word-level tokenizer")
    want = {w: i for i, w in enumerate(vocab_words(vocab_size))}
    if model["vocab"] != want:
        diff = sorted(set(model["vocab"].items()) ^ set(want.items()), key=str)[:3]
        raise HFImportError(f"import: {d}/tokenizer.json's vocabulary is not the lab's {vocab_size} words "
                            f"(differs at {', '.join(f'{w!r:.12}={i!r:.8}' for w, i in diff)})")


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
