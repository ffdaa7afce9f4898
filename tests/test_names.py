"""One name per concept (docs/names.md): no dataclass of the package has a retired field and no command a retired
flag; the page lists every retired name this test knows."""
import dataclasses
import importlib
import inspect
import pathlib
import pkgutil

import pytest

import reasonlab
from reasonlab import experiments as X
from reasonlab import tasks
from reasonlab.cli import build_parser
from reasonlab.cli.commands import COMMANDS

RETIRED = {"n", "eval_n", "n_eval", "card_eval", "select_n", "probe_n", "seq_n", "prm_n", "verifier_n", "n_per_k", "lr",
           "sft_lr"}
RETIRED_FLAGS = {"-n", "--n", "--eval-n", "--n-eval", "--card-eval", "--select-n", "--probe-n", "--seq-n", "--prm-n",
                 "--verifier-n", "--lr", "--sft-lr"}
SPEC_NAMES = {"reasonlab.train.sft.Recipe": {"lr"}}
"""The spec's own names, kept so that a notebook written against it runs: a recipe dict's "lr"."""
NAMES_MD = pathlib.Path(__file__).resolve().parents[1] / "docs" / "names.md"


TEMPLATES = ("reasonlab.experiments.template", "reasonlab.tasks.template")
"""files a user copies: importing one registers its experiment or task (another test may have registered a copy)"""


def package_dataclasses() -> dict[str, type]:
    """Every dataclass of the package's modules (the templates apart), the registries left as they were."""
    found, experiments, task_classes = {}, dict(X.REGISTRY), dict(tasks.REGISTRY)
    try:
        for m in pkgutil.walk_packages(reasonlab.__path__, "reasonlab."):
            if m.name.endswith("__main__") or m.name in TEMPLATES:
                continue
            mod = importlib.import_module(m.name)
            for name, obj in vars(mod).items():
                if inspect.isclass(obj) and dataclasses.is_dataclass(obj) and obj.__module__ == mod.__name__:
                    found[f"{mod.__name__}.{name}"] = obj
    finally:
        X.REGISTRY.clear(), X.REGISTRY.update(experiments)
        tasks.REGISTRY.clear(), tasks.REGISTRY.update(task_classes)
        tasks.get.cache_clear()
    return found


def test_no_config_field_has_a_retired_name():
    classes = package_dataclasses()
    assert len(classes) > 30 and "reasonlab.experiments.kl.Config" in classes and \
        "reasonlab.cli.commands.Eval" in classes           # the walk reaches experiments and commands
    bad = {path: sorted({f.name for f in dataclasses.fields(cls)} & RETIRED - SPEC_NAMES.get(path, set()))
           for path, cls in classes.items()}
    assert not {p: b for p, b in bad.items() if b}


def flags_of(argv: list[str]) -> set[str]:
    ap = build_parser(argv)
    sub = ap._subparsers._group_actions[0].choices[argv[0]]
    if len(argv) > 1 and sub._subparsers is not None:
        sub = sub._subparsers._group_actions[0].choices[argv[1]]
    return {s for a in sub._actions for s in a.option_strings}


@pytest.mark.parametrize("argv", [name.split() for name in COMMANDS] + [[e] for e in X.names()],
                         ids=lambda a: " ".join(a))
def test_no_command_takes_a_retired_flag(argv):
    flags = flags_of(argv)
    assert "--help" in flags and not flags & RETIRED_FLAGS


def test_names_page_lists_every_retired_name():
    text = NAMES_MD.read_text(encoding="utf-8")
    retired = text.split("## Retired names", 1)[1]
    assert all(f"`{n}`" in retired for n in RETIRED), [n for n in RETIRED if f"`{n}`" not in retired]
    assert all(f"`{f}`" in retired or f.lstrip("-").replace("-", "_") in RETIRED for f in RETIRED_FLAGS)
