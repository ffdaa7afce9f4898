"""Executors: every unit ends as a result or a reported failure; failures are retried a bounded number of times."""
import os

import pytest

from reasonlab.runner.executor import ExecConfig, Unit, probe_unit, run_units
from reasonlab.train.zoo import cached_model


def units(tmp_path, n=3, **plan):
    """n probe units; `plan` maps x -> dict(fail=..., die=...)."""
    return [Unit(f"u{x}", probe_unit, dict(x=x, marker=str(tmp_path / f"m{x}"), **plan.get(f"u{x}", {})),
                 log=str(tmp_path / "logs" / f"u{x}.log")) for x in range(n)]


def test_inline_unit_that_raises_is_retried_then_reported_and_the_others_finish(tmp_path):
    written = {}
    out = run_units(units(tmp_path, u1=dict(fail=5), u2=dict(fail=1)), ExecConfig(retries=2),
                    on_done=lambda u, r, s: written.__setitem__(u.uid, r), log=None, progress=False)
    assert [o.ok for o in out.values()] == [True, False, True]
    assert out["u1"].attempts == 3 and "planned failure on attempt 3" in out["u1"].error
    assert out["u2"].attempts == 2 and out["u2"].result == {"x": 2, "square": 4, "attempt": 2}
    assert set(written) == {"u0", "u2"}                      # only finished units reach the driver's writer
    log = open(tmp_path / "logs" / "u1.log").read()           # per-unit log, one header per attempt
    assert log.count("=== attempt") == 3


def test_pool_reruns_a_unit_whose_worker_was_killed_and_charges_only_that_unit(tmp_path):
    # u1's worker dies once (rerun succeeds), u3's every time (reported after 1 + retries attempts); the units that
    # shared the pool with them are not charged for it
    out = run_units(units(tmp_path, 5, u1=dict(die=1, seconds=0.4), u3=dict(die=9, seconds=0.4)),
                    ExecConfig(workers=2, retries=1, threads=1), log=None, progress=False)
    assert [o.ok for o in out.values()] == [True, True, True, False, True]
    assert out["u1"].result["attempt"] == 2 and out["u1"].attempts == 2
    assert out["u3"].attempts == 2 and "died (exit code 13)" in out["u3"].error
    assert [out[u].attempts for u in ("u0", "u2", "u4")] == [1, 1, 1]
    assert [out[u].result["square"] for u in ("u0", "u1", "u2", "u4")] == [0, 1, 4, 16]


def test_exec_config_rejects_bad_values():
    for bad in (dict(executor="slurm"), dict(workers=0), dict(retries=-1), dict(ray_address="auto")):
        with pytest.raises(ValueError):
            ExecConfig(**bad).validate()
    with pytest.raises(ValueError, match="unique"):
        run_units([Unit("a", probe_unit, {"x": 1}), Unit("a", probe_unit, {"x": 2})])


def test_cached_model_trains_once_and_leaves_a_lock_file(tmp_path):
    cfg = {"seed": 0, "lr": 3e-3, "batch": 8, "phases": [[[0.0, 0.0, 1.0], 2, 1, [2, 8]]]}
    a = cached_model("tiny-x", cfg, cache=str(tmp_path), log=None)
    b = cached_model("tiny-x", cfg, cache=str(tmp_path), log=None)
    assert a is b                                            # memoized in this process
    assert os.path.exists(tmp_path / "tiny-x.safetensors") and os.path.exists(tmp_path / "tiny-x.unit-lock")


@pytest.mark.slow
def test_lab_on_two_local_workers_writes_the_same_files_as_in_process(quick_cache, tmp_path):
    import json

    from reasonlab.runner import lab

    def files(out):
        res = {}
        for exp in ("base", "budgets", "rl"):
            with open(os.path.join(out, exp, "seed0.json")) as f:
                r = json.load(f)
            res[exp] = (r["key"], untimed(r["result"]))
        return res
    outs = []
    for w in (1, 2):
        out = str(tmp_path / f"w{w}")
        lab.run(lab.LabConfig(quick=True, seeds=(0,), out=out, cache_dir=quick_cache,
                              only=("base", "budgets", "rl"), execution=ExecConfig(workers=w, threads=1)), log=lambda s: None)
        outs.append(files(out))
    assert outs[0] == outs[1]


def untimed(x):
    if isinstance(x, dict):
        return {k: untimed(v) for k, v in x.items()          # wall-clock fields differ between any two runs
                if k not in ("seconds", "timing", "step_time", "tokens_per_s") and not k.endswith("_s")}
    if isinstance(x, list):
        return [untimed(v) for v in x]
    return x


@pytest.mark.slow   # two more worker start-ups; the default suite's budget is tight
def test_two_workers_asking_for_one_missing_model_train_it_once(tmp_path):
    cfg = {"seed": 0, "lr": 3e-3, "batch": 8, "phases": [[[0.0, 0.0, 1.0], 40, 1, [2, 8]]]}
    us = [Unit(f"w{i}", cached_model, dict(name="tiny-y", cfg=cfg, cache=str(tmp_path)), log=str(tmp_path / f"w{i}.log"))
          for i in range(2)]
    out = run_units(us, ExecConfig(workers=2, threads=1), log=None, progress=False)
    assert all(o.ok for o in out.values())
    logs = [open(tmp_path / f"w{i}.log").read() for i in range(2)]
    assert sum("(saved" in x for x in logs) == 1 and sum("(loaded cached model" in x for x in logs) == 1


FAULTS = """
import resource, sys, torch
import reasonlab.train.rl, reasonlab.train.zoo, reasonlab.core.evaluate   # the modules a command has loaded
from reasonlab.runner.executor import keep_freed_memory
kept = keep_freed_memory()
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):          # 40 MB: above the 32 MB that glibc's adaptive mmap threshold can reach
    torch.empty(10 << 20).fill_(1.0)
print(kept, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
"""


def test_kept_freed_memory_is_reused_without_page_faults():
    """keep_freed_memory: a 40 MB tensor made and freed ten times faults its pages in once, not ten times as with
    glibc's own settings (each a fresh mmap); REASONLAB_MALLOC=default leaves those settings."""
    import subprocess
    import sys

    def run(**env):
        out = subprocess.run([sys.executable, "-c", FAULTS], capture_output=True, text=True, check=True,
                             env={**os.environ, "REASONLAB_MALLOC": "", **env}).stdout.split()
        return out[0] == "True", int(out[1])
    kept, faults = run()
    if not kept:
        pytest.skip("not glibc on Linux: mallopt is not there")
    plain, plain_faults = run(REASONLAB_MALLOC="default")
    pages = (40 << 20) // 4096
    assert not plain and plain_faults > 5 * pages      # glibc's settings: every allocation faults in afresh
    assert faults < 3 * pages                           # kept: the first one faults in, the rest reuse it
