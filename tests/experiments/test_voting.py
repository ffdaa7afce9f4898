"""The voting lesson: per-sample misreadings, best-of-N on kept outputs, search over readers, and its claims on
hand-made results (hold, fail)."""
import copy

import pytest
import torch

from reasonlab import experiments as X
from reasonlab.core.model import GPT
from reasonlab.core.pool import pool_of
from reasonlab.core.task import DIGIT0, ID, prompt_ids
from reasonlab.experiments import voting
from reasonlab.methods.readers import Readers
from reasonlab.methods.search import Scorer, beam_search, dvts
from reasonlab.methods.verifier import OracleVerifier
from reasonlab.stats import findings
from reasonlab.train.sft import misread


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


@pytest.mark.parametrize("nudge", [0.0, 3.0])
def test_a_search_over_readers_without_noise_is_the_models_search(noisy_model, nudge):
    """sigma = 0 and greedy picks: beam search and DVTS over readers (a full forward per row, every step) give what
    they give on the model's KV-cache tree, outputs, picks and token counts. As it is, the model's chains break off
    into tails of several tokens; nudged toward the digits, two problems write chains to the end of the context side
    by side."""
    u = noisy_model.head.weight[DIGIT0:DIGIT0 + 10].mean(0).detach()
    with torch.no_grad():
        noisy_model.ln_f.bias += nudge * u / u.norm()
    probs = [[1, 2, 3], [4, 5, 6, 7], [9, 9], [3, 1, 4, 1, 5]]
    for f in (beam_search, dvts):
        got, want = (f(m, Scorer(OracleVerifier()), probs, 4, 2, force="S", gen=torch.Generator().manual_seed(0),
                       temperature=0.0) for m in (Readers(noisy_model, 0.0), noisy_model))
        assert got.keys() == want.keys() and len({len(o) for o in want["pick"]}) > 1
        for key in got:
            assert (got[key] == want[key]) if isinstance(got[key], list) else (got[key] == want[key]).all(), key


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
                "bon": {"orm": {1: greedy, 4: greedy, 64: top + orm},
                        "prm": {1: greedy, 4: greedy, 64: top + orm + prm}},
                "search": {"beam": {4: greedy + beam, 16: greedy + beam},
                           "dvts": {4: greedy + beam, 16: greedy + beam + dvts_edge}}}
    return {"fixed": arm(fixed_gain, orm_edge if fixed_orm_edge is None else fixed_orm_edge,
                         prm_edge if fixed_prm_edge is None else fixed_prm_edge, fixed_beam_edge),
            "per_sample": {**arm(per_sample_gain, orm_edge, prm_edge, beam_edge), "sigma": 0.3}}


def test_claims_hold_and_fail():
    fs = voting.claims([result(0.0 + 0.003 * s, 0.3 + 0.01 * s) for s in range(5)])
    assert [f["verdict"] for f in fs[:3]] == [findings.HOLDS, findings.HOLDS, findings.FAILS]
    fs = voting.claims([result(0.2 + 0.01 * s, 0.01 * s) for s in range(5)])   # only the fixed thinker gains
    assert [f["verdict"] for f in fs[:3]] == [findings.FAILS, findings.FAILS, findings.HOLDS]


def test_lightman_ordering_holds_on_both_thinkers():
    fs = voting.claims([result(0.0, 0.3, orm_edge=0.04 + 0.01 * s, prm_edge=0.03 + 0.01 * s) for s in range(5)])
    assert len(fs) == 11 and [f["verdict"] for f in fs[3:7]] == [findings.HOLDS] * 4
    assert [f["control"] for f in fs[3:7]] == ["best-of-N with the ORM", "majority voting over the same samples"] * 2
    assert "per-sample" in fs[3]["statistic"] and "erring" in fs[5]["statistic"]
    assert all("Lightman" in f["source"] for f in fs[3:7])


def test_lightman_ordering_fails_where_the_verifiers_lose():
    # per-sample thinker: the ORM below majority and the PRM below the ORM; fixed thinker: the ordering holds
    fs = voting.claims([result(0.0, 0.3, orm_edge=-0.2 + 0.01 * s, prm_edge=-0.05 + 0.01 * s,
                               fixed_orm_edge=0.04 + 0.01 * s, fixed_prm_edge=0.03 + 0.01 * s) for s in range(5)])
    assert [f["verdict"] for f in fs[3:7]] == [findings.FAILS, findings.FAILS, findings.HOLDS, findings.HOLDS]


def test_search_claims_hold_where_readers_vary_and_fail_where_they_do_not():
    # per-sample: beam beats best-of-4 by 5-9 points, fixed: beam ties it; DVTS a point above beam at 16
    fs = voting.claims([result(0.0, 0.3, beam_edge=0.05 + 0.01 * s, fixed_beam_edge=0.002 * (s - 2),
                               dvts_edge=0.01 + 0.002 * s) for s in range(5)])
    assert [f["verdict"] for f in fs[7:]] == [findings.HOLDS, findings.UNSURE, findings.HOLDS, findings.HOLDS]
    assert "per-sample" in fs[7]["statistic"] and "erring" in fs[8]["statistic"]
    assert all(f["control"] for f in fs[7:])
    # beam loses to best-of-4 on both, more where the readers vary; DVTS three points below beam
    fs = voting.claims([result(0.0, 0.3, beam_edge=-0.1 + 0.01 * s, fixed_beam_edge=-0.02 + 0.002 * s,
                               dvts_edge=-0.03 + 0.002 * s) for s in range(5)])
    assert [f["verdict"] for f in fs[7:]] == [findings.FAILS, findings.FAILS, findings.FAILS, findings.FAILS]


def stripped(*path) -> dict:
    """A valid hand-made result without the entry at `path`, which starts with a thinker's key, or "both"."""
    r = result(0.0, 0.3)
    for arm in (("fixed", "per_sample") if path[0] == "both" else (path[0],)):
        keys, parent = (arm, *path[1:]), r
        for key in keys[:-1]:
            parent = parent[key]
        del parent[keys[-1]]
    return r


@pytest.mark.parametrize("path, word", [(("per_sample",), "per_sample"), (("per_sample", "search"), "search"),
                                        (("both", "bon"), "bon"), (("per_sample", "bon", "prm"), "bon")])
def test_check_needs_both_thinkers_best_of_n_and_the_searches(path, word):
    voting.check(result(0.0, 0.3))
    with pytest.raises(ValueError, match=word):
        voting.check(stripped(*path))


def test_a_thinker_greedy_at_the_ceiling_leaves_voting_untestable():
    fs = voting.claims([result(0.0, 0.0, greedy=1.0) for s in range(5)])
    assert fs[0]["verdict"] == findings.UNTESTABLE and fs[2]["verdict"] == findings.UNTESTABLE
    assert "cannot pass" in fs[0]["untestable"]


def test_room_is_the_mean_of_each_seeds_bound():
    """One seed already right at greedy leaves the others' gains testable: the mean gain can still pass."""
    rs = [result(0.0, 0.3 + 0.01 * s) for s in range(4)] + [result(0.0, 0.0, greedy=1.0)]
    assert voting.claims(rs)[0]["verdict"] != findings.UNTESTABLE


@pytest.mark.parametrize("bad, word", [(dict(samples=2), "samples"), (dict(calib_draws=0), "calib_draws"),
                                       (dict(verifier_steps=0), "verifier_steps"), (dict(n=0), "n")])
def test_config_rejects_what_cannot_run(bad, word):
    with pytest.raises(ValueError, match=word):
        X.get("voting").validate(voting.Config(**bad))
    X.get("voting").validate(voting.Config())
