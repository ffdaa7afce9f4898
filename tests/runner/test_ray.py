"""Ray: a local 2-CPU instance gives the same files as the local executor, reruns a unit (a sweep's cell) whose
worker died, and retries then reports a unit that raises. One instance for the module (starting Ray costs ~5 s)."""
import json
import os

import pytest

ray = pytest.importorskip("ray")

from reasonlab.runner import sweep  # noqa: E402
from reasonlab.runner.executor import ExecConfig, Unit, probe_unit, run_units  # noqa: E402

TIME_KEYS = {"seconds", "timing", "step_time", "tokens_per_s"}   # and every key ending in _s (train_s, round_s)


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=200 * 2 ** 20, log_to_driver=False)
    yield
    ray.shutdown()


def quick_rl(out, cache, executor, workers=1):
    """2 cells x 2 seeds of the rl experiment at quick size (GRPO alone, 2 or 3 steps) on the quick base model."""
    return sweep.SweepConfig(exp="rl", grid={"steps": [2, 3]}, fixed={"algos": ("grpo",)}, seeds=(0, 1), quick=True,
                             out=str(out), cache_dir=str(cache), execution=ExecConfig(executor, workers))


def untimed(x):
    """A result without its wall-clock fields, which differ between any two runs."""
    if isinstance(x, dict):
        return {k: untimed(v) for k, v in x.items() if k not in TIME_KEYS and not k.endswith("_s")}
    if isinstance(x, list):
        return [untimed(v) for v in x]
    return x


def result_files(out):
    """Every (cell, seed) record of a sweep, without its wall-clock fields."""
    files = {}
    for root, _, names in os.walk(os.path.join(out, "cells")):
        for n in (n for n in names if n.startswith("seed") and n.endswith(".json")):
            with open(os.path.join(root, n)) as f:
                files[os.path.relpath(os.path.join(root, n), out)] = untimed(json.load(f))
    return files


@pytest.fixture
def one_thread():
    """Ray's workers run one torch thread each; the in-process run must too, or the sums in the matrix products
    run in another order and the numbers differ in their last bits (on a machine whose torch defaults to 2)."""
    import torch
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.mark.slow        # 35 s: the default suite keeps Ray in the killed-worker test; this one runs in make test-slow
def test_ray_sweep_writes_the_same_files_as_the_local_executor(local_ray, one_thread, tmp_path, quick_cache):
    local = sweep.run(quick_rl(tmp_path / "local", quick_cache, "local"), log=None)
    on_ray = sweep.run(quick_rl(tmp_path / "ray", quick_cache, "ray", 2), log=None)
    a, b = result_files(str(tmp_path / "local")), result_files(str(tmp_path / "ray"))
    assert len(a) == 4 and a == b                              # same cells, seeds, keys and numbers
    assert untimed(local["cells"]) == untimed(on_ray["cells"]) and not on_ray["failed"]
    assert (tmp_path / "ray" / "table.md").read_text() == (tmp_path / "local" / "table.md").read_text()


def test_a_ray_worker_killed_mid_cell_costs_that_cell_a_retry_not_the_sweep(local_ray, clean_registry, tmp_path):
    """Every (cell, seed) of a toy sweep kills its Ray worker the first time it runs: each is retried, and the sweep
    ends with the cells a local run gives (run after it, when every unit has died once). Two units: a worker's
    restart costs seconds."""
    toy = os.path.join(os.path.dirname(__file__), "..", "toy_experiment.py")
    (tmp_path / "die").mkdir()
    cfg = dict(exp="toy", grid={"offset": [0.25, 0.5]}, fixed={"die": str(tmp_path / "die")}, seeds=(0,),
               experiment=(toy,))
    on_ray = sweep.run(sweep.SweepConfig(**cfg, out=str(tmp_path / "ray"), execution=ExecConfig("ray", 2, retries=1)),
                       log=None)
    assert len(os.listdir(tmp_path / "die")) == 2 and not on_ray["failed"]     # two workers died, two retries
    local = sweep.run(sweep.SweepConfig(**cfg, out=str(tmp_path / "local")), log=None)
    values = lambda s: [(r["params"], r["findings"]) for r in s["cells"]]   # noqa: E731
    assert values(on_ray) == values(local)
    drop_pid = lambda files: {k: {**v, "result": {"value": v["result"]["value"]}} for k, v in files.items()}   # noqa: E731
    assert len(result_files(str(tmp_path / "ray"))) == 2
    assert drop_pid(result_files(str(tmp_path / "ray"))) == drop_pid(result_files(str(tmp_path / "local")))


def test_ray_reruns_a_unit_whose_worker_was_killed_and_reports_one_that_keeps_raising(local_ray, tmp_path):
    plan = {1: dict(die=1, seconds=0.5), 2: dict(fail=9)}
    units = [Unit(f"u{x}", probe_unit, dict(x=x, marker=str(tmp_path / f"m{x}"), **plan.get(x, {})))
             for x in range(4)]
    out = run_units(units, ExecConfig("ray", retries=1), log=None, progress=False)
    assert out["u1"].ok and out["u1"].result["attempt"] == 2      # killed mid-unit, rerun, done
    assert not out["u2"].ok and out["u2"].attempts == 2 and "RuntimeError: probe unit 2" in out["u2"].error
    assert out["u0"].ok and out["u3"].ok and out["u3"].result["square"] == 9


@pytest.mark.slow
def test_sweep_joins_a_running_cluster_by_address(tmp_path, quick_cache):
    """--ray-address: the driver joins a cluster it did not start and ships the package with runtime_env."""
    from ray.cluster_utils import Cluster

    from reasonlab.cli import main
    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False,
                                                            "object_store_memory": 200 * 2 ** 20})
    try:
        argv = ["sweep", "rl", "--quick", "--grid", "steps=2,3", "--set", "algos=grpo", "--seeds", "0",
                "--cache-dir", quick_cache]
        assert main(argv + ["--out", str(tmp_path / "cluster"), "--executor", "ray", "--ray-address", cluster.address]) == 0
        assert not ray.is_initialized()                      # the driver disconnected; the cluster is still up
        assert main(argv + ["--out", str(tmp_path / "local"), "--threads", "1"]) == 0
        assert result_files(str(tmp_path / "cluster")) == result_files(str(tmp_path / "local"))
    finally:
        cluster.shutdown()


def test_the_lab_runs_a_toy_experiment_file_on_ray(local_ray, clean_registry, tmp_path):
    """An experiment from a user's file runs in Ray workers too: each worker loads the file before its unit."""
    from reasonlab.runner import lab
    toy = os.path.join(os.path.dirname(__file__), "..", "toy_experiment.py")
    cfg = lab.LabConfig(only=("toy",), experiment=(toy,), seeds=(0, 1), out=str(tmp_path / "lab"),
                        cache_dir=str(tmp_path / "c"), execution=ExecConfig("ray", 2))
    res = lab.run(cfg, log=lambda s: None)
    assert [r["value"] for r in res["toy"]["results"]] == [0.5, 0.51]
    assert all(r["pid"] != os.getpid() for r in res["toy"]["results"])
