"""Findings as computed checks: each lesson the lab states is a function of the results that returns the claim,
the statistic with its 95 % interval and per-seed values, the threshold and its source, and a verdict read off the
interval: holds, does not hold, inconclusive, or untestable.

One interval method decides every verdict: Student's t over the per-seed statistics (each seed is one independent
run of the whole experiment, so problems within a seed never count as independent replicates). Holds: the whole
interval is past the threshold (a one-sided test at 2.5 %); does not hold: the whole interval is on the other side
or at it; else inconclusive. Untestable is declared per claim before the run: the largest effect the arms' ceilings
or floors allow cannot pass the threshold, or the statistic has no variance by construction. Comparisons carry a
float tolerance (TOL), so float noise cannot flip a verdict. A primary is judged against its placebo's spread as
well (`floored`, where the lab has a placebo run beside it): five seeds can miss the spread they are drawn from.

Three kinds of check (`kind`): a *premise* is what a lesson rests on and the task makes true by construction; it is
checked, listed apart, never counted as a finding, and if it does not hold the experiment's other claims are
untestable (`gate`). A *primary* is the experiment's open question, at most one per experiment (none: the
experiment is a demonstration); `holm` corrects the primaries of a lab for multiplicity (Holm 1979, at the one-sided
2.5 % level, on unrounded p values). Every other claim is *secondary* and says so.
"""
from __future__ import annotations

import contextlib
import functools
import math
from dataclasses import dataclass

import numpy as np

HOLDS, FAILS, UNSURE, UNTESTABLE = "holds", "does not hold", "inconclusive", "untestable"
VERDICTS = (HOLDS, FAILS, UNSURE, UNTESTABLE)
PREMISE, PRIMARY, SECONDARY = "premise", "primary", "secondary"
KINDS = (PREMISE, PRIMARY, SECONDARY)
TOL = 1e-9
"""statistics within TOL of a threshold count as at it (float noise never decides a verdict)"""
ALPHA = 0.025
"""the one-sided level of every verdict: the lower end of a two-sided 95 % interval"""


@dataclass(frozen=True)
class Threshold:
    """A claim's threshold, fixed before the run, with where it comes from (a paper's figure, a practical margin)."""
    value: float
    source: str


def t_cdf(t: float, df: int) -> float:
    """Student's t distribution function for integer df (Abramowitz & Stegun 26.7.3-4: exact finite series)."""
    th = math.atan(t / math.sqrt(df))
    c2, s = math.cos(th) ** 2, math.sin(th)
    if df % 2:
        tot = term = math.cos(th) if df > 1 else 0.0
        for k in range(3, df - 1, 2):
            term *= c2 * (k - 1) / k
            tot += term
        a = 2 / math.pi * (th + s * tot)
    else:
        tot = term = 1.0
        for k in range(2, df - 1, 2):
            term *= c2 * (k - 1) / k
            tot += term
        a = s * tot
    return 0.5 + 0.5 * a


@functools.cache
def t_quantile(p: float, df: int) -> float:
    """The p quantile of Student's t (bisection on t_cdf)."""
    lo, hi = -1e3, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
    return (lo + hi) / 2


def moments(values) -> tuple[int, float, float]:
    """(n, mean, sample sd with ddof 1) of per-seed values, bit for bit as numpy's mean and std give them, without
    their per-call overhead (the null simulation judges a million five-seed claims): numpy sums fewer than 8 items
    one after another, as Python's sum does, so up to 7 values are summed in Python, more by numpy's reductions."""
    n = len(values)
    if n > 7:
        x = np.asarray(values, dtype=float)
        m = np.add.reduce(x) / n
        d = x - m
        return n, float(m), math.sqrt(np.add.reduce(d * d) / (n - 1))
    x = [math.nan if v is None else float(v) for v in values]
    m = sum(x) / n if n else math.nan
    return n, m, (math.sqrt(sum((v - m) * (v - m) for v in x) / (n - 1)) if n > 1 else math.nan)


def _interval(n: int, m: float, sd: float, df: int | None = None) -> tuple[float, float]:
    """The 95 % t interval of a mean of n values with this sd, on df degrees of freedom (None: n - 1)."""
    if n < 2:
        return -math.inf, math.inf
    h = t_quantile(1 - ALPHA, n - 1 if df is None else df) * sd / math.sqrt(n)
    return m - h, m + h


def _p(n: int, m: float, sd: float, thr: float, direction: str, df: int | None = None) -> float:
    """One-sided p of the t test against "the claim is false": mean <= thr (direction ">"), or mean > thr
    (direction "<="), on df degrees of freedom (None: n - 1)."""
    if n < 2:
        return 1.0
    d = m - thr
    if sd <= TOL:
        return 0.0 if (d > TOL if direction == ">" else d <= TOL) else 1.0
    t, df = d / (sd / math.sqrt(n)), n - 1 if df is None else df
    return 1 - t_cdf(t, df) if direction == ">" else t_cdf(t, df)


def seed_interval(values) -> tuple[float, tuple[float, float]]:
    """Mean over seeds and its 95 % t interval ((-inf, inf) from one seed; a point when every seed agrees)."""
    n, m, sd = moments(values)
    return m, _interval(n, m, sd)


def greater(ci, thr: float) -> str:
    """The statistic exceeds thr: holds when the whole interval is above it, fails when the whole interval is at or
    below it."""
    return HOLDS if ci[0] > thr + TOL else FAILS if ci[1] <= thr + TOL else UNSURE


def at_most(ci, thr: float) -> str:
    """The statistic is at most thr: holds when the whole interval is at or below it."""
    return HOLDS if ci[1] <= thr + TOL else FAILS if ci[0] > thr + TOL else UNSURE


def both(*verdicts: str) -> str:
    """Every part must hold; any part that fails fails the claim; an untestable part makes the claim untestable."""
    if UNTESTABLE in verdicts:
        return UNTESTABLE
    return FAILS if FAILS in verdicts else HOLDS if all(v == HOLDS for v in verdicts) else UNSURE


def _r(v):
    return None if v is None or not math.isfinite(v) else round(float(v), 4)


def finding(section: str, claim: str, statistic: str, value: float, ci, per_seed, threshold: str, verdict: str,
            **detail) -> dict:
    """One checked claim, JSON-able."""
    return {"section": section, "claim": claim, "statistic": statistic, "value": _r(value),
            "ci95": [_r(ci[0]), _r(ci[1])], "per_seed": [_r(v) for v in per_seed], "threshold": threshold,
            "verdict": verdict, **detail}


def missing(section: str, claim: str, why: str, **detail) -> dict:
    """A claim whose evidence this run did not produce: reported, inconclusive."""
    return {"section": section, "claim": claim, "statistic": why, "value": None, "ci95": [None, None],
            "per_seed": [], "threshold": "", "verdict": UNSURE, **detail}


def unread(section: str, claim: str, statistic: str, threshold: float | Threshold, why: str, **detail) -> dict:
    """A "greater" claim the design leaves nothing to read on this run (why): stated with its threshold, no
    evidence, untestable."""
    thr = threshold.value if isinstance(threshold, Threshold) else threshold
    source = {"source": threshold.source} if isinstance(threshold, Threshold) else {}
    return {**missing(section, claim, statistic, **source, **detail), "threshold": f"> {thr:g}",
            "verdict": UNTESTABLE, "untestable": why}


def seed_check(section: str, claim: str, statistic: str, per_seed, threshold: float | Threshold, test=greater,
               room: float | tuple[float, float] | None = None, untestable: str | None = None, **detail) -> dict:
    """A claim about one number per seed, judged on its t interval.

    room: the range the statistic can reach by the design, computed from the config and the task before the run
    (never from the run's data), (least, most), or the one bound on the side that passes (most for greater, least
    for at_most): a claim that cannot pass, or cannot fail, whatever the data is untestable (`out_of_room`).
    untestable: a reason known before the run (the statistic has no variance by construction)."""
    thr = threshold.value if isinstance(threshold, Threshold) else float(threshold)
    sign = ">" if test is greater else "<="
    if _DRAW is not None:
        per_seed = _DRAW(thr, sign, per_seed)
    n, m, sd = moments(per_seed)
    ci = _interval(n, m, sd)
    verdict = test(ci, thr)
    why = untestable if untestable is not None else None if room is None else out_of_room(room, thr, sign)
    if room is not None:
        detail["room"] = [_r(v) for v in (room if isinstance(room, tuple) else
                                          ((-math.inf, room) if sign == ">" else (room, math.inf)))]
    if why is not None:
        verdict = UNTESTABLE
        detail["untestable"] = why
    if isinstance(threshold, Threshold):
        detail["source"] = threshold.source
    return finding(section, claim, statistic, m, ci, per_seed, f"{sign} {thr:g}", verdict,
                   p=_p(n, m, sd, thr, sign), **detail)


_DRAW = None
"""while a null simulation runs (`drawn`): draw(threshold, sign, per_seed) -> the per-seed values judged instead"""


@contextlib.contextmanager
def drawn(draw):
    """The null simulation's entry into the experiments' own claims: while active, every `seed_check` judges
    draw(threshold, sign, its per-seed values) in their place (runner.null draws them at the claim's threshold)."""
    global _DRAW
    before, _DRAW = _DRAW, draw
    try:
        yield
    finally:
        _DRAW = before


def negative(what: str, statistic: str, per_seed, threshold: float | Threshold, test=greater) -> dict:
    """A measured negative control, the `negative` detail of a primary: a known-inert treatment or a known-biased
    alternative in the treatment's place (what), its statistic per seed, judged against the primary's threshold as
    the primary is (a check shown beside it, never counted as a finding)."""
    f = seed_check("", what, statistic, per_seed, threshold, test=test)
    return {k: f[k] for k in ("claim", "statistic", "value", "ci95", "per_seed", "threshold", "verdict")}


def floored(f: dict, pilot) -> dict:
    """A primary judged against its placebo's spread as well as its own: it holds only if its own t test holds and
    the interval with the larger of the two spreads (pooled degrees of freedom, n - 1 + n_pilot - 1) clears the
    threshold too; p is the larger of the two tests' p values, so Holm sees the same rule.

    Why: five seeds can all land in one mode of a bimodal spread, or short of a rare tail, and then show a spread far
    below the true one (the t test alone then "holds" above its level under a bimodal null: stats.null). The
    placebo is an independent replicate of the comparison with the control in both arms, run apart from the verdict,
    so its spread is the comparison's spread under the null. With equal spreads the larger one is at least the
    pooled one, whose t test is exact: the floor only makes the test stricter, and the own t test keeps the level
    where the treatment widens the spread. `pilot`: the placebo's per-seed values; where it has fewer than two or no
    spread, or the claim has no evidence, f is returned as it is."""
    pilot = [v for v in pilot or [] if v is not None]
    x = [v for v in f.get("per_seed") or [] if v is not None]
    parts = f.get("threshold", "").split()
    if len(pilot) < 2 or len(x) < 2 or len(parts) < 2 or parts[0] not in (">", "<=") or f.get("value") is None:
        return f
    s_pilot = moments(pilot)[2]
    if s_pilot <= TOL:
        return f
    sign, thr = parts[0], float(parts[1])
    n, m, s = moments(x)
    df, s = n - 1 + len(pilot) - 1, max(s, s_pilot)
    ci, p = _interval(n, m, s, df), _p(n, m, s, thr, sign, df)
    own = f.get("ungated", f["verdict"])
    out = {**f, "p": max(f.get("p", 1.0), p),
           "floor": {"sd": _r(s_pilot), "df": df, "ci95": [_r(ci[0]), _r(ci[1])], "p": _r(p)}}
    if own == HOLDS and (greater if sign == ">" else at_most)(ci, thr) != HOLDS:
        note = (f"holds on its own seeds' spread, not with its placebo's spread ({s_pilot:.3g}) as a floor: "
                f"[{_num(ci[0])}, {_num(ci[1])}]")
        out = {**out, "floored": note}
        out.update({"ungated": UNSURE} if "ungated" in f else {"verdict": UNSURE})
    return out


def out_of_room(room, thr: float, sign: str = ">") -> str | None:
    """Why a claim cannot be tested, or None: the design's range of the statistic (least, most) leaves it no way to
    pass, or no way to fail, against its own threshold (sign ">" for greater, "<=" for at_most). One rule for all."""
    lo, hi = room if isinstance(room, (tuple, list)) else ((-math.inf, room) if sign == ">" else (room, math.inf))
    lo, hi = (-math.inf if lo is None else lo), (math.inf if hi is None else hi)
    passes = (lambda v: v > thr + TOL) if sign == ">" else (lambda v: v <= thr + TOL)
    best, worst = (hi, lo) if sign == ">" else (lo, hi)
    if not passes(best):
        return f"the design lets the statistic reach {best:.3f} at best: it cannot pass {sign} {thr:g}"
    if passes(worst):
        return f"the design bounds the statistic by {worst:.3f}, on the claim's side of {sign} {thr:g}: it cannot fail"
    return None


def with_room(f: dict, room: tuple[float, float]) -> dict:
    """A finding with the design's room (from its experiment's config) attached, and untestable by `out_of_room`
    against its threshold's first clause, the statistic's (a claim whose evidence this run did not produce, with no
    threshold, is left as it is)."""
    parts = f["threshold"].split()
    if len(parts) < 2 or parts[0] not in (">", "<="):
        return f
    sign, thr = parts[0], float(parts[1])
    why = out_of_room(room, thr, sign)
    out = {**f, "room": [_r(room[0]), _r(room[1])]}
    return {**out, "verdict": UNTESTABLE, "untestable": why, "ungated": f["verdict"]} if why else out


def premise(f: dict, name: str | None = None) -> dict:
    """Mark a check as a premise (what the lesson rests on; see the module docstring). name: how the claims that
    rest on it alone say so (`requires`); a claim that names none rests on every premise of its experiment."""
    return {**f, "kind": PREMISE, **({"name": name} if name else {})}


def primary(f: dict) -> dict:
    """Mark a claim as its experiment's primary: the open question it was designed to answer."""
    return {**f, "kind": PRIMARY}


def kind_of(f: dict) -> str:
    return f.get("kind") or (PRIMARY if f.get("primary") else SECONDARY)


def gate(fs: list[dict]) -> list[dict]:
    """One experiment's findings with its premises applied: a claim whose premise does not hold is untestable,
    naming it. A claim rests on the premises its `requires` names, or on every premise of its experiment."""
    premises = {f.get("name") or f["claim"]: f for f in fs if kind_of(f) == PREMISE}
    failed = {n for n, f in premises.items() if f["verdict"] != HOLDS}
    out = []
    for f in fs:
        blocked = [n for n in f.get("requires", premises) if n in failed] if kind_of(f) != PREMISE else []
        why = "; ".join(f"premise '{premises[n]['claim']}' {premises[n]['verdict']}" for n in blocked)
        out.append({**f, "verdict": UNTESTABLE, "untestable": why, "ungated": f["verdict"]} if blocked else f)
    return out


def judge(fs: list[dict], room: tuple[float, float] | None = None) -> list[dict]:
    """One experiment's claims as the lab judges them: its primary against the design's `room` (with_room; None:
    no room given), then every claim gated by the premises it requires (gate)."""
    if room is not None:
        fs = [with_room(f, room) if kind_of(f) == PRIMARY else f for f in fs]
    return gate(fs)


def holm(fs: list[dict], alpha: float = ALPHA, family: int | None = None) -> list[dict]:
    """Holm's step-down correction over the primary claims (kind "primary" and a p value), on their unrounded p
    values: a primary holds only if Holm rejects it at alpha; one that held unadjusted and does not survive becomes
    inconclusive. `family`: the number of primaries declared before the run (an untestable one counts: it was
    asked); at least those with a p value. Returns new dicts, with "p_holm" on the primaries."""
    prim = sorted((i for i, f in enumerate(fs) if kind_of(f) == PRIMARY and f.get("p") is not None),
                  key=lambda i: fs[i]["p"])
    out = [dict(f) for f in fs]
    m, running, stop = max(len(prim), family or 0), 0.0, False
    for rank, i in enumerate(prim):
        running = max(running, min(1.0, (m - rank) * fs[i]["p"]))
        out[i]["p_holm"] = running
        stop = stop or fs[i]["p"] > alpha / (m - rank)
        if stop and out[i]["verdict"] == HOLDS:
            out[i]["verdict"] = UNSURE
            out[i]["holm"] = f"holds at 2.5 % alone, not after Holm's correction over {m} primary claims"
    return out


def _num(v) -> str:
    return "—" if v is None else f"{v:.3f}"


def counts(fs: list[dict]) -> dict[str, int]:
    """Verdicts of the findings (premises are not findings: not counted)."""
    return {v: sum(f["verdict"] == v for f in fs if kind_of(f) != PREMISE) for v in VERDICTS}


def cell(v) -> str:
    """A value as one markdown table cell: its pipes escaped (a claim such as "KL(pi || pi_ref)" would split it)."""
    return str(v).replace("|", "\\|")


_JUDGED: dict[tuple[str, str], dict] = {}
"""the lab's judged findings of the section being rendered, by (section, claim): what the page says of a claim"""


@contextlib.contextmanager
def judged(fs: list[dict]):
    """While an experiment renders its page: its claims as the lab judged them (room, premises, Holm), so that
    `verdict_line` and `table` say what findings.json says, never a verdict of their own."""
    global _JUDGED
    before, _JUDGED = _JUDGED, {(f["section"], f["claim"]): f for f in fs}
    try:
        yield
    finally:
        _JUDGED = before


def as_judged(f: dict) -> dict:
    """The lab's judgement of the claim f (itself outside a lab's rendering)."""
    return _JUDGED.get((f["section"], f["claim"]), f)


def ungated(f: dict) -> str:
    """A claim's verdict before its premises or its room gated it (a placebo is judged so: it must not hold)."""
    return f.get("ungated", f["verdict"])


def gated(f: dict) -> str:
    """Why an untestable claim is untestable, and, where a premise gated it, what its own interval said before."""
    return f["untestable"] + (f"; before gating: {f['ungated']}" if f.get("ungated") else "")


def verdict_cell(f: dict) -> str:
    """A table cell with the verdict in bold and, where a gate made the claim untestable, its verdict before."""
    return f"**{f['verdict']}**" + (f" (before gating: {f['ungated']})" if f.get("ungated") else "")


def table(fs: list[dict]) -> str:
    """The findings table: claim (primary or secondary), evidence (value [95 % CI]; per seed), threshold, verdict."""
    rows = ["| section | claim | statistic | value [95 % CI] | per seed | threshold | verdict |",
            "|---|---|---|---|---|---|---|"]
    for f in map(as_judged, fs):
        ci = f["ci95"]
        val = "—" if f["value"] is None else f"{f['value']:.3f} [{_num(ci[0])}, {_num(ci[1])}]"
        kind = ("" if "kind" not in f and "primary" not in f      # an experiment's own table, before the lab's
                else {PRIMARY: "**primary**: ", PREMISE: "premise: "}.get(kind_of(f), "secondary: "))
        notes = [gated(f) if f.get("untestable") else "", f.get("floored", ""), f.get("holm", "")]
        why = f" ({'; '.join(n for n in notes if n)})" if any(notes) else ""
        rows.append(f"| {f['section']} | {kind}{cell(f['claim'])} | {cell(f['statistic'])} | {val} | "
                    f"{', '.join(_num(v) for v in f['per_seed'])} | {cell(f['threshold'])} | **{f['verdict']}**"
                    f"{cell(why)} |")
    return "\n".join(rows)


def verdict_line(f: dict) -> str:
    """One sentence for a section's text: the claim and what this run says of it (as the lab judged it)."""
    f = as_judged(f)
    ci = f["ci95"]
    ev = "" if f["value"] is None else f" ({f['statistic']} = {f['value']:.3f}, 95 % CI [{_num(ci[0])}, {_num(ci[1])}], threshold {f['threshold']})"
    why = f"; {gated(f)}" if f.get("untestable") else f"; {f['floored']}" if f.get("floored") else ""
    c = f["claim"]
    name = c.split(" ")[0][1:]                  # "RL ..." and "L1-Max ..." keep their capitals; "Chains ..." does not
    c = c if any(ch.isupper() or ch.isdigit() for ch in name) else c[0].lower() + c[1:]
    return f"**{f['verdict'].capitalize()}** on this run: {c}{ev}{why}."


def held_on(fs: list[dict]) -> dict[str, list[str]]:
    """{experiment: the tasks on which its primary holds (as judged)} for every experiment with a primary, in order.
    A lesson replicates where it holds on two tasks or more."""
    out: dict[str, list[str]] = {}
    for f in fs:
        if kind_of(f) == PRIMARY:
            out.setdefault(f["experiment"], [])
            if f["verdict"] == HOLDS:
                out[f["experiment"]].append(f.get("task", "digits"))
    return out


def replicated(tasks: list[str]) -> str:
    return (f"replicates ({', '.join(tasks)})" if len(tasks) > 1 else f"{tasks[0]} only" if tasks
            else "holds on no task")


def by_task(fs: list[dict], name=lambda exp: f"`{exp}`") -> list[str]:
    """The primaries with a column per task (value [95 % CI]: verdict, as judged) and a last column saying where
    each holds: the rows of a markdown table."""
    tasks = list(dict.fromkeys(f.get("task", "digits") for f in fs))
    prim = {(f["experiment"], f.get("task", "digits")): f for f in fs if kind_of(f) == PRIMARY}
    rows = ["| experiment | primary claim | " + " | ".join(tasks) + " | holds on |", "|---|---|" + "---|" * len(tasks) + "---|"]
    for exp, where in held_on(fs).items():
        first = next(f for (e, _), f in prim.items() if e == exp)
        cells = []
        for t in tasks:
            f = prim.get((exp, t))
            ci = f and f["ci95"]
            cells.append("not run" if f is None else f"{_num(f['value'])} [{_num(ci[0])}, {_num(ci[1])}]: "
                         f"**{f['verdict']}**" if f["value"] is not None else f"**{f['verdict']}**")
        control = f" (control: {first['control']})" if first.get("control") else ""
        rows.append(f"| {name(exp)} | {cell(first['claim'] + control)} | " + " | ".join(cells) + f" | {replicated(where)} |")
    return rows
