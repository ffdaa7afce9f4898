"""The tasks: step-checkable problem families, one file each, registered by name (`base.py` says what a task is and
what the lab derives from it). The layer beneath everything else: pure Python, no torch.

    digits    the sum of k digits mod 10: the course module's task (a direct answer is at chance from k = 3)
    modprod   the product of k digits 0..6 mod 7: a 0 absorbs, so a direct answer is right wherever a 0 is
    compose   k permutations of ten symbols applied in turn (Ramesh et al. 2024): a direct answer works at small k
    add       two k-digit numbers, the sum written most significant digit first (Lee et al. 2023's scratchpad)

A task outside the package is one file that ends with `register(MyTask)`: `reasonlab lab --task-file my_task.py
--task my_task` (docs/your_task.md; a template in `reasonlab/tasks/template.py`).
"""
from __future__ import annotations

import importlib.util
import os
import sys
from typing import Sequence

from . import add, compose, digits, modprod  # noqa: F401  (each registers itself)
from .base import Task  # noqa: F401  (the layer's public names, these four imports)
from .draws import ENUMERATE_MAX, product  # noqa: F401
from .records import (  # noqa: F401
    FMT_COLOR,
    FMT_INDEX,
    FMT_LABEL,
    FMT_NAMES,
    FMT_OF,
    FORMAT_TABLE,
    FORMATS,
    FREE_COLOR,
    IGNORE,
    PARTS,
    SPECIALS,
    Problem,
    Verdict,
    chain_steps,
    format_name,
)
from .registry import REGISTRY, get, register, task_of  # noqa: F401

BUILTIN = ("digits", "modprod", "compose", "add")
"""The built-in tasks, in the report's order."""
_LOADED: set[str] = set()


def names() -> tuple[str, ...]:
    """The registered tasks: the built-ins first, then the others as they came."""
    return tuple([n for n in BUILTIN if n in REGISTRY] + [n for n in REGISTRY if n not in BUILTIN])


def problem_of(x, task: str | Task = "digits") -> Problem:
    """A Problem as it is, or the problem of an instance given as a sequence of ints (the course module passes a
    digit-sum problem as its list of digits)."""
    if isinstance(x, Problem):
        return x
    return (task if isinstance(task, Task) else get(task)).problem(x)


def problems_of(xs: Sequence, task: str | Task = "digits") -> list[Problem]:
    return [problem_of(x, task) for x in xs]


def of(problems: Sequence[Problem]) -> Task:
    """The one task of a list of problems (ValueError if they mix tasks)."""
    names_ = {p.task for p in problems}
    if len(names_) > 1:
        raise ValueError(f"problems of several tasks ({', '.join(sorted(names_))}) in one call")
    return task_of(problems[0]) if problems else get("digits")


def run_user_file(path: str, flag: str, prefix: str) -> None:
    """Execute a user's Python file (a task or an experiment of their own) as the module <prefix><its name>, held in
    sys.modules while it runs (dataclasses look their module up); ValueError naming `flag` when it is not one."""
    if not os.path.isfile(path) or not path.endswith(".py"):
        raise ValueError(f"{flag} {path}: not a Python file")
    mod_name = prefix + "".join(c if c.isalnum() else "_" for c in os.path.basename(path)[:-3])
    spec = importlib.util.spec_from_file_location(mod_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception:
        sys.modules.pop(mod_name, None)
        raise


def load_file(path: str) -> list[str]:
    """Import a task file (a user's task); returns the names it registered."""
    path = os.path.abspath(os.path.expanduser(path))
    if path in _LOADED:
        return []
    before = set(REGISTRY)
    run_user_file(path, "--task-file", "reasonlab_task_")
    _LOADED.add(path)
    new = [n for n in REGISTRY if n not in before]
    if not new:
        raise ValueError(f"--task-file {path}: the file registers no task (end it with register(MyTask))")
    return new
