"""Every step the README and docs/*.md show works as written: each `reasonlab` command of their code blocks passes
the real command's parsing and checks (flags, choices, bounds, each config's validate); the cheap ones (eval,
sample, export) run as written; the README's sample and API block and hf.md's snippet give what the pages show."""
import glob
import os
import re
import shlex

import pytest

from reasonlab import cli, tasks
from reasonlab import experiments as X
from reasonlab.cli import jobs

ROOT = os.path.join(os.path.dirname(__file__), "..")
PAGES = [os.path.join(ROOT, "README.md"), *sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))]
SKIP_PAGES = {"history.md"}          # the record of earlier versions: its commands are of their time


def blocks(path: str) -> list[tuple[str, str]]:
    """(language, text) of each fenced code block of a page."""
    text = open(path, encoding="utf-8").read()
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.M | re.S)]


def literal(line: str) -> list[list[str]]:
    """The commands a documented line stands for: its comment and a synopsis's optional parts ([...]) left out, the
    first of each choice (a|b), alternatives written "cmd A | cmd B" split apart."""
    line = re.sub(r"\s+#\s.*$", "", line)
    while re.search(r"\[[^\[\]]*\]", line):
        line = re.sub(r"\s*\[[^\[\]]*\]", "", line)
    out, cmd = [], []
    for w in shlex.split(line) + ["|"]:
        if w == "|":
            out.append(cmd if cmd[:1] == ["reasonlab"] else ["reasonlab", *cmd])
            cmd = []
        else:
            cmd.append(w.split("|")[0] if "|" in w and " " not in w else w)
    return out


def documented() -> list[tuple[str, list[str]]]:
    """(where, argv) of every reasonlab command in the pages' code blocks ("$ " prompts and # comments dropped,
    continuation lines joined)."""
    found = []
    for page in PAGES:
        if os.path.basename(page) in SKIP_PAGES:
            continue
        for lang, text in blocks(page):
            if lang not in ("", "bash"):
                continue
            text = re.sub(r"\\\n\s*", " ", text)
            lines = [ln.strip().removeprefix("$ ") for ln in text.splitlines()]
            # a synopsis continues on indented lines that start with a flag: join them to their command
            joined: list[str] = []
            for ln in lines:
                if ln.startswith(("[", "--")) and joined:
                    joined[-1] += " " + ln
                else:
                    joined.append(ln)
            for ln in joined:
                if ln.startswith("reasonlab "):
                    for cmd in literal(ln):
                        found.append((f"{os.path.basename(page)}: {shlex.join(cmd)}", cmd[1:]))
    return found


COMMANDS = documented()


def test_the_pages_show_commands():
    pages = {where.split(":")[0] for where, _ in COMMANDS}
    assert {"README.md", "hf.md", "methods.md", "scale-out.md", "your_idea.md", "your_task.md"} <= pages
    assert len(COMMANDS) >= 30


def forget_user_files() -> None:
    """Drop every task and experiment a user's file registered (modules reasonlab_task_* and reasonlab_user_*,
    `tasks.run_user_file`), and what tasks.get built from them."""
    for name in [n for n, cls in tasks.REGISTRY.items() if cls.__module__.startswith("reasonlab_task_")]:
        del tasks.REGISTRY[name]
    for name in [n for n, e in X.REGISTRY.items() if e.run.__module__.startswith("reasonlab_user_")]:
        del X.REGISTRY[name]
    tasks._LOADED.clear()
    X._LOADED.clear()
    tasks.get.cache_clear()


@pytest.fixture
def registries():
    """A page's user file registers its task or experiment by a name another page's copy (or another test) may
    have registered from a file of its own: each test starts and ends without them."""
    forget_user_files()
    yield
    forget_user_files()


@pytest.mark.parametrize("where,argv", COMMANDS, ids=[w for w, _ in COMMANDS])
def test_every_documented_command_passes_its_checks(where, argv, tmp_path, monkeypatch, registries):
    """Parsing runs every check a command makes before its work: flags, choices, bounds, a config's validate()."""
    monkeypatch.chdir(tmp_path)
    if "--experiment" in argv or "--task-file" in argv:      # the user's copy of a template, as the page makes it
        src = "experiments/template.py" if "--experiment" in argv else "tasks/template.py"
        name = argv[argv.index("--experiment" if "--experiment" in argv else "--task-file") + 1]
        text = open(os.path.join(ROOT, "reasonlab", src), encoding="utf-8").read()
        (tmp_path / name).write_text(text.replace('name = "maxdigit"', 'name = "my_task"'))   # the page's edit
    if "--config" in argv:                                   # the grid file docs/scale-out.md describes
        (tmp_path / argv[argv.index("--config") + 1]).write_text("seeds = [0, 1]\nquick = true\n[grid]\n"
                                                                 "beta = [0.0, 0.04]\n[set]\nsteps = 30\n")
    args = cli.parse(argv)
    if args.cmd == "sweep":                                  # a sweep checks every cell's config before any work
        jobs.sweep_config(args)


RUN_AS_WRITTEN = (("eval",), ("sample",), ("export", "dataset"), ("export", "hf"))
"""the documented commands cheap enough to run as written here (seconds each); the others are checked above"""
RUNS = [(w, a) for w, a in COMMANDS if any(tuple(a[:len(c)]) == c for c in RUN_AS_WRITTEN)
        and not {"--checkpoint", "--task-file"} & set(a)]          # those read what an earlier step of the page made


@pytest.mark.parametrize("where,argv", RUNS, ids=[w for w, _ in RUNS])
def test_the_cheap_documented_commands_run_as_written(where, argv, tmp_path, monkeypatch, capsys):
    if argv[:2] == ["export", "hf"]:
        pytest.importorskip("transformers")
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 0, capsys.readouterr().err
    if argv[0] == "export":
        assert os.listdir(tmp_path / argv[2])                 # the directory the page names, written


def test_the_readmes_sample_gives_what_the_readme_shows(capsys):
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    shown = re.search(r"^\$ reasonlab (.*)\n(.*)\n(.*)\n", text, re.M)
    assert cli.main(shlex.split(shown.group(1))) == 0
    out = capsys.readouterr().out.splitlines()
    assert [" ".join(x.split()) for x in out[:2]] == [" ".join(shown.group(i).split()) for i in (2, 3)]


def test_the_readmes_python_runs_as_written_at_small_size(monkeypatch, tmp_path):
    """The API block, with rl_train's 100 steps cut to 2: every other line exactly as the README has it."""
    monkeypatch.chdir(tmp_path)
    code = next(t for lang, t in blocks(os.path.join(ROOT, "README.md")) if lang == "python" and "rl_train" in t)
    assert "steps=100" in code
    env: dict = {}
    exec(compile(code.replace("steps=100", "steps=2"), "README.md", "exec"), env)
    assert len(env["hist"]) >= 1 and len(env["rewards"]) == len(env["problems"])
