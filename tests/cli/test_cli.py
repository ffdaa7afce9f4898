"""The CLI: bad input is one line on stderr and exit code 2; good input works."""
import json
import os
import subprocess
import sys

import pytest

from reasonlab.cli import main
from reasonlab.io.checkpoint import save_model
from reasonlab.train.sft import build_model


@pytest.fixture
def ckpt(tmp_path):
    stem = str(tmp_path / "m")
    save_model(stem, build_model(0), {})
    return stem


@pytest.mark.parametrize("argv,msg", [
    (["sample", "3 5 x"], "digits"),
    (["sample", "3 5 12"], "digits"),
    (["sample", "3"], "k must be"),
    (["sample", "1 2 3 4 5 6 7 8 9"], "k must be"),
    (["sample", "3 5", "--force", "Q"], "unknown format"),
    (["sample", "3 5", "--temperature", "-1"], "--temperature must be 0 (greedy)"),
    (["sample", "3 5", "--samples", "0"], "positive"),
    (["pretrain", "--steps", "0", "5"], "positive"),
    (["pretrain", "--steps", "-3"], "positive"),
    (["pretrain", "--steps", "5"], "one number per phase"),
    (["pretrain", "--name", "../x", "--recipe", "spec", "--steps", "1", "1"], "invalid model name"),
    (["eval", "--checkpoint", "/nonexistent/x"], "not found"),
    (["eval", "--device", "tpu", "--checkpoint", "x"], "unknown device"),
    (["frobnicate"], "invalid choice"),
    ([], "required"),
])
def test_bad_input_is_one_line_and_exit_2(argv, msg, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("reasonlab: error:") and msg in err


def test_corrupt_checkpoint_is_exit_2(ckpt, capsys):
    with open(ckpt + ".safetensors", "r+b") as f:
        f.truncate(50)
    assert main(["eval", "--checkpoint", ckpt + ".safetensors", "--n-test", "2"]) == 2
    assert "corrupt" in capsys.readouterr().err


def test_sample_shows_format_and_chain(ckpt, capsys):
    assert main(["sample", "3 5 9 2 7", "--checkpoint", ckpt, "--force", "T", "--samples", "3", "--temperature", "1"]) == 0
    out = capsys.readouterr().out
    assert "answer 6" in out and out.count("format full") == 3


def test_eval_prints_the_table_and_writes_json(ckpt, tmp_path, capsys):
    path = tmp_path / "e.json"
    assert main(["eval", "--checkpoint", ckpt, "--n-test", "3", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "free share" in out and "chain correct" in out
    data = json.loads(path.read_text())
    assert set(data) == {"free", "A", "S", "T"} and set(data["T"]["per_k"]) == {str(k) for k in range(2, 9)}


def test_pretrain_quick_end_to_end(capsys):
    assert main(["pretrain", "--quick", "--n-test", "5"]) == 0
    out = capsys.readouterr().out
    assert "config:" in out and "free share" in out


def test_console_script_entry_point():
    r = subprocess.run([sys.executable, "-m", "reasonlab.cli", "sample", "1 2", "--force", "X"], capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1


def test_train_writes_a_run_directory_and_resumes(ckpt, tmp_path, capsys):
    run = str(tmp_path / "run")
    argv = ["train", "--checkpoint", ckpt, "--steps", "2", "--prompts-per-step", "2", "--num-generations", "4",
            "--out", run, "--checkpoint-every", "1", "--eval-every", "2", "--n-val", "2"]
    assert main(argv) == 0
    for f in ("config.json", "metrics.jsonl", "ckpt-000002/state.json", "ckpt-000002/state.safetensors", "curves.png",
              "formats.png", "eval.json"):
        assert (tmp_path / "run" / f).exists(), f
    assert main(argv) == 2 and "--resume" in capsys.readouterr().err          # never overwrite a run silently
    assert main(argv[:4] + ["4"] + argv[5:] + ["--resume"]) == 0
    steps = [json.loads(s)["step"] for s in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4]


def test_the_model_train_writes_is_read_by_eval_sample_and_export(ckpt, tmp_path, capsys):
    """`train` ends with its evaluation and writes its policy where --checkpoint reads it."""
    run = tmp_path / "run"
    assert main(["train", "--checkpoint", ckpt, "--steps", "2", "--prompts-per-step", "2", "--num-generations", "4",
                 "--out", str(run), "--n-val", "2"]) == 0
    out = capsys.readouterr().out
    assert "final step 2: greedy acc" in out and f"--checkpoint {run}/model" in out
    assert json.loads((run / "eval.json").read_text())[-1]["final"] is True
    model = str(run / "model")
    assert main(["eval", "--checkpoint", model, "--n-test", "2"]) == 0
    assert main(["sample", "3 5 9", "--checkpoint", model]) == 0 and "problem 3 5 9" in capsys.readouterr().out
    assert main(["train", "--checkpoint", model, "--steps", "1", "--prompts-per-step", "2", "--num-generations", "4",
                 "--out", str(tmp_path / "again"), "--n-val", "1"]) == 0


@pytest.mark.parametrize("extra,msg", [
    (["--algo", "ppo"], "invalid choice"),
    (["--num-generations", "1"], "num_generations"),
    (["--beta", "-1"], ">= 0"),
    (["--forced-trains", "format"], "force_direct > 0"),
    (["--force-direct", "1.5"], "--force-direct must be < 1, got 1.5"),
])
def test_train_bad_input(ckpt, tmp_path, extra, msg, capsys):
    assert main(["train", "--checkpoint", ckpt, "--out", str(tmp_path / "r"), "--steps", "1"] + extra) == 2
    assert msg in capsys.readouterr().err


def test_an_experiment_command_is_the_lab_on_that_experiment(tmp_path, quick_cache, capsys):
    """`reasonlab budgets --n 6`: its Config from the flags, over the quick config; the results and the report are
    the lab's (the same store, the same file for `lab --only budgets` to reuse)."""
    out = tmp_path / "lab"
    argv = ["budgets", "--quick", "--n-test", "6", "--out", str(out), "--cache-dir", quick_cache, "--workers", "1"]
    assert main(argv) == 0
    assert "budget forcing trades accuracy for tokens" in capsys.readouterr().out      # its claims, printed
    rec = json.loads((out / "budgets" / "seed0.json").read_text())
    md = (out / "report.md").read_text()
    assert "## 1. Thinking longer" in md and (out / "budgets" / "budgets.png").exists()
    from reasonlab.experiments import budgets
    from reasonlab.runner import lab
    cfg = lab.LabConfig(quick=True, seeds=(0,), out=str(out), cache_dir=quick_cache, only=("budgets",),
                        configs={"budgets": budgets.Config(n_test=6)})
    assert rec["key"] == lab.unit_key("budgets", 0, cfg)           # the lab reuses it
    assert main(["budgets", "--quick", "--n-test", "6", "--out", str(out), "--report-only"]) == 0
    assert main(["budgets", "--quick", "--n-test", "0", "--out", str(out)]) == 2 and "--n-test must be positive" in capsys.readouterr().err
    assert main(["budgets", "--quick", "--n", "6", "--out", str(out)]) == 2      # no abbreviations: --n is no flag


@pytest.mark.parametrize("argv,msg", [
    (["sampling", "--n-max", "3"], "n_max"),
    (["adaptive", "--methods", "nope"], "'nope'"),
    (["rl", "--algos", "ppo"], "'ppo'"),
    (["rl", "--bogus"], "unrecognized arguments"),
    (["rl", "--checkpoint", "/nonexistent/m"], "not found"),
    (["search", "--checkpoint", "/nonexistent/m"], "not found"),
])
def test_experiment_commands_reject_bad_input(argv, msg, capsys, tmp_path):
    assert main(argv + ["--out", str(tmp_path / "o"), "--cache-dir", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists() or not os.listdir(tmp_path / "o")


def test_every_commands_flags_come_from_its_dataclass():
    """One source of truth: every field of every command's dataclass, nested configs included (but the few the
    command sets itself), is one flag whose help is the field's docstring, and a Literal field offers exactly its
    choices."""
    import argparse
    import dataclasses
    import typing

    from reasonlab.cli import build_parser
    from reasonlab.cli.commands import COMMANDS, SKIP
    from reasonlab.core import config

    def leaves(cls, skip):
        for f in dataclasses.fields(cls):
            tp = config._unwrap(config.hints(cls)[f.name])[0]
            if f.name in skip:
                continue
            if dataclasses.is_dataclass(tp):
                yield from leaves(tp, {s.split(".", 1)[1] for s in skip if s.startswith(f.name + ".")})
            else:
                yield cls, f, tp
    from reasonlab import experiments as X
    from reasonlab.cli.commands import EXPERIMENT_SKIP, RunExperiment
    commands = {**{name: [(cls, SKIP.get(name, ()))] for name, (cls, _) in COMMANDS.items()},
                **{name: [(X.get(name).Config, ()), (RunExperiment, EXPERIMENT_SKIP)] for name in X.BUILTIN}}
    for name, parts in commands.items():
        p = build_parser(name.split())
        for word in name.split():
            p = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices[word]
        actions = {a.dest: a for a in p._actions if a.dest != "help"}
        fields = [x for cls, skip in parts for x in leaves(cls, skip)]
        assert {f.name for _, f, _ in fields} == set(actions) - {"command"}, name    # one flag per field, no more
        for owner, f, tp in fields:
            a, doc = actions[f.name], config.field_docs(owner)[f.name]
            assert doc and a.help.replace("%%", "%").startswith(doc), (name, f.name)
            literal = tp if typing.get_origin(tp) is typing.Literal else (
                typing.get_args(tp)[0] if typing.get_origin(tp) is tuple else None)
            if typing.get_origin(literal) is typing.Literal:
                assert [str(c) for c in a.choices] == [str(v) for v in typing.get_args(literal)], (name, f.name)


def test_help_and_usage_errors_load_neither_torch_nor_matplotlib():
    import subprocess
    import sys

    from reasonlab.cli.commands import COMMANDS
    argvs = [["--help"], []] + [name.split() + ["--help"] for name in COMMANDS if name not in ("lab", "sweep")] + [
        ["train", "--algo", "nope"], ["lab", "--bogus"], ["sample"], ["eval", "--n-test", "x"]]
    code = ("import sys, contextlib, io; from reasonlab.cli import main\n"
            f"for argv in {argvs!r}:\n"
            "    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
            "        try:\n            rc = main(argv)\n        except SystemExit as e:\n            rc = e.code\n"
            "    assert rc in (0, 2), (argv, rc)\n"
            "print(sorted({'torch', 'matplotlib', 'numpy'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.split("\n")[0] == "[]", out.stdout + out.stderr


def test_sweep_help_lists_the_experiments_own_fields(capsys):
    """`reasonlab sweep NAME --help` ends with the fields of NAME's Config a grid may name, typed, with their bounds
    where their types carry them and their defaults; an experiment's own flags say the bounds too."""
    shown = {}
    for name in ("rl", "kl"):
        with pytest.raises(SystemExit):
            main(["sweep", name, "--help"])
        shown[name] = capsys.readouterr().out.split(f"fields of {name}'s config that --grid and --set may name:")[1]
    assert "probe_beta (float, >= 0; default 0.04)" in shown["kl"] and "probe_beta" not in shown["rl"]
    assert "treatment (one of grpo," in shown["rl"] and shown["rl"] != shown["kl"]
    assert "n_test (int, 1 to 25,000; default 50)" in shown["kl"] and "probe_every (int, >= 0; default 5)" in shown["kl"]
    with pytest.raises(SystemExit):
        main(["kl", "--help"])
    assert "[1 to 25,000]" in " ".join(capsys.readouterr().out.split()).split("--n-test N_TEST", 2)[2]


def test_workers_help_says_the_value_that_will_run(capsys, monkeypatch):
    """The lab and an experiment's command run one worker per CPU unless told: their help says so, with the count;
    a sweep runs one worker unless told, and its help says 1."""
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    for argv, want in ((["lab"], "(default here: 6, one per CPU)"), (["rl"], "(default here: 6, one per CPU)"),
                       (["sweep", "rl"], "(default 1)")):
        with pytest.raises(SystemExit):
            main([*argv, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert want in text.split("--workers WORKERS", 2)[2].split("--ray-address")[0], argv


def test_every_command_prints_its_help():
    """argparse formats help with %: a docstring's "20 %" must not break `reasonlab <cmd> --help`."""
    import argparse

    from reasonlab.cli import build_parser
    def walk(p):   # every parser, nested ones (reasonlab verifier train) included
        yield p
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for q in a.choices.values():
                    yield from walk(q)
    from reasonlab import experiments as X
    parsers = list(walk(build_parser()))
    assert len(parsers) > 12
    for p in parsers:
        assert p.format_help().startswith("usage:"), p.prog
    for name in X.BUILTIN:      # an experiment's parser gets its flags when it is the command named
        sub = next(a for a in build_parser([name])._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
        assert "--seeds" in sub.format_help() and f"{name}'s config" in sub.format_help()


@pytest.mark.parametrize("argv,msg", [
    (["train", "--kl-estimator", "k9"], "invalid choice"),
    (["train", "--loss-type", "ppo"], "invalid choice"),
    (["train", "--k-range", "3"], "expected 2 arguments"),
    (["train", "--max-resample", "-1"], "--max-resample must be >= 0, got -1"),
    (["lab", "--only", "nothing"], "unknown experiment"),
])
def test_derived_flags_reject_bad_values(argv, msg, capsys, tmp_path):
    assert main(argv + ["--cache-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and msg in err


def test_python_dash_m_reasonlab_is_the_cli():
    r = subprocess.run([sys.executable, "-m", "reasonlab", "sample", "1 2", "--force", "X"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith("reasonlab: error:") and r.stderr.count("\n") == 1


def test_eval_says_in_words_when_the_model_wrote_no_chain():
    from reasonlab.core.evaluate import format_table
    cell = {"acc": 0.5, "share": {"direct": 1.0, "short": 0.0, "full": 0.0}}
    table = {c: {"acc": 0.5, "length": 3.0, "chain_ok": float("nan"), "share": cell["share"], "per_k": {2: cell}}
             for c in ("free", "A", "S", "T")}
    text = format_table(table)
    assert "nan" not in text and "no chain written when free" in text
    table["free"]["chain_ok"] = 0.25
    assert "chain correct (free S/T answers) 0.250" in format_table(table)


def test_the_tables_last_row_weighs_each_k_alike():
    """eval's summary row is the mean over k, not over problems: 25 problems at k = 2 and 500 at k = 8 do not make
    it k = 8's accuracy (it moved with -n, and disagreed with the model card)."""
    from reasonlab.core.evaluate import format_table
    share = {"direct": 1.0, "short": 0.0, "full": 0.0}
    per_k = {2: {"acc": 1.0, "share": share, "n": 25}, 8: {"acc": 0.1, "share": share, "n": 500}}
    table = {c: {"acc": (25 + 50) / 525, "length": 3.0, "chain_ok": 1.0, "share": share, "per_k": per_k}
             for c in ("free", "A", "S", "T")}
    last = [line for line in format_table(table).splitlines() if line.startswith("mean k")][0]
    assert last.split()[2:6] == ["0.550"] * 4


def test_task_is_one_flag_of_each_command_that_works_on_a_task():
    """`--task` once per command (train's comes from RLConfig.task), with the task's help."""
    import argparse

    from reasonlab.cli import build_parser
    for name in ("sample", "eval", "pretrain", "train", "export hf", "export dataset", "import hf"):
        p = build_parser(name.split())
        for word in name.split():
            p = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices[word]
        flags = [s for a in p._actions for s in a.option_strings if s == "--task"]
        assert flags == ["--task"], name
        assert "the task" in next(a for a in p._actions if "--task" in a.option_strings).help, name


@pytest.mark.parametrize("argv", [["sample", "3 5"], ["eval"], ["pretrain", "--quick"], ["train", "--steps", "1"],
                                  ["export", "hf", "{tmp}/d"], ["export", "dataset", "{tmp}/d"],
                                  ["import", "hf", "{tmp}"]])
def test_an_unknown_task_is_one_line_and_exit_2(argv, tmp_path, capsys):
    assert main([a.format(tmp=tmp_path) for a in argv] + ["--task", "nope", "--cache-dir", str(tmp_path / "c")]
                if argv[0] not in ("export", "import") else [a.format(tmp=tmp_path) for a in argv] + ["--task", "nope"]
                ) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown task 'nope': choose from" in err and "digits" in err
    assert not (tmp_path / "c").exists() and not (tmp_path / "d").exists()


@pytest.fixture
def add_ckpt(tmp_path):
    stem = str(tmp_path / "add")
    save_model(stem, build_model(0, task="add"), {"task": "add"})
    return stem


def test_sample_reads_the_problem_with_the_task(add_ckpt, capsys):
    """The problem as the task shows it ("473 215" or "473 + 215" for add), the answer as the task writes it, the
    chain's states as its words; the checkpoint's task without --task, and a --task of another task refused."""
    for text in ("473 215", "473 + 215"):
        assert main(["sample", text, "--task", "add", "--checkpoint", add_ckpt, "--force", "T", "--samples", "2",
                     "--temperature", "1"]) == 0
        out = capsys.readouterr().out
        assert "problem 473 + 215  (answer 0 6 8 8)" in out and out.count("format full") == 2
    assert main(["sample", "473 215", "--checkpoint", add_ckpt]) == 0
    assert "problem 473 + 215" in capsys.readouterr().out
    assert main(["sample", "473 215", "--task", "digits", "--checkpoint", add_ckpt]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--task digits: the checkpoint" in err and "is a model of task add" in err
    assert main(["sample", "47 215", "--checkpoint", add_ckpt]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not one of the add task's" in err and "k must be in 2..5" in err


@pytest.mark.parametrize("task,text,shown", [("modprod", "3 5 0 2", "3 5 0 2"), ("compose", "4 f1 f0 f1",
                                                                                     "4 then f1 f0 f1"),
                                             ("compose:n_f=2", "4 then f1 f0", "4 then f1 f0"),
                                             ("digits", "35927", "3 5 9 2 7")])
def test_sample_takes_each_tasks_syntax(task, text, shown, tmp_path, capsys):
    stem = str(tmp_path / "m")
    save_model(stem, build_model(0, task=task), {"task": task})
    assert main(["sample", text, "--checkpoint", stem, "--force", "S"]) == 0
    assert f"problem {shown}  (answer " in capsys.readouterr().out
    assert main(["sample", "4 f9 x", "--task", task.split(":")[0], "--checkpoint", stem]) == 2
    assert f"not one of the {task.split(':')[0]} task's" in capsys.readouterr().err


def test_eval_and_train_take_the_checkpoints_task(add_ckpt, tmp_path, capsys):
    path = tmp_path / "e.json"
    assert main(["eval", "--checkpoint", add_ckpt, "--n-test", "1", "--json", str(path)]) == 0
    assert set(json.loads(path.read_text())["T"]["per_k"]) == {str(k) for k in range(2, 6)}
    run = tmp_path / "run"
    assert main(["train", "--checkpoint", add_ckpt, "--steps", "1", "--prompts-per-step", "2", "--num-generations",
                 "2", "--out", str(run)]) == 0
    assert json.loads((run / "config.json").read_text())["task"] == "add"
    assert main(["train", "--checkpoint", add_ckpt, "--task", "compose", "--out", str(tmp_path / "r2")]) == 2
    assert "is a model of task add" in capsys.readouterr().err
