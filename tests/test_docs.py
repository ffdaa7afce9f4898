"""Every step the README and docs/*.md show works as written: each `reasonlab` command of their code blocks passes
the real command's parsing and checks (flags, choices, bounds, each config's validate); the cheap ones (eval,
sample, export) run as written; the README's sample and API block and hf.md's snippet give what the pages show; in
the slow suite each page's commands and python lines (its scripts, its pytest) run in the page's order."""
import glob
import importlib.util
import os
import re
import shlex
import subprocess
import sys

import pytest

from reasonlab import cli, tasks
from reasonlab import experiments as X
from reasonlab.cli import jobs
from reasonlab.cli.guard import UsageError

ROOT = os.path.join(os.path.dirname(__file__), "..")
PAGES = [os.path.join(ROOT, "README.md"), *sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))]
SKIP_PAGES = {"history.md"}          # the record of earlier versions: its commands are of their time


def blocks(path: str) -> list[tuple[str, str]]:
    """(language, text) of each fenced code block of a page."""
    text = open(path, encoding="utf-8").read()
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.M | re.S)]


def uncommented(line: str) -> str:
    """A documented line without its trailing "# ..." comment."""
    return re.sub(r"\s+#\s.*$", "", line)


def literal(line: str) -> list[list[str]]:
    """The commands a documented line stands for: its comment and a synopsis's optional parts ([...]) left out, the
    first of each choice (a|b), alternatives written "cmd A | cmd B" split apart."""
    line = uncommented(line)
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
    """(where, argv) of every reasonlab command (argv without "reasonlab") and every python line (argv from "python")
    in the pages' code blocks, in page order ("$ " prompts and # comments dropped, continuation lines joined)."""
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
                elif ln.startswith("python "):
                    cmd = shlex.split(uncommented(ln))
                    found.append((f"{os.path.basename(page)}: {shlex.join(cmd)}", cmd))
    return found


STEPS = documented()
COMMANDS = [(w, a) for w, a in STEPS if a[0] != "python"]
SCRIPTS = [(w, a) for w, a in STEPS if a[0] == "python"]


def test_the_pages_show_commands():
    pages = {where.split(":")[0] for where, _ in COMMANDS}
    assert {"README.md", "hf.md", "methods.md", "scale-out.md", "your_idea.md", "your_task.md"} <= pages
    assert len(COMMANDS) >= 30


def test_every_documented_python_line_names_a_file_or_module_that_exists():
    """The python lines the pages show (run in order with the page's commands in the slow suite): a script of the
    repository, `-m` a module, or `-c` code."""
    assert {w.split(":")[0] for w, _ in SCRIPTS} >= {"methods.md", "your_idea.md", "your_task.md"}
    for where, argv in SCRIPTS:
        if argv[1] == "-m":
            assert importlib.util.find_spec(argv[2]), where
        elif argv[1] != "-c":
            assert os.path.isfile(os.path.join(ROOT, argv[1])), where


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
    have registered from a file of its own: each test starts without them, and the registries are given back as
    they were (a test file that loaded the template task at its import still finds it)."""
    tasks.names(), X.names()                  # the built-ins registered first (both load them on first use)
    before = (dict(tasks.REGISTRY), dict(X.REGISTRY), set(tasks._LOADED), set(X._LOADED))
    forget_user_files()
    yield
    for now, was in zip((tasks.REGISTRY, X.REGISTRY, tasks._LOADED, X._LOADED), before):
        now.clear()
        now.update(was)
    tasks.get.cache_clear()


def user_files(argv: list[str], where) -> None:
    """The files a page tells its reader to make before a command: the copy of a template (--experiment,
    --task-file, with the page's edit) and the grid file docs/scale-out.md describes (--config)."""
    if "--experiment" in argv or "--task-file" in argv:
        src = "experiments/template.py" if "--experiment" in argv else "tasks/template.py"
        name = argv[argv.index("--experiment" if "--experiment" in argv else "--task-file") + 1]
        text = open(os.path.join(ROOT, "reasonlab", src), encoding="utf-8").read()
        (where / name).write_text(text.replace('name = "maxdigit"', 'name = "my_task"'))
    if "--config" in argv:
        (where / argv[argv.index("--config") + 1]).write_text("seeds = [0, 1]\nquick = true\n[grid]\n"
                                                              "beta = [0.0, 0.04]\n[set]\nsteps = 30\n")


@pytest.mark.parametrize("where,argv", COMMANDS, ids=[w for w, _ in COMMANDS])
def test_every_documented_command_passes_its_checks(where, argv, tmp_path, monkeypatch, registries):
    """Parsing runs every check a command makes before its work: flags, choices, bounds, a config's validate()."""
    monkeypatch.chdir(tmp_path)
    user_files(argv, tmp_path)
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


NEEDS_A_CLUSTER = "--ray-address"
"""a command that joins a running Ray cluster (none here): parsed and checked above, not run"""


def accepts(argv: list[str], *flag: str) -> bool:
    try:
        cli.parse(argv + list(flag))
    except (UsageError, SystemExit):
        return False
    return True


def small(argv: list[str]) -> list[str]:
    """A documented command at small size: one seed, each experiment's quick config (--quick), train's 2 steps; a
    placeholder the page names (RUN_A, RUN_B: the committed run) or a path under the reader's home (the model cache:
    this test's) filled in. Every other word as the page has it."""
    out = [a.replace("~/.cache/reasonlab", os.environ["REASONLAB_CACHE"]) for a in argv]
    out = [os.path.join(ROOT, "results", "lab") if a in ("RUN_A", "RUN_B") else a for a in out]
    if "--seeds" in out:
        i = j = out.index("--seeds")
        while j + 1 < len(out) and not out[j + 1].startswith("--"):
            j += 1
        out[i:j + 1] = ["--seeds", "0"]
    elif accepts(out, "--seeds", "0"):
        out += ["--seeds", "0"]
    if out[0] == "train":
        out += ["--steps", "2"]
    elif "--quick" not in out and accepts(out, "--quick"):
        out.append("--quick")
    return out


PAGES_RUN = sorted({w.split(":")[0] for w, _ in STEPS})


def run_python(where: str, argv: list[str], here) -> None:
    """A page's python line as the reader runs it: a script of the repository (benchmarks/, scripts/) from the
    directory the page's commands wrote to, `-m pytest` inside the repository, as the page says."""
    for d in ("benchmarks", "scripts"):
        if not os.path.exists(here / d):
            os.symlink(os.path.join(ROOT, d), here / d)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, *filter(None, [os.environ.get("PYTHONPATH")])])}
    cwd = ROOT if argv[1:3] == ["-m", "pytest"] else here
    r = subprocess.run([sys.executable, *argv[1:]], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, (where, r.stdout[-1000:], r.stderr[-2000:])


@pytest.mark.slow      # every page's commands in order at small size: minutes
@pytest.mark.parametrize("page", PAGES_RUN)
def test_every_documented_command_runs_at_small_size(page, tmp_path, monkeypatch, capsys, registries):
    """Each page's commands and python lines run in the page's order in one directory (a step reads what an earlier
    one wrote, as the reader's would), at small size (`small`); the model the page's TRL or verl step trains is stood
    in for by the exported one (out/trained: the base model as exported)."""
    pytest.importorskip("transformers")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "README.md").write_text(open(os.path.join(ROOT, "README.md"), encoding="utf-8").read())
    os.symlink(os.path.join(ROOT, "results"), tmp_path / "results")        # `findings readme` reads the run
    ran = []
    for where, argv in (c for c in STEPS if c[0].startswith(page + ":")):
        if argv[0] == "python":
            run_python(where, argv, tmp_path)
            ran.append(where)
            continue
        if NEEDS_A_CLUSTER in argv:
            continue
        if argv[:2] == ["import", "hf"] and not os.path.exists(argv[2]):     # what the page's trainer wrote
            assert cli.main(["export", "hf", argv[2], "--seed", "0"]) == 0
        if "ray" in argv:
            pytest.importorskip("ray")
        if "tensorboard" in argv:
            pytest.importorskip("tensorboard")
        user_files(argv, tmp_path)
        cmd = small(argv)
        assert cli.main(cmd) == 0, (where, cmd, capsys.readouterr().err[-2000:])
        ran.append(where)
    assert ran, page
