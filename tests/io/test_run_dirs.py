"""The lab's and sweeps' run directories: one process at a time (a second stops naming the holder, or waits), a lock
left by a killed holder is taken over and said; files keep the mode a plain open() gives them."""
import json
import multiprocessing as mp
import os
import signal
import stat
import time

import pytest

from reasonlab.cli import main
from reasonlab.io import runs
from reasonlab.io.checkpoint import write_json

TOY = os.path.join(os.path.dirname(__file__), "..", "toy_experiment.py")
FORK = mp.get_context("fork")


pytestmark = pytest.mark.usefixtures("clean_registry")


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


@pytest.mark.parametrize("bad", ["[1, 2]", '{"key": "k", "seconds": 1}', "{", "result [1, 2]"],
                         ids=["a-list", "no-result", "not-json", "a-result-of-the-wrong-shape"])
def test_a_stored_result_of_the_wrong_shape_is_rerun_and_said(tmp_path, capsys, bad):
    out = tmp_path / "lab"
    assert toy_lab(out, "--workers", "1") == 0
    path = out / "toy" / "seed0.json"
    if bad.startswith("result"):                 # the current key: only the result is wrong
        rec = json.loads(path.read_text())
        path.write_text(json.dumps({**rec, "result": [1, 2]}))
    else:
        path.write_text(bad)
    capsys.readouterr()
    assert toy_lab(out, "--workers", "1") == 0
    assert "running it again" in capsys.readouterr().out
    assert json.loads(path.read_text())["result"]["value"] == 0.5


def test_report_only_over_a_timing_file_of_the_wrong_shape_is_one_line(tmp_path, capsys):
    out = tmp_path / "lab"
    assert toy_lab(out, "--workers", "1") == 0
    (out / "timing.json").write_text("[]")
    capsys.readouterr()
    assert toy_lab(out, "--report-only") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("reasonlab: error:") and "timing.json" in err, err


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
        assert main(["sweep", "rl", "--grid", "steps=1,2", "--out", str(out)]) == 2
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


@pytest.mark.parametrize("toml,argv,msg", [
    ("grid = 5\n", [], "grid must be dict"),
    ("seeds = [-1]\n[grid]\nsteps = [2]\n", [], "seeds must be in 0..4294967295"),
    ("seeds = [true]\n[grid]\nsteps = [2]\n", [], "seeds must be a list of integers"),
    ("[grid]\nn_test = [5]\n[set]\nsteps = 100000000\n", [], "steps = 100,000,000 is more than 10,000,000"),
    ("[grid]\nsteps = [2.5]\n", [], "bad value 2.5 for steps"),
    (None, ["--set", "steps=100000000"], "is more than 10,000,000"),
    (None, ["--grid", "steps=0,1"], "steps must be positive"),
    (None, ["--grid", "steps=2", "--seeds", "-1"], "--seeds must be in 0..4294967295"),
    (None, ["--grid", "steps=" + ",".join(str(i + 1) for i in range(200)),
            "--grid", "n_test=" + ",".join(str(i + 1) for i in range(60))], "36,000 (cell, seed) units"),
    (None, ["--grid", "steps=1,2", "--max-units", "5"], "6 (cell, seed) units, more than --max-units 5"),
])
def test_every_sweep_value_is_checked_before_any_work(tmp_path, capsys, toml, argv, msg):
    if toml is not None:
        (tmp_path / "grid.toml").write_text(toml)
        argv = ["--config", str(tmp_path / "grid.toml")] + argv
    assert main(["sweep", "rl", *argv, "--out", str(tmp_path / "o"), "--cache-dir", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and msg in err, err
    assert not (tmp_path / "o" / "cells").exists()


@pytest.mark.parametrize("toml,argv", [("[grid]\nbeta = [nan]\n", []), (None, ["--set", "beta=nan", "--grid", "steps=1,2"]),
                                       (None, ["--grid", "beta=0,inf"])], ids=["toml", "set", "grid"])
def test_a_non_finite_sweep_value_is_refused_before_any_work(tmp_path, capsys, toml, argv):
    if toml is not None:
        (tmp_path / "grid.toml").write_text(toml)
        argv = ["--config", str(tmp_path / "grid.toml")]
    assert main(["sweep", "l1", *argv, "--out", str(tmp_path / "o"), "--cache-dir", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "beta must be a finite number" in err, err
    assert not (tmp_path / "o" / "cells").exists()


def test_a_value_beyond_bounds_is_refused(tmp_path, capsys):
    assert main(["l1", "--steps", "100000000000", "--out", str(tmp_path)]) == 2
    assert "--steps = 100,000,000,000 is more than 10,000,000" in capsys.readouterr().err


def test_a_config_that_is_not_a_file_and_a_cache_that_is_a_file_are_refused(tmp_path, capsys, monkeypatch):
    os.mkfifo(tmp_path / "grid.toml")
    signal.alarm(20)                              # reading a FIFO would hang: fail instead
    try:
        assert main(["sweep", "rl", "--config", str(tmp_path / "grid.toml"), "--out", str(tmp_path / "o")]) == 2
    finally:
        signal.alarm(0)
    assert "is not a regular file" in capsys.readouterr().err
    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv("REASONLAB_CACHE", str(tmp_path / "afile"))
    assert main(["sweep", "rl", "--grid", "steps=2", "--out", str(tmp_path / "o")]) == 2
    assert "is a file, not a directory" in capsys.readouterr().err


def test_commands_that_draw_nothing_do_not_load_matplotlib(tmp_path):
    import subprocess
    import sys
    code = ("import sys; from reasonlab.train.sft import build_model; from reasonlab.io.checkpoint import save_model\n"
            f"save_model({str(tmp_path / 'm')!r}, build_model(0), {{}})\n"
            "from reasonlab.cli import main\n"
            f"assert main(['sample', '1 2', '--checkpoint', {str(tmp_path / 'm')!r}]) == 0\n"
            f"assert main(['findings', 'diff', {str(tmp_path)!r}, {str(tmp_path)!r}]) == 2\n"
            "print(sorted({'matplotlib'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.splitlines()[-1] == "[]", out.stdout + out.stderr


def test_an_unwritable_home_still_gets_one_line(tmp_path):
    import subprocess
    import sys
    bad = tmp_path / "run" / "base"
    bad.mkdir(parents=True)
    (bad / "seed0.json").write_text("[1, 2]")
    env = {**os.environ, "HOME": "/proc", "XDG_CONFIG_HOME": "", "MPLCONFIGDIR": ""}
    for argv in (["lab", "--report-only", "--out", str(tmp_path / "run"), "--seeds", "0"],
                 ["sample", "1 2", "--checkpoint", str(tmp_path / "missing")]):
        out = subprocess.run([sys.executable, "-m", "reasonlab", *argv], capture_output=True, text=True, env=env)
        assert out.returncode == 2 and out.stderr.count("\n") == 1 and out.stderr.startswith("reasonlab: error"), \
            out.stderr


def test_the_lab_and_each_experiment_config_meet_the_same_bounds():
    from reasonlab import experiments as X
    from reasonlab.runner.config import LabConfig
    with pytest.raises(ValueError, match="seeds must be in"):
        LabConfig(seeds=(-1,)).validate()
    with pytest.raises(ValueError, match="is more than 10,000,000"):
        LabConfig(only=("rl",), configs={"rl": X.get("rl").Config(steps=10**9)}).validate()
