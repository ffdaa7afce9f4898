"""The model zoo: every model the lab trains once and keeps in the cache (the base models, the erring
thinkers, any recipe), each under a lock so that two processes never train the same one.

    <cache>/<name>.safetensors + <name>.json   the weights and {key, version, ...}; the key is the recipe's
                                               (checkpoint.cache_key), so a changed recipe retrains
    <cache>/.<name>.lock                       held while one process trains <name>; another waits, then loads it

The package ships the lab's starting models (reasonlab/models/: the five base models, the erring thinkers and the
quick base models of seeds 0 and 1, each with its recipe's key), so that findings do not move with the CPU that
trained them and the lab skips minutes of training: a cache miss whose key matches a shipped model copies it into
the cache. REASONLAB_RETRAIN=1 (`reasonlab lab --retrain`) trains them here instead; `reasonlab pretrain` always
trains.
"""
from __future__ import annotations

import copy
import fcntl
import glob
import json
import os
import time
from dataclasses import asdict
from typing import Any, Callable

from .. import __version__
from ..core.model import GPT
from ..io.checkpoint import CheckpointError, cache_key, fingerprint, load_model, save_model
from ..io.files import cache_dir, check_name, resolve, writable_dir
from ..tasks import Task
from .erring import ERR_CFG
from .sft import base_cfg, base_name, for_task, model_name, pretrain

STALE_TMP_S = 600          # a cache temp file older than this is an orphan of a killed writer
SHIPPED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models")
"""the starting models that come with the package"""


def shipped(name: str, key: dict, retrain: bool = False) -> GPT | None:
    """The package's copy of `name` if it was trained with this key (and retraining was not asked for, here or by
    REASONLAB_RETRAIN), else None."""
    stem = os.path.join(SHIPPED, name)
    if retrain or os.environ.get("REASONLAB_RETRAIN", "") not in ("", "0") or not os.path.exists(stem + ".json"):
        return None
    try:
        model, meta = load_model(stem)
    except CheckpointError:
        return None
    return model if meta.get("key") == key else None


def train_size(cfg: dict) -> str:
    """What training the recipe takes, said before it starts: its steps (a gated phase: at most), no time (a time
    guessed from another machine misleads on this one; the progress bar measures it here)."""
    steps = sum(ph[1] for ph in cfg.get("phases", []))
    iters = cfg.get("misread", {}).get("iters", 0)
    return f"at most {steps:,} steps" if steps else f"{iters} evaluations to place its noise"


class _NameLock:
    """An advisory lock on one cache name (<cache>/.<name>.lock, fcntl): one process trains a model while another
    wanting the same name waits, then loads what the first stored instead of training it again."""

    def __init__(self, stem: str, log: Callable | None):
        self.path = os.path.join(os.path.dirname(stem), f".{os.path.basename(stem)}.lock")
        self.log = log

    def __enter__(self):
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self.fd, 32, 0).decode(errors="replace").strip() or "?"
            if self.log:
                self.log(f"  (process {holder} is training {os.path.basename(self.path)[1:-5]}: waiting for it)")
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"{os.getpid()}\n".encode(), 0)
        return self

    def __exit__(self, *exc):
        os.close(self.fd)   # closing the descriptor releases the lock; the file stays (removing it would race)


def clean_orphans(directory: str, name: str, older_than: float = STALE_TMP_S) -> int:
    """Remove temp files of `name` left by a killed writer (atomic_write's .tmp-*<name>.* files). Called with
    the name's lock held; the age limit also spares a writer that does not take the lock (store())."""
    n = 0
    for f in glob.glob(os.path.join(glob.escape(directory), f".tmp-*{glob.escape(name)}.*")):
        try:
            if time.time() - os.path.getmtime(f) > older_than:
                os.remove(f)
                n += 1
        except OSError:
            pass
    return n


def get_model(name: str, cfg: dict, quick: bool = False, log: Callable | None = print, init: GPT | None = None,
              cache: str | None = None, device: str | None = None, progress: bool = False, retrain: bool = False
              ) -> GPT:
    """Load <cache>/<name> if it was trained with this cfg (and fixed data, and init); else train and save it
    (retrain: never copy the package's shipped model).

    quick=True trains 30 steps per phase and neither reads nor writes the cache. A corrupt or stale cached file
    is reported and retrained. An unusable cache directory is an error at once (PathError), before any training;
    the name is locked while it is trained, so a second process waits and then loads it.
    """
    stem = os.path.join(cache_dir(cache), check_name(name))
    key = cache_key(cfg, init)
    if quick:
        return pretrain(cfg, quick=True, init=init, device=device, progress=progress)
    writable_dir(cache_dir(cache), "model cache")
    with _NameLock(stem, log):
        clean_orphans(cache_dir(cache), name)
        why = f"no cached model {name} in {cache_dir(cache)}"
        if os.path.exists(stem + ".json"):
            try:
                model, meta = load_model(stem)
                if meta.get("key") == key:
                    if log:
                        log(f"  (loaded cached model {stem}.safetensors)")
                    return model.to(device or "cpu")
                why = f"cached {name} was trained with another config"
            except CheckpointError as e:
                why = str(e)
        ship = shipped(name, key, retrain)
        if ship is not None:
            store(name, cfg, ship, init=init, cache=cache, shipped=True)
            if log:
                log(f"  (copied the shipped model {name} into {cache_dir(cache)})")
            return ship.to(device or "cpu")
        if log:   # said before the work starts, with its size
            verb = "training it" if why.startswith("no cached") else "retraining"
            log(f"  ({why}: {verb}, {train_size(cfg)})")
        t0, stats = time.perf_counter(), {}
        model = pretrain(cfg, quick=quick, init=init, device=device, progress=progress, stats=stats, log=log)
        store(name, cfg, model, init=init, cache=cache, train_seconds=round(time.perf_counter() - t0, 2),
              phase_steps=stats.get("phase_steps", []))   # a gated phase's length is the run's, not the recipe's
        if log:
            log(f"  (saved {stem}.safetensors)")
    return model


def store(name: str, cfg: dict, model: GPT, init: GPT | None = None, cache: str | None = None, **meta) -> str:
    """Put a model trained with cfg into the cache under `name`, so get_model(name, cfg) loads it."""
    stem = os.path.join(cache_dir(cache), check_name(name))
    save_model(stem, model, {"key": cache_key(cfg, init), "version": __version__, "task": cfg.get("task", "digits"),
                             **meta})
    return stem


_MODELS: dict = {}


def cached_model(name: str, cfg: dict, cache: str | None = None, device: str | None = None, progress: bool = False,
                 log: Callable | None = print):
    """get_model under a per-name file lock in the cache, memoized in this process (a worker loads each base model
    once). The lock only stops duplicate training on one host: on NFS or Lustre flock may be a no-op, and then two
    nodes may both train and store it; the cache's atomic writes keep that correct."""
    key = (cache_dir(cache), check_name(name), fingerprint(cfg), device or "cpu")
    if key not in _MODELS:
        os.makedirs(key[0], exist_ok=True)
        # a name of its own: a lock that checkpoint.get_model may take inside (on <name>.lock) must not be this
        # one, or this process would wait on itself (flock locks of two open() calls conflict)
        with open(os.path.join(key[0], name + ".unit-lock"), "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)      # released when f is closed, also if this process dies
            try:
                _MODELS[key] = get_model(name, cfg, cache=cache, device=device, progress=progress, log=log)
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)
    return _MODELS[key]


def _checkpoint(stem: str, device: str | None = None) -> tuple[GPT, dict]:
    key = ("checkpoint", os.path.abspath(resolve(stem)), device or "cpu")
    if key not in _MODELS:
        model, meta = load_model(key[1])
        _MODELS[key] = (model.to(key[2]).eval(), meta)
    return _MODELS[key]


def checkpoint_model(stem: str, device: str | None = None) -> GPT:
    """A saved model (stem, .json or .safetensors), checked and loaded once per process; each call gets a copy."""
    return copy.deepcopy(_checkpoint(stem, device)[0])


def checkpoint_task(stem: str) -> str:
    """The task a saved model was trained on (its JSON's "task"; digits for a model saved before tasks were named)."""
    return _checkpoint(stem)[1].get("task", "digits")


def model_in_cache(name: str, cfg: dict, cache: str | None = None) -> bool:
    """Whether the cache holds `name` trained with `cfg` (its JSON key matches; the tensors are checked on load).
    Cheap: lets a driver skip the base-model stage, and the start of a process pool for it."""
    try:
        with open(os.path.join(cache_dir(cache), name + ".json")) as f:
            return json.load(f).get("key") == cache_key(cfg)
    except (OSError, ValueError, AttributeError):
        return False


def base_model(seed: int, quick: bool = False, cache: str | None = None, device: str | None = None,
               log: Callable | None = print, progress: bool = False, task: str | Task = "digits") -> GPT:
    """The cached base model of this seed and task, trained first if the cache has none."""
    return get_model(base_name(seed, quick, task), base_cfg(seed, quick, task=task), cache=cache, device=device, log=log,
                     progress=progress)


def erring_cfg(seed: int, task: str | Task = "digits") -> dict:
    """The erring thinker's recipe for a seed and task (ERR_CFG: misread words on the base model)."""
    return for_task(dict(ERR_CFG, seed=seed), task)


def get_erring_model(seed: int, cache: str | None = None, device: str | None = None, log: Callable | None = print,
                     task: str | Task = "digits", stream: int | None = None) -> GPT:
    """The erring thinker for `seed` (ERR_CFG on the cached base model), made once and cached as err-seed<seed>.
    stream: the seed of its misreading in place of `seed` (a second erring thinker on the same base model, made on a
    stream of its own: a placebo's replicate), cached as err-seed<seed>-stream<stream>."""
    base = base_model(seed, cache=cache, device=device, log=log, task=task)
    name = model_name("err", seed, task) + ("" if stream is None else f"-stream{stream}")
    return get_model(name, erring_cfg(seed if stream is None else stream, task), init=base, cache=cache,
                     device=device, log=log)


def on_erring(*defaults: type, replicate: Callable[[Any], bool] | None = None) -> Callable[[Any], dict]:
    """The `depends` of an experiment built on the erring thinker: its recipe and the defaults of these config
    classes (VerifierConfig -> "verifier"), part of the result store's key, so that a change to any reruns it.
    replicate(cfg): the config runs a second erring thinker made on a stream of its own (the placebo's), which the
    key then says."""
    def depends(cfg) -> dict:
        erring = for_task(ERR_CFG, getattr(cfg, "task", "digits"))
        return {"erring": erring, **({"replicate": erring} if replicate and replicate(cfg) else {}),
                **{c.__name__.removesuffix("Config").lower(): asdict(c()) for c in defaults}}
    return depends


def thinker_model(kind: str, seed: int, cache: str | None = None, device: str | None = None,
                  log: Callable | None = None, task: str | Task = "digits", stream: int | None = None) -> GPT:
    """The generator test-time search and the verifiers work on: "erring" (get_erring_model; stream: a second one
    made on a stream of its own), "base" (the standard base model, the contrast) or "quick" (the lab's quick base
    model)."""
    if kind in ("base", "quick"):
        return base_model(seed, quick=kind == "quick", cache=cache, device=device, log=log, task=task)
    return get_erring_model(seed, cache=cache, device=device, log=log, task=task, stream=stream)
