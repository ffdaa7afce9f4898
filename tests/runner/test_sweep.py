"""`reasonlab sweep NAME`: a grid over an experiment's own Config, typed by its fields and checked before any work;
each cell runs per seed through the lab's engine, its claims are checked, finished units are reused, a failing cell
is reported while the others finish."""
import json
import os
import re

import pytest

from reasonlab.cli import main
from reasonlab.runner import config as C
from reasonlab.runner import sweep
from reasonlab.runner.executor import ExecConfig

TOY = os.path.join(os.path.dirname(__file__), "..", "toy_experiment.py")


@pytest.fixture
def toy(clean_registry):
    from reasonlab import experiments as X
    X.load_file(TOY)
    return TOY


def toy_sweep(out, grid=None, seeds=(0, 1, 2), **kw):
    return sweep.SweepConfig(exp="toy", grid=grid or {"offset": [-0.5, 0.5]}, seeds=seeds, out=str(out),
                             experiment=(TOY,), **kw)


def test_grid_values_are_typed_by_the_experiments_config_fields():
    g = C.parse_assignments("rl", ["steps=10,20", "algos=grpo+dr_grpo,rloo", "eval-every=0"], many=True)
    assert g == {"steps": [10, 20], "algos": [("grpo", "dr_grpo"), ("rloo",)], "eval_every": [0]}
    assert C.parse_assignments("kl", ["betas=0+0.04"], many=False) == {"betas": (0.0, 0.04)}
    cfg = sweep.SweepConfig(exp="rl", grid={"steps": [10, 20], "algos": [("grpo",), ("rloo",), ("dapo",)]})
    assert len(cfg.cells()) == 6 and cfg.cells()[1] == {"steps": 10, "algos": ("rloo",)}
    assert cfg.config_of(cfg.cells()[1]).algos == ("rloo",) and cfg.run_dir == "runs/sweep-rl"
    for bad, msg in ((["lr=1"], "unknown field 'lr'"), (["steps=1.5"], "bad value '1.5' for steps"),
                     (["seed=1,2"], "--seeds"), (["steps"], "field=value")):
        with pytest.raises(ValueError, match=msg):
            C.parse_assignments("rl", bad, many=True)


def test_a_toml_grid_is_typed_the_same_way(tmp_path):
    p = tmp_path / "g.toml"
    p.write_text('seeds = [0, 2]\nquick = true\n[grid]\nalgos = [["grpo"], ["rloo", "dapo"]]\nsteps = [2, 3]\n'
                 '[set]\nn_test = 50\n')
    assert C.load_toml(str(p), "rl") == {"grid": {"algos": [("grpo",), ("rloo", "dapo")], "steps": [2, 3]},
                                         "fixed": {"n_test": 50}, "seeds": (0, 2), "quick": True}
    p.write_text("[grid]\nsteps = [1, 'x']\n")
    with pytest.raises(ValueError, match="bad value 'x' for steps"):
        C.load_toml(str(p), "rl")
    p.write_text("base = 'tiny'\n")
    with pytest.raises(ValueError, match="unknown key 'base'"):
        C.load_toml(str(p), "rl")


@pytest.mark.parametrize("argv,msg", [
    (["sweep", "rl"], "an empty sweep"),
    (["sweep", "nothing", "--grid", "x=1"], "unknown experiment 'nothing'"),
    (["sweep", "rl", "--grid", "lr=1"], "unknown field 'lr'"),
    (["sweep", "rl", "--grid", "algos=ppo"], "'ppo'"),
    (["sweep", "adaptive", "--grid", "methods=nope"], "'nope'"),
    (["sweep", "rl", "--grid", "steps=1", "--ray-address", "auto"], "--ray-address needs --executor ray"),
    (["sweep", "rl", "--config", "/nonexistent/g.toml"], "not found"),
    (["sweep", "search", "--grid", "n_test=5", "--checkpoint", "/nonexistent/m"], "not found"),
    (["sweep", "rl", "--grid", "steps=1,2,3", "--seeds", "0", "1", "--max-units", "5"], "more than --max-units"),
])
def test_sweep_cli_rejects_bad_input_before_any_work(argv, msg, capsys, tmp_path):
    assert main(argv + ["--out", str(tmp_path / "o"), "--cache-dir", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert not os.path.exists(tmp_path / "o" / "cells")


def test_each_cell_runs_per_seed_its_claims_are_checked_and_finished_units_are_reused(toy, tmp_path, monkeypatch):
    marker = tmp_path / "runs.txt"
    monkeypatch.setenv("TOY_MARKER", str(marker))
    s = sweep.run(toy_sweep(tmp_path / "s"), log=None)
    assert s["ran"] == 6 and [r["n"] for r in s["cells"]] == [3, 3]
    assert [r["findings"][0]["verdict"] for r in s["cells"]] == ["does not hold", "holds"]   # value -0.49.. vs 0.51..
    assert s["cells"][1]["findings"][0]["per_seed"] == [0.5, 0.51, 0.52]
    table = (tmp_path / "s" / "table.md").read_text()
    assert "| offset | seeds | C1 |" in table and "| 0.5 | 3/3 | holds: 0.510" in table and "C1: The toy value" in table
    fs = json.loads((tmp_path / "s" / "findings.json").read_text())
    assert [(f["params"], f["verdict"]) for f in fs] == [({"offset": -0.5}, "does not hold"), ({"offset": 0.5}, "holds")]
    for r in s["cells"]:                                  # each cell's page: the experiment's own render
        assert "## Toy: a value per seed" in (tmp_path / "s" / "cells" / r["cell"] / "report.md").read_text()
    assert (tmp_path / "s" / "report.html").exists()
    os.remove(tmp_path / "s" / "cells" / s["cells"][0]["cell"] / "seed1.json")
    again = sweep.run(toy_sweep(tmp_path / "s", seeds=(0, 1, 2, 3)), log=None)   # one lost unit + a new seed each
    assert again["ran"] == 3 and [r["n"] for r in again["cells"]] == [4, 4]
    assert len(marker.read_text().splitlines()) == 9
    only = sweep.run(toy_sweep(tmp_path / "s", seeds=(0, 1, 2, 3)), log=None, report_only=True)
    assert only["ran"] == 0 and [r["findings"] for r in only["cells"]] == [r["findings"] for r in again["cells"]]


def test_a_failing_cell_is_retried_then_reported_and_the_others_finish(toy, tmp_path, monkeypatch):
    monkeypatch.setenv("TOY_FAIL", "-0.5")
    s = sweep.run(toy_sweep(tmp_path / "s", seeds=(0, 1), execution=ExecConfig(retries=2)), log=None)
    bad = s["cells"][0]["cell"]
    assert sorted(s["failed"]) == [f"cells/{bad}/seed0", f"cells/{bad}/seed1"]
    assert "RuntimeError: toy boom at offset -0.5" in s["failed"][f"cells/{bad}/seed0"]
    assert [r["n"] for r in s["cells"]] == [0, 2]
    md = (tmp_path / "s" / "report.md").read_text()
    assert "| -0.5 | 0/2 | failed |" in md and "**Failed units**" in md and "toy boom" in md
    monkeypatch.delenv("TOY_FAIL")
    assert main(["sweep", "toy", "--experiment", TOY, "--grid", "offset=-0.5,0.5", "--seeds", "0", "1",
                 "--out", str(tmp_path / "s")]) == 0     # the rerun runs only the failed cell


def test_a_sweep_of_a_real_experiment_at_quick_size(tmp_path, quick_cache, capsys):
    """The rl experiment's own run, claims and render for each cell: a grid over its config from the command line."""
    argv = ["sweep", "rl", "--quick", "--grid", "steps=2,3", "--set", "algos=grpo+dr_grpo", "eval_every=1",
            "--seeds", "0", "1", "--out", str(tmp_path / "s"), "--cache-dir", quick_cache, "--workers", "1"]
    assert main(argv) == 0
    s = json.loads((tmp_path / "s" / "summary.json").read_text())
    assert [r["params"] for r in s["cells"]] == [{"algos": ["grpo", "dr_grpo"], "eval_every": 1, "steps": 2},
                                                 {"algos": ["grpo", "dr_grpo"], "eval_every": 1, "steps": 3}]
    for r in s["cells"]:
        rec = json.loads((tmp_path / "s" / "cells" / r["cell"] / "seed1.json").read_text())
        assert set(rec["result"]) == {"grpo", "dr_grpo"} and rec["result"]["grpo"]["steps"] == r["params"]["steps"]
        assert len(r["findings"]) == 3 and (tmp_path / "s" / "cells" / r["cell"] / "rl" / "curves.png").exists()
        page = (tmp_path / "s" / "cells" / r["cell"] / "report.md").read_text()
        said = [(word, f) for f in r["findings"]      # the cell's page says the verdicts of the sweep's table
                for word in re.findall(r"\*\*([A-Z][a-z ]+)\*\* on this run: ." + re.escape(f["claim"][1:40]), page)]
        assert said and all(word.lower() == f["verdict"] for word, f in said), said
    assert "| steps | seeds | C1 | C2 | C3 |" in capsys.readouterr().out


def scalars(log_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(str(log_dir))
    acc.Reload()
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}


def test_tensorboard_event_files_per_rl_run(tmp_path, quick_cache):
    pytest.importorskip("tensorboard")
    cfg = sweep.SweepConfig(exp="rl", grid={"steps": [2]}, fixed={"algos": ("grpo",)}, seeds=(0,), quick=True,
                            out=str(tmp_path / "s"), cache_dir=quick_cache, report_to="tensorboard")
    s = sweep.run(cfg, log=None)
    rec = json.loads((tmp_path / "s" / "cells" / s["cells"][0]["cell"] / "seed0.json").read_text())
    sc = scalars(tmp_path / "s" / "cells" / s["cells"][0]["cell"] / "tensorboard" / "rl" / "grpo" / "seed0")
    assert sc["train/reward"] == [(h["step"], pytest.approx(h["reward"])) for h in rec["result"]["grpo"]["hist"]]
    assert {"train/kl", "train/entropy", "train/completions/mean_length", "train/share/direct"} <= set(sc)
    # `reasonlab train --report-to tensorboard`: live from metrics.jsonl, with the greedy evaluations under eval/
    run_dir = tmp_path / "train"
    assert main(["train", "--checkpoint", os.path.join(quick_cache, "lab-quick-seed0"), "--steps", "3",
                 "--prompts-per-step", "2", "--num-generations", "4", "--eval-every", "2", "--n-val", "5",
                 "--out", str(run_dir), "--report-to", "tensorboard"]) == 0
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
