"""Run-directory bookkeeping for `reasonlab train`: one writer per directory, a log that survives a torn line, and
checkpoints that are one atomic unit.

    <run_dir>/.lock               advisory fcntl lock, holding the writer's pid (a second process is refused)
    <run_dir>/config.json         the run's config
    <run_dir>/metrics.jsonl       one JSON line per step; a torn final line (kill or full disk mid-write) is
                                  dropped on resume, and said so
    <run_dir>/ckpt-000010/        the checkpoint after step 10: state.safetensors + state.json, written into a
                                  .tmp-ckpt-* directory and renamed into place in one step; the previous one is
                                  removed only after the next is in place, and resume falls back to it when the
                                  newest does not verify

Resume with no complete checkpoint starts at step 0 and says so. Resume with a changed field that defines the run
(learning rate, algorithm, seed, ...) is refused: the restored optimizer and RNG would silently keep the old ones.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import tempfile
from typing import Callable

from .checkpoint import CheckpointError, load_tensors, save_tensors, umask, write_json, write_text
from .files import PathError, writable_dir

CKPT_RE = re.compile(r"ckpt-(\d+)")
# RLConfig fields that may change on --resume: how long and how chatty the run is, not what it computes
RESUMABLE_CHANGES = {"steps", "log_every", "table_every", "checkpoint_every"}


class RunError(ValueError):
    """A run directory that cannot be used as asked (locked, already holding a run, changed config on resume)."""


# ---------------------------------------------------------------------------------------------------------------
# The lock. flock locks belong to an open file description, so a second open in the same process would block on
# itself: the descriptors this process holds are kept here, and taking a lock it already holds is a no-op.

_HELD: dict[str, int] = {}


def lock(run_dir: str, flag: str = "--out", wait: bool = False, log: Callable | None = None) -> bool:
    """Take the run directory's lock; True if taken now, False if this process already held it. If another process
    holds it: RunError naming its pid, or (wait) wait for it. A pid left in the lock file by a process that died
    holding it is said (log) and taken over. PathError if the directory cannot be created or written."""
    run_dir = writable_dir(run_dir, "run directory")
    if run_dir in _HELD:
        return False
    fd = os.open(os.path.join(run_dir, ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        if not wait:
            os.close(fd)
            raise RunError(f"{run_dir} is in use by process {holder}: wait for it to finish (or pass --wait), or "
                           f"use another {flag}") from None
        if log:
            log(f"{run_dir} is in use by process {holder}: waiting for it")
        fcntl.flock(fd, fcntl.LOCK_EX)
    stale = os.pread(fd, 32, 0).decode(errors="replace").strip()
    if stale and log:           # a holder that unlocks clears its pid: this one died holding the lock
        log(f"{run_dir}: took over the lock of process {stale}, which is no longer running")
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    _HELD[run_dir] = fd
    return True


def unlock(run_dir: str) -> None:
    fd = _HELD.pop(os.path.abspath(os.path.expanduser(run_dir)), None)
    if fd is not None:
        os.ftruncate(fd, 0)     # no pid left behind: the next holder knows this one ended cleanly
        os.close(fd)


@contextlib.contextmanager
def locked(run_dir: str, flag: str, wait: bool = False, log: Callable | None = None):
    """The run directory's lock for a block (released after it, unless this process held it before)."""
    taken = lock(run_dir, flag, wait, log)
    try:
        yield
    finally:
        if taken:
            unlock(run_dir)


def unlock_all() -> None:
    for d in list(_HELD):
        unlock(d)


# ---------------------------------------------------------------------------------------------------------------
# The metrics log.

def append_metric(run_dir: str, rec: dict) -> None:
    """One JSON line, written with one write() call: a kill leaves the file whole or with one torn final line."""
    with open(os.path.join(run_dir, "metrics.jsonl"), "a") as f:
        f.write(json.dumps(rec) + "\n")


def read_metrics(path: str, log: Callable | None = None) -> list[dict]:
    """The records of a metrics.jsonl. A torn final line (no newline, or not JSON) is dropped, and said; a bad
    line before the end is an error naming the file and line (it is not the trace of a crash)."""
    if not os.path.exists(path):
        return []
    with open(path, "rb") as f:
        lines = f.read().decode("utf-8", errors="replace").split("\n")
    tail = lines.pop()            # "" when the file ends with a newline, else the last line, maybe torn
    try:                          # a whole record that lost only its newline is kept
        rec = json.loads(tail)
        if isinstance(rec, dict) and isinstance(rec.get("step"), int):
            lines.append(tail)
            tail = ""
    except ValueError:
        pass
    recs = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            if not isinstance(rec, dict) or not isinstance(rec.get("step"), int):
                raise ValueError("no integer 'step'")
        except ValueError as e:
            if i == len(lines) - 1 and not tail:   # the last complete-looking line may be torn too
                tail = line
                break
            raise RunError(f"{path}, line {i + 1}: not a metrics record ({e})") from None
        recs.append(rec)
    if tail.strip() and log:
        log(f"dropped a torn final line of {path} ({len(tail)} bytes: the run was stopped mid-write)")
    return recs


def truncate_metrics(run_dir: str, last_step: int, log: Callable | None = None) -> None:
    """Keep the records of steps <= last_step: steps logged after the checkpoint are run again on resume."""
    path = os.path.join(run_dir, "metrics.jsonl")
    if os.path.exists(path):
        keep = [r for r in read_metrics(path, log) if r["step"] <= last_step]
        write_text(path, "".join(json.dumps(r) + "\n" for r in keep))


# ---------------------------------------------------------------------------------------------------------------
# Checkpoints: a directory per step, renamed into place.

def checkpoints(run_dir: str) -> list[tuple[int, str]]:
    """(step, stem) of every checkpoint directory, newest first; a pre-directory `state.*` pair comes last."""
    out = []
    for d in os.listdir(run_dir) if os.path.isdir(run_dir) else []:
        m = CKPT_RE.fullmatch(d)
        if m and os.path.isdir(os.path.join(run_dir, d)):
            out.append((int(m.group(1)), os.path.join(run_dir, d, "state")))
    out.sort(reverse=True)
    if os.path.exists(os.path.join(run_dir, "state.json")):   # runs written before checkpoints were directories
        out.append((-1, os.path.join(run_dir, "state")))
    return out


def latest(run_dir: str) -> str | None:
    """The stem of the newest checkpoint (not verified), or None."""
    c = checkpoints(run_dir)
    return c[0][1] if c else None


def save_checkpoint(run_dir: str, step: int, tensors: dict, meta: dict) -> str:
    """Write ckpt-<step>/ as one unit: both files into a fresh temp directory, then one rename. Older checkpoints
    are removed only once the new one is in place, so a kill at any point leaves a complete checkpoint."""
    tmp = tempfile.mkdtemp(dir=run_dir, prefix=".tmp-ckpt-")
    os.chmod(tmp, 0o777 & ~umask())                 # a plain mkdir's mode, not mkdtemp's 0700
    final = os.path.join(run_dir, f"ckpt-{step:06d}")
    try:
        save_tensors(os.path.join(tmp, "state"), tensors, meta)
        if os.path.isdir(final):    # a checkpoint of this step that did not verify: we fell back past it
            shutil.rmtree(final)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for s, stem in checkpoints(run_dir):
        if s != step:
            if s < 0:
                for ext in (".json", ".safetensors"):
                    if os.path.exists(stem + ext):
                        os.remove(stem + ext)
            else:
                shutil.rmtree(os.path.dirname(stem), ignore_errors=True)
    return os.path.join(final, "state")


def load_checkpoint(run_dir: str, log: Callable | None = None) -> tuple[str, dict, dict] | None:
    """(stem, tensors, meta) of the newest checkpoint that verifies, falling back to older ones; None if none."""
    for _, stem in checkpoints(run_dir):
        try:
            t, meta = load_tensors(stem)
            return stem, t, meta
        except CheckpointError as e:
            if log:
                log(f"{e}: falling back to the previous checkpoint")
    return None


def clean_temps(run_dir: str) -> None:
    """Remove what killed writers left (.tmp-ckpt-* directories, .tmp-* files); only called with the lock held."""
    for f in os.listdir(run_dir):
        if f.startswith(".tmp-"):
            p = os.path.join(run_dir, f)
            shutil.rmtree(p, ignore_errors=True) if os.path.isdir(p) else os.remove(p)


def config_changes(old: dict, new: dict) -> list[str]:
    """'field: old -> new' for each run-defining field that differs (after a JSON round trip: tuples are lists)."""
    old, new = json.loads(json.dumps(old)), json.loads(json.dumps(new))
    return [f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in sorted(set(old) | set(new))
            if k not in RESUMABLE_CHANGES and old.get(k) != new.get(k)]


def has_run(run_dir: str) -> bool:
    return os.path.exists(os.path.join(run_dir, "metrics.jsonl")) or bool(checkpoints(run_dir))


def precheck(run_dir: str, resume: bool) -> None:
    """Before any work: the directory is usable and ours (locked), and a fresh run would not clobber one."""
    lock(run_dir)
    if not resume and has_run(run_dir):
        raise RunError(f"run directory {run_dir} already has a run: pass --resume to continue it or another --out")


def open_run(run_dir: str, cfg: dict, resume: bool, apply: Callable[[dict, dict], tuple[int, list]],
             log: Callable | None = print) -> tuple[int, list, bool]:
    """Lock and set up a run directory; with resume, restore the newest complete checkpoint through
    apply(tensors, meta) -> (step, history). Returns (start step, history, whether this call took the lock)."""
    took = lock(run_dir)
    try:
        if not resume and has_run(run_dir):
            raise RunError(f"run directory {run_dir} already has a run: pass --resume to continue it or another --out")
        clean_temps(run_dir)
        start, hist = 0, []
        if resume:
            got = load_checkpoint(run_dir, log)
            if got is None:
                if log:
                    log(f"no complete checkpoint in {run_dir}: starting at step 0")
            else:
                stem, t, meta = got
                changed = config_changes(meta.get("config", {}), cfg)
                if changed:
                    raise RunError(f"--resume with a changed run config ({'; '.join(changed)}): restore the old "
                                   f"values or use another --out")
                start, hist = apply(t, meta)
                if log:
                    log(f"resumed {run_dir} at step {start} ({os.path.relpath(stem, run_dir)})")
            truncate_metrics(run_dir, start, log)
        write_json(os.path.join(run_dir, "config.json"), cfg)
    except BaseException:
        if took:
            unlock(run_dir)
        raise
    return start, hist, took


__all__ = ["RunError", "PathError", "lock", "unlock", "unlock_all", "append_metric", "read_metrics",
           "truncate_metrics", "checkpoints", "latest", "save_checkpoint", "load_checkpoint", "open_run", "precheck"]
