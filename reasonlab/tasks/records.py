"""The records every task shares: the specials, the three formats, which chain steps a format writes, a problem and
a check's verdict."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SPECIALS = ("<pad>", "<s>", "</s>", "=", "A", "S", "T", "_")
"""The words every task shares, first in every vocabulary."""
PAD, BOS, EOS, EQ, FILL = 0, 1, 2, 3, 7
IGNORE = -100
# The one table of formats; every other mapping derives from it. Its order (direct, short, full) is the order of
# every `mix` and of the format index 0/1/2 in pools.
FORMAT_TABLE = (
    # name     token  label              plot colour
    ("direct", "A",   "A (direct)",      "#4C72B0"),
    ("short",  "S",   "S (short chain)", "#DD8452"),
    ("full",   "T",   "T (full chain)",  "#55A868"),
)
FORMATS = {name: tok for name, tok, _, _ in FORMAT_TABLE}   # format name -> control token
FMT_OF = {tok: name for name, tok in FORMATS.items()}       # control token -> format name
FMT_NAMES = tuple(FORMATS)
FMT_INDEX = {name: i for i, name in enumerate(FMT_NAMES)}
FMT_LABEL = {name: label for name, _, label, _ in FORMAT_TABLE}
FMT_COLOR = {name: colour for name, _, _, colour in FORMAT_TABLE}
FREE_COLOR = "#8172B3"   # free generation (the model picks the format) in plots
PARTS = {"train": (0.0, 0.5), "val": (0.5, 0.75), "test": (0.75, 1.0)}
"""The parts of every task's problem space: training draws only from train, selection from val, scoring from test."""
ENUMERATE_MAX = 10_000
"""A k whose instances number at most this many is enumerated: its parts hold exact shares (by rank of the hash) and
its draws are exact samples without replacement."""
DRAW_MISSES = 10_000
"""Draws in a row that bring no new instance of the part after which a draw stops short of n: the knobs can draw no
more there (compose's default n_f = 3 has 810 instances at k = 4, about 200 in "test")."""
OUT_SLACK = 2
"""Room after the longest right output (the course module's 24-token sequences leave two)."""


def format_name(x: str) -> str:
    """A format given as its token (A, S, T) or its name (direct, short, full) -> its name."""
    if x in FORMATS:
        return x
    if x in FMT_OF:
        return FMT_OF[x]
    raise ValueError(f"unknown format {x!r}: use A, S or T (or direct, short, full)")


def chain_steps(k: int, fmt: str) -> list[int]:
    """1-based unit steps after which the chain writes the state (empty for "direct"): every step for "full",
    every second step and the last for "short"."""
    if fmt == "direct":
        return []
    stride = 1 if fmt == "full" else 2
    return [i for i in range(1, k + 1) if i % stride == 0 or i == k]


@dataclass(frozen=True)
class Problem:
    """One problem: a JSON-serialisable record, the only input a check or a reward needs."""
    task: str
    """the registered name of its task"""
    k: int
    """its size: the number of unit steps"""
    x: tuple[int, ...]
    """the instance, as the task's small ints"""
    knobs: tuple[tuple[str, Any], ...] = field(default=(), compare=False)
    """the knobs it was drawn under (they change the distribution, not the rule; not part of its identity)"""

    def to_json(self) -> dict:
        return {"task": self.task, "k": self.k, "x": list(self.x), "knobs": dict(self.knobs)}

    @classmethod
    def from_json(cls, d: dict) -> "Problem":
        return cls(d["task"], int(d["k"]), tuple(int(v) for v in d["x"]), tuple(sorted(d.get("knobs", {}).items())))


@dataclass(frozen=True)
class Verdict:
    """What `Task.check` says of one output, from the problem alone."""
    template_ok: bool
    """format token, the format's number of chain steps, "A", an answer of the right length, </s>"""
    answer_ok: bool
    """the answer is right (the rule reward)"""
    steps: tuple[bool, ...]
    """one label per chain step written: the state is the one the format puts there (a PRM's labels)"""
    first_error: int | None
    """the index of the first wrong step, the answer counting as step len(steps) (right when it is right and comes
    after the format's whole chain); None when every written step and the answer are right"""
