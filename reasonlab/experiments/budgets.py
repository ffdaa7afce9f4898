"""Thinking budgets: s1's budget forcing on the base model's chains (Muennighoff et al. 2025, arXiv 2501.19393).

Capping a chain at b steps (the answer marker forced once the chain has b states: on digits, running sums) trades
accuracy for tokens: T capped at 0 steps is a direct answer, at k_max steps (digits: 8) the full chain. That holds by
construction, so it is a premise. The open question is s1's "Wait": the end of thinking suppressed so the chain runs
past its natural end. s1 reports a gain on a model that re-checks its work; this model was never shown a chain
longer than k steps. Forced `extend` steps past its natural end (T writes k states; here it must write k + extend
before it may answer), does its accuracy fall below the uncapped chain's? The base model's uncapped chain is right
on nearly every problem, so Wait could not be seen to help it: the primary forces the erring thinker's S chain (its
prompts' words misread, fixed in its weights, so its chains err; its T is right nearly everywhere in some seeds),
whose uncapped chain leaves headroom (a premise, checked on the run). The control is its uncapped chain on the same
problems; the placebo forces nothing (extend = 0) on a second erring thinker, its misreading drawn on a stream of its
own: an independent replicate of the control.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from .. import tasks
from ..core.config import Count, Count0, NTest
from ..core.problems import test_problems
from ..io.report import TOKEN_COLOR, chance_level, md_table, plt, save
from ..methods import tts
from ..stats import findings
from ..stats.findings import both, finding, seed_check
from ..stats.summary import mean_std, pm
from ..tasks import Problem, chain_steps
from ..train.zoo import on_erring, thinker_model
from . import Experiment, opening, reading, register, replicate_seed, task_of
from .thresholds import THRESHOLDS as TH

SEC = "budgets"
WHO = {"erring": "the erring thinker", "base": "the base model"}
FORMATS = {"S": "short", "T": "full"}


@dataclass
class Config:
    task: str = "digits"
    """the task (`reasonlab.tasks`: digits, modprod, compose, add; knobs after colons: "compose:n_f=4")"""
    n_test: NTest = 200
    """test problems per k (this seed's own draw; digits' k = 2 has 25, k = 3 250)"""
    extend: Count0 = 1
    """the primary's forcing: states the chain must write past its natural end (T: k) before it may answer
    (s1's "Wait", appended once per step); 0: no forcing, on a second erring thinker made on a stream of its own
    (the placebo: an independent replicate of the control; with wait_on base, the same model: no spread)"""
    shown: tuple[Count, ...] = (2, 3, 4)
    """further forcings shown beside the primary's (steps past the natural end)"""
    wait_on: Literal["erring", "base"] = "erring"
    """the model the primary forces past its end: the erring thinker (its chains err: headroom for Wait to help), or
    the base model (right nearly everywhere: no headroom, the premise fails)"""
    chain: Literal["S", "T"] = "S"
    """the chain forced past its end: S (the erring thinker's forced S errs on about a third of the problems), or T
    (its full chain is right nearly everywhere in some seeds: too little headroom; docs/findings_moved.md)"""


def past_the_end(model, probs: list[Problem], wait: int, fmt: str = "T") -> dict:
    """Greedy forced `fmt` with at least its natural length + wait states before the answer (each k forced to its
    own length: T writes k states, S those of chain_steps(k, "short"); wait = 0: the uncapped chain, no hook):
    accuracy and tokens, overall and per k."""
    rows = {}
    for k in sorted({p.k for p in probs}):
        group = [p for p in probs if p.k == k]
        natural = len(chain_steps(k, FORMATS[fmt]))
        if wait:
            rows[k] = tts.budget_sweep(model, group, fmt, [natural + wait], kind="min")[0] | {"n": len(group)}
        else:
            rows[k] = tts.budget_sweep(model, group, fmt, [None])[0] | {"n": len(group)}
    n = sum(r["n"] for r in rows.values())
    mean = lambda key: sum(r[key] * r["n"] for r in rows.values()) / n    # noqa: E731
    return {"wait": wait, "acc": mean("acc"), "tokens": mean("tokens"), "thinking_tokens": mean("thinking_tokens"),
            "acc_by_k": {k: r["acc"] for k, r in rows.items()}}


def run(cfg: Config, seed: int, env) -> dict:
    task = tasks.get(cfg.task)
    model = env.base(seed, cfg.task)
    probs = test_problems(cfg.n_test, "budgets", seed, task=task)
    short = len(chain_steps(task.k_max, "short"))     # the longest short chain: its caps 0..short
    out = {"budgets": tts.budget_sweep(model, probs, "T", task.budgets) + tts.budget_sweep(model, probs, "S",
                                                                                          range(0, short + 1)),
           "wait_on": cfg.wait_on}
    waited = model if cfg.wait_on == "base" else thinker_model("erring", seed, env.cache, env.device, task=task)
    # forcing nothing (the placebo), the treatment arm is the control run again: the uncapped chain of a second
    # erring thinker, its misreading drawn on a stream of its own (the base model has no second one: the same model)
    again = waited if cfg.extend or cfg.wait_on == "base" else thinker_model(
        "erring", seed, env.cache, env.device, task=task, stream=replicate_seed(seed, "erring"))
    out.update(uncapped=past_the_end(waited, probs, 0, cfg.chain), extend=cfg.extend, chain=cfg.chain,
               forced=[past_the_end(waited if w else again, probs, w, cfg.chain)
                       for w in sorted({cfg.extend, *cfg.shown})])
    return out if task.spec == "digits" else {**out, "task": task.spec}   # a digits result keeps its keys


def _forced(r: dict, wait: int) -> dict:
    return next(f for f in r["forced"] if f["wait"] == wait)


def caps_trade_accuracy_for_tokens(rs: list[dict]) -> dict:
    """Capping T's chain at b steps: more budget, more accuracy and more tokens (b = 0 against the largest b)."""
    def rows(r):
        t = sorted((b for b in r["budgets"] if b["format"] == "T" and b["kind"] == "max"), key=lambda b: b["budget"])
        return t[0], t[-1]
    acc = [hi["acc"] - lo["acc"] for lo, hi in map(rows, rs)]
    tok = [hi["tokens"] - lo["tokens"] for lo, hi in map(rows, rs)]
    bmax = rows(rs[0])[1]["budget"]
    a = seed_check(SEC, "", "", acc, TH["budgets.cap_gain"])
    t = seed_check(SEC, "", "", tok, 0.0)
    return findings.premise(finding(
        SEC, f"Budget forcing trades accuracy for tokens: T capped at {bmax} steps is more accurate than at 0 steps "
        "(a direct answer), and costs more tokens", f"acc(T, <= {bmax}) - acc(T, <= 0)", a["value"], a["ci95"],
        a["per_seed"], "> 0 (and the token difference > 0)", both(a["verdict"], t["verdict"]), p=max(a["p"], t["p"]),
        source=TH["budgets.cap_gain"].source, tokens={"value": t["value"], "ci95": t["ci95"],
                                                      "per_seed": t["per_seed"]}), "caps")


def forced_on(r: dict) -> tuple[str, str]:
    """The model and the chain the primary forces past its end, in words (a result from before they were fields:
    the base model's T)."""
    return WHO[r.get("wait_on", "base")], r.get("chain", "T")


def headroom(rs: list[dict]) -> dict:
    """The premise of the primary: the forced model's uncapped chain is wrong often enough for Wait to help."""
    who, c = forced_on(rs[0])
    return findings.premise(seed_check(
        SEC, f"{who[0].upper() + who[1:]}'s uncapped chain leaves headroom: right on at most "
        f"{TH['budgets.headroom'].value:g} of the problems", f"acc({c}, uncapped)", [r["uncapped"]["acc"] for r in rs],
        TH["budgets.headroom"], test=findings.at_most), "headroom")


def wait_lowers_accuracy(rs: list[dict]) -> dict:
    """The primary: the uncapped chain's accuracy minus the forced one's (`wait` steps past the natural end)."""
    w, state = rs[0]["extend"], task_of(rs[0]).state_name
    who, c = forced_on(rs[0])
    return findings.primary(seed_check(
        SEC, f"s1's \"Wait\" does not carry over: forced {w} {state}(s) past its natural end, {who}'s {c} chain "
        "answers less accurately than uncapped (what differs: the end of the chain suppressed)",
        f"acc({c}, uncapped) - acc({c}, at least its length + {w} steps)",
        [r["uncapped"]["acc"] - _forced(r, w)["acc"] for r in rs],
        TH["budgets.wait_loss"], control=f"{who}'s uncapped chain ({c}, no forcing), same problems",
        requires=["headroom"]))


def claims(rs: list[dict]) -> list[dict]:
    return [caps_trade_accuracy_for_tokens(rs), headroom(rs), wait_lowers_accuracy(rs)]


def room(cfg: Config) -> tuple[float, float]:
    """A difference of two accuracies."""
    return (-1.0, 1.0)


def placebo(cfg: Config) -> Config:
    """No forcing: the treatment arm is the uncapped chain of a second erring thinker, made on a stream of its own
    (an independent replicate of the control)."""
    return replace(cfg, extend=0, shown=())


def plot_budgets(caps: list[dict], forced: list[dict], path: str, task=None, who: str = "the base model",
                 chain: str = "T") -> str:
    """Greedy accuracy against thinking tokens: chains capped at b steps (± std over seeds), and the full chain
    forced past its natural end; chance of `task` (default: digits)."""
    task = task or tasks.get("digits")
    chance = chance_level(task)
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for f in ("S", "T"):
        rows = [b for b in caps if b["format"] == f]
        ax.errorbar([b["thinking_tokens"] for b in rows], [b["acc"] for b in rows],
                    yerr=[[b["acc"] - b["lo"] for b in rows], [b["hi"] - b["acc"] for b in rows]],
                    ls="-", marker="o", ms=3, color=TOKEN_COLOR[f], label=f"{f}, at most b steps")
    ax.errorbar([b["thinking_tokens"] for b in forced], [b["acc"] for b in forced],
                yerr=[[b["acc"] - b["lo"] for b in forced], [b["hi"] - b["acc"] for b in forced]], ls="--", marker="s",
                ms=3, color=TOKEN_COLOR[chain],
                label=f"{chain} of {who}, forced w steps past its end (w = 0: uncapped)")
    ax.axhline(chance, color="grey", ls=":", lw=1, label=f"chance ({chance:.2g})")
    ax.set_xlabel("thinking tokens (chain steps written)")
    ax.set_ylabel(f"greedy accuracy (k = {task.k_min}..{task.k_max})")
    ax.legend(fontsize=8)
    return save(fig, path)


def _avg(rows: list[dict], key: str = "acc") -> dict:
    m, s = mean_std([r[key] for r in rows])
    return {"acc": m, "lo": m - s, "hi": m + s, "thinking_tokens": float(np.mean([r["thinking_tokens"] for r in rows]))}


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    caps = [{**b, **_avg([r["budgets"][i] for r in rs])} for i, b in enumerate(rs[0]["budgets"])]
    forced = [{"wait": 0, **_avg([r["uncapped"] for r in rs])}] + [
        {"wait": f["wait"], **_avg([_forced(r, f["wait"]) for r in rs])} for f in rs[0]["forced"] if f["wait"]]
    who, c = forced_on(rs[0])
    plot_budgets(caps, forced, os.path.join(out, "budgets", "budgets.png"), task_of(rs[0]), who, c)
    table = md_table(["format", "chain budget", "chain steps written", "accuracy"],
                     [[b["format"], f"at most {b['budget']}", f"{b['thinking_tokens']:.2f}",
                       pm([r["budgets"][i]["acc"] for r in rs])] for i, b in enumerate(caps)]
                     + [[f"{c}, {who}", "uncapped" if f["wait"] == 0 else f"at least its length + {f['wait']}",
                         f"{f['thinking_tokens']:.2f}",
                         pm([(r["uncapped"] if f["wait"] == 0 else _forced(r, f["wait"]))["acc"] for r in rs])]
                        for f in forced])
    fs = findings.gate(claims(rs))
    t = [b for b in caps if b["format"] == "T"]
    w = next(f for f in forced if f["wait"] == rs[0]["extend"])
    head = (f"T capped at 0 steps {t[0]['acc']:.2f} → {t[-1]['budget']} steps {t[-1]['acc']:.2f}; {who}'s {c} "
            f"{forced[0]['acc']:.2f}, forced {w['wait']} past its end {w['acc']:.2f}")
    md = f"""## Thinking longer: budget forcing and s1's "Wait"

{opening("budgets")}

![budget forcing](budgets/budgets.png)

{table}

Greedy decoding on this seed's test problems; "at most b": once the chain has b states the answer marker is
forced (s1's budget cap), on the base model; "at least its length + w": the end of the chain is suppressed until w
states past its natural length are written (s1's "Wait"), on {who}'s {c} chain, which leaves headroom. Mean ± std
over seeds; tokens count up to the end of the answer.
{" ".join(findings.verdict_line(f) for f in fs)}

*Paper:* s1: simple test-time scaling (Muennighoff et al. 2025, arXiv 2501.19393).
{reading("budgets")}
"""
    return [(md, head)]


def check(result) -> None:
    if not result.get("forced") or "acc" not in result.get("uncapped", {}):
        raise ValueError("a budgets result needs the uncapped chain and at least one forced past its end")


QUESTION = """Capping the chain at b steps trades accuracy for tokens, by construction. Forcing the chain past its
natural end (s1's "Wait") helps a model that re-checks its work: what does it do to one that was never shown a
longer chain?"""
EXPLORE = """`tts.budget_hook(task, max_chain=b)` on any generation; `reasonlab sampling --budgets` adds the
budget-forced points to the sampling frontier."""

register(Experiment("budgets", Config, run, claims, render, question=QUESTION, explore=EXPLORE,
                    keys=("budgets", "uncapped", "forced", "extend"), check=check,
                    depends=on_erring(replicate=lambda cfg: cfg.extend == 0 and cfg.wait_on == "erring"),
                    room=room, placebo=placebo, negative="the same thinker unforced in the forced arm's place: 0 by "
                    "definition",
                    quick=Config(n_test=30), run_cost=5, render_cost=0.1))
