"""Ray: a local 2-CPU instance gives the same files as the local executor, reruns a unit whose worker died, and
retries then reports a unit that raises. One instance for the module (starting Ray costs ~5 s)."""
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


def tiny(out, cache, executor, workers=1):
    """2 cells x 2 seeds, 2 RL steps of 4 x 4 samples from the tiny base model."""
    return sweep.SweepConfig(grid={"algo": ["grpo", "rloo"]}, fixed={"steps": 2, "prompts_per_step": 4,
                             "num_generations": 4, "learning_rate": 3e-4}, seeds=(0, 1), base="tiny", eval_n=10,
                             out=str(out), cache_dir=str(cache), execution=ExecConfig(executor, workers))


def untimed(x):
    """A result without its wall-clock fields, which differ between any two runs."""
    if isinstance(x, dict):
        return {k: untimed(v) for k, v in x.items() if k not in TIME_KEYS and not k.endswith("_s")}
    if isinstance(x, list):
        return [untimed(v) for v in x]
    return x


def result_files(out):
    files = {}
    for root, _, names in os.walk(os.path.join(out, "cells")):
        for n in names:
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


def test_ray_sweep_writes_the_same_files_as_the_local_executor(local_ray, one_thread, tmp_path):
    cache = tmp_path / "cache"
    local = sweep.run(tiny(tmp_path / "local", cache, "local"), log=None)
    on_ray = sweep.run(tiny(tmp_path / "ray", cache, "ray", 2), log=None)
    a, b = result_files(str(tmp_path / "local")), result_files(str(tmp_path / "ray"))
    assert len(a) == 4 and a == b                              # same cells, seeds, keys and numbers
    assert untimed(local["cells"]) == untimed(on_ray["cells"]) and not on_ray["failed"]
    for name in ("table.md", "report.html", "cells.png"):
        assert os.path.getsize(tmp_path / "ray" / name) > 100
    drop_seconds = lambda t: [line.rsplit("|", 3)[0] for line in t.splitlines()]   # the "train s" column
    assert drop_seconds((tmp_path / "ray" / "table.md").read_text()) == drop_seconds((tmp_path / "local" / "table.md").read_text())


def test_ray_reruns_a_unit_whose_worker_was_killed_and_reports_one_that_keeps_raising(local_ray, tmp_path):
    plan = {1: dict(die=1, seconds=0.5), 2: dict(fail=9)}
    units = [Unit(f"u{x}", probe_unit, dict(x=x, marker=str(tmp_path / f"m{x}"), **plan.get(x, {})))
             for x in range(4)]
    out = run_units(units, ExecConfig("ray", retries=1), log=None, progress=False)
    assert out["u1"].ok and out["u1"].result["attempt"] == 2      # killed mid-unit, rerun, done
    assert not out["u2"].ok and out["u2"].attempts == 2 and "RuntimeError: probe unit 2" in out["u2"].error
    assert out["u0"].ok and out["u3"].ok and out["u3"].result["square"] == 9


@pytest.mark.slow
def test_sweep_joins_a_running_cluster_by_address(tmp_path):
    """--ray-address: the driver joins a cluster it did not start and ships the package with runtime_env."""
    from ray.cluster_utils import Cluster

    from reasonlab.cli import main
    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False,
                                                            "object_store_memory": 200 * 2 ** 20})
    try:
        argv = ["sweep", "--grid", "algo=grpo,rloo", "--set", "steps=2", "prompts_per_step=4", "num_generations=4",
                "--seeds", "0", "--base", "tiny", "--eval-n", "10", "--cache-dir", str(tmp_path / "cache")]
        assert main(argv + ["--out", str(tmp_path / "cluster"), "--executor", "ray", "--ray-address", cluster.address]) == 0
        assert not ray.is_initialized()                      # the driver disconnected; the cluster is still up
        assert main(argv + ["--out", str(tmp_path / "local")]) == 0
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
