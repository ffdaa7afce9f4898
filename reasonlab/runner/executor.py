"""Executors: run independent units (a config in, a JSON-able result out) here, on a local process pool, or on Ray.

A unit is a module-level function and its keyword arguments. Every executor runs the same function on the same
arguments, so it gets the same result (same seeds, same numbers, given the same torch thread count); only the
driver writes result files (through `on_done`), so a unit that is retried never leaves half a result behind.

    local, workers = 1   in this process, one unit after another (the default; needs neither Ray nor a pool)
    local, workers = N   a pool of N spawned processes, one torch thread each
    ray                  Ray tasks (num_cpus = 1): a local Ray instance with `workers` CPUs, or a running cluster
                         joined with `ray_address`

Failures are retried by the driver, not by Ray or the pool, so that every executor has the same bounded budget
(`retries` more attempts): an exception in the unit, a worker that died (killed, segfault, out of memory: Ray's
own OOM retries are unbounded, so Ray's retries are off) all count as one failed attempt. A unit that still fails
is reported in its Outcome, and the other units go on.

Base models are shared through the model cache; `cached_model` holds a file lock around get_model's
train-and-store so that two workers on one host never train the same model at once (the second one waits and
then loads it). On a cluster the cache must be a path every node sees (or every node trains its own copy, which
is correct, only slower: the model is a deterministic function of its recipe).
"""
from __future__ import annotations

import contextlib
import ctypes
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from typing import Any, Callable, Literal

from tqdm import tqdm

from ..core.config import Count, Count0, check_choices, check_numbers


@dataclass
class ExecConfig:
    executor: Literal["local", "ray"] = "local"
    """local: this process (workers = 1) or a process pool; ray: Ray tasks, on a local instance or a cluster"""
    workers: Count = 1
    """local: processes in the pool (1 = run in this process; `reasonlab lab` defaults to one per CPU); ray without an
    address: CPUs of the local instance (1: all of this machine's)"""
    ray_address: str | None = None
    """join this Ray cluster (e.g. auto, or ray://head:10001); None starts a local instance"""
    retries: Count0 = 1
    """extra attempts for a unit that raised or whose worker died; after that it is reported as failed"""
    threads: Count0 = 0
    """torch threads per unit in pool and Ray workers (0: CPUs // workers locally, the task's CPUs on Ray)"""

    def validate(self) -> None:
        check_choices(self, "execution")               # executor: the choices in its type
        check_numbers(self, "execution")               # workers, retries, threads: the bounds in their types
        if self.ray_address and self.executor != "ray":
            raise ValueError("--ray-address needs --executor ray")
        if self.executor == "ray":
            try:
                import ray  # noqa: F401
            except ImportError:
                raise ValueError("--executor ray needs Ray: pip install 'reasonlab[ray]'") from None


@dataclass
class Unit:
    uid: str
    """unique name, e.g. rl/seed0; also names the log file"""
    fn: Callable
    """a module-level function (workers import it by name)"""
    kwargs: dict = field(default_factory=dict)
    """its arguments: picklable, paths absolute"""
    log: str | None = None
    """the unit's stdout and stderr go to this file (appended, one header per attempt); None: the console"""


class UnitsFailed(RuntimeError):
    """Some units still failed after their retries (the others' results are written)."""


@dataclass
class Outcome:
    uid: str
    ok: bool
    result: Any = None
    error: str | None = None
    attempts: int = 0
    seconds: float = 0.0
    """run time of the successful attempt, measured in the worker"""


# ---------------------------------------------------------------------------------------------------------------
# What runs in the worker.

def set_threads(n: int) -> None:
    """Set torch's thread count for this process. Set at every unit start, not once per worker: a reused Ray
    worker keeps the pool it built first (ray-project/ray#35937)."""
    if n > 0:
        os.environ["OMP_NUM_THREADS"] = str(n)     # read by torch when a unit first imports it
        torch = sys.modules.get("torch")
        if torch is not None and torch.get_num_threads() != n:
            torch.set_num_threads(n)


MALLOC = {-3: 64 << 20, -1: 256 << 20}
"""glibc's mallopt settings that keep_freed_memory makes: M_MMAP_THRESHOLD (-3) 64 MiB, M_TRIM_THRESHOLD (-1)
256 MiB."""


def keep_freed_memory() -> bool:
    """Let glibc's malloc keep freed memory for the next allocation instead of handing it back to the kernel
    (this process only; glibc on Linux only; REASONLAB_MALLOC=default leaves glibc's settings). By default blocks
    over 128 KiB-32 MiB (the threshold adapts) are mmapped and unmapped, and the heap's free top is trimmed, so the
    tensors of a few MiB that every training or decode step makes are fresh pages that fault in as they are
    written, which is slow in a VM; with these settings the lab makes less than half the page faults
    (`benchmarks/allocator.py` measures it, docs/performance.md). An application's choice, not an import's: the CLI, every
    executor unit (the lab, sweeps) and the benchmarks call it; a notebook may. Returns whether the settings were
    made."""
    if os.environ.get("REASONLAB_MALLOC", "").lower() in ("default", "0", "off") or not sys.platform.startswith("linux"):
        return False
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)   # glibc's (musl has none)
    return mallopt is not None and all(mallopt(param, value) == 1 for param, value in MALLOC.items())


def call_unit(fn: Callable, kwargs: dict, threads: int = 0, log: str | None = None, attempt: int = 1):
    """Run fn(**kwargs) with `threads` torch threads and its output in `log`; returns (result, seconds)."""
    set_threads(threads)
    keep_freed_memory()
    t = time.perf_counter()
    if log is None:
        res = fn(**kwargs)
    else:
        os.makedirs(os.path.dirname(os.path.abspath(log)), exist_ok=True)
        with open(log, "a", encoding="utf-8") as f, contextlib.redirect_stdout(f), contextlib.redirect_stderr(f):
            print(f"=== attempt {attempt}, pid {os.getpid()}, {time.strftime('%Y-%m-%d %H:%M:%S')}", flush=True)
            res = fn(**kwargs)
            print(f"=== done in {time.perf_counter() - t:.1f}s", flush=True)
    return res, time.perf_counter() - t


def _ray_call(fn, kwargs, log, attempt):
    import ray
    cpus = ray.get_runtime_context().get_assigned_resources().get("CPU", 1)
    return call_unit(fn, kwargs, max(1, int(cpus)), log, attempt)


# ---------------------------------------------------------------------------------------------------------------
# The driver: one loop per backend around one book of attempts, retries, progress and results.

class _Book:
    def __init__(self, units: list[Unit], ex: ExecConfig, on_done, log, progress, on_start=None):
        self.todo: deque[Unit] = deque(units)
        self.ex, self.on_done, self.log, self.on_start = ex, on_done, log, on_start
        self.attempts: dict[str, int] = {}
        self.out: dict[str, Outcome] = {}
        self.bar = None
        if progress:
            self.bar = tqdm(total=len(units), unit="unit", desc=f"{ex.executor}×{ex.workers}", leave=False)

    def next(self) -> tuple[Unit, int]:
        u = self.todo.popleft()
        self.attempts[u.uid] = self.attempts.get(u.uid, 0) + 1
        if self.on_start is not None:
            self.on_start(u, self.attempts[u.uid])
        return u, self.attempts[u.uid]

    def done(self, u: Unit, result, secs: float) -> None:
        self.out[u.uid] = Outcome(u.uid, True, result, None, self.attempts[u.uid], round(secs, 1))
        if self.on_done is not None:
            self.on_done(u, result, secs)
        self._tick()

    def failed(self, u: Unit, error: str) -> None:
        error = error.strip().splitlines()[-1][:500] if error.strip() else "unknown error"
        n = self.attempts[u.uid]
        if n <= self.ex.retries:
            self._say(f"  {u.uid}: attempt {n} failed ({error}); retrying")
            self.todo.append(u)
        else:
            self._say(f"  {u.uid}: failed after {n} attempt(s): {error}")
            self.out[u.uid] = Outcome(u.uid, False, None, error, n)
            self._tick()

    def _say(self, s):
        if self.log:
            (self.bar.write if self.bar is not None and self.log is print else self.log)(s)

    def _tick(self):
        if self.bar is not None:
            self.bar.update(1)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def run_units(units: list[Unit], ex: ExecConfig | None = None, on_done: Callable | None = None,
              log: Callable | None = print, progress: bool = True, on_start: Callable | None = None) -> dict[str, Outcome]:
    """Run every unit on the executor; on_done(unit, result, seconds) is called in this process as each one
    finishes (write its result file there), on_start(unit, attempt) as each is handed to a worker. Returns
    {uid: Outcome}, in the units' order."""
    ex = ex or ExecConfig()
    ex.validate()
    if len({u.uid for u in units}) != len(units):
        raise ValueError("unit ids must be unique")
    book = _Book(units, ex, on_done, log, progress and bool(units), on_start)
    try:
        if units:
            if ex.executor == "ray":
                _run_ray(book)
            elif ex.workers > 1:
                _run_pool(book)
            else:
                _run_inline(book)
    finally:
        book.close()
    return {u.uid: book.out[u.uid] for u in units}


def _run_inline(book: _Book) -> None:
    while book.todo:
        u, n = book.next()
        try:
            res, secs = call_unit(u.fn, u.kwargs, book.ex.threads, u.log, n)
        except Exception as e:   # KeyboardInterrupt is not an Exception: it stops the run
            book.failed(u, f"{type(e).__name__}: {e}")
        else:
            book.done(u, res, secs)


def _threads(ex: ExecConfig) -> int:
    return ex.threads or max(1, (os.cpu_count() or 1) // ex.workers)


def _worker_main(conn, threads: int, path: list[str]) -> None:
    """A pool worker: runs the units it is sent, one at a time, until it is sent None. Ctrl-C reaches the whole
    process group: the driver alone answers it (it stops the workers), so a worker ignores it. Its progress bars
    take a thread lock, not tqdm's default multiprocessing one: a worker the driver terminates would leave that
    semaphore behind, and the resource tracker's warning about it would follow the driver's last line."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    tqdm.set_lock(threading.RLock())
    sys.path[:0] = [p for p in path if p not in sys.path]
    set_threads(threads)
    while True:
        msg = conn.recv()
        if msg is None:
            return
        fn, kwargs, log, attempt = msg
        try:
            conn.send(("ok", call_unit(fn, kwargs, threads, log, attempt)))
        except Exception as e:
            conn.send(("err", f"{type(e).__name__}: {e}"))


def _run_pool(book: _Book) -> None:
    """`workers` spawned processes (fork would copy the driver's torch threads and locks), each fed one unit at a
    time over a pipe. The driver knows which unit each process runs, so when one dies (killed, segfault, OOM) only
    that unit is charged an attempt and a fresh process takes its place; concurrent.futures' pool cannot do this
    (BrokenProcessPool fails every pending future)."""
    ex = book.ex
    threads = _threads(ex)
    ctx = mp.get_context("spawn")
    path = [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]

    def start():
        here, there = ctx.Pipe()
        proc = ctx.Process(target=_worker_main, args=(there, threads, path), daemon=True)
        proc.start()
        there.close()
        return {"proc": proc, "conn": here, "unit": None}
    slots: list[dict | None] = [None] * min(ex.workers, len(book.todo))   # None: no process (started on demand)
    finished = False
    try:
        while True:
            for i, s in enumerate(slots):
                if book.todo and (s is None or s["unit"] is None):
                    s = slots[i] = s or start()
                    u, n = book.next()
                    s["unit"] = u
                    s["conn"].send((u.fn, u.kwargs, u.log, n))
            busy = [s for s in slots if s is not None and s["unit"] is not None]
            if not busy:
                break
            wait([s["conn"] for s in busy] + [s["proc"].sentinel for s in busy])
            for i, s in enumerate(slots):
                if s is None or s["unit"] is None or not (s["conn"].poll() or not s["proc"].is_alive()):
                    continue
                u = s["unit"]
                try:
                    kind, val = s["conn"].recv()
                except (EOFError, OSError):       # the process died mid-unit: a new one starts if there is work
                    s["proc"].join(1)
                    book.failed(u, f"worker process died (exit code {s['proc'].exitcode})")
                    slots[i] = None
                    continue
                s["unit"] = None
                if kind == "ok":
                    book.done(u, *val)
                else:
                    book.failed(u, val)
        finished = True
    finally:
        live = [s for s in slots if s is not None]
        if not finished:                  # interrupted or terminated: stop the workers now, mid-unit or not
            for s in live:
                s["proc"].terminate()
        for s in live:
            try:
                s["conn"].send(None)
            except (OSError, ValueError):
                pass
        for s in live:
            s["proc"].join(5)
            if s["proc"].is_alive():
                s["proc"].kill()
                s["proc"].join(1)


def ray_init(ex: ExecConfig) -> bool:
    """Start or join Ray unless this process already did; returns whether we started it (and must shut it down)."""
    import ray
    if ray.is_initialized():
        return False
    # ray.init replaces this process's SIGTERM handler (with sys.exit) and Ray's native failure-signal handler
    # dumps a stack (or aborts) on SIGTERM: keep the command's own handling, one line and exit 143
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
    on_term = signal.getsignal(signal.SIGTERM)
    try:
        _start_ray(ex)
    finally:
        if threading.current_thread() is threading.main_thread() and on_term is not None:
            signal.signal(signal.SIGTERM, on_term)
    return True


def _start_ray(ex: ExecConfig) -> None:
    import ray
    if ex.ray_address:
        # ship this checkout of the package to the cluster's workers, so they run the driver's code
        pkg = os.path.dirname(os.path.abspath(__file__))
        ray.init(address=ex.ray_address, runtime_env={"py_modules": [pkg], "env_vars": {"OMP_NUM_THREADS": "1"}},
                 log_to_driver=False)
    else:
        # local workers inherit this environment: make sure they import this checkout of the package
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        pp = os.environ.get("PYTHONPATH", "")
        if root not in pp.split(os.pathsep):
            os.environ["PYTHONPATH"] = root + (os.pathsep + pp if pp else "")
        # workers = 1 (the default) means "not given": Ray then uses every CPU of this machine
        ray.init(num_cpus=ex.workers if ex.workers > 1 else None, include_dashboard=False,
                 object_store_memory=200 * 2 ** 20, log_to_driver=False)


def _ray_wait(refs: list) -> list:
    """The finished refs among `refs`, waiting at most a second (so that a signal is handled soon); a signal's
    exception (SIGTERM's, Ctrl-C's) raised inside Ray's wait comes back wrapped in a SystemError: raise it as itself."""
    import ray
    try:
        return ray.wait(refs, num_returns=1, timeout=1)[0]
    except SystemError as e:
        if e.__context__ is not None and not isinstance(e.__context__, Exception):
            raise e.__context__ from None
        raise


def _run_ray(book: _Book) -> None:
    """Plain tasks, max_retries = 0 (the book retries); ray.wait in completion order, so a slow unit does not
    hold back the results of the others."""
    import ray
    started = ray_init(book.ex)
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(_ray_call)
        pending: dict = {}
        while book.todo or pending:
            while book.todo:
                u, n = book.next()
                pending[remote.remote(u.fn, u.kwargs, u.log, n)] = u
            ready = _ray_wait(list(pending))
            for ref in ready:
                u = pending.pop(ref)
                try:
                    res, secs = ray.get(ref)
                except ray.exceptions.RayTaskError as e:      # the unit raised
                    cause = getattr(e, "cause", None)
                    book.failed(u, f"{type(cause).__name__}: {cause}" if cause is not None else str(e))
                except ray.exceptions.RayError as e:          # the worker or its node died, or ran out of memory
                    book.failed(u, f"{type(e).__name__}: worker died")
                else:
                    book.done(u, res, secs)
    finally:
        if started:
            ray.shutdown()


# ---------------------------------------------------------------------------------------------------------------
# A unit for the executor tests (importable by Ray workers): sleeps, raises or kills its worker on chosen attempts.

def probe_unit(x: int, seconds: float = 0.0, fail: int = 0, die: int = 0, marker: str | None = None) -> dict:
    """Returns {"x": x, "square": x * x} after `seconds`. The first `fail` attempts raise RuntimeError and the next
    `die` attempts kill the worker process (os._exit) midway; attempts are counted in the file `marker`."""
    n = 1
    if marker:
        with open(marker, "a+") as f:
            f.write(".")
            f.seek(0)
            n = len(f.read())
    if n <= fail:
        raise RuntimeError(f"probe unit {x}: planned failure on attempt {n}")
    time.sleep(seconds / 2)
    if n <= fail + die:
        os._exit(13)
    time.sleep(seconds / 2)
    return {"x": x, "square": x * x, "attempt": n}
