"""The lab's and sweeps' run directories: one process at a time (a second stops naming the holder, or waits), a lock
left by a killed holder is taken over and said; files keep the mode a plain open() gives them."""
import multiprocessing as mp
import os
import signal
import stat
import time

import pytest

from reasonlab import experiments as X
from reasonlab.cli import main
from reasonlab.io import runs
from reasonlab.io.checkpoint import write_json

TOY = os.path.join(os.path.dirname(__file__), "toy_experiment.py")
FORK = mp.get_context("fork")


@pytest.fixture(autouse=True)
def clean_registry():
    before, loaded = dict(zip(X.names(), map(X.get, X.names()))), set(X._LOADED)
    yield
    X.REGISTRY.clear()
    X.REGISTRY.update(before)
    X._LOADED.clear()
    X._LOADED.update(loaded)


def hold(path, seconds, ready):
    runs.lock(path, "--out")
    ready.set()
    time.sleep(seconds)
    runs.unlock(path)


def holder(path, seconds):
    ready = FORK.Event()
    p = FORK.Process(target=hold, args=(path, seconds, ready))
    p.start()
    assert ready.wait(30)
    return p


def toy_lab(out, *extra):
    return main(["lab", "--experiment", TOY, "--only", "toy", "--seeds", "0", "--out", str(out), *extra])


def test_a_second_lab_on_one_out_stops_naming_the_holder(tmp_path, capsys):
    out = tmp_path / "lab"
    p = holder(str(out), 60)
    try:
        assert toy_lab(out) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"in use by process {p.pid}" in err and "--out" in err
        assert not (out / "toy").exists()                      # nothing ran
    finally:
        p.kill()
        p.join()
    assert toy_lab(out) == 0                                    # the killed holder's lock is taken over, and said
    assert f"took over the lock of process {p.pid}" in capsys.readouterr().out
    assert toy_lab(out) == 0 and "took over" not in capsys.readouterr().out   # a clean end leaves no pid behind


def test_wait_waits_for_the_holder(tmp_path, capsys):
    out = tmp_path / "lab"
    p = holder(str(out), 1.5)
    t = time.perf_counter()
    assert toy_lab(out, "--wait") == 0
    assert time.perf_counter() - t > 0.5 and "waiting for it" in capsys.readouterr().out
    p.join()


def test_a_second_sweep_on_one_out_stops(tmp_path, capsys):
    out = tmp_path / "sweep"
    p = holder(str(out), 60)
    try:
        assert main(["sweep", "--grid", "beta=0,0.04", "--base", "tiny", "--out", str(out)]) == 2
        assert f"in use by process {p.pid}" in capsys.readouterr().err
    finally:
        p.kill()
        p.join()


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_atomic_writes_keep_the_umasks_mode(tmp_path, mask):
    old = os.umask(mask)
    try:
        write_json(str(tmp_path / "a.json"), {"x": 1})
        with open(tmp_path / "b.json", "w") as f:
            f.write("{}")
        runs.save_checkpoint(str(tmp_path), 1, {}, {})
    finally:
        os.umask(old)
    mode = lambda p: stat.S_IMODE(os.stat(p).st_mode)   # noqa: E731
    assert mode(tmp_path / "a.json") == mode(tmp_path / "b.json") == 0o666 & ~mask
    assert mode(tmp_path / "ckpt-000001") == 0o777 & ~mask
    assert mode(tmp_path / "ckpt-000001" / "state.json") == 0o666 & ~mask
