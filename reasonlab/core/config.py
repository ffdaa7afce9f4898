"""One source of truth for configs: a dataclass's fields, their types and the docstring under each, give the
CLI flags, their help and the choices that `validate` checks. The same idea as tyro (used by cleanrl), in the few
lines this project needs: bool, int, float, str, Literal, optional and fixed-length tuple fields.
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import textwrap
import types
import typing


@functools.cache
def field_docs(cls) -> dict[str, str]:
    """{field: the string literal written under it in the class body}."""
    body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body
    docs = {}
    for a, b in zip(body, body[1:]):
        if (isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name) and isinstance(b, ast.Expr)
                and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str)):
            docs[a.target.id] = " ".join(b.value.value.split())
    return docs


def _unwrap(tp):
    """(the type without None, whether None is allowed)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


@functools.cache
def hints(cls) -> dict:
    return typing.get_type_hints(cls)


def choices(cls) -> dict[str, tuple]:
    """{field: allowed values} for every Literal field."""
    out = {}
    for f in dataclasses.fields(cls):
        tp, optional = _unwrap(hints(cls)[f.name])
        if typing.get_origin(tp) is typing.Literal:
            out[f.name] = typing.get_args(tp) + ((None,) if optional else ())
    return out


def check_choices(obj, what: str) -> None:
    """Reject a Literal field holding another value, naming the field and the allowed values."""
    for name, ok in choices(type(obj)).items():
        if getattr(obj, name) not in ok:
            raise ValueError(f"invalid {what} config: {name}={getattr(obj, name)!r}, expected one of "
                             f"{', '.join(str(v) for v in ok)}")


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_flags(p: argparse.ArgumentParser, cls, skip=(), aliases: dict | None = None) -> list[str]:
    """Add one flag per field of `cls` (but `skip`), default None so that only what the user set overrides the
    config; values are checked by the config's `validate`. `aliases` adds other flag names for a field (e.g.
    {"learning_rate": ["--lr"]}). Returns the field names."""
    docs, names = field_docs(cls), []
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        tp, optional = _unwrap(hints(cls)[f.name])
        kw: dict = {"default": None, "help": docs.get(f.name, "").replace("%", "%%")}   # argparse formats help with %
        if f.default is not dataclasses.MISSING:
            kw["help"] += f" (default {f.default})"
        if tp is bool:
            kw["action"] = argparse.BooleanOptionalAction
        elif typing.get_origin(tp) is typing.Literal:
            kw["choices"] = [str(v) for v in typing.get_args(tp)]
        elif typing.get_origin(tp) is tuple:
            args = typing.get_args(tp)
            kw["nargs"], kw["type"] = ("+" if args[-1] is Ellipsis else len(args)), args[0]
        else:
            kw["type"] = tp
        if optional and "type" in kw and "nargs" not in kw:
            inner = kw["type"]
            kw["type"] = lambda s, t=inner: None if s.lower() == "none" else t(s)
            kw["help"] += "; 'none' for None"
        p.add_argument(flag(f.name), *(aliases or {}).get(f.name, ()), dest=f.name, **kw)
        names.append(f.name)
    return names


def overrides(args: argparse.Namespace, names) -> dict:
    """The fields the user set on the command line, with tuples as tuples."""
    out = {}
    for n in names:
        v = getattr(args, n, None)
        if v is not None:
            out[n] = tuple(v) if isinstance(v, list) else v
    return out
