"""One source of truth for configs: a dataclass's fields, their types and the docstring under each, give the
CLI flags, their help, the choices (a `Literal`) and the bounds (a `Bound` in the type: `n_test: NTest`) that
`check_choices` and `check_numbers` check. The same idea as tyro (used by cleanrl), in the few lines this project
needs: bool, int, float, str, Literal, optional and fixed-length tuple fields.
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import math
import numbers
import os
import textwrap
import types
import typing


@functools.cache
def field_docs(cls) -> dict[str, str]:
    """{field: the string literal written under it in the class body}, a base dataclass's fields included (a
    subclass's own docstring wins)."""
    docs = {}
    for c in reversed([c for c in cls.__mro__ if dataclasses.is_dataclass(c)]):
        body = ast.parse(textwrap.dedent(inspect.getsource(c))).body[0].body
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


def item_choices(cls) -> dict[str, tuple]:
    """{field: the values its items may take} for every tuple-of-Literal field (`algos: tuple[Algo, ...]`)."""
    out = {}
    for f in dataclasses.fields(cls):
        tp, _ = _unwrap(hints(cls)[f.name])
        item = typing.get_args(tp)[0] if typing.get_origin(tp) is tuple and typing.get_args(tp) else None
        if typing.get_origin(item) is typing.Literal:
            out[f.name] = typing.get_args(item)
    return out


def check_choices(obj, what: str) -> None:
    """Reject a Literal field holding another value, or a tuple-of-Literal field an item of another value, naming
    the field and the allowed values."""
    for name, ok in choices(type(obj)).items():
        if getattr(obj, name) not in ok:
            raise ValueError(f"invalid {what} config: {name}={getattr(obj, name)!r}, expected one of "
                             f"{', '.join(str(v) for v in ok)}")
    for name, ok in item_choices(type(obj)).items():
        for x in getattr(obj, name) or ():
            if x not in ok:
                raise ValueError(f"invalid {what} config: {name} may hold only {', '.join(str(v) for v in ok)}, "
                                 f"got {x!r}")


SEED_MAX = 2**32 - 1          # numpy's and torch's seeding take it; 2**70 overflows torch.manual_seed
STEPS_MAX = 10**7             # any step count beyond this is a typo, not a run
N_TEST_MAX = 25_000
"""Test problems per k of an evaluation (every `n_test`), drawn distinct: k = 5 has 25,213 in its test part, and a
draw of more distinct problems than there are never ends."""


# Rough bytes per sequence, measured on the 200K-parameter model (KV cache 4 x 2 x 64 x 24 floats = 48 KiB, plus
# logits and activations): generating one, training on one (activations kept for backward), keeping one sample.
GEN_ROW = 64 << 10
TRAIN_ROW = 1 << 20
SAMPLE_ROW = 256
N_K = 7                       # k = 2..8: evaluation commands draw n problems per k


def mem_available() -> int:
    """Bytes of memory available now (MemAvailable), or physical memory where /proc is absent."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 8 << 30


def fits(flag: str, rows: int, per_row: int, unit: int = 1) -> None:
    """Refuse a size whose memory estimate exceeds half of the available memory, saying the largest that fits."""
    budget = mem_available() // 2
    if rows * per_row > budget:
        most = max(1, budget // per_row // unit)
        raise ValueError(f"{flag}: about {rows * per_row / 2**30:.1f} GiB for {rows:,} sequences, more than half of the "
                         f"{2 * budget / 2**30:.1f} GiB available; use at most {most:,}")


NS = (1, 2, 4, 8, 16, 32, 64)
"""The sample counts every curve over N is read at (voting, pass@N, best-of-N, search): powers of two, as
search-and-learn's."""

TEMPERATURE = (1e-3, 1e3)
"""Sampling temperatures allowed besides 0 (greedy): logits / 1e-300 are inf and sampling gets NaN probabilities."""


@dataclasses.dataclass(frozen=True)
class Bound:
    """A number field's bounds, written next to the field in its type (`n_test: NTest = 100`): lo <= x <= hi, or
    exactly 0 where zero_ok (a greedy temperature); `over` / `under`: what to say past either end ({x}, {lo}, {hi}).
    `check_numbers` reads it."""
    lo: float
    hi: float | None = None
    over: str = "must be at most {hi:,}, got {x:,}"
    under: str = ""
    zero_ok: bool = False
    strict: bool = False
    """lo itself is out: lo < x"""
    below: bool = False
    """hi itself is out: x < hi"""

    def problem(self, x) -> str | None:
        if self.zero_ok and x == 0:
            return None
        if x < self.lo or (self.strict and x <= self.lo):
            return (self.under or ("must be > {lo:g}, got {x}" if self.strict else "must be positive, got {x}"
                                   if self.lo == 1 else "must be >= {lo:g}, got {x}")).format(x=x, lo=self.lo, hi=self.hi)
        if self.hi is not None and (x > self.hi or (self.below and x >= self.hi)):
            return self.over.format(x=x, lo=self.lo, hi=self.hi)
        return None

    def text(self) -> str:
        """The bounds as help shows them: ">= 1", "1 to 25,000", "0 or 0.001 to 1,000"."""
        num = lambda v: f"{int(v):,}" if float(v).is_integer() else f"{v:g}"     # noqa: E731
        low = f"> {num(self.lo)}" if self.strict else f">= {num(self.lo)}"
        high = f"{'<' if self.below else '<='} {num(self.hi)}" if self.hi is not None else ""
        span = low if self.hi is None else f"{low} and {high}" if self.strict or self.below else \
            f"{num(self.lo)} to {num(self.hi)}"
        return f"0 or {span}" if self.zero_ok else span


Count = typing.Annotated[int, Bound(1)]
"""a count a run needs at least one of (problems, samples, rounds, layers)"""
NTest = typing.Annotated[int, Bound(1, N_TEST_MAX, "must be at most {hi:,} (k = 5 has no more test problems), got {x:,}")]
"""test problems per k, drawn distinct"""
NTest0 = typing.Annotated[int, Bound(0, N_TEST_MAX, NTest.__metadata__[0].over)]
"""test problems per k where 0 means none (a model card's table)"""
Steps = typing.Annotated[int, Bound(1, STEPS_MAX, "= {x:,} is more than {hi:,}")]
"""the steps of the run a config is about"""
Steps0 = typing.Annotated[int, Bound(0, STEPS_MAX, "= {x:,} is more than {hi:,}")]
"""steps of a second run, 0 for none (a warm start, RL before a probe)"""
Every = typing.Annotated[int, Bound(0)]
"""a cadence in steps, 0 for never"""
Seed = typing.Annotated[int, Bound(0, SEED_MAX, "must be in {lo}..{hi}, got {x}", "must be in {lo}..{hi}, got {x}")]
"""a seed numpy's and torch's seeding take"""
_GREEDY_OR = "must be 0 (greedy) or in {lo:g}..{hi:g}, got {x:g}"
Temperature = typing.Annotated[float, Bound(TEMPERATURE[0], TEMPERATURE[1], _GREEDY_OR, _GREEDY_OR, zero_ok=True)]
"""a sampling temperature: 0 (greedy) or one whose logits stay finite"""
Sampled = typing.Annotated[float, Bound(TEMPERATURE[0], TEMPERATURE[1], "must be at most {hi:g}, got {x:g}",
                                         "must be in {lo:g}..{hi:g} (it samples: 0, greedy, is out), got {x:g}")]
"""a sampling temperature where the method needs samples that differ (search, a verifier's training outputs)"""
Positive = typing.Annotated[float, Bound(0, strict=True)]
"""a number that must be above 0: a learning rate, a clip range, a growth factor"""
NonNegative = typing.Annotated[float, Bound(0)]
"""a weight in a loss or a reward (a KL weight, a length weight, an entropy bonus): 0 for none"""
Fraction = typing.Annotated[float, Bound(0, 1, strict=True)]
"""a share of the data that must hold some: above 0, at most 1"""
Probability = typing.Annotated[float, Bound(0, 1, "must be < 1, got {x}", strict=True, below=True)]
"""a probability strictly between 0 and 1 (a cut-off on outputs' probability)"""
Count0 = typing.Annotated[int, Bound(0)]
"""a count where 0 means none"""
Share0 = typing.Annotated[float, Bound(0, 1, "must be < 1, got {x}", below=True)]
"""a share of the samples that may be none but not all (rollouts forced to answer directly)"""


@functools.cache
def _items(cls) -> dict:
    """{field: the type of its value, or of each item} with its metadata: inside Optional and tuple[..., ...]."""
    out = {}
    for name, tp in typing.get_type_hints(cls, include_extras=True).items():
        tp = _unwrap(tp)[0]
        out[name] = typing.get_args(tp)[0] if typing.get_origin(tp) is tuple else tp
    return out


@functools.cache
def bounds(cls) -> dict[str, Bound]:
    """{field: its Bound} for every field whose type carries one (also inside Optional and tuple[..., ...])."""
    out = {}
    for name, tp in _items(cls).items():
        found = [m for m in getattr(tp, "__metadata__", ()) if isinstance(m, Bound)]
        if found:
            out[name] = found[0]
    return out


@functools.cache
def integers(cls) -> frozenset[str]:
    """The fields whose type is an integer (a bounded one too; also inside Optional and tuple[..., ...])."""
    return frozenset(name for name, tp in _items(cls).items() if getattr(tp, "__origin__", tp) is int)


def check_numbers(obj, what: str, flags: bool = False) -> None:
    """The bounds every config obeys, whichever way its values came (flags, TOML, --set, code): floats finite, an
    integer field an integer, and each field's Bound where its type carries one (nested configs too). flags: name a
    field as its command-line flag (the command line's check)."""
    limits, ints = bounds(type(obj)), integers(type(obj))
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if dataclasses.is_dataclass(v):
            check_numbers(v, what, flags)
            continue
        bad = _bound(v, limits.get(f.name), f.name in ints)
        if bad:
            raise ValueError(f"{flag(f.name)} {bad}" if flags else f"invalid {what} config: {f.name} {bad}")


def _bound(v, limit: Bound | None, integer: bool = False) -> str | None:
    """What is wrong with one field's value (each item of a tuple), or None."""
    for x in (v if isinstance(v, (tuple, list)) else (v,)):
        if integer and x is not None and (isinstance(x, bool) or not isinstance(x, numbers.Integral)):
            return f"must be an integer, got {x!r}"
        if isinstance(x, float) and not math.isfinite(x):
            return f"must be a finite number, got {x}"
        if isinstance(x, bool) or not isinstance(x, (int, float)) or limit is None:
            continue
        bad = limit.problem(x)
        if bad:
            return bad
    return None


def flag(name: str) -> str:
    return "-" + name if len(name) == 1 else "--" + name.replace("_", "-")


def _is_config(tp) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def add_flags(p: argparse.ArgumentParser, cls, skip=()) -> None:
    """One flag per field of `cls`: its name (-x for a one-letter name), its docstring as help, its `Literal` as
    choices; a field without a default is positional; the fields of a nested config are flags of their own (names
    must not clash). Defaults are None, so that only what the user set overrides the config (`given`); values are
    checked by the config's validate(). `skip`: field names (dotted for nested ones) that are not flags."""
    docs = field_docs(cls)
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        tp, optional = _unwrap(hints(cls)[f.name])
        if _is_config(tp):
            add_flags(p, tp, skip={s.split(".", 1)[1] for s in skip if s.startswith(f.name + ".")})
            continue
        kw: dict = {"help": docs.get(f.name, "").replace("%", "%%")}   # argparse formats help with %
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING)
        if default is not dataclasses.MISSING and default is not None and default != ():
            kw["help"] += f" (default {' '.join(map(str, default)) if isinstance(default, tuple) else default})"
        if f.name in bounds(cls):
            kw["help"] += f" [{bounds(cls)[f.name].text()}]"
        if tp is bool:
            kw["action"] = argparse.BooleanOptionalAction
        elif typing.get_origin(tp) is tuple:
            args = typing.get_args(tp)
            item = args[0]
            if args[-1] is Ellipsis:
                kw["nargs"], kw["action"] = "+", "extend"
            else:
                kw["nargs"] = len(args)
            if typing.get_origin(item) is typing.Literal:
                kw["choices"] = list(typing.get_args(item))
            else:
                kw["type"] = item
        elif typing.get_origin(tp) is typing.Literal:
            kw["choices"] = [str(v) for v in typing.get_args(tp)]
        else:
            kw["type"] = tp
        if optional and "type" in kw and "nargs" not in kw:
            inner = kw["type"]
            kw["type"] = lambda s, t=inner: None if s.lower() == "none" else t(s)
            kw["help"] += "; none: unset (as described)"
        if default is dataclasses.MISSING:
            p.add_argument(f.name, **kw)
        else:
            p.add_argument(flag(f.name), dest=f.name, default=None, **kw)


def given(cls, ns: argparse.Namespace, skip=()) -> dict:
    """The fields of `cls` the user set on the command line ({nested config: {...}} for nested ones), tuples as
    tuples."""
    out = {}
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        tp, _ = _unwrap(hints(cls)[f.name])
        if _is_config(tp):
            sub = given(tp, ns, {s.split(".", 1)[1] for s in skip if s.startswith(f.name + ".")})
            if sub:
                out[f.name] = sub
            continue
        v = getattr(ns, f.name, None)
        if v is not None:
            out[f.name] = tuple(v) if isinstance(v, list) else v
    return out


def make(cls, values: dict, **fixed):
    """cls from its given values over its defaults (a nested config from its own dict; a JSON list back to a tuple
    where the field is a tuple) and `fixed` ones. An unknown field is an error naming the known ones."""
    known = {f.name for f in dataclasses.fields(cls)}
    bad = sorted(set(values) - known)
    if bad:
        raise ValueError(f"unknown {cls.__module__.rsplit('.', 1)[-1]} field {bad[0]!r}: choose from {', '.join(sorted(known))}")
    kw = {}
    for f in dataclasses.fields(cls):
        if f.name not in values:
            continue
        tp, _ = _unwrap(hints(cls)[f.name])
        v = values[f.name]
        if _is_config(tp) and isinstance(v, dict):
            v = make(tp, v)
        elif isinstance(v, list) and (typing.get_origin(tp) is tuple or tp is tuple):
            v = tuple(v)
        kw[f.name] = v
    return cls(**{**kw, **fixed})


def field_type(cls, dotted: str):
    """(the type of a field, whether None is allowed, its owner class) for a field name, dotted into nested
    configs ("verifier.steps"); ValueError naming the fields where there is none."""
    head, _, rest = dotted.partition(".")
    names = [f.name for f in dataclasses.fields(cls)]
    if head not in names:
        raise ValueError(f"unknown field {dotted!r}: choose from {', '.join(names)}")
    tp, optional = _unwrap(hints(cls)[head])
    if rest:
        if not _is_config(tp):
            raise ValueError(f"{head} is not a nested config: {dotted!r}")
        return field_type(tp, rest)
    return tp, optional, cls


def parse_value(cls, dotted: str, value):
    """A value for a field of `cls`, typed by the field: text from the command line ("3e-5", "true", "none", a tuple
    as "a+b+c") or a value TOML gave typed (checked the same way). ValueError naming the field and the type."""
    tp, optional, _ = field_type(cls, dotted)
    if optional and (value is None or str(value).lower() in ("none", "null")):
        return None
    try:
        return _typed(tp, value)
    except (TypeError, ValueError):
        raise ValueError(f"bad value {value!r} for {dotted} (expected {_type_name(tp)})") from None


def _typed(tp, value):
    if typing.get_origin(tp) is tuple:
        item = typing.get_args(tp)[0]
        parts = value if isinstance(value, (list, tuple)) else [v for v in str(value).split("+") if v]
        return tuple(_typed(item, v) for v in parts)
    if typing.get_origin(tp) is typing.Literal:
        for choice in typing.get_args(tp):
            if str(choice) == str(value):
                return choice
        raise ValueError
    if tp is bool:
        if isinstance(value, bool):
            return value
        if str(value).lower() not in ("true", "1", "yes", "false", "0", "no"):
            raise ValueError
        return str(value).lower() in ("true", "1", "yes")
    if tp is int:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError
        return int(value)
    if tp is float:
        if isinstance(value, bool):
            raise ValueError
        return float(value)
    if tp is str:
        return str(value)
    raise TypeError(f"a field of type {tp} cannot be set from text")


def _type_name(tp) -> str:
    if typing.get_origin(tp) is tuple:
        return f"items of {_type_name(typing.get_args(tp)[0])} joined by +"
    if typing.get_origin(tp) is typing.Literal:
        return "one of " + ", ".join(map(str, typing.get_args(tp)))
    return getattr(tp, "__name__", str(tp))


def field_list(cls, prefix: str = "") -> list[str]:
    """One line per field a grid may name (nested configs' fields dotted): its type, its bounds where its type
    carries them, its default and its doc."""
    docs, out = field_docs(cls), []
    for f in dataclasses.fields(cls):
        tp = _unwrap(hints(cls)[f.name])[0]
        if _is_config(tp):
            out += field_list(tp, f"{prefix}{f.name}.")
            continue
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        shown = "+".join(map(str, default)) if isinstance(default, tuple) else default
        limit = f", {bounds(cls)[f.name].text()}" if f.name in bounds(cls) else ""
        out.append(f"  {prefix}{f.name} ({_type_name(tp)}{limit}; default {shown}): {docs.get(f.name, '')}")
    return out


def with_values(obj, values: dict):
    """A copy of the config `obj` with {dotted field: value} set (nested configs copied where a value goes in)."""
    top: dict = {}
    for dotted, v in values.items():
        head, _, rest = dotted.partition(".")
        top.setdefault(head, {})
        if rest:
            top[head][rest] = v
        else:
            top[head] = v
    new = {}
    for head, v in top.items():
        sub = getattr(obj, head)
        new[head] = with_values(sub, v) if dataclasses.is_dataclass(sub) and isinstance(v, dict) else v
    return dataclasses.replace(obj, **new)
