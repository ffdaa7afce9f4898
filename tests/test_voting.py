"""The voting lesson: per-sample misreadings, best-of-N on kept outputs, search over readers, and its claims on
hand-made results (hold, fail)."""
import copy

import torch

from reasonlab.core.model import GPT
from reasonlab.core.pool import pool_of
from reasonlab.core.task import DIGIT0, ID
from reasonlab.experiments import voting
from reasonlab.core.sampling import generate
from reasonlab.core.task import prompt_ids
from reasonlab.methods.readers import Readers
from reasonlab.methods.search import Scorer, beam_search, dvts
from reasonlab.methods.verifier import OracleVerifier
from reasonlab.train.sft import misread
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


def test_readers_read_as_the_misread_model_and_afresh_on_every_call():
    torch.manual_seed(0)
    base = GPT(d_model=32, n_layers=1, n_heads=2)
    readers = Readers(base, 0.5)
    ids = torch.tensor([prompt_ids([3, 4, 5]) + [ID["S"], DIGIT0 + 7]] * 2)
    direction = torch.randn(10, 32, generator=torch.Generator().manual_seed(9))   # misread's draw for seed 9
    z = torch.stack([readers.scale * direction, torch.zeros(10, 32)])
    got = readers.logits(ids, z)
    with torch.no_grad():
        want = misread(copy.deepcopy(base), 0.5, 9)(ids[:1])[0][0, -1]
        clean = base(ids[1:])[0][0, -1]
    assert torch.allclose(got[0], want, atol=1e-5) and torch.allclose(got[1], clean, atol=1e-5)
    gen = torch.Generator().manual_seed(0)
    a, b = readers.draw(2, gen)
    assert not torch.equal(a, b)                                           # each call reads through its own


def test_a_search_over_readers_without_noise_is_the_base_models_search():
    """sigma = 0, one beam of width one, greedy picks: beam search and DVTS write the base model's greedy chain."""
    torch.manual_seed(0)
    base = GPT(d_model=32, n_layers=1, n_heads=2)
    probs = [[1, 2, 3], [4, 5, 6, 7]]
    want = generate(base, [prompt_ids(d) for d in probs], None, 0.0, force=["S"])
    for f in (beam_search, dvts):
        r = f(Readers(base, 0.0), Scorer(OracleVerifier()), probs, 1, 1, force="S",
              gen=torch.Generator().manual_seed(0), temperature=0.0)
        assert r["pick"] == want


def test_best_of_n_reads_each_kept_output_by_its_verifier():
    ids = lambda words: [ID[w] for w in words.split()]
    right, wrong = ids("S 3 A 3 </s>"), ids("S 4 A 4 </s>")                # [1, 2]: the sum is 3
    pool = pool_of([[1, 2], [5, 5]], [[wrong, wrong, right, wrong], [ids("S 0 A 0 </s>")] * 4])
    oracle = voting.bon(pool, {"orm": Scorer(OracleVerifier()), "prm": Scorer(OracleVerifier())})
    assert oracle["prm"] == oracle["orm"] == {1: 0.5, 2: 0.5, 4: 1.0}     # the right sample is the third


def result(fixed_gain: float, per_sample_gain: float, greedy: float = 0.6, orm_edge: float = 0.05,
           prm_edge: float = 0.05, fixed_orm_edge: float | None = None, fixed_prm_edge: float | None = None,
           beam_edge: float = 0.05, fixed_beam_edge: float = 0.0, dvts_edge: float = 0.0) -> dict:
    """Hand-made: majority@64 = greedy + gain; best-of-64 with the ORM = majority@64 + orm_edge, with the PRM =
    that + prm_edge (the fixed thinker's edges default to the per-sample one's); best-of-4 with the PRM = greedy,
    beam search at 4 and 16 = greedy + beam_edge (fixed_beam_edge on the fixed thinker), DVTS at 16 = beam at 16
    + dvts_edge."""
    def arm(g, orm, prm, beam):
        top = greedy + g
        return {"greedy": greedy, "majority": {1: greedy, 4: greedy, 64: top},
                "bon": {"orm": {1: greedy, 4: greedy, 64: top + orm}, "prm": {1: greedy, 4: greedy, 64: top + orm + prm}},
                "search": {"beam": {4: greedy + beam, 16: greedy + beam},
                           "dvts": {4: greedy + beam, 16: greedy + beam + dvts_edge}}}
    return {"fixed": arm(fixed_gain, orm_edge if fixed_orm_edge is None else fixed_orm_edge,
                         prm_edge if fixed_prm_edge is None else fixed_prm_edge, fixed_beam_edge),
            "per_sample": {**arm(per_sample_gain, orm_edge, prm_edge, beam_edge), "sigma": 0.3}}


def test_claims_hold_and_fail():
    fs = voting.claims([result(0.0 + 0.003 * s, 0.3 + 0.01 * s) for s in range(5)])
    assert [f["verdict"] for f in fs[:3]] == [F.HOLDS, F.HOLDS, F.FAILS]
    fs = voting.claims([result(0.2 + 0.01 * s, 0.01 * s) for s in range(5)])   # only the fixed thinker gains
    assert [f["verdict"] for f in fs[:3]] == [F.FAILS, F.FAILS, F.HOLDS]


def test_lightman_ordering_holds_on_both_thinkers():
    fs = voting.claims([result(0.0, 0.3, orm_edge=0.04 + 0.01 * s, prm_edge=0.03 + 0.01 * s) for s in range(5)])
    assert len(fs) == 11 and [f["verdict"] for f in fs[3:7]] == [F.HOLDS] * 4
    assert [f["control"] for f in fs[3:7]] == ["best-of-N with the ORM", "majority voting over the same samples"] * 2
    assert "per-sample" in fs[3]["statistic"] and "erring" in fs[5]["statistic"]
    assert all("Lightman" in f["source"] for f in fs[3:7])


def test_lightman_ordering_fails_where_the_verifiers_lose():
    # per-sample thinker: the ORM below majority and the PRM below the ORM; fixed thinker: the ordering holds
    fs = voting.claims([result(0.0, 0.3, orm_edge=-0.2 + 0.01 * s, prm_edge=-0.05 + 0.01 * s,
                               fixed_orm_edge=0.04 + 0.01 * s, fixed_prm_edge=0.03 + 0.01 * s) for s in range(5)])
    assert [f["verdict"] for f in fs[3:7]] == [F.FAILS, F.FAILS, F.HOLDS, F.HOLDS]


def test_search_claims_hold_where_readers_vary_and_fail_where_they_do_not():
    # per-sample: beam beats best-of-4 by 5-9 points, fixed: beam ties it; DVTS a point above beam at 16
    fs = voting.claims([result(0.0, 0.3, beam_edge=0.05 + 0.01 * s, fixed_beam_edge=0.002 * (s - 2),
                               dvts_edge=0.01 + 0.002 * s) for s in range(5)])
    assert [f["verdict"] for f in fs[7:]] == [F.HOLDS, F.UNSURE, F.HOLDS, F.HOLDS]
    assert "per-sample" in fs[7]["statistic"] and "erring" in fs[8]["statistic"]
    assert all(f["control"] for f in fs[7:])
    # beam loses to best-of-4 on both, more where the readers vary; DVTS three points below beam
    fs = voting.claims([result(0.0, 0.3, beam_edge=-0.1 + 0.01 * s, fixed_beam_edge=-0.02 + 0.002 * s,
                               dvts_edge=-0.03 + 0.002 * s) for s in range(5)])
    assert [f["verdict"] for f in fs[7:]] == [F.FAILS, F.FAILS, F.FAILS, F.FAILS]


def test_check_needs_both_thinkers():
    voting.check(result(0.0, 0.3))
    try:
        voting.check({"fixed": result(0.0, 0.3)["fixed"]})
    except ValueError as e:
        assert "per_sample" in str(e)
    else:
        raise AssertionError("a result without the per-sample thinker passed the check")


def test_check_needs_the_searches():
    old = result(0.0, 0.3)
    del old["per_sample"]["search"]                                       # a result stored before the searches
    try:
        voting.check(old)
    except ValueError as e:
        assert "search" in str(e)
    else:
        raise AssertionError("a result without beam search and DVTS passed the check")


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
