"""A task of one's own, from a file: every command that takes --task takes --task-file first (docs/your_task.md),
and the lab runs on it in quick mode."""
import json
import os

import pytest

import reasonlab
from reasonlab.cli import main
from reasonlab.io.checkpoint import save_model
from reasonlab.train.sft import build_model

TEMPLATE = os.path.join(os.path.dirname(reasonlab.__file__), "tasks", "template.py")


def test_the_commands_read_a_task_from_a_file(tmp_path, capsys):
    mine = tmp_path / "my_task.py"                   # the template under a name no other test registers
    mine.write_text(open(TEMPLATE).read().replace('name = "maxdigit"', 'name = "my_task"'))
    stem = str(tmp_path / "m")
    assert main(["sample", "3 5 9", "--task", "my_task", "--force", "T"]) == 2           # not registered yet
    assert "my_task" in capsys.readouterr().err
    assert main(["sample", "3 5 9", "--task-file", str(mine), "--task", "my_task", "--force", "T",
                 "--checkpoint", str(tmp_path / "none")]) == 2                            # the file is read first
    capsys.readouterr()
    from reasonlab import tasks
    save_model(stem, build_model(0, task=tasks.get("my_task")), {"task": "my_task"})
    assert main(["sample", "3 5 9", "--task-file", str(mine), "--checkpoint", stem, "--force", "T"]) == 0
    assert "problem 3 5 9  (answer 9)" in capsys.readouterr().out
    out = tmp_path / "e.json"
    assert main(["eval", "--task-file", str(mine), "--checkpoint", stem, "--n-test", "2", "--json", str(out)]) == 0
    assert set(json.loads(out.read_text())["T"]["per_k"]) == {str(k) for k in range(2, 9)}
    assert main(["sample", "3 5 9", "--task-file", str(tmp_path / "no.py"), "--task", "maxdigit"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a Python file" in err


@pytest.mark.slow      # trains the task's quick base model (~30 s)
def test_the_quick_lab_runs_on_a_task_from_a_file(tmp_path, capsys):
    out, cache = str(tmp_path / "lab"), str(tmp_path / "cache")
    assert main(["lab", "--quick", "--task-file", TEMPLATE, "--tasks", "maxdigit", "--only", "base", "faithful",
                 "--seeds", "0", "--out", out, "--cache-dir", cache, "--workers", "1"]) == 0
    fs = json.load(open(os.path.join(out, "findings.json")))
    assert fs and {f["task"] for f in fs} == {"maxdigit"} and {f["experiment"] for f in fs} == {"base", "faithful"}
    assert "maxdigit" in open(os.path.join(out, "report.md")).read()
