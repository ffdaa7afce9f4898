"""The README's findings block and the difference between two runs' findings, both read off findings.json files:
the README never types a verdict. `make results` writes the block; a test fails when README and findings disagree.
"""
from __future__ import annotations

import json
import os

from .. import experiments as X
from ..io.checkpoint import write_text
from ..stats.findings import FAILS, HOLDS, PREMISE, UNSURE, UNTESTABLE, counts

BEGIN = "<!-- findings: written by `make results` from results/lab/findings.json; do not edit by hand -->"
END = "<!-- /findings -->"


def _num(v) -> str:
    return "—" if v is None else f"{v:.3f}"


def load(path: str) -> list[dict]:
    """A findings.json (a run directory holding one, or the file itself): a list of claims."""
    if os.path.isdir(path):
        path = os.path.join(path, "findings.json")
    with open(path, encoding="utf-8") as f:
        fs = json.load(f)
    if not isinstance(fs, list) or not all(isinstance(x, dict) and "claim" in x and "verdict" in x for x in fs):
        raise ValueError(f"{path} is not a findings file (a list of claims with their verdicts)")
    return fs


def block(fs: list[dict], report: str = "results/lab/report.md") -> str:
    """One row per experiment: its primary claim (with its control), the statistic's value and interval, the
    verdict, or "demonstration" for one with no primary; then the counts."""
    rows = ["| experiment: its question | primary claim (control) | value [95 % CI] | verdict |", "|---|---|---|---|"]
    for exp in dict.fromkeys(f["experiment"] for f in fs):
        name = f"`{exp}`: {X.BUILTIN[exp]}" if exp in X.BUILTIN else f"`{exp}`"
        f = next((f for f in fs if f["experiment"] == exp and f.get("primary")), None)
        if f is None:
            rows.append(f"| {name} | demonstration: its premises only | | |")
            continue
        ci = f["ci95"]
        val = "—" if f["value"] is None else f"{f['value']:.3f} [{_num(ci[0])}, {_num(ci[1])}]"
        control = f" (control: {f['control']})" if f.get("control") else ""
        rows.append(f"| {name} | {f['claim']}{control} | {val} | {f['verdict']} |")
    n = counts(fs)
    claims = sum(f.get("kind") != PREMISE for f in fs)
    tail = (f"{claims} claims in all: {n[HOLDS]} hold, {n[FAILS]} do not hold, {n[UNSURE]} are inconclusive, "
            f"{n[UNTESTABLE]} untestable (premises apart); primary claims are corrected together (Holm). The full "
            f"table, with per-seed values, thresholds and their sources, the premises, each primary's room and its "
            f"placebo, is in [the report]({report}).")
    return "\n".join([BEGIN, *rows, "", tail, END])


def sync(readme: str, findings: str, check: bool = False) -> bool:
    """Write the block into `readme` between its markers; with check, only say whether it is up to date. Returns
    whether the README is (check) or was (write) already up to date."""
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        raise ValueError(f"{readme} has no findings block ({BEGIN} ... {END})")
    head, rest = text.split(BEGIN, 1)
    new = head + block(load(findings)) + rest.split(END, 1)[1]
    if new != text and not check:
        write_text(readme, new)
    return new == text


def diff(a: str, b: str) -> list[str]:
    """What moved between two runs: each claim (matched by experiment and claim text) whose verdict changed, and the
    claims only one run has."""
    fa, fb = ({(f.get("experiment", f.get("section")), f["claim"]): f for f in load(p)} for p in (a, b))
    out = []
    for k in fa.keys() | fb.keys():
        x, y = fa.get(k), fb.get(k)
        if x is None or y is None:
            out.append(f"{'only in ' + (b if x is None else a)}: {k[0]}: {k[1]}")
        elif x["verdict"] != y["verdict"]:
            out.append(f"{k[0]}: {k[1]}: {x['verdict']} ({_num(x['value'])}) -> {y['verdict']} ({_num(y['value'])})")
    return sorted(out)
