"""Checkpoints as safetensors + JSON, written atomically (the spec's train-once cache `get_model` is in train/zoo.py).

A checkpoint `<stem>` is two files: `<stem>.safetensors` (tensors) and `<stem>.json` (metadata, including the
SHA-256 of the tensor bytes written). The JSON is written last, so a checkpoint whose JSON exists and whose hash
matches is complete; anything else is reported as unreadable. Nothing is ever unpickled. A model's config is
checked against bounds and the tensors' shapes before the model is built, and its weights must be finite.
(An RL run's checkpoint is one directory renamed into place: reasonlab/io/runs.py.)
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import stat
import tempfile
from typing import Callable

import torch
from safetensors.torch import load as load_bytes
from safetensors.torch import save as save_bytes

from ..core.model import GPT

CACHE_VERSION = 3  # bump when a change to training makes old cached models stale


# Bounds on a model config read from a file, checked before anything is allocated: a crafted JSON must not make
# us build a 5 GB model (d_model 8192) or loop a million times (n_layers 10**6) before a shape check fails.
MODEL_BOUNDS = {"vocab_size": (1, 4096), "d_model": (1, 4096), "n_layers": (1, 64), "n_heads": (1, 256),
                "max_len": (1, 4096)}
MAX_FILE_BYTES = 2 << 30   # a checkpoint file larger than this is refused unread


class CheckpointError(ValueError):
    """A checkpoint that is missing, truncated, corrupt or of the wrong shape."""


def umask() -> int:
    """The process's umask (read by setting it and setting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: str, write: Callable[[str], None]) -> None:
    """Call write(tmp) on a temporary file beside `path`, then rename it into place. The temp name is unique
    (mkstemp), so two writers never share one; on any failure (ENOSPC included) it is removed. The file gets the
    mode a plain open() would give it (0666 less the umask), not mkstemp's 0600. An OSError names `path`."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".tmp-", suffix=os.path.basename(path))
    os.close(fd)
    try:
        os.chmod(tmp, 0o666 & ~umask())
        write(tmp)
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        if isinstance(e, OSError) and e.filename in (None, tmp):      # name the file the user asked for
            raise OSError(e.errno, e.strerror or str(e), path) from e
        raise


def write_text(path: str, text: str) -> None:
    def w(tmp):
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
    atomic_write(path, w)


def write_json(path: str, obj) -> None:
    def w(tmp):
        with open(tmp, "w") as f:
            json.dump(obj, f, indent=1, sort_keys=True)
    atomic_write(path, w)


def int_keys(obj):
    """JSON turns int keys (k, N) into strings; turn them back, at any depth."""
    if isinstance(obj, dict):
        return {(int(k) if isinstance(k, str) and k.isdigit() and k.isascii() else k): int_keys(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [int_keys(v) for v in obj]
    return obj


def strict_json(obj):
    """obj with every NaN / inf float replaced by None: strict JSON (RFC 8259 has no NaN) for files others read."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: strict_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict_json(v) for v in obj]
    return obj


def save_tensors(stem: str, tensors: dict[str, torch.Tensor], meta: dict) -> None:
    """Write <stem>.safetensors then <stem>.json (meta + the hash of the bytes written), each atomically.

    The hash is of the bytes this process wrote, not of the file after the rename: a second writer that replaced
    the tensor file in between would otherwise get its weights certified under our metadata."""
    data = save_bytes({k: v.detach().cpu().contiguous() for k, v in tensors.items()})

    def w(tmp):
        with open(tmp, "wb") as f:
            f.write(data)
    atomic_write(stem + ".safetensors", w)
    write_json(stem + ".json", dict(meta, sha256=hashlib.sha256(data).hexdigest()))


def load_tensors(stem: str) -> tuple[dict[str, torch.Tensor], dict]:
    """Read a checkpoint written by save_tensors; CheckpointError if missing, truncated or corrupt."""
    try:
        for ext in (".json", ".safetensors"):   # regular files only: a FIFO would hang open()
            if os.path.exists(stem + ext) and not stat.S_ISREG(os.stat(stem + ext).st_mode):
                raise CheckpointError(f"checkpoint {stem}{ext} is not a regular file")
            if os.path.exists(stem + ext) and os.path.getsize(stem + ext) > MAX_FILE_BYTES:
                raise CheckpointError(f"checkpoint {stem}{ext} is larger than {MAX_FILE_BYTES >> 30} GiB")
        with open(stem + ".json") as f:
            meta = json.load(f)
        with open(stem + ".safetensors", "rb") as f:
            data = f.read()   # hash and parse the same bytes: the file may be replaced between two reads
        if not isinstance(meta, dict) or hashlib.sha256(data).hexdigest() != meta.get("sha256"):
            raise CheckpointError(f"checkpoint {stem} is corrupt (tensor file does not match its metadata)")
        return load_bytes(data), meta
    except CheckpointError:
        raise
    except FileNotFoundError as e:
        raise CheckpointError(f"checkpoint {stem} not found ({os.path.basename(e.filename or '')})") from None
    except Exception as e:  # OSError, JSON and safetensors' own errors: all mean "unreadable"
        raise CheckpointError(f"checkpoint {stem} is unreadable: {type(e).__name__}: {e}") from None


def save_model(stem: str, model: GPT, meta: dict) -> None:
    save_tensors(stem, model.state_dict(), dict(meta, model=model.config()))


def check_model_config(cfg, state: dict[str, torch.Tensor], where: str = "checkpoint") -> dict:
    """The saved model config, checked against bounds and against the tensors' shapes before any model is built:
    a crafted config (n_heads 3 or -4, d_model 8192, n_layers 10**6) is refused without allocating anything."""
    def bad(msg):
        raise CheckpointError(f"{where} has an invalid model config: {msg}")
    if not isinstance(cfg, dict) or set(cfg) != set(MODEL_BOUNDS):
        bad(f"expected the fields {', '.join(sorted(MODEL_BOUNDS))}, got {cfg!r:.200}")
    for k, (lo, hi) in MODEL_BOUNDS.items():
        v = cfg[k]
        if type(v) is not int or not lo <= v <= hi:
            bad(f"{k}={v!r:.40} (must be an integer in {lo}..{hi})")
    d, h = cfg["d_model"], cfg["n_heads"]
    if h > d or d % h:
        bad(f"d_model={d} is not divisible by n_heads={h}")
    want = {"tok.weight": (cfg["vocab_size"], d), "pos.weight": (cfg["max_len"], d), "head.weight": (cfg["vocab_size"], d),
            "ln_f.weight": (d,)}
    for i in range(cfg["n_layers"]):
        want[f"blocks.{i}.attn.qkv.weight"] = (3 * d, d)
        want[f"blocks.{i}.mlp.0.weight"] = (4 * d, d)
    n_blocks = len({k.split(".")[1] for k in state if k.startswith("blocks.")})
    if n_blocks != cfg["n_layers"]:
        bad(f"n_layers={cfg['n_layers']} but the weights hold {n_blocks} blocks")
    for k, shape in want.items():
        if k not in state or tuple(state[k].shape) != shape:
            got = tuple(state[k].shape) if k in state else "missing"
            bad(f"tensor {k} is {got}, the config needs {shape}")
    return cfg


def check_finite(state: dict[str, torch.Tensor], where: str) -> None:
    """NaN or inf weights make every logit NaN, and greedy decoding then silently answers token 0: refuse them."""
    for k, v in state.items():
        if v.is_floating_point() and not bool(torch.isfinite(v).all()):
            raise CheckpointError(f"{where} has non-finite weights (NaN or inf in {k})")


def load_model(stem: str) -> tuple[GPT, dict]:
    """A GPT rebuilt from its saved config, weights loaded strictly; config, shapes and finiteness checked first."""
    state, meta = load_tensors(stem)
    cfg = check_model_config(meta.get("model"), state, f"checkpoint {stem}")
    check_finite(state, f"checkpoint {stem}")
    try:
        model = GPT(**cfg)
        model.load_state_dict(state, strict=True)
    except (KeyError, TypeError, RuntimeError) as e:
        raise CheckpointError(f"checkpoint {stem} does not fit the model: {e}") from None
    with torch.no_grad():   # finite weights can still overflow (1e30 everywhere): one tiny forward proves them
        logits, _ = model.eval()(torch.zeros(1, min(2, cfg["max_len"]), dtype=torch.long).clamp(max=cfg["vocab_size"] - 1))
    if not bool(torch.isfinite(logits).all()):
        raise CheckpointError(f"checkpoint {stem} gives non-finite logits")
    return model, meta


def fingerprint(obj) -> str:
    """Short SHA-256 of a JSON-able object (the STaR data, for the cache key)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def weights_hash(model: GPT) -> str:
    """Short SHA-256 of a model's weights (names and bytes)."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode() + t.detach().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def cache_key(cfg: dict, init: GPT | None = None) -> dict:
    """What decides whether a cached model is still valid: the recipe, the fixed data's fingerprint, the init."""
    key = {k: v for k, v in cfg.items() if k != "fixed"}
    key["n_fixed"] = len(cfg.get("fixed") or [])
    key["fixed_hash"] = fingerprint(cfg.get("fixed"))
    if init is not None:
        key["init_hash"] = weights_hash(init)
    key["cache_version"] = CACHE_VERSION
    return json.loads(json.dumps(key))  # normalise tuples to lists so it compares equal after a round trip
