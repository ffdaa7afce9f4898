"""STaR on the erring thinker: the "none" filter keeps wrong chains, and the lesson's claims on hand-made results
(hold, fail, untestable)."""
import pytest
import torch

from reasonlab.core.task import ID
from reasonlab.experiments import star_erring as E
from reasonlab.methods import star
from reasonlab.methods.config import StarConfig
from reasonlab.stats import findings


def result(s0: float, s1: dict, fp: float = 0.03) -> dict:
    """One seed: forced S accuracy s0 before STaR and s1[filter] after round 1."""
    rec = lambda s, r: {"round": r, "S": s, "T": s, "free": s, "n_kept": 2000, "false_positive_rate": fp}  # noqa: E731
    return {f: [rec(s0, 0), rec(s1[f], 1)] for f in E.FILTERS}


def test_claims_hold_fail_and_are_untestable():
    fs = E.claims([result(0.66, {"none": 0.66 + 0.002 * s, "answer": 0.85 + 0.01 * s, "chain": 0.99})
                   for s in range(5)])
    assert [f["verdict"] for f in fs] == [findings.HOLDS] * 3
    assert abs(fs[0]["value"] - 0.21) < 1e-9
    fs = E.claims([result(0.66, {"none": 0.8, "answer": 0.64 - 0.01 * s, "chain": 0.6}) for s in range(5)])
    assert [f["verdict"] for f in fs] == [findings.FAILS] * 3
    fs = E.claims([result(0.66, {"none": 0.66, "answer": 0.8 + 0.01 * s, "chain": 0.9}, fp=0.001) for s in range(5)])
    assert fs[2]["verdict"] == findings.UNTESTABLE and "design bound" in fs[2]["untestable"]
    fs = E.claims([result(1.0, {"none": 1.0, "answer": 1.0, "chain": 1.0}) for _ in range(5)])   # at the ceiling
    assert fs[0]["verdict"] == findings.UNTESTABLE and fs[2]["verdict"] == findings.UNTESTABLE


def test_check_needs_every_filter():
    E.check(result(0.66, {"none": 0.66, "answer": 0.8, "chain": 0.9}))
    with pytest.raises(ValueError, match="every filter"):
        E.check({"answer": result(0.66, {"none": 0.66, "answer": 0.8, "chain": 0.9})["answer"]})


def test_each_filter_keeps_what_it_says(monkeypatch):
    """On hand-written samples (a right chain, a chain whose errors cancel, a wrong answer): the chain filter keeps
    the first, the answer filter the first two, the control every one."""
    d = [3, 5, 9]                                              # running sums 8, 7 (S), answer 7
    rows = [["S", "8", "7", "A", "7", "</s>"], ["S", "9", "7", "A", "7", "</s>"], ["S", "8", "6", "A", "6", "</s>"]]
    ids = torch.tensor([[ID[w] for w in r] + [ID["<pad>"]] * 2 for r in rows])
    monkeypatch.setattr(star, "sample_tree", lambda *a, **k: (ids, None))
    kept = {f: [tuple(w) for _, w in star.collect(None, [d], StarConfig(filter=f, samples=3, force="S", cap=3),
                                                   None)["kept"]] for f in ("chain", "answer", "none")}
    assert kept == {"chain": [tuple(rows[0])], "answer": [tuple(r) for r in rows[:2]], "none": [tuple(r) for r in rows]}
    stats = star.collect(None, [d], StarConfig(filter="none", samples=3, force="S", cap=3), None)
    assert stats["false_positive_rate"] == 0.5                 # of the two right answers, one has a wrong step
