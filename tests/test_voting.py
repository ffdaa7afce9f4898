"""The voting lesson: per-sample misreadings, best-of-N on kept outputs, and its claims on hand-made results (hold,
fail)."""
import torch

from reasonlab.core.model import GPT
from reasonlab.core.pool import pool_of
from reasonlab.core.task import DIGIT0, ID
from reasonlab.experiments import voting
from reasonlab.methods.verifier import OracleVerifier
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


def test_best_of_n_reads_each_kept_output_by_its_verifier():
    ids = lambda words: [ID[w] for w in words.split()]
    right, wrong = ids("S 3 A 3 </s>"), ids("S 4 A 4 </s>")                # [1, 2]: the sum is 3
    pool = pool_of([[1, 2], [5, 5]], [[wrong, wrong, right, wrong], [ids("S 0 A 0 </s>")] * 4])
    oracle = voting.bon(pool, {"orm": OracleVerifier(), "prm": OracleVerifier()})
    assert oracle["prm"] == oracle["orm"] == {1: 0.5, 2: 0.5, 4: 1.0}     # the right sample is the third


def result(fixed_gain: float, per_sample_gain: float, greedy: float = 0.6, orm_edge: float = 0.05,
           prm_edge: float = 0.05, fixed_orm_edge: float | None = None, fixed_prm_edge: float | None = None) -> dict:
    """Hand-made: majority@64 = greedy + gain; best-of-64 with the ORM = majority@64 + orm_edge, with the PRM =
    that + prm_edge (the fixed thinker's edges default to the per-sample one's)."""
    def arm(g, orm, prm):
        top = greedy + g
        return {"greedy": greedy, "majority": {1: greedy, 64: top},
                "bon": {"orm": {1: greedy, 64: top + orm}, "prm": {1: greedy, 64: top + orm + prm}}}
    return {"fixed": arm(fixed_gain, orm_edge if fixed_orm_edge is None else fixed_orm_edge,
                         prm_edge if fixed_prm_edge is None else fixed_prm_edge),
            "per_sample": {**arm(per_sample_gain, orm_edge, prm_edge), "sigma": 0.3}}


def test_claims_hold_and_fail():
    fs = voting.claims([result(0.0 + 0.003 * s, 0.3 + 0.01 * s) for s in range(5)])
    assert [f["verdict"] for f in fs[:3]] == [F.HOLDS, F.HOLDS, F.FAILS]
    fs = voting.claims([result(0.2 + 0.01 * s, 0.01 * s) for s in range(5)])   # only the fixed thinker gains
    assert [f["verdict"] for f in fs[:3]] == [F.FAILS, F.FAILS, F.HOLDS]


def test_lightman_ordering_holds_on_both_thinkers():
    fs = voting.claims([result(0.0, 0.3, orm_edge=0.04 + 0.01 * s, prm_edge=0.03 + 0.01 * s) for s in range(5)])
    assert len(fs) == 7 and [f["verdict"] for f in fs[3:]] == [F.HOLDS] * 4
    assert [f["control"] for f in fs[3:]] == ["best-of-N with the ORM", "majority voting over the same samples"] * 2
    assert "per-sample" in fs[3]["statistic"] and "erring" in fs[5]["statistic"]
    assert all("Lightman" in f["source"] for f in fs[3:])


def test_lightman_ordering_fails_where_the_verifiers_lose():
    # per-sample thinker: the ORM below majority and the PRM below the ORM; fixed thinker: the ordering holds
    fs = voting.claims([result(0.0, 0.3, orm_edge=-0.2 + 0.01 * s, prm_edge=-0.05 + 0.01 * s,
                               fixed_orm_edge=0.04 + 0.01 * s, fixed_prm_edge=0.03 + 0.01 * s) for s in range(5)])
    assert [f["verdict"] for f in fs[3:]] == [F.FAILS, F.FAILS, F.HOLDS, F.HOLDS]


def test_check_needs_both_thinkers():
    voting.check(result(0.0, 0.3))
    try:
        voting.check({"fixed": result(0.0, 0.3)["fixed"]})
    except ValueError as e:
        assert "per_sample" in str(e)
    else:
        raise AssertionError("a result without the per-sample thinker passed the check")


def test_check_needs_best_of_n_with_both_verifiers():
    old = result(0.0, 0.3)
    for arm in ("fixed", "per_sample"):
        del old[arm]["bon"]                                                 # a result stored before best-of-N
    partial = result(0.0, 0.3)
    del partial["per_sample"]["bon"]["prm"]
    for r in (old, partial):
        try:
            voting.check(r)
        except ValueError as e:
            assert "bon" in str(e)
        else:
            raise AssertionError("a result without best-of-N with the ORM and the PRM passed the check")


def test_a_thinker_greedy_at_the_ceiling_leaves_voting_untestable():
    fs = voting.claims([result(0.0, 0.0, greedy=1.0) for s in range(5)])
    assert fs[0]["verdict"] == F.UNTESTABLE and fs[2]["verdict"] == F.UNTESTABLE
    assert "cannot pass" in fs[0]["untestable"]


def test_room_is_the_mean_of_each_seeds_bound():
    """One seed already right at greedy leaves the others' gains testable: the mean gain can still pass."""
    rs = [result(0.0, 0.3 + 0.01 * s) for s in range(4)] + [result(0.0, 0.0, greedy=1.0)]
    assert voting.claims(rs)[0]["verdict"] != F.UNTESTABLE
