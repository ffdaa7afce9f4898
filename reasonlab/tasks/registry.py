"""The registry: tasks by name, and a task with its knobs from one string ("compose:n_f=3")."""
from __future__ import annotations

import functools

from .base import Task
from .draws import _ranked
from .records import Problem

REGISTRY: dict[str, type[Task]] = {}


def register(cls: type[Task]) -> type[Task]:
    """Add a task class to the registry (a class of the same module registering again, a reload, replaces it)."""
    if not cls.name or not cls.name.replace("_", "").isalnum():
        raise ValueError(f"a task's name is a word (letters, digits, _), got {cls.name!r}")
    old = REGISTRY.get(cls.name)
    if old is not None and old.__module__ != cls.__module__:
        raise ValueError(f"two tasks are called {cls.name!r} ({old.__module__}, {cls.__module__})")
    REGISTRY[cls.name] = cls
    get.cache_clear()
    _ranked.cache_clear()
    return cls


def _knob_value(cls: type[Task], name: str, text: str):
    default = cls.knob_defaults[name]
    try:
        if isinstance(default, bool):
            if text.lower() not in ("true", "false", "1", "0"):
                raise ValueError
            return text.lower() in ("true", "1")
        return type(default)(text)
    except ValueError:
        raise ValueError(f"task {cls.name}: knob {name} takes a {type(default).__name__}, got {text!r}") from None


@functools.lru_cache(maxsize=None)
def get(spec: str) -> Task:
    """The task a string names: "digits", or a name and knobs, "compose:n_f=3:..." (ValueError naming the choices)."""
    name, *knobs = str(spec).split(":")
    if name not in REGISTRY:
        raise ValueError(f"unknown task {name!r}: choose from {', '.join(REGISTRY)}")
    cls = REGISTRY[name]
    values = {}
    for kv in knobs:
        key, eq, text = kv.partition("=")
        if not eq or key not in cls.knob_defaults:
            choices = ", ".join(f"{k}=<{type(v).__name__}>" for k, v in cls.knob_defaults.items()) or "none"
            raise ValueError(f"task {name}: bad knob {kv!r} (its knobs: {choices})")
        values[key] = _knob_value(cls, key, text)
    return cls(**values)


def task_of(p: Problem) -> Task:
    """The task of a problem (with the knobs it was drawn under)."""
    return get(":".join([p.task] + [f"{k}={v}" for k, v in p.knobs])) if p.knobs else get(p.task)
