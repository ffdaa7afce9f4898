"""kill -9 at random points of real `reasonlab train` runs, then `--resume`: the resumed run finishes, its
metrics.jsonl holds steps 1..N once each, and its final policy is bit-identical to an uninterrupted run's. The runs
start from an untrained model saved to a file (nothing is trained first); a small entropy bonus moves its weights
at every step, so that equal weights say the resume restored the optimizer and the sampling RNG, not that nothing
moved (untrained, every reward is 0 and GRPO's advantages with it)."""
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest
import torch

from reasonlab.io import checkpoint, runs
from reasonlab.io.checkpoint import save_model
from reasonlab.train.sft import build_model

STEPS = 16
KILLS = 5


def train_argv(run, model, resume=False) -> list[str]:
    return [sys.executable, "-m", "reasonlab", "train", "--checkpoint", model, "--seed", "0", "--steps", str(STEPS),
            "--prompts-per-step", "4", "--num-generations", "4", "--checkpoint-every", "2", "--entropy-coef", "0.01",
            "--out", str(run)] + (["--resume"] if resume else [])


def env() -> dict:
    """This test's environment (its own model cache), one thread per process: the machine is shared."""
    return {**os.environ, "OMP_NUM_THREADS": "1"}


def final_policy(run) -> dict:
    tensors, _ = checkpoint.load_tensors(runs.latest(str(run)))
    return {k: v for k, v in tensors.items() if k.startswith("policy.")}


def logged_steps(run) -> list[int]:
    with open(os.path.join(run, "metrics.jsonl")) as f:
        return [json.loads(line)["step"] for line in f]


def lines(path) -> int:
    with open(path) as f:
        return sum(1 for _ in f)


@pytest.fixture
def model(tmp_path):
    stem = str(tmp_path / "m")
    save_model(stem, build_model(0), {})
    return stem


@pytest.fixture
def reference(model, tmp_path):
    """The uninterrupted run's final policy."""
    run = tmp_path / "ref"
    subprocess.run(train_argv(run, model), env=env(), capture_output=True, check=True)
    return final_policy(run)


def kill_at_random(run, model, rng: random.Random) -> dict:
    """Start a run and SIGKILL it once `target` steps are logged, 0-150 ms later (target 0: 0.5-3 s after the start,
    during start-up); what was on disk then."""
    p = subprocess.Popen(train_argv(run, model), env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    target = rng.randint(0, STEPS - 1)
    log = os.path.join(run, "metrics.jsonl")
    while p.poll() is None and target and (not os.path.exists(log) or lines(log) < target):
        time.sleep(0.01)
    time.sleep(rng.uniform(0.0, 0.15) if target else rng.uniform(0.5, 3.0))
    finished = p.poll() is not None
    p.send_signal(signal.SIGKILL)
    p.wait()
    return {"target": target, "finished": finished, "checkpoints": [s for s, _ in runs.checkpoints(str(run))]}


@pytest.mark.slow
def test_runs_killed_at_random_points_resume_to_the_uninterrupted_result(tmp_path, model, reference):
    start = {k: v for k, v in build_model(0).state_dict().items()}
    assert any(not torch.equal(v, start[k[len("policy."):]]) for k, v in reference.items())   # the weights moved
    rng, trials = random.Random(1234), []
    for i in range(KILLS):
        run = tmp_path / f"kill{i}"
        t = kill_at_random(run, model, rng)
        r = subprocess.run(train_argv(run, model, resume=True), env=env(), capture_output=True, text=True)
        t["resume"] = r.returncode, (r.stderr.strip().splitlines() or [""])[-1][-200:]
        t["said"] = [s for s in r.stdout.splitlines() if "resumed" in s or "starting at step 0" in s]
        t["steps"] = logged_steps(run) if r.returncode == 0 else None
        t["same"] = r.returncode == 0 and all(torch.equal(reference[k], v) for k, v in final_policy(run).items())
        trials.append(t)
    bad = [t for t in trials if t["resume"][0] != 0 or t["steps"] != list(range(1, STEPS + 1)) or not t["same"]]
    assert not bad, bad
    assert any(t["checkpoints"] and not t["finished"] for t in trials), trials   # some kills fell mid-run
