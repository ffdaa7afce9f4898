"""The voting lesson: per-sample misreadings, and its claims on hand-made results (hold, fail)."""
import torch

from reasonlab.core.model import GPT
from reasonlab.core.task import DIGIT0
from reasonlab.experiments import voting
from reasonlab.stats import findings as F


def test_a_reader_misreads_only_the_digits_and_each_draw_differently():
    torch.manual_seed(0)
    base = GPT(d_model=32, n_layers=1, n_heads=2)
    before = base.tok.weight.detach().clone()
    a, b = voting.reader(base, 0.5, 1), voting.reader(base, 0.5, 2)
    assert torch.equal(base.tok.weight, before)                          # the base is left as it was
    digits = slice(DIGIT0, DIGIT0 + 10)
    assert torch.equal(a.tok.weight[:DIGIT0], before[:DIGIT0]) and not torch.equal(a.tok.weight[digits], before[digits])
    assert not torch.equal(a.tok.weight[digits], b.tok.weight[digits])
    assert torch.equal(voting.reader(base, 0.5, 1).tok.weight, a.tok.weight)   # a draw is reproducible


def result(fixed_gain: float, per_sample_gain: float, greedy: float = 0.6) -> dict:
    arm = lambda g: {"greedy": greedy, "majority": {1: greedy, 64: greedy + g}}
    return {"fixed": arm(fixed_gain), "per_sample": {**arm(per_sample_gain), "sigma": 0.3}}


def test_claims_hold_and_fail():
    fs = voting.claims([result(0.0 + 0.003 * s, 0.3 + 0.01 * s) for s in range(5)])
    assert [f["verdict"] for f in fs] == [F.HOLDS, F.HOLDS, F.FAILS]
    fs = voting.claims([result(0.2 + 0.01 * s, 0.01 * s) for s in range(5)])   # only the fixed thinker gains
    assert [f["verdict"] for f in fs] == [F.FAILS, F.FAILS, F.HOLDS]


def test_check_needs_both_thinkers():
    voting.check(result(0.0, 0.3))
    try:
        voting.check({"fixed": result(0.0, 0.3)["fixed"]})
    except ValueError as e:
        assert "per_sample" in str(e)
    else:
        raise AssertionError("a result without the per-sample thinker passed the check")
