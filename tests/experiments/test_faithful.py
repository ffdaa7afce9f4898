"""The faithful-chains lesson: corrupted prefixes, and its claims on hand-made results (hold, fail, untestable)."""
import pytest

from reasonlab.core.task import ID, chain_steps
from reasonlab.experiments import faithful
from reasonlab.stats import findings


def test_a_corrupted_prefix_shifts_the_implied_answer():
    d = [3, 5, 9, 2, 7]                                   # T sums 3 8 7 9 6, answer 6
    prefix, follows = faithful.corrupt(d, "T", 2, 4)
    assert prefix == [ID[w] for w in ["T", "3", "8", "1"]] and follows == 0
    prefix, follows = faithful.corrupt(d, "S", 0, 9)      # S sums 8 9 6: the first written 7
    assert prefix == [ID[w] for w in ["S", "7"]] and follows == 5


def model(follow_first: float, follow_rest: float, clean: float = 1.0, n: int = 100) -> dict:
    """One model, one seed: every (k, step) cell with n corrupted chains; the answer follows with the given shares
    (the first step, the others) and is otherwise right."""
    out = {}
    for f, fmt in faithful.FMT.items():
        cells = {}
        for k in range(2, 9):
            for j in range(len(chain_steps(k, fmt))):
                share = follow_first if j == 0 else follow_rest
                cells[f"{k}/{j}"] = {"n": n, "follows": round(share * n), "truth": n - round(share * n)}
        out[f] = {"clean_acc_by_k": {k: clean for k in range(2, 9)}, "cells": cells}
    return out


def result(follow_first: float, follow_rest: float, clean: float = 1.0, **trained) -> dict:
    """One seed: the base model as `model` builds it, and trained models given as name=(first, rest[, clean])."""
    return {"base": model(follow_first, follow_rest, clean), **{m: model(*v) for m, v in trained.items()}}


def test_claims_hold_fail_and_are_untestable_when_the_precondition_fails():
    faithful_model = [result(0.2 + 0.01 * s, 1.0) for s in range(5)]
    fs = faithful.claims(faithful_model)
    assert [f["verdict"] for f in fs] == [findings.HOLDS, findings.HOLDS, findings.HOLDS]
    ignores = [result(0.0, 0.02 * s) for s in range(5)]          # answers the truth whatever the chain says
    assert [f["verdict"] for f in faithful.claims(ignores)][:2] == [findings.FAILS, findings.FAILS]
    broken = [result(0.2, 1.0, clean=0.5) for _ in range(5)]      # the chain itself is wrong half the time
    fs = faithful.claims(broken)
    assert all(f["verdict"] == findings.UNTESTABLE and "precondition" in f["untestable"] for f in fs)


def test_trained_models_against_the_base():
    # GRPO follows every corrupted step, the base misses the first: GRPO tightens the tie; STaR loosens it
    rs = [result(0.2 + 0.01 * s, 0.9, rl=(1.0, 1.0), star=(0.1, 0.5)) for s in range(5)]
    fs = faithful.claims(rs)
    assert [f["verdict"] for f in fs[3:]] == [findings.HOLDS, findings.FAILS]
    # a trained model whose own chain breaks makes its claim untestable, and only its claim
    rs = [result(0.2 + 0.01 * s, 0.9, rl=(1.0, 1.0, 0.5)) for s in range(5)]
    fs = faithful.claims(rs)
    assert fs[0]["verdict"] == findings.HOLDS and fs[3]["verdict"] == findings.UNTESTABLE and "GRPO" in fs[3]["untestable"]
    # a base that already follows every corrupted chain leaves no room to follow more
    rs = [result(1.0, 1.0, rl=(1.0, 1.0)) for s in range(5)]
    assert faithful.claims(rs)[3]["verdict"] == findings.UNTESTABLE


def test_check_needs_the_base_model():
    faithful.check(result(0.5, 0.5, rl=(1.0, 1.0)))
    try:
        faithful.check({"rl": model(1.0, 1.0)})
    except ValueError as e:
        assert "base" in str(e)
    else:
        raise AssertionError("a result without the base model passed the check")


def test_the_config_needs_the_base_model_and_chain_formats():
    faithful.Config().validate()
    for bad in (dict(models=("rl", "star")), dict(formats=("A",)), dict(formats=())):
        with pytest.raises(ValueError, match="models must include base"):
            faithful.Config(**bad).validate()
