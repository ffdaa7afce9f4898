"""Accuracy, format shares, length and chain correctness, overall and per k."""
from __future__ import annotations

import torch

from .. import tasks
from ..tasks import FORMATS, Problem
from .model import GPT
from .problems import TEST_SEED, problems_per_k
from .sampling import generate


def summarize(problems: list[Problem], results: list[dict]) -> dict:
    """acc, mean length, format shares and chain_ok (share of S/T answers whose every step checks)."""
    n = max(1, len(results))
    task = tasks.of(problems)
    acc = sum(task.correct(p, r) for r, p in zip(results, problems)) / n
    share = {f: sum(r["fmt"] == f for r in results) / n for f in FORMATS}
    chains = [task.check_chain(p, r) for r, p in zip(results, problems) if r["fmt"] in ("short", "full")]
    return {"acc": acc, "length": sum(r["length"] for r in results) / n, "share": share,
            "chain_ok": sum(bool(c) for c in chains) / len(chains) if chains else float("nan"), "n": len(results)}


def evaluate(model: GPT, problems: list, gen: torch.Generator | None = None, temperature: float = 0.0,
             force: list[str] | None = None) -> dict:
    """Generate on every problem (Problems of one task, or the course module's lists of digits) and score it.

    Returns the spec's dict (acc, length, share, chain_ok, results = parses, outputs = raw ids) plus
    per_k: {k: the same summary over the problems of size k}.
    """
    problems = tasks.problems_of(problems)
    task = tasks.of(problems)
    outs = generate(model, [task.prompt_ids(p) for p in problems], gen, temperature, force, task=task)
    res = [task.parse(o) for o in outs]
    out = summarize(problems, res)
    out.pop("n")
    by_k: dict[int, list[int]] = {}
    for i, p in enumerate(problems):
        by_k.setdefault(p.k, []).append(i)
    out["per_k"] = {k: summarize([problems[i] for i in idx], [res[i] for i in idx]) for k, idx in sorted(by_k.items())}
    out["results"], out["outputs"] = res, outs
    return out


def eval_table(model: GPT, n: int = 500, seed: int = TEST_SEED, task="digits") -> dict:
    """Greedy accuracy per k for free generation and each forced format: {"free"|"A"|"S"|"T": evaluate(...)}."""
    probs = problems_per_k(n, seed, task=task)
    table = {"free": evaluate(model, probs)}
    for tok in FORMATS.values():
        table[tok] = evaluate(model, probs, force=[tok])
    return table


def meets_bar(model: GPT, probs: list[Problem], probs_k2: list[Problem], S: float = 0.99, T: float = 0.99,
              A: float = 0.99) -> bool:
    """Greedy forced S and T at least S and T at every k of `probs`, and forced A at least A on `probs_k2` (the
    smallest k; no test when A is 0):
    the bar's three parts, evaluated in turn and stopped at the first that fails (train.Gate's test, the
    time-to-quality benchmark's check)."""
    for f, need in (("S", S), ("T", T)):
        if min(v["acc"] for v in evaluate(model, probs, force=[f])["per_k"].values()) < need:
            return False
    return A <= 0 or evaluate(model, probs_k2, force=["A"])["acc"] >= A


def passes_bar(table: dict, bar: float = 0.99, direct: bool = True) -> bool:
    """The base-model bar: forced S and T >= bar at every k, and (direct) forced A >= bar at the smallest k."""
    st = all(table[f]["per_k"][k]["acc"] >= bar for f in ("S", "T") for k in table[f]["per_k"])
    return st and (not direct or table["A"]["per_k"][min(table["A"]["per_k"])]["acc"] >= bar)


def format_table(table: dict) -> str:
    """Accuracy per k x {free, A, S, T} as a fixed-width text table, with the free format shares; the last row is
    the mean over k (each k weighs alike, so it does not move with n where a small k has fewer problems)."""
    ks = list(table["free"]["per_k"])
    lines = ["k      " + "".join(f"{c:>7}" for c in ("free", "A", "S", "T")) + "   free share A/S/T"]
    for k in ks:
        sh = table["free"]["per_k"][k]["share"]
        row = "".join(f"{table[c]['per_k'][k]['acc']:7.3f}" for c in ("free", "A", "S", "T"))
        lines.append(f"{k:<7}{row}   {sh['direct']:.2f}/{sh['short']:.2f}/{sh['full']:.2f}")
    sh = table["free"]["share"]
    mean_k = {c: sum(v["acc"] for v in table[c]["per_k"].values()) / len(ks) for c in ("free", "A", "S", "T")}
    lines.append("mean k " + "".join(f"{mean_k[c]:7.3f}" for c in ("free", "A", "S", "T"))   # each k alike: not moved
                 + f"   {sh['direct']:.2f}/{sh['short']:.2f}/{sh['full']:.2f}")                # by n or small k's size
    ok = table["free"]["chain_ok"]
    chains = (f"chain correct (free S/T answers) {ok:.3f}" if ok == ok
              else "no chain written when free (every free answer is direct), so no chain to check")
    lines.append(f"mean length (free) {table['free']['length']:.2f}; {chains}")
    return "\n".join(lines)
