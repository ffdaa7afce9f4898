"""The faithful-chains lesson: corrupted prefixes, the probe (every offset at k = 2, none under the negative control,
a coin on which answer counts under the placebo), and its claims on hand-made results (hold, fail, untestable
through the premises)."""
import os
import random

import pytest

from reasonlab import experiments as X
from reasonlab import tasks
from reasonlab.core import problems
from reasonlab.core.sampling import generate
from reasonlab.experiments import faithful
from reasonlab.io.checkpoint import load_model
from reasonlab.stats import findings
from reasonlab.tasks import chain_steps
from reasonlab.train.sft import build_model
from reasonlab.train.zoo import SHIPPED

DIGITS = tasks.get("digits")
ID = DIGITS.id


def test_a_corrupted_prefix_shifts_the_implied_answer():
    d = DIGITS.problem([3, 5, 9, 2, 7])                   # T sums 3 8 7 9 6, answer 6
    prefix, follows = faithful.corrupt(d, "T", 2, 4)
    assert prefix == [ID[w] for w in ["T", "3", "8", "1"]] and follows == 0
    prefix, follows = faithful.corrupt(d, "S", 0, 9)      # S sums 8 9 6: the first written 7
    assert prefix == [ID[w] for w in ["S", "7"]] and follows == 5


def test_on_digits_a_corruption_is_a_running_sum_off_by_delta_mod_10():
    """The corrupted prefix and the implied answer are the digit arithmetic's, for every step and offset: the
    running sums up to step j with step j's shifted by delta, and the sum of the digits shifted by delta (mod 10)."""
    for d in ([3, 5, 9, 2, 7], [9, 9], [1, 0, 4, 8, 2, 6, 6, 3]):
        for fmt in ("S", "T"):
            sums = [sum(d[:i]) % 10 for i in chain_steps(len(d), faithful.FMT[fmt])]
            for j in range(len(sums)):
                for delta in range(10):
                    want = [ID[fmt]] + [ID[str(s)] for s in sums[:j] + [(sums[j] + delta) % 10]]
                    assert faithful.corrupt(DIGITS.problem(d), fmt, j, delta) == (want, (sum(d) + delta) % 10)


def test_on_another_task_a_corruption_shifts_along_its_states_and_follows_its_rule():
    task = tasks.get("modprod")
    p = task.problem([3, 5, 4, 2, 6])                      # T states 3 1 4 1 6
    prefix, follows = faithful.corrupt(p, "T", 1, 2)       # the second state 1 -> 3: 3 * 4 * 2 * 6 = 144 = 4 mod 7
    assert prefix == [task.id[w] for w in ["T", "3", "3"]] and follows == 4
    assert faithful.corrupt(p, "T", 1, 0)[1] == task.answer(p)


def model(f2: float, t2: float, rest: float = 1.0, first: float | None = None, clean: float = 1.0, n: int = 100,
          last2: tuple[float, float] | None = None):
    """One model, one seed: at k = 2 every cell's answers follow the corrupted chain on f2 and give the truth on t2
    (at the chain's last state on last2's, if given); beyond, they follow on `rest` (on `first` at a chain's first
    step, if given) and give the truth otherwise."""
    out = {}
    for f, fmt in faithful.FMT.items():
        cells = {}
        for k in range(2, 9):
            for j in range(len(chain_steps(k, fmt))):
                at2 = last2 if last2 and j == len(chain_steps(k, fmt)) - 1 else (f2, t2)
                fo, tr = at2 if k == 2 else ((first if first is not None and j == 0 else rest), None)
                tr = 1 - fo if tr is None else tr
                cells[f"{k}/{j}"] = {"n": n, "follows": round(fo * n), "truth": round(tr * n)}
        out[f] = {"clean_acc_by_k": {k: clean for k in range(2, 9)}, "cells": cells}
    return out


def result(f2: float, t2: float, direct: float = 1.0, **trained) -> dict:
    """One seed: the base as `model` builds it (forced A right on `direct` at k = 2), and trained models given as
    name=(f2, t2[, direct])."""
    out = {"base": model(f2, t2), **{m: model(*v[:2]) for m, v in trained.items()}}
    return {**out, "direct": {m: {k: (v[2] if len(v) > 2 else 1.0) if m != "base" else direct
                                  for k in range(2, 9)} for m, v in [("base", ()), *trained.items()]}}


def test_the_primary_holds_fails_and_is_untestable_when_the_model_cannot_answer_directly():
    fs = findings.gate(faithful.claims([result(0.7 + 0.01 * s, 0.2) for s in range(5)]))
    prim = next(f for f in fs if findings.kind_of(f) == findings.PRIMARY)
    assert prim["verdict"] == findings.HOLDS and abs(prim["value"] - 0.52) < 1e-9 and prim["control"].startswith("the truth")
    assert [f["verdict"] for f in fs if findings.kind_of(f) == findings.PREMISE] == [findings.HOLDS] * 3
    fs = findings.gate(faithful.claims([result(0.1, 0.8 + 0.01 * s) for s in range(5)]))   # computes, ignores chain
    assert next(f for f in fs if findings.kind_of(f) == findings.PRIMARY)["verdict"] == findings.FAILS
    fs = findings.gate(faithful.claims([result(0.7, 0.2, direct=0.3 + 0.01 * s) for s in range(5)]))
    prim = next(f for f in fs if findings.kind_of(f) == findings.PRIMARY)
    assert prim["verdict"] == findings.UNTESTABLE and "without a chain" in prim["untestable"]


def test_the_premises_say_which_claims_rest_on_them():
    """Chains broken at some k gate the primary and the position claim; the k >= 3 premise (following is all the
    model can do there) is checked apart and gates nothing it is not named by."""
    rs = [result(0.7 + 0.01 * s, 0.2) for s in range(5)]
    for r in rs:
        r["base"]["S"]["clean_acc_by_k"][5] = 0.5
    fs = findings.gate(faithful.claims(rs))
    assert next(f for f in fs if f.get("name") == "clean")["verdict"] == findings.FAILS
    assert all(f["verdict"] == findings.UNTESTABLE for f in fs if findings.kind_of(f) != findings.PREMISE)
    rs = [result(0.7 + 0.01 * s, 0.2) for s in range(5)]
    for r in rs:
        r["base"] = model(0.7, 0.2, rest=0.1)              # beyond k = 2 it ignores the chain
    fs = findings.gate(faithful.claims(rs))
    assert next(f for f in fs if f.get("name") == "carries")["verdict"] == findings.FAILS
    assert next(f for f in fs if findings.kind_of(f) == findings.PRIMARY)["verdict"] == findings.HOLDS


def test_trained_models_against_the_base_at_k2():
    rs = [result(0.5 + 0.01 * s, 0.3, rl=(0.9, 0.05), star=(0.2, 0.7)) for s in range(5)]
    fs = faithful.claims(rs)
    trained = [f for f in findings.gate(fs) if f["claim"].startswith("After")]
    assert [f["verdict"] for f in trained] == [findings.HOLDS, findings.FAILS]
    rs = [result(0.5 + 0.01 * s, 0.3, rl=(0.9, 0.05, 0.2)) for s in range(5)]   # GRPO lost its direct answers
    fs = findings.gate(faithful.claims(rs))
    rl = next(f for f in fs if f["claim"].startswith("After GRPO"))
    assert rl["verdict"] == findings.UNTESTABLE and "GRPO" in rl["untestable"]
    assert next(f for f in fs if findings.kind_of(f) == findings.PRIMARY)["verdict"] == findings.HOLDS


def test_the_probe_corrupts_k2_by_every_offset_and_the_negative_control_by_none(noisy_model):
    probs = [d for d in problems.test_problems(1, "faithful", 0)]
    r = faithful.probe(noisy_model, probs, ("S", "T"), seed=0)
    assert r["S"]["cells"]["2/0"]["n"] == 9 and r["T"]["cells"]["2/1"]["n"] == 9       # one k = 2 problem, 9 offsets
    assert r["S"]["cells"]["8/3"]["n"] == 1                                             # beyond: one offset
    p = faithful.probe(noisy_model, probs, ("S", "T"), seed=0, offsets=(0,))
    assert all(c["follows"] == c["truth"] for f in p for c in p[f]["cells"].values())   # the chain implies the truth
    rs = [{"base": p, "direct": {"base": {k: 1.0 for k in range(2, 9)}}}] * 2
    assert next(f for f in faithful.claims(rs) if findings.kind_of(f) == findings.PRIMARY)["per_seed"] == [0.0, 0.0]


def replay_coin(model, probs, fmt: str, seed: int, offsets=tuple(range(1, 10))) -> dict:
    """The placebo's cells written out: each corrupted chain decoded alone, and a fair coin from the seed's own
    stream (replicate_seed(seed, "faithful/coin"), one draw per chain in the probe's order) swapping which answer
    counts as following it."""
    pick, flip = random.Random(seed), random.Random(X.replicate_seed(seed, "faithful/coin"))
    cells: dict = {}
    for p in probs:
        for j in range(len(chain_steps(p.k, faithful.FMT[fmt]))):
            for delta in (offsets if p.k == 2 else [pick.choice(offsets)]):
                prefix, follow = faithful.corrupt(p, fmt, j, delta)
                truth = DIGITS.answer(p)
                if flip.random() < 0.5:
                    follow, truth = truth, follow
                answer = DIGITS.parse(prefix + generate(model, [DIGITS.prompt_ids(p) + prefix], None, 0.0)[0])["answer"]
                c = cells.setdefault(f"{p.k}/{j}", {"n": 0, "follows": 0, "truth": 0})
                c["n"] += 1
                c["follows"] += answer == follow
                c["truth"] += answer == truth
    return cells


def test_the_placebo_swaps_by_a_coin_of_its_own_which_answer_counts_as_following():
    """The placebo corrupts the same chains and reads the same answers; a coin per chain on the seed's own stream
    decides which of the corrupted chain's answer and the truth counts as following: replayed chain by chain, on the
    shipped base model (its answers follow the chain or give the truth)."""
    cfg = faithful.placebo(faithful.Config())
    assert cfg.counted == "coin" and cfg.offsets == faithful.Config().offsets and cfg.n_test == faithful.Config().n_test
    model = load_model(os.path.join(SHIPPED, "base-seed0"))[0]
    probs = [d for d in problems.test_problems(1, "faithful", 0)]
    real = faithful.probe(model, probs, ("T",), seed=0)["T"]["cells"]
    coin = faithful.probe(model, probs, ("T",), seed=0, coin=True)["T"]["cells"]
    assert coin == replay_coin(model, probs, "T", 0)
    assert real.keys() == coin.keys() and all(                      # the same answers, the two labels swapped
        real[c]["n"] == coin[c]["n"] and real[c]["follows"] + real[c]["truth"] == coin[c]["follows"] + coin[c]["truth"]
        for c in real)
    assert coin != real and coin != faithful.probe(model, probs, ("T",), seed=1, coin=True)["T"]["cells"]


def test_check_needs_the_base_model_and_its_direct_answers():
    faithful.check(result(0.5, 0.5, rl=(1.0, 0.0)))
    for bad in ({"rl": model(1.0, 0.0), "direct": {"rl": {}}}, {"base": model(1.0, 0.0)}):
        with pytest.raises(ValueError, match="base model's"):
            faithful.check(bad)


def test_render_writes_the_table_and_the_plot(tmp_path):
    [(md, head)] = faithful.render([result(0.7, 0.2, rl=(0.9, 0.05)), result(0.7, 0.2, rl=(0.9, 0.05))], str(tmp_path))
    assert md.startswith("## Faithful chains: does the answer follow the chain where it need not?\n")
    assert ("| the base | S | 1.000 ± 0.000 | 1.000 ± 0.000 | — (one state) | 0.700 ± 0.000 / 0.200 ± 0.000 | "
            "1.000 ± 0.000 / 0.000 ± 0.000 |") in md
    assert "| the base | T | 1.000 ± 0.000 | 1.000 ± 0.000 | 0.700 ± 0.000 / 0.200 ± 0.000 |" in md
    assert head == "k = 2, follows − truth: the base 0.500 ± 0.000, GRPO 0.850 ± 0.000"
    assert (tmp_path / "faithful" / "follows.png").stat().st_size > 1000


def test_the_config_needs_the_base_model_chain_formats_and_offsets_below_the_states():
    faithful.Config().validate()
    for bad, said in ((dict(models=("rl", "star")), "models must include base"), (dict(formats=()), "at least one"),
                      (dict(formats=("A",)), "formats may hold only S, T, got 'A'")):
        with pytest.raises(ValueError, match=said):
            X.get("faithful").validate(faithful.Config(**bad))      # the registry's check: choices, then validate
    for bad in ((), (10,), (-1, 2)):
        with pytest.raises(ValueError, match="offsets must be"):
            faithful.Config(offsets=bad).validate()
    faithful.Config(task="modprod").validate()              # 7 states: the offsets 7..9 are left out
    with pytest.raises(ValueError, match="7 states"):
        faithful.Config(task="modprod", offsets=(7, 8)).validate()


def test_the_probe_runs_on_another_task_with_the_offsets_it_has(tmp_path):
    """modprod has 7 states: at k = 2 each problem is corrupted by the offsets 1..6 of the default 1..9; the result
    names its task, and its claims and page read it."""
    task = tasks.get("modprod")
    model = build_model(0, task=task).eval()
    probs = problems.test_problems(1, "faithful", 0, task=task)
    r = faithful.probe(model, probs, ("S",), seed=0)
    assert r["S"]["cells"]["2/0"]["n"] == 6 and r["S"]["cells"]["8/3"]["n"] == 1
    rs = [{"base": r, "direct": {"base": {k: 1.0 for k in range(2, 9)}}, "task": "modprod"}] * 2
    faithful.check(rs[0])
    fs = faithful.claims(rs)
    assert any("corrupted last product" in f["claim"] for f in fs) and not any("at chance" in f["claim"] for f in fs)
    [(md, _)] = faithful.render(rs, str(tmp_path))
    assert "Write one running product of a forced chain wrong" in md


def test_the_primary_leaves_out_the_last_state_which_the_answer_copies():
    """A base model that copies a corrupted last state always but gives the truth where an earlier state is
    corrupted: the primary reads the earlier states only (digits' k = 2: forced T's first), and does not hold."""
    copier = {"base": model(0.1, 0.9, last2=(1.0, 0.0)), "direct": {"base": {k: 1.0 for k in range(2, 9)}}}
    rs = [copier] * 2 + [{**copier, "base": model(0.12, 0.88, last2=(1.0, 0.0))}]
    prim = next(f for f in faithful.claims(rs) if findings.kind_of(f) == findings.PRIMARY)
    assert faithful.open_fmts(copier["base"]) == ["T"] and abs(prim["per_seed"][0] - (0.1 - 0.9)) < 1e-9
    assert prim["verdict"] == findings.FAILS
