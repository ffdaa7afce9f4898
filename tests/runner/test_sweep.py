"""`reasonlab sweep`: typed grids from TOML or the command line, checked before any training; resume reuses
finished units; a failing cell is reported while the others finish; TensorBoard gets one event file per run."""
import json
import os

import pytest

from reasonlab.cli import main
from reasonlab.runner import config as C
from reasonlab.runner import sweep
from reasonlab.runner.executor import ExecConfig
from reasonlab.train.zoo import cached_model


def tiny(out, cache, seeds=(0,), grid=None, **kw):
    return sweep.SweepConfig(grid=grid or {"learning_rate": [1e-4, 3e-4]},
                             fixed={"steps": 2, "prompts_per_step": 4, "num_generations": 4}, seeds=seeds, base="tiny",
                             eval_n=10, out=str(out), cache_dir=str(cache), **kw)


def test_grid_values_are_typed_by_the_rl_config_fields():
    g = C.parse_assignments(["learning_rate=1e-5,3e-5", "steps=10", "clip=false,true", "epsilon-high=none,0.28",
                                 "method=grpo,cost0.3"], many=True)
    assert g == {"learning_rate": [1e-5, 3e-5], "steps": [10], "clip": [False, True], "epsilon_high": [None, 0.28],
                 "method": ["grpo", "cost0.3"]}
    cfg = sweep.SweepConfig(grid={"beta": [0.0, 0.04], "algo": ["grpo", "rloo", "dapo"]})
    assert len(cfg.cells()) == 6 and cfg.cells()[1] == {"beta": 0.0, "algo": "rloo"}
    for bad, msg in ((["lr=1"], "unknown sweep key 'lr'"), (["steps=1.5"], "bad value"), (["seed=1,2"], "--seeds"),
                     (["beta"], "key=value")):
        with pytest.raises(ValueError, match=msg):
            C.parse_assignments(bad, many=True)


def test_toml_grid(tmp_path):
    p = tmp_path / "g.toml"
    p.write_text('seeds = [0, 2]\nbase = "quick"\n[grid]\nmethod = ["grpo", "kimi"]\nbeta = [0, 0.04]\n[set]\nsteps = 50\n')
    spec = C.load_toml(str(p))
    assert spec == {"grid": {"method": ["grpo", "kimi"], "beta": [0.0, 0.04]}, "fixed": {"steps": 50},
                    "seeds": (0, 2), "base": "quick"}
    p.write_text("[grid]\nsteps = [1, 'x']\n")
    with pytest.raises(ValueError, match="bad value 'x' for steps"):
        C.load_toml(str(p))


def test_sweep_cli_rejects_bad_input_before_any_work(capsys, tmp_path):
    for argv, msg in ((["sweep"], "an empty sweep"), (["sweep", "--grid", "lr=1"], "unknown sweep key"),
                      (["sweep", "--grid", "method=nope"], "unknown adaptive method 'nope'"),
                      (["sweep", "--grid", "algo=reinforce", "--set", "num_iterations=2"], "clip=False"),
                      (["sweep", "--grid", "beta=0", "--ray-address", "auto"], "--ray-address needs --executor ray"),
                      (["sweep", "--config", str(tmp_path / "none.toml")], "not found"),
                      (["lab", "--retries", "-1"], "retries"), (["rl", "--report-to", "wandb"], "invalid choice")):
        assert main(argv + ["--out", str(tmp_path / "o")]) == 2, argv
        err = capsys.readouterr().err
        assert msg in err and err.count("\n") == 1 and "Traceback" not in err, (argv, err)
    assert not os.path.exists(tmp_path / "o" / "cells")


def test_resume_reuses_finished_units_and_runs_only_new_or_missing_ones(tmp_path):
    cache = tmp_path / "cache"
    first = sweep.run(tiny(tmp_path / "s", cache), log=None)
    assert first["ran"] == 2 and [r["n"] for r in first["cells"]] == [1, 1]
    files = sorted(os.path.relpath(os.path.join(r, n), tmp_path / "s") for r, _, ns in os.walk(tmp_path / "s" / "cells") for n in ns)
    os.remove(tmp_path / "s" / files[0])
    again = sweep.run(tiny(tmp_path / "s", cache, seeds=(0, 1)), log=None)   # one lost unit + a new seed for each cell
    assert again["ran"] == 3 and [r["n"] for r in again["cells"]] == [2, 2]
    assert again["cells"][1]["acc"][0] == pytest.approx(
        sum(json.load(open(tmp_path / "s" / "cells" / again["cells"][1]["cell"] / f"seed{s}.json"))["result"]["acc"]
            for s in (0, 1)) / 2)
    table = (tmp_path / "s" / "table.md").read_text()
    assert table.count("| 2/2 |") == 2 and "report.html" in os.listdir(tmp_path / "s")


def test_a_failing_cell_is_retried_then_reported_and_the_others_finish(tmp_path, monkeypatch):
    calls = []
    real = sweep.run_cell

    def flaky(params, seed, **kw):
        calls.append(params["learning_rate"])
        if params["learning_rate"] == 3e-4:
            raise RuntimeError("boom")
        return real(params, seed, **kw)
    monkeypatch.setattr(sweep, "run_cell", flaky)
    s = sweep.run(tiny(tmp_path / "s", tmp_path / "cache", execution=ExecConfig(retries=2)), log=None)
    assert calls.count(3e-4) == 3 and calls.count(1e-4) == 1
    assert list(s["failed"]) == [f"{s['cells'][1]['cell']}/seed0"] and "RuntimeError: boom" in s["failed"][f"{s['cells'][1]['cell']}/seed0"]
    assert s["cells"][0]["n"] == 1 and s["cells"][1]["n"] == 0
    md = (tmp_path / "s" / "report.md").read_text()
    assert "| 0.0003 | failed |" in md and "**Failed units**" in md and "boom" in md


def scalars(log_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(str(log_dir))
    acc.Reload()
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}


def test_tensorboard_event_files_per_rl_run(tmp_path, capsys):
    pytest.importorskip("tensorboard")
    s = sweep.run(tiny(tmp_path / "s", tmp_path / "cache", report_to="tensorboard"), log=None)
    for row in s["cells"]:
        sc = scalars(tmp_path / "s" / "tensorboard" / row["cell"] / "seed0")
        hist = s["hists"][row["cell"]][0]
        assert sc["train/reward"] == [(h["step"], pytest.approx(h["reward"])) for h in hist]
        assert {"train/kl", "train/entropy", "train/completions/mean_length", "train/share/direct"} <= set(sc)
    # `reasonlab rl --report-to tensorboard`: live from metrics.jsonl, with the greedy evaluations under eval/
    cached_model("sweep-tiny-seed0", sweep.tiny_base_cfg(0), cache=str(tmp_path / "cache"), log=None)
    run_dir = tmp_path / "rl"
    assert main(["rl", "--checkpoint", str(tmp_path / "cache" / "sweep-tiny-seed0"), "--steps", "3",
                 "--prompts-per-step", "2", "--num-generations", "4", "--eval-every", "2", "--eval-n", "5",
                 "--run-dir", str(run_dir), "--report-to", "tensorboard"]) == 0
    sc = scalars(run_dir / "tensorboard")
    assert [st for st, _ in sc["train/reward"]] == [1, 2, 3] and [st for st, _ in sc["eval/accuracy"]] == [2]


def test_lab_tensorboard_files_come_from_its_rl_results(tmp_path):
    pytest.importorskip("tensorboard")
    from reasonlab.io import tblog
    hist = [{"step": s, "reward": 0.1 * s, "kl": 0.01, "share": {"direct": 1 - 0.2 * s}} for s in (1, 2, 3)]
    results = {"rl": {"results": [{"grpo": {"seed": 4, "hist": hist, "curve": [{"step": 2, "acc": 0.5}]}}]},
               "adaptive": {"results": [{"runs": [{"method": "kimi", "seed": 4, "share_direct_over_steps": [0.5, 0.25]}]}]}}
    tblog.write_lab(str(tmp_path), results)
    sc = scalars(tmp_path / "tensorboard" / "rl" / "grpo" / "seed4")
    assert sc["train/reward"] == [(1, pytest.approx(0.1)), (2, pytest.approx(0.2)), (3, pytest.approx(0.3))]
    assert sc["eval/acc"] == [(2, 0.5)]
    assert scalars(tmp_path / "tensorboard" / "adaptive" / "kimi" / "seed4")["train/share/direct"] == [(1, 0.5), (2, 0.25)]
    with pytest.raises(ValueError, match="unknown --report-to"):
        tblog.check("wandb")
