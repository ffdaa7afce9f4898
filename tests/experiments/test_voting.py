"""The voting lesson: per-sample misreadings, best-of-N on kept outputs, search over readers, and its claims on
hand-made results (hold, fail)."""
import copy

import numpy as np
import pytest
import torch

from reasonlab import experiments as X
from reasonlab import tasks
from reasonlab.core import problems as P
from reasonlab.core.evaluate import evaluate
from reasonlab.core.model import GPT
from reasonlab.core.pool import pool_of, sample_pool
from reasonlab.core.sampling import generate
from reasonlab.core.seeds import hashed_seed
from reasonlab.core.task import DIGIT0, ID, prompt_ids
from reasonlab.experiments import voting
from reasonlab.methods import verifier as V
from reasonlab.methods.readers import Readers
from reasonlab.methods.search import Scorer, beam_search, best_of_n, dvts
from reasonlab.methods.tts import majority
from reasonlab.methods.verifier import OracleVerifier, VerifierConfig, aggregate, train_verifier
from reasonlab.methods.verifier import steps as read_steps
from reasonlab.stats import findings
from reasonlab.train.erring import misread
from reasonlab.train.sft import build_model
from reasonlab.train.zoo import base_model

DIGITS = tasks.get("digits")


def test_every_misreading_draw_is_its_own_and_none_is_an_erring_thinkers():
    """The per-sample thinker's draws (test samples, greedy, calibration, verifier samples) are hashed from (seed,
    purpose, j): no two share a direction, across seeds too, and none is the misreading an erring thinker draws
    from its seed (0, 1, ...)."""
    purposes = {"sample": 64, "greedy": 1, "calibrate": 8, "verifier": voting.VERIFIER_DRAWS}
    draws = [voting.draw(s, p, j) for s in range(10) for p, n in purposes.items() for j in range(n)]
    assert len(set(draws)) == len(draws) == 10 * sum(purposes.values())
    assert not set(draws) & set(range(10))
    assert voting.draw(0, "sample", 3) == hashed_seed("voting", 0, "sample", 3)


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


def test_on_another_task_a_reader_misreads_its_words_and_writes_the_verifiers_samples():
    """On modprod a reader blurs modprod's seven words (and only those), and the per-sample thinker's verifier
    samples are modprod problems with two forced S outputs each."""
    task = tasks.get("modprod")
    torch.manual_seed(0)
    base = build_model(0, task=task)
    before = base.tok.weight.detach().clone()
    words = slice(task.id["0"], task.id["6"] + 1)
    a = voting.reader(base, 0.5, 1, task)
    assert torch.equal(a.tok.weight[:words.start], before[:words.start])
    assert not torch.equal(a.tok.weight[words], before[words])
    probs, outs = voting.per_sample_training(base, 0.5, 0, 1, "modprod")
    assert len(probs) == len(outs) == 2 * len(task.ks()) and {p.task for p in probs} == {"modprod"}
    assert all(o[0] == task.id["S"] for o in outs)


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
    probs = tasks.problems_of([[1, 2, 3], [4, 5, 6, 7], [9, 9], [3, 1, 4, 1, 5]])
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


class ChainLover:
    """A verifier that scores every chain step 0.9 and every answer 0.6: it likes chains, whether they answer or not."""
    kind, flops_per_token = "orm", 0.0

    def score_steps(self, digits_list, outputs):
        return [[0.6 if a else 0.9 for _, _, a in read_steps(o)] for o in outputs]


def test_best_of_n_scores_an_output_that_never_answers_zero():
    """Best-of-N reads each output through the search experiment's scorer: a chain that ends without an answer
    scores 0, however its steps score, so it never outranks an answered one. Reading the raw last step, as the
    voting experiment did, best-of-2 here keeps the silent chain and is wrong on every problem."""
    ids = lambda words: [ID[w] for w in words.split()]
    right, silent = ids("S 3 A 3 </s>"), ids("S 3 </s>")                   # [1, 2]: the sum is 3
    pool = pool_of([[1, 2]] * 3, [[right, silent]] * 3)
    assert voting.bon(pool, {"orm": Scorer(ChainLover())})["orm"] == {1: 1.0, 2: 1.0}
    raw = aggregate(Scorer(ChainLover()).steps(*pool.flat()), "last").reshape(3, 2)
    assert best_of_n(pool, raw, 2).mean() == 0.0


def arm(greedy: float, top: float, orm: float, prm: float, beam: float, dvts_edge: float, one: float | None = None):
    """One thinker, hand-made: greedy; majority@64 = top; best-of-64 with the ORM and the PRM; best-of-4 with the
    PRM = greedy; beam search at 4 and 16 = greedy + beam; DVTS at 16 = beam at 16 + dvts_edge; every N = 1 = `one`
    (default greedy)."""
    one = greedy if one is None else one
    return {"greedy": greedy, "majority": {1: one, 4: greedy, 64: top},
            "bon": {"orm": {1: one, 4: greedy, 64: orm}, "prm": {1: one, 4: greedy, 64: prm}},
            "search": {"beam": {4: greedy + beam, 16: greedy + beam},
                       "dvts": {4: greedy + beam, 16: greedy + beam + dvts_edge}}}


def result(fixed_gain: float, per_sample_gain: float, greedy: float = 0.6, orm_edge: float = 0.05,
           prm_edge: float = 0.05, fixed_orm_edge: float | None = None, fixed_prm_edge: float | None = None,
           beam_edge: float = 0.05, fixed_beam_edge: float = 0.0, dvts_edge: float = 0.0) -> dict:
    """Hand-made: majority@64 = greedy + gain; best-of-64 with the ORM = majority@64 + orm_edge, with the PRM =
    that + prm_edge (the fixed thinker's edges default to the per-sample one's); best-of-4 with the PRM = greedy,
    beam search at 4 and 16 = greedy + beam_edge (fixed_beam_edge on the fixed thinker), DVTS at 16 = beam at 16
    + dvts_edge."""
    def one(g, orm, prm, beam):
        top = greedy + g
        return arm(greedy, top, top + orm, top + orm + prm, beam, dvts_edge)
    return {"fixed": one(fixed_gain, orm_edge if fixed_orm_edge is None else fixed_orm_edge,
                         prm_edge if fixed_prm_edge is None else fixed_prm_edge, fixed_beam_edge),
            "per_sample": {**one(per_sample_gain, orm_edge, prm_edge, beam_edge), "sigma": 0.3}}


def by_claim(fs: list[dict]) -> dict[str, dict]:
    """The findings by a short name: premises by their name, the rest by claim text."""
    return {f.get("name") or f["claim"]: f for f in fs}


def kinds(fs):
    return [findings.kind_of(f) for f in fs]


def test_premises_come_first_then_one_primary_on_the_erring_thinker():
    fs = voting.claims([result(0.1 + 0.01 * s, 0.3 + 0.01 * s) for s in range(5)])
    assert kinds(fs)[:6] == [findings.PREMISE] * 6 and kinds(fs)[6] == findings.PRIMARY
    assert kinds(fs).count(findings.PRIMARY) == 1 and len(fs) == 18
    assert [f["name"] for f in fs[:6]] == ["per_sample_votes", "fixed_errs", "per_sample_orm", "per_sample_prm",
                                           "fixed_orm", "fixed_prm"]
    p = fs[6]
    assert "erring thinker" in p["statistic"] and "greedy" in p["control"] and p["requires"] == ["fixed_errs"]
    assert all(f.get("requires") is not None for f in fs[6:])      # each claim names the premises it rests on


def test_the_primary_holds_and_fails_on_the_erring_thinker_alone():
    fs = findings.gate(voting.claims([result(0.1 + 0.01 * s, 0.3 + 0.01 * s) for s in range(5)]))
    assert fs[6]["verdict"] == findings.HOLDS and fs[0]["verdict"] == findings.HOLDS
    fs = findings.gate(voting.claims([result(0.003 * s, 0.3 + 0.01 * s) for s in range(5)]))   # the vote repeats
    assert fs[6]["verdict"] == findings.FAILS and fs[7]["verdict"] == findings.HOLDS           # per-sample gains more


def test_the_per_sample_premise_gates_only_the_claims_that_rest_on_it():
    fs = findings.gate(voting.claims([result(0.1 + 0.01 * s, 0.01 * s) for s in range(5)]))   # no convergence
    assert fs[0]["verdict"] == findings.FAILS and fs[6]["verdict"] == findings.HOLDS
    assert fs[7]["verdict"] == findings.UNTESTABLE and "per-sample thinker's design" in fs[7]["untestable"]


def test_a_thinker_greedy_at_the_ceiling_leaves_the_primary_untestable():
    fs = findings.gate(voting.claims([result(0.0, 0.0, greedy=0.98) for _ in range(5)]))
    assert fs[1]["verdict"] == findings.FAILS
    assert fs[6]["verdict"] == findings.UNTESTABLE and "erring thinker errs" in fs[6]["untestable"]


def test_the_room_and_the_placebo_are_fixed_by_the_config():
    cfg = voting.Config()
    assert voting.room(cfg) == (-1.0, 1.0) and findings.out_of_room(voting.room(cfg), 0.05, ">") is None
    assert voting.placebo(cfg).temperature == 0.0 and voting.placebo(cfg) == voting.Config(temperature=0.0)
    X.get("voting").validate(voting.placebo(cfg))


def test_the_placebo_votes_over_a_second_erring_thinker(monkeypatch):
    """At temperature 0 (the placebo) the vote is over an erring thinker made on a stream of its own (replicate_seed):
    an independent replicate of the control, which the store's key says; at temperature 1 over the seed's own."""
    class Voted(Exception):
        pass
    asked = []
    monkeypatch.setattr(voting, "thinker_model", lambda kind, seed, cache, device, task, stream=None:
                        asked.append(stream) or ("erring thinker", stream))
    monkeypatch.setattr(voting, "sample_pool", lambda model, *a, **k: (_ for _ in ()).throw(Voted(model)))
    env = type("Env", (), {"cache": None, "device": "cpu"})()
    for cfg, streams in ((voting.placebo(voting.Config()), [None, X.replicate_seed(0, "erring")]),
                         (voting.Config(), [None])):
        asked.clear()
        with pytest.raises(Voted) as voted:
            voting.run(cfg, 0, env)
        assert asked == streams and voted.value.args[0] == ("erring thinker", streams[-1]), (cfg.temperature, asked)
    depends = X.get("voting").depends
    assert "replicate" in depends(voting.placebo(voting.Config())) and "replicate" not in depends(voting.Config())


def test_a_vote_at_temperature_0_is_greedy_exactly(quick_cache):
    """At temperature 0 every sample is the greedy decode: majority@N equals greedy problem by problem (so the
    placebo's vote is its second thinker's greedy decode)."""
    m = base_model(0, quick=True, cache=quick_cache, log=None)
    probs = P.test_problems(20, "voting", 0)
    pool = sample_pool(m, probs, 8, force=["S"], temperature=0.0, seed=0)
    greedy = [r["answer"] == DIGITS.answer(p) for r, p in zip(evaluate(m, probs, force=["S"])["results"], probs)]
    assert 0 < np.mean(greedy) < 1 and (pool.correct == pool.correct[:, :1]).all()
    assert majority(pool, 8).tolist() == pool.correct[:, 0].astype(float).tolist() == [float(g) for g in greedy]


OLD_PER_SAMPLE = {"orm": {1: [0.5616, 0.4832, 0.5328, 0.384, 0.7072], 64: [0.1808, 0.1904, 0.2096, 0.1328, 0.2048]},
                  "prm": {1: [0.5616, 0.4832, 0.5328, 0.384, 0.7072], 64: [0.576, 0.3728, 0.5056, 0.4656, 0.4752]}}
"""The per-sample thinker's best-of-1 and best-of-64 in the committed run before the verifiers were mended"""


def test_the_gate_marks_verifiers_that_fall_as_todays_did():
    """The committed run's per-sample ORM fell from 0.38-0.71 at N = 1 to 0.13-0.21 at N = 64: its premise does not
    hold and every claim that reads it is untestable, naming it. The PRM of that run peaked at N = 4 (0.6) and fell to
    0.37-0.58 at 64: the premise reads the whole curve, so it fails too, where comparing the ends alone let it
    stand; a PRM that only rises stands, and the claims on the erring thinker are untouched."""
    def run(prm_at_4, prm_at_64):
        rs = []
        for s in range(5):
            r = result(0.0, 0.3)
            for kind, at in OLD_PER_SAMPLE.items():
                r["per_sample"]["bon"][kind] = {1: at[1][s], 4: 0.6, 64: at[64][s]}
            r["per_sample"]["bon"]["prm"].update({4: prm_at_4(s), 64: prm_at_64(s)})
            r["per_sample"]["majority"][64] = 0.95
            rs.append(r)
        return by_claim(findings.gate(voting.claims(rs)))
    fs = run(lambda s: 0.6, lambda s: OLD_PER_SAMPLE["prm"][64][s])
    assert fs["per_sample_orm"]["verdict"] == findings.FAILS and fs["per_sample_prm"]["verdict"] == findings.FAILS
    assert "best-of-4) - acc(best-of-64)" in fs["per_sample_prm"]["statistic"]
    gated = [f for f in fs.values() if f.get("untestable")]
    assert {f["claim"] for f in gated} >= {
        "With errors drawn per sample, best-of-64 with the PRM beats best-of-64 with the ORM",
        "With errors drawn per sample, best-of-64 with the ORM beats majority@64",
        "With errors drawn per sample, best-of-64 with the PRM beats majority@64",
        "With errors drawn per sample, PRM-guided beam search beats best-of-4 with the same PRM at N = 4"}
    assert all("per-sample thinker's" in f["untestable"] for f in gated)
    up = lambda s, d: OLD_PER_SAMPLE["prm"][1][s] + d    # noqa: E731
    fs = run(lambda s: up(s, 0.05), lambda s: up(s, 0.1))   # rises on every seed: it stands
    assert fs["per_sample_prm"]["verdict"] == findings.HOLDS
    assert {f["claim"] for f in fs.values() if f.get("untestable")} == {
        "With errors drawn per sample, best-of-64 with the PRM beats best-of-64 with the ORM",
        "With errors drawn per sample, best-of-64 with the ORM beats majority@64"}


def test_lightman_ordering_holds_on_both_thinkers():
    fs = voting.claims([result(0.0, 0.3, orm_edge=0.04 + 0.01 * s, prm_edge=0.03 + 0.01 * s) for s in range(5)])
    ordering = fs[8:14]
    assert [f["verdict"] for f in ordering] == [findings.HOLDS] * 6
    assert [f["control"] for f in ordering] == ["best-of-N with the ORM", "majority voting over the same samples",
                                                "majority voting over the same samples"] * 2
    assert "per-sample" in ordering[0]["statistic"] and "erring" in ordering[3]["statistic"]
    assert all("Lightman" in f["source"] for f in ordering)


def test_lightman_ordering_fails_where_the_verifiers_lose():
    # per-sample thinker: the ORM below majority and the PRM below the ORM; fixed thinker: the ordering holds
    fs = voting.claims([result(0.0, 0.3, orm_edge=-0.2 + 0.01 * s, prm_edge=-0.05 + 0.01 * s,
                               fixed_orm_edge=0.04 + 0.01 * s, fixed_prm_edge=0.03 + 0.01 * s) for s in range(5)])
    assert [f["verdict"] for f in fs[8:14]] == [findings.FAILS, findings.FAILS, findings.FAILS] + [findings.HOLDS] * 3


def test_search_claims_hold_where_readers_vary_and_fail_where_they_do_not():
    # per-sample: beam beats best-of-4 by 5-9 points, fixed: beam ties it; DVTS a point above beam at 16
    fs = voting.claims([result(0.0, 0.3, beam_edge=0.05 + 0.01 * s, fixed_beam_edge=0.002 * (s - 2),
                               dvts_edge=0.01 + 0.002 * s) for s in range(5)])
    assert [f["verdict"] for f in fs[14:]] == [findings.HOLDS, findings.UNSURE, findings.HOLDS, findings.HOLDS]
    assert "per-sample" in fs[14]["statistic"] and "erring" in fs[15]["statistic"]
    assert all(f["control"] for f in fs[14:])
    # beam loses to best-of-4 on both, more where the readers vary; DVTS three points below beam
    fs = voting.claims([result(0.0, 0.3, beam_edge=-0.1 + 0.01 * s, fixed_beam_edge=-0.02 + 0.002 * s,
                               dvts_edge=-0.03 + 0.002 * s) for s in range(5)])
    assert [f["verdict"] for f in fs[14:]] == [findings.FAILS, findings.FAILS, findings.FAILS, findings.FAILS]


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


@pytest.mark.parametrize("bad, word", [(dict(samples=2), "samples"), (dict(calib_draws=0), "calib_draws"),
                                       (dict(verifier_steps=0), "verifier_steps"), (dict(n_test=0), "n_test"),
                                       (dict(temperature=-1.0), "temperature")])
def test_config_rejects_what_cannot_run(bad, word):
    with pytest.raises(ValueError, match=word):
        X.get("voting").validate(voting.Config(**bad))
    X.get("voting").validate(voting.Config())
    X.get("voting").validate(voting.Config(task="compose"))


@pytest.mark.slow
def test_the_per_sample_prm_rises_with_n_and_fell_when_labelled_past_the_first_error(monkeypatch):
    """Seed 0's per-sample thinker, 30 test problems per k, 64 samples each: best-of-64 with its PRM labelled as
    PRM800K labels (up to the first wrong step) is far above a single sample and no lower than best-of-4; the same
    PRM labelled on every step past the error too (the rule before) falls well below its best-of-4, as the committed
    run's did (seed 0: 0.84 at N = 4, 0.57 at N = 64)."""
    base = X.Env().base(0)
    sigma = voting.calibrate(base, 0, 1)
    probs = P.test_problems(30, "voting", 0)
    gen = torch.Generator().manual_seed(0)
    outs = [generate(voting.reader(base, sigma, voting.draw(0, "sample", j)), [DIGITS.prompt_ids(p) for p in probs], gen, 1.0,
                     force=["S"]) for j in range(64)]
    pool = pool_of(probs, [[outs[j][i] for j in range(64)] for i in range(len(probs))])
    samples = voting.per_sample_training(base, sigma, 0, 200)
    cfg = VerifierConfig(kind="prm", n_train=200, formats=("S",), format_weights=(1.0,))

    def bon():
        return voting.bon(pool, {"prm": Scorer(train_verifier("prm", base, 0, cfg, cache="", log=None,
                                                               samples=samples))})["prm"]
    new = bon()
    monkeypatch.setattr(V, "first_error", lambda labels: labels)        # every step labelled, as before
    old = bon()
    assert new[64] >= new[1] + 0.2 and new[64] >= new[4] - 0.02, new
    assert old[64] <= old[4] - 0.1, old
