"""Checkpoints as safetensors + JSON, written atomically, and the spec's train-once cache `get_model`.

A checkpoint `<stem>` is two files: `<stem>.safetensors` (tensors) and `<stem>.json` (metadata, including the
SHA-256 of the tensor file). The JSON is written last, so a checkpoint whose JSON exists and whose hash matches
is complete; anything else is reported as unreadable. Nothing is ever unpickled.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from typing import Callable

import torch
from safetensors.torch import load_file, save_file

from .model import GPT

CACHE_ENV = "REASONLAB_CACHE"
CACHE_VERSION = 1  # bump when a change to training makes old cached models stale
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


class CheckpointError(Exception):
    """A checkpoint that is missing, truncated, corrupt or of the wrong shape."""


def cache_dir(path: str | None = None) -> str:
    """The model cache: `path`, else $REASONLAB_CACHE, else ~/.cache/reasonlab."""
    return os.path.abspath(os.path.expanduser(path or os.environ.get(CACHE_ENV) or "~/.cache/reasonlab"))


def check_name(name: str) -> str:
    """A cache name is letters, digits, '_', '.', '-' (no separators, no '..'): it cannot leave the cache."""
    if not isinstance(name, str) or not NAME_RE.match(name) or ".." in name:
        raise ValueError(f"invalid model name {name!r}: use letters, digits, '_', '.' and '-' only")
    return name


def atomic_write(path: str, write: Callable[[str], None]) -> None:
    """Call write(tmp) on a temporary file beside `path`, then rename it into place."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".tmp-", suffix=os.path.basename(path))
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
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


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def save_tensors(stem: str, tensors: dict[str, torch.Tensor], meta: dict) -> None:
    """Write <stem>.safetensors then <stem>.json (meta + the tensor file's hash), each atomically."""
    tensors = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
    atomic_write(stem + ".safetensors", lambda tmp: save_file(tensors, tmp))
    write_json(stem + ".json", dict(meta, sha256=_sha256(stem + ".safetensors")))


def load_tensors(stem: str) -> tuple[dict[str, torch.Tensor], dict]:
    """Read a checkpoint written by save_tensors; CheckpointError if missing, truncated or corrupt."""
    try:
        with open(stem + ".json") as f:
            meta = json.load(f)
        if not isinstance(meta, dict) or _sha256(stem + ".safetensors") != meta.get("sha256"):
            raise CheckpointError(f"checkpoint {stem} is corrupt (tensor file does not match its metadata)")
        return load_file(stem + ".safetensors"), meta
    except CheckpointError:
        raise
    except FileNotFoundError as e:
        raise CheckpointError(f"checkpoint {stem} not found ({os.path.basename(e.filename or '')})") from None
    except Exception as e:  # OSError, JSON and safetensors' own errors: all mean "unreadable"
        raise CheckpointError(f"checkpoint {stem} is unreadable: {type(e).__name__}: {e}") from None


def save_model(stem: str, model: GPT, meta: dict) -> None:
    save_tensors(stem, model.state_dict(), dict(meta, model=model.config()))


def load_model(stem: str) -> tuple[GPT, dict]:
    """A GPT rebuilt from its saved config, weights loaded strictly."""
    state, meta = load_tensors(stem)
    try:
        model = GPT(**meta["model"])
        model.load_state_dict(state, strict=True)
    except (KeyError, TypeError, RuntimeError) as e:
        raise CheckpointError(f"checkpoint {stem} does not fit the model: {e}") from None
    return model.eval(), meta


def resolve(path: str) -> str:
    """Accept a checkpoint given as stem, .json or .safetensors path."""
    for ext in (".json", ".safetensors"):
        if path.endswith(ext):
            return path[:-len(ext)]
    return path


def fingerprint(obj) -> str:
    """Short SHA-256 of a JSON-able object (the STaR data, for the cache key)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def cache_key(cfg: dict, init: GPT | None = None) -> dict:
    """What decides whether a cached model is still valid: the recipe, the fixed data's fingerprint, the init."""
    key = {k: v for k, v in cfg.items() if k != "fixed"}
    key["n_fixed"] = len(cfg.get("fixed") or [])
    key["fixed_hash"] = fingerprint(cfg.get("fixed"))
    if init is not None:
        h = hashlib.sha256()
        for name, t in sorted(init.state_dict().items()):
            h.update(name.encode() + t.detach().cpu().numpy().tobytes())
        key["init_hash"] = h.hexdigest()[:16]
    key["cache_version"] = CACHE_VERSION
    return json.loads(json.dumps(key))  # normalise tuples to lists so it compares equal after a round trip


def get_model(name: str, cfg: dict, quick: bool = False, log: Callable | None = print, init: GPT | None = None,
              cache: str | None = None, device: str | None = None, progress: bool = False) -> GPT:
    """Load <cache>/<name> if it was trained with this cfg (and fixed data, and init); else train and save it.

    quick=True trains 30 steps per phase and neither reads nor writes the cache. A corrupt or stale cached file
    is reported and retrained.
    """
    from .train import pretrain

    stem = os.path.join(cache_dir(cache), check_name(name))
    key = cache_key(cfg, init)
    if not quick and os.path.exists(stem + ".json"):
        try:
            model, meta = load_model(stem)
            if meta.get("key") == key:
                if log:
                    log(f"  (loaded cached model {stem}.safetensors)")
                return model.to(device or "cpu")
            if log:
                log(f"  (cached {name} was trained with another config: retraining)")
        except CheckpointError as e:
            if log:
                log(f"  ({e}: retraining)")
    t0 = time.perf_counter()
    model = pretrain(cfg, quick=quick, init=init, device=device, progress=progress)
    if not quick:
        store(name, cfg, model, init=init, cache=cache, train_seconds=round(time.perf_counter() - t0, 2))
        if log:
            log(f"  (saved {stem}.safetensors)")
    return model


def store(name: str, cfg: dict, model: GPT, init: GPT | None = None, cache: str | None = None, **meta) -> str:
    """Put a model trained with cfg into the cache under `name`, so get_model(name, cfg) loads it."""
    from . import __version__
    stem = os.path.join(cache_dir(cache), check_name(name))
    save_model(stem, model, {"key": cache_key(cfg, init), "version": __version__, **meta})
    return stem
