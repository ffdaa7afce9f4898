"""The experiment registry and the result store: a toy experiment from its own file runs under `reasonlab lab
--only toy` on each executor, is reused, and lands in the report and findings; the template runs as the guide says."""
import json
import os
import shutil
from dataclasses import dataclass

import pytest

from reasonlab import experiments as X
from reasonlab.cli import main
from reasonlab.runner import lab
from reasonlab.runner.store import BadRecord, Store

TOY = os.path.join(os.path.dirname(__file__), "..", "toy_experiment.py")
TEMPLATE = os.path.join(os.path.dirname(X.__file__), "template.py")


pytestmark = pytest.mark.usefixtures("clean_registry")


def runs(marker):
    return open(marker).read().split("\n")[:-1] if os.path.exists(marker) else []


def test_the_builtin_experiments_are_registered_once_in_the_reports_order():
    assert X.names() == ("base", "budgets", "sampling", "star", "rl", "adaptive", "l1", "search",
                         "faithful", "labels", "entropy", "kl", "passk", "voting", "l1_recipe")
    for e in map(X.get, X.names()):       # every config has a docstring per field and passes its own checks
        from reasonlab.core.config import field_docs
        assert set(field_docs(e.Config)) == {f for f in e.Config.__dataclass_fields__}, e.name
        e.validate(e.config())
        e.validate(e.config(quick=True))


@pytest.mark.parametrize("workers", [1, 2])
def test_a_toy_experiment_runs_is_reused_and_reported(tmp_path, monkeypatch, capsys, workers):
    marker = tmp_path / "marker"
    monkeypatch.setenv("TOY_MARKER", str(marker))
    out = str(tmp_path / "lab")
    argv = ["lab", "--experiment", TOY, "--only", "toy", "--seeds", "0", "1", "--out", out,
            "--cache-dir", str(tmp_path / "cache"), "--workers", str(workers)]
    assert main(argv) == 0
    done = runs(marker)
    assert sorted(line.split()[0] for line in done) == ["0", "1"]
    pids = {int(line.split()[1]) for line in done}
    assert (pids == {os.getpid()}) == (workers == 1)              # a pool runs units in its own processes
    md = open(os.path.join(out, "report.md"), encoding="utf-8").read()
    assert "## 1. Toy: a value per seed" in md and "toy headline" in md
    fs = json.load(open(os.path.join(out, "findings.json")))
    assert [f["claim"] for f in fs] == ["The toy value is above zero"] and fs[0]["per_seed"] == [0.5, 0.51]
    cache = tmp_path / "cache"                                     # the toy asked for no base model
    assert not cache.exists() or not [f for f in os.listdir(cache) if f.endswith(".safetensors")]
    capsys.readouterr()
    assert main(argv) == 0                                         # the second run reuses both seeds
    assert len(runs(marker)) == 2 and capsys.readouterr().out.count("finished earlier, reused") == 2


def test_the_toy_is_found_in_an_entry_point(tmp_path, monkeypatch):
    import importlib.metadata
    import importlib.util
    spec = importlib.util.spec_from_file_location("toy_ep", TOY)
    mod = importlib.util.module_from_spec(spec)
    import sys
    sys.modules["toy_ep"] = mod
    X.REGISTRY.pop("toy", None)

    class EP:
        def load(self):
            spec.loader.exec_module(mod)
            return X.REGISTRY["toy"]
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [EP()] if group == X.ENTRY_POINTS else [])
    assert X.load_entry_points() == ["toy"]
    cfg = lab.LabConfig(only=("toy",), seeds=(0,), out=str(tmp_path / "lab"), cache_dir=str(tmp_path / "c"))
    assert set(lab.run(cfg, log=lambda s: None)) == {"toy"}


def test_a_name_taken_by_another_module_is_refused(tmp_path, capsys):
    clash = tmp_path / "clash.py"
    clash.write_text(open(TOY).read().replace('Experiment("toy"', 'Experiment("base"'))
    assert main(["lab", "--experiment", str(clash), "--out", str(tmp_path / "o")]) == 2
    assert "two experiments are called 'base'" in capsys.readouterr().err


def test_bad_experiment_files_are_one_line_errors(tmp_path, capsys):
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    assert main(["lab", "--experiment", str(empty), "--out", str(tmp_path / "o")]) == 2
    assert "registers no experiment" in capsys.readouterr().err
    assert main(["lab", "--experiment", str(tmp_path / "missing.py"), "--out", str(tmp_path / "o")]) == 2
    assert main(["lab", "--only", "nope", "--out", str(tmp_path / "o")]) == 2
    assert "unknown experiment 'nope'" in capsys.readouterr().err


def test_the_store_reuses_only_a_matching_well_formed_record(tmp_path):
    X.load_file(TOY)
    check = X.get("toy").check_result
    st, said = Store(str(tmp_path)), []
    assert st.read("toy", 0) is None and not st.reusable("toy", 0, "k", check)
    st.write("toy", 0, "k", 1.23, {"value": 0.5})
    assert st.reusable("toy", 0, "k", check) and not st.reusable("toy", 0, "other", check)
    rec = st.read("toy", 0, check)
    assert rec == {"key": "k", "seconds": 1.2, "result": {"value": 0.5}}
    for bad in ([1, 2], {"key": "k", "seconds": 1.0}, {"key": "k", "seconds": 1.0, "result": {"value": "x"}},
                {"key": "k", "seconds": 1.0, "result": [1]}, "not json"):
        with open(st.path("toy", 0), "w") as f:
            f.write(bad if isinstance(bad, str) else json.dumps(bad))
        assert not st.reusable("toy", 0, "k", check, log=said.append)
        with pytest.raises(BadRecord, match="seed0.json"):
            st.collect(["toy"], [0], check=lambda g: check)
    assert len(said) == 5 and all("running it again" in s for s in said)


def test_report_only_names_a_bad_record(tmp_path, capsys):
    out = tmp_path / "lab"
    (out / "base").mkdir(parents=True)
    (out / "base" / "seed0.json").write_text(json.dumps([1, 2]))
    assert main(["lab", "--report-only", "--out", str(out), "--seeds", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "seed0.json" in err and "not a result record" in err


def test_the_guide_runs_the_template(tmp_path, quick_cache, capsys):
    """docs/your_idea.md: copy the template, run it with --experiment and --only, read its section."""
    idea = tmp_path / "my_idea.py"
    shutil.copy(TEMPLATE, idea)
    out = str(tmp_path / "lab")
    assert main(["lab", "--experiment", str(idea), "--only", "my_idea", "--quick", "--out", out,
                 "--cache-dir", quick_cache]) == 0
    md = open(os.path.join(out, "report.md"), encoding="utf-8").read()
    assert "## 1. My idea: does thinking pay on the hardest problems?" in md
    assert os.path.getsize(os.path.join(out, "my_idea", "accuracy.png")) > 1000
    guide = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "your_idea.md"), encoding="utf-8").read()
    assert "reasonlab lab --experiment my_idea.py --only my_idea --quick" in guide


@dataclass
class _Unregistered:
    n: int = 1
    """a field"""


def test_a_config_of_another_type_is_refused():
    with pytest.raises(ValueError, match="expected a Config"):
        X.get("base").validate(_Unregistered())


def test_a_packed_run_stores_gzipped_results_and_no_html(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TOY_MARKER", str(tmp_path / "marker"))
    out = tmp_path / "lab"
    argv = ["lab", "--experiment", TOY, "--only", "toy", "--seeds", "0", "1", "--out", str(out),
            "--cache-dir", str(tmp_path / "cache")]
    assert main(argv) == 0 and (out / "toy" / "seed0.json").exists() and (out / "report.html").exists()
    assert main(argv + ["--pack"]) == 0                              # reused, then packed
    assert sorted(os.listdir(out / "toy")) == ["seed0.json.gz", "seed1.json.gz"] and not (out / "report.html").exists()
    assert len(runs(tmp_path / "marker")) == 2
    first = (out / "toy" / "seed0.json.gz").read_bytes()
    assert main(argv + ["--pack", "--report-only"]) == 0
    assert (out / "toy" / "seed0.json.gz").read_bytes() == first     # deterministic bytes: a rerun is no diff
    st = Store(str(out))
    assert st.read("toy", 1)["result"]["value"] == 0.51 and st.path("toy", 1).endswith(".gz")
    assert main(argv) == 0 and len(runs(tmp_path / "marker")) == 2   # a plain run reuses packed results too


def test_the_lab_runs_the_core_tier_by_default_and_every_tier_with_all(clean_registry):
    """A lesson beyond the core tier runs under `--all` or `--only`, not by default."""
    from dataclasses import dataclass

    @dataclass
    class Config:
        n: int = 1
    X.register(X.Experiment("extra_lesson", Config, lambda c, s, e: {}, lambda rs: [], lambda rs, o: [],
                            tier="lesson", uses_base=False))
    assert "extra_lesson" not in lab.LabConfig().selected()
    assert set(lab.LabConfig().selected()) == {n for n in X.BUILTIN if X.get(n).tier == "core"}
    assert "faithful" in lab.LabConfig(all=True).selected() and "faithful" not in lab.LabConfig().selected()
    assert "extra_lesson" in lab.LabConfig(all=True).selected()
    assert lab.LabConfig(only=("extra_lesson",)).selected() == ("extra_lesson",)


def test_an_experiment_refuses_a_task_it_cannot_run_before_any_work(tmp_path, capsys):
    """`Experiment.supports`: a task it cannot run on is one line and exit 2, and nothing is written."""
    picky = tmp_path / "picky.py"
    picky.write_text(open(TOY).read()
                     .replace("class Config:\n", 'class Config:\n    task: str = "digits"\n    """the task"""\n')
                     .replace('Experiment("toy", Config, run, claims, render, uses_base=False, check=check)',
                              'Experiment("picky", Config, run, claims, render, uses_base=False, check=check, '
                              'supports=lambda t: "one-word answers only" if t.answer_len_max > 1 else None)'))
    out = tmp_path / "o"
    assert main(["lab", "--experiment", str(picky), "--only", "picky", "--tasks", "digits", "add", "--seeds", "0",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "picky cannot run on task add: one-word answers only" in err
    assert not out.exists() or not any(out.rglob("seed*.json"))
    assert main(["lab", "--experiment", str(picky), "--only", "picky", "--tasks", "modprod", "--seeds", "0",
                 "--out", str(out)]) == 0
