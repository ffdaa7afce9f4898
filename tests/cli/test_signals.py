"""SIGTERM and Ctrl-C stop the lab and sweeps with their pool workers within 5 seconds: one line, exit 143 or 130,
no worker traceback, no process left behind; finished units are kept and a rerun reuses them."""
import os
import re
import signal
import subprocess
import sys
import time

import pytest

TOY = os.path.join(os.path.dirname(__file__), "..", "toy_experiment.py")


def until(ready, timeout=120) -> bool:
    end = time.time() + timeout
    while time.time() < end:
        if ready():
            return True
        time.sleep(0.2)
    return False


def started(logs, n):
    """n unit logs show their first attempt: the workers are busy."""
    return lambda: os.path.isdir(logs) and sum("=== attempt" in open(os.path.join(logs, f)).read()
                                               for f in os.listdir(logs)) >= n


def gone(pgid, timeout=5.0) -> bool:
    end = time.time() + timeout
    while time.time() < end:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def stop(argv, ready, sig, env=None):
    """Start a command in its own process group, wait until ready(), send sig (Ctrl-C: to the whole group, as a
    terminal does; SIGTERM: to the driver alone, as kill does); (exit code, stderr, seconds it took to stop)."""
    p = subprocess.Popen([sys.executable, "-m", "reasonlab", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True, env={**os.environ, **(env or {})})
    try:
        assert until(ready), p.communicate(timeout=5)
        time.sleep(0.5)
        t = time.time()
        os.killpg(p.pid, sig) if sig == signal.SIGINT else p.send_signal(sig)
        _, err = p.communicate(timeout=10)
        took = time.time() - t
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert gone(p.pid), "processes left behind"
    return p.returncode, err, took


@pytest.mark.parametrize("sig,code,word", [(signal.SIGTERM, 143, "terminated"),
                                           pytest.param(signal.SIGINT, 130, "interrupted", marks=pytest.mark.slow)])
def test_the_lab_and_its_workers_stop_cleanly(tmp_path, sig, code, word):
    out = tmp_path / "lab"
    argv = ["lab", "--experiment", TOY, "--only", "toy", "--seeds", "0", "1", "2", "--workers", "2", "--out", str(out)]
    (tmp_path / "marker").write_text("")
    rc, err, took = stop(argv, started(str(out / "logs"), 2), sig,
                         {"TOY_SLEEP": "60", "TOY_MARKER": str(tmp_path / "marker")})
    assert rc == code and err.strip().splitlines()[-1] == f"reasonlab: {word}", err
    assert "Traceback" not in err and took < 5.0
    assert not (out / "toy" / "seed0.json").exists()                        # nothing half-written


@pytest.mark.slow
@pytest.mark.parametrize("sig,code,word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_a_sweep_and_its_workers_stop_cleanly_and_a_rerun_reuses_what_finished(tmp_path, sig, code, word):
    out = tmp_path / "sweep"
    argv = ["sweep", "toy", "--experiment", TOY, "--grid", "sleep=0,60", "--seeds", "0", "--workers", "2",
            "--out", str(out), "--cache-dir", str(tmp_path / "c")]
    cells = out / "cells"                                   # the sleep=0 cell has finished, the other one sleeps
    done = lambda: cells.is_dir() and any(d.startswith("sleep=0.0-") and os.path.exists(cells / d / "seed0.json")  # noqa: E731
                                          for d in os.listdir(cells))
    rc, err, took = stop(argv, done, sig)
    assert rc == code and err.strip().splitlines()[-1] == f"reasonlab: {word}", err
    assert "Traceback" not in err and took < 5.0
    rerun = subprocess.run([sys.executable, "-m", "reasonlab", *argv[:5], "sleep=0", *argv[6:]], capture_output=True,
                           text=True)
    assert rerun.returncode == 0 and "finished earlier, reused" in rerun.stdout, rerun.stdout + rerun.stderr


@pytest.mark.slow
def test_a_ray_sweep_keeps_the_commands_sigterm_handling_and_a_rerun_reuses_what_finished(tmp_path):
    """ray.init replaces the SIGTERM handler and Ray's native failure handler dumps a stack (or aborts, exit -6):
    the command keeps its own, one line and exit 143, nothing left running."""
    pytest.importorskip("ray")
    out = tmp_path / "sweep"
    argv = ["sweep", "toy", "--experiment", TOY, "--grid", "sleep=0,60", "--seeds", "0", "--executor", "ray",
            "--workers", "2", "--out", str(out), "--cache-dir", str(tmp_path / "c")]
    cells = out / "cells"
    done = lambda: cells.is_dir() and any(d.startswith("sleep=0.0-") and os.path.exists(cells / d / "seed0.json")  # noqa: E731
                                          for d in os.listdir(cells))
    rc, err, took = stop(argv, done, signal.SIGTERM)
    said = [ln for ln in re.split(r"[\r\n]", err) if ln.strip() and not re.search(r"\d+/\d+ \[", ln)    # progress bars
            and not re.match(r"\d{4}-\d\d-\d\d [\d:,]+\t(INFO|WARNING) ", ln)]                  # Ray's start-up log
    assert rc == 143 and said == ["reasonlab: terminated"], err               # one line: no traceback, no native dump
    rerun = subprocess.run([sys.executable, "-m", "reasonlab", *argv[:5], "sleep=0", *argv[6:]], capture_output=True,
                           text=True)
    assert rerun.returncode == 0 and "finished earlier, reused" in rerun.stdout, rerun.stdout + rerun.stderr
