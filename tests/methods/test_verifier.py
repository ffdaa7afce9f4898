"""Verifiers: step reading, labels, aggregation, AUROC / calibration, what the network reads, and (slow) learning."""
import copy
import importlib

import numpy as np
import pytest
import torch

from reasonlab import tasks
from reasonlab.core.task import DIGIT0, ID, MAX_LEN, PROMPT_LEN
from reasonlab.methods import verifier as V
from reasonlab.methods import verifier_quality as Q
from reasonlab.train.erring import ERR_CFG, calibrate_misread, misread
from reasonlab.train.sft import build_model, pretrain
from reasonlab.train.zoo import get_erring_model


def w(s: str) -> list[int]:
    return [ID[x] for x in s.split()]


DIGITS = tasks.get("digits")
D = DIGITS.problem([3, 5, 9, 2, 7])   # running sums 3 8 7 9 6, answer 6; S writes sums after digits 2, 4, 5: 8 9 6


def test_steps_read_chain_sums_then_the_answer():
    assert V.steps(w("S 8 9 6 A 6 </s>")) == [(1, 8, False), (2, 9, False), (3, 6, False), (5, 6, True)]
    assert V.steps(w("A 6 </s>")) == [(1, 6, True)]
    assert V.steps(w("T 3 8")) == [(1, 3, False), (2, 8, False)]        # a partial chain: the sums so far
    assert V.steps(w("</s>")) == [] and V.steps([]) == []
    assert V.steps(w("S 8 9 </s>")) == [(1, 8, False), (2, 9, False)]    # broken template: no answer step


def test_oracle_labels_mark_each_step_by_the_rule():
    assert V.oracle_labels(D, w("S 8 9 6 A 6 </s>")) == [1, 1, 1, 1]
    # an error at the second sum propagates: later sums are wrong too, the answer with them
    assert V.oracle_labels(D, w("S 8 1 8 A 8 </s>")) == [1, 0, 0, 0]
    # right answer after a wrong chain: the answer step is right, the chain step is not
    assert V.oracle_labels(D, w("S 8 1 6 A 6 </s>")) == [1, 0, 1, 1]
    # a sum written past the chain's end is wrong, and so is an answer that comes too late or too early (a chain
    # that skips its last sums: right answer, wrong process); T checks every digit
    assert V.oracle_labels(D, w("S 8 9 6 6 A 6 </s>")) == [1, 1, 1, 0, 0]
    assert V.oracle_labels(D, w("S 8 9 A 6 </s>")) == [1, 1, 0]
    assert V.oracle_labels(D, w("T 3 8 7 9 6 A 6 </s>")) == [1] * 6
    assert V.oracle_labels(D, w("A 5 </s>")) == [0]
    assert V.outcome_label(D, w("S 8 1 6 A 6 </s>")) == 1.0 and V.outcome_label(D, w("S 8 9 </s>")) == 0.0


def test_prm_labels_stop_at_the_first_wrong_step_as_prm800k_does():
    """The PRM trains on the oracle's labels up to and including the first wrong step (PRM800K's labellers stop
    there); a chain right to its end is labelled whole. Labelled past the error, the answer step of "S 8 1 8 A 8"
    would learn that an answer which follows from its chain is wrong."""
    outs = [w("S 8 9 6 A 6 </s>"), w("S 8 1 8 A 8 </s>"), w("S 8 9 6 A 5 </s>"), w("S 3 9 6 A 6 </s>"), w("</s>")]
    cfg = V.VerifierConfig(kind="prm")
    got = V.make_labels("prm", None, [D] * len(outs), outs, cfg, torch.Generator())
    assert got == [[1, 1, 1, 1], [1, 0], [1, 1, 1, 0], [0], []]
    assert V.first_error([1.0, 0.0, 1.0]) == [1.0, 0.0] and V.first_error([]) == []
    ids, y, m = V._targets([D] * len(outs), outs, got)                  # the unlabelled steps are not trained on
    assert m.sum(1).tolist() == [4, 2, 4, 1, 0] and y[m].tolist() == [1, 1, 1, 1, 1, 0, 1, 1, 1, 0, 0]
    orm = V.make_labels("orm", None, [D] * len(outs), outs, cfg, torch.Generator())
    assert orm == [[1.0] * 4, [0.0] * 4, [0.0] * 4, [1.0] * 4, []]      # the ORM labels every step by the outcome


def test_the_uniform_verifier_scores_every_step_alike():
    outs = [w("S 8 9 6 A 6 </s>"), w("S 8 1 8 A 8 </s>"), w("A 6 </s>"), w("</s>")]
    assert V.UniformVerifier().score_steps([D] * 4, outs) == [[1.0] * 4, [1.0] * 4, [1.0], []]


def test_oracle_verifier_min_is_the_process_check():
    o = V.OracleVerifier()
    outs = [w("S 8 9 6 A 6 </s>"), w("S 8 1 6 A 6 </s>"), w("A 6 </s>"), w("</s>")]
    assert V.aggregate(o.score_steps([D] * 4, outs), "min").tolist() == [1, 0, 1, 0]
    assert V.aggregate(o.score_steps([D] * 4, outs), "last").tolist() == [1, 1, 1, 0]
    assert [len(s) for s in o.score_steps([D] * 4, outs)] == [4, 4, 1, 0]


def test_steps_labels_and_scores_on_a_task_with_many_word_answers():
    """add: a step is a (digit, carry) state, the answer one step at its last word; the oracle checks each state and
    the whole answer; a learned verifier reads the task's prompt and scores each step."""
    add = tasks.get("add")
    p = add.problem([4, 7, 3, 2, 1, 5])                   # 473 + 215 = 688: columns 8c0 8c0 6c0, answer 0 6 8 8

    def aw(s):
        return [add.id[x] for x in s.split()]
    right, bad_step = aw("T 8c0 8c0 6c0 A 0 6 8 8 </s>"), aw("T 8c0 9c0 6c0 A 0 6 8 8 </s>")
    bad_answer = aw("T 8c0 8c0 6c0 A 0 6 9 8 </s>")
    assert V.steps(right, add) == [(1, 8, False), (2, 8, False), (3, 6, False), (8, 688, True)]
    assert V.steps(aw("A 0 6 8 8 </s>"), add) == [(4, 688, True)]
    assert V.steps(aw("T 8c0 1c1"), add) == [(1, 8, False), (2, 11, False)]      # a cut chain: the states so far
    o = V.OracleVerifier()
    assert o.score_steps([p] * 3, [right, bad_step, bad_answer]) == [[1, 1, 1, 1], [1, 0, 1, 1], [1, 1, 1, 0]]
    assert V.oracle_labels(p, aw("S 8c0 6c0 A 0 6 8 8 </s>")) == [1, 1, 1]      # S: the states of columns 2, 3
    assert V.oracle_labels(p, aw("S 8c0 A 0 6 8 8 </s>")) == [1, 0]             # an answer before the chain's end
    assert [V.outcome_label(p, x) for x in (right, bad_step, bad_answer)] == [1.0, 1.0, 0.0]
    assert V.UniformVerifier().score_steps([p], [right]) == [[1.0] * 4]
    v = V.Verifier(V.build_net(build_model(0, task=add)), "prm")
    sc = v.score_steps([p, p], [right, aw("T 8c0")])
    assert [len(x) for x in sc] == [4, 1] and all(0 < x < 1 for r in sc for x in r)
    assert np.allclose(sc[1], sc[0][:1], atol=1e-5)


def test_aggregation_last_min_prod():
    s = [[0.9, 0.5, 0.8], [0.2], []]
    assert V.aggregate(s, "last").tolist() == [0.8, 0.2, 0.0]
    assert V.aggregate(s, "min").tolist() == [0.5, 0.2, 0.0]
    assert np.allclose(V.aggregate(s, "prod"), [0.9 * 0.5 * 0.8, 0.2, 0.0])
    with pytest.raises(ValueError):
        V.aggregate(s, "mean")


def test_math_shepherd_shares_on_a_hand_made_case():
    # D's S chain: prefixes "S 8" and "S 8 9" and "S 8 9 6"; completions chosen by hand
    comp = {
        tuple(w("S 8")): [w("9 6 A 6 </s>"), w("9 5 A 5 </s>"), w("1 6 A 6 </s>"), w("A 2 </s>")],   # 2 of 4 right
        tuple(w("S 8 9")): [w("6 A 6 </s>")] * 3 + [w("7 A 7 </s>")],                              # 3 of 4
        tuple(w("S 8 9 6")): [w("A 6 </s>")] * 4,                                                  # 4 of 4
    }
    seen = []

    def complete(prompts):
        seen.extend(prompts)
        return [comp[tuple(p[PROMPT_LEN:])] for p in prompts]

    outs = [w("S 8 9 6 A 6 </s>"), w("S 8 9 6 A 5 </s>")]
    labels = V.mc_labels([D, D], outs, complete)
    assert labels == [[0.5, 0.75, 1.0, 1.0], [0.5, 0.75, 1.0, 0.0]]   # the answer step: right or not, no rollout
    assert len(seen) == 3 and all(p[:PROMPT_LEN] == DIGITS.prompt_ids(D) for p in seen)   # each prefix rolled out once


def test_auroc_and_calibration_on_hand_made_examples():
    assert Q.auroc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == 0.75
    assert Q.auroc([0.5, 0.5, 0.5], [0, 1, 1]) == 0.5          # ties count half
    assert Q.auroc([0.9, 0.1], [0, 1]) == 0.0
    assert np.isnan(Q.auroc([0.2, 0.3], [1, 1]))
    cal = Q.calibration([0.25, 0.25, 0.25, 0.25, 0.95, 0.95], [1, 0, 0, 0, 1, 1])
    assert cal["ece"] == pytest.approx(4 / 6 * 0.0 + 2 / 6 * 0.05)
    assert [(b["n"], b["positive"]) for b in cal["bins"]] == [(4, 0.25), (2, 1.0)]


def test_the_network_reads_the_prompt_and_the_output_once():
    """What search charges a verifier (prompt + output per scored sequence) is what its network is fed."""
    outs = [w("S 8 9 6 A 6 </s>"), w("A 6 </s>"), w("T 3")]
    want = (PROMPT_LEN + 7) + (PROMPT_LEN + 3) + (PROMPT_LEN + 2)
    assert int((V._batch([D] * 3, outs) != ID["<pad>"]).sum()) == want
    net = V.build_net(build_model(0))
    assert V.Verifier(net, "prm").flops_per_token == 2 * sum(p.numel() for p in net.parameters())
    long = [list(range(4, 7)) + [ID["1"]] * 20]                      # cut at MAX_LEN
    assert int((V._batch([D], long) != ID["<pad>"]).sum()) == MAX_LEN


def test_learned_verifier_scores_one_per_step_in_unit_interval():
    v = V.Verifier(V.build_net(build_model(0)), "orm")
    outs = [w("S 8 9 6 A 6 </s>"), w("A 6 </s>"), w("T 3"), w("</s>")]
    sc = v.score_steps([D] * 4, outs)
    assert [len(s) for s in sc] == [4, 1, 1, 0]
    assert all(0 < x < 1 for s in sc for x in s)
    # scoring a prefix alone gives the same step scores as inside the whole output (causal: a step sees its past)
    assert np.allclose(v.score_steps([D], [w("S 8 9")])[0], sc[0][:2], atol=1e-5)
    assert V.aggregate(sc, "last")[3] == 0.0


def test_token_head_starts_from_the_thinkers_logit_for_the_written_token():
    thinker = build_model(0)
    ids = V._batch([D, D], [w("S 8 9 6 A 6 </s>"), w("T 3")])
    want = thinker(ids)[0][:, :-1].gather(-1, ids[:, 1:, None])[..., 0]
    got = V.position_logits(V.build_net(thinker), ids)
    assert torch.allclose(got[:, 1:], want, atol=1e-6) and (got[:, 0] == 0).all()
    scalar = V.build_net(thinker, head="scalar")
    assert V.position_logits(scalar, ids).shape == ids.shape
    # the training path (only what the steps need runs) gives the same logits at the steps, both heads
    m = torch.zeros(ids.shape, dtype=torch.bool)
    m[0, [PROMPT_LEN + 1, PROMPT_LEN + 2, PROMPT_LEN + 5]] = m[1, PROMPT_LEN + 1] = True
    for net in (V.build_net(thinker), scalar):
        assert torch.allclose(V.logits_at(net, ids, m), V.position_logits(net, ids)[m], atol=1e-5)


def test_held_out_problems_are_disjoint_from_training_problems():
    test = set(V.held_out_problems(30, seed=0))
    train = {d for s in (0, 1) for d in V.training_problems(30, s)}
    assert test and train and not test & train
    assert V.held_out_problems(5, seed=3) == V.held_out_problems(5, seed=3)


@pytest.mark.parametrize("change, said", [
    (dict(kind="bogus"), "kind='bogus', expected one of orm, prm, prm-mc"),
    (dict(formats=("S", "X"), format_weights=(1, 1)), "formats may hold only A, S, T, got 'X'"),
    (dict(formats=("S", "T"), format_weights=(1.0,)), "formats and format_weights must pair up"),
    (dict(steps=0), "steps must be positive, got 0")])
def test_config_validation(change, said):
    with pytest.raises(ValueError, match=f"invalid verifier config: {said}"):
        V.VerifierConfig(**change).validate()


def test_verifier_cache_round_trip(tmp_path):
    thinker = build_model(0).eval()
    cfg = V.VerifierConfig(n_train=3, samples=1, steps=2, batch=8)
    v1 = V.train_verifier("prm", thinker, 0, cfg, cache=str(tmp_path), log=None)
    v2 = V.train_verifier("prm", thinker, 0, cfg, cache=str(tmp_path), log=None)
    assert list(tmp_path.glob("verifier-prm-*-seed0.safetensors"))
    outs = [w("S 8 9 6 A 6 </s>"), w("T 3 8")]
    assert all(np.allclose(a, b) for a, b in zip(v1.score_steps([D] * 2, outs), v2.score_steps([D] * 2, outs)))
    assert v2.meta["kind"] == "prm" and v2.meta["n_outputs"] == 7 * 3


def test_repeated_sampling_is_memoised_and_leaves_the_generator_where_sampling_would(monkeypatch):
    thinker = build_model(0).eval()
    cfg, probs = V.VerifierConfig(samples=2), V.training_problems(4, 0)
    calls, real = [], V._sample_outputs
    monkeypatch.setattr(V, "_sample_outputs", lambda *a: calls.append(1) or real(*a))

    def sample(g):
        out = V.sample_outputs(thinker, probs, cfg, g)
        return out, torch.rand(3, generator=g)    # what draws from g next (prm-mc's rollouts)

    V._SAMPLED.clear()
    first = sample(torch.Generator().manual_seed(5))
    again = sample(torch.Generator().manual_seed(5))            # from the memo
    assert len(calls) == 1
    V._SAMPLED.clear()
    fresh = sample(torch.Generator().manual_seed(5))            # sampled anew
    assert len(calls) == 2
    for a in (again, fresh):
        assert a[0] == first[0] and torch.equal(a[1], first[1])
    # another generator state, other weights or other settings sample anew
    V.sample_outputs(thinker, probs, cfg, torch.Generator().manual_seed(6))
    V.sample_outputs(build_model(1).eval(), probs, cfg, torch.Generator().manual_seed(5))
    V.sample_outputs(thinker, probs, V.VerifierConfig(samples=1), torch.Generator().manual_seed(5))
    assert len(calls) == 5


def test_pretrain_callback_stops_at_its_check_and_is_deterministic():
    cfg = {"seed": 3, "lr": 3e-3, "phases": [[[0.0, 0.5, 0.5], 12, 2, [2, 8]]]}
    calls = []
    a = pretrain(cfg, callback=lambda s, m: calls.append(s) or s >= 8, every=4)
    assert calls == [4, 8]                                        # checked every 4 steps, stopped at the second
    b = pretrain(cfg, callback=lambda s, m: s >= 8, every=4)
    full = pretrain(cfg)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert not all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), full.state_dict().values()))


def test_erring_thinker_misreads_only_digits_and_is_calibrated_by_bisection(monkeypatch):
    base = build_model(0)
    clean = {k: v.clone() for k, v in base.state_dict().items()}
    m = misread(copy.deepcopy(base), 0.5, seed=3)
    for k, v in m.state_dict().items():          # only the ten digit rows of the embedding move
        moved = (v != clean[k]).any(-1) if v.dim() == 2 else (v != clean[k])
        want = torch.zeros_like(moved)
        if k == "tok.weight":
            want[DIGIT0:DIGIT0 + 10] = True
        assert torch.equal(moved, want), k
    assert torch.equal(misread(copy.deepcopy(base), 0.5, 3).tok.weight, m.tok.weight)   # deterministic
    # calibration against a stand-in accuracy that falls linearly with sigma: 1 - sigma
    unit = (misread(copy.deepcopy(base), 1.0, 7).tok.weight - base.tok.weight).detach().abs().sum()
    monkeypatch.setattr(importlib.import_module("reasonlab.train.erring"), "evaluate", lambda model, probe, force: {
        "acc": 1 - float((model.tok.weight.detach() - clean["tok.weight"]).abs().sum() / unit)})
    mr = dict(ERR_CFG["misread"], acc=0.45, iters=12)
    sigma = calibrate_misread(base, mr, 7)
    assert 0.55 - 2 ** -12 <= sigma <= 0.55 + 1e-6
    assert torch.equal(base.tok.weight, clean["tok.weight"])      # the model is left as it was
    # several directions (the per-sample thinker's draws, experiments.voting): their accuracies averaged
    unit8 = (misread(copy.deepcopy(base), 1.0, 8).tok.weight - base.tok.weight).detach().abs().sum()
    assert abs(calibrate_misread(base, mr, [7, 8]) - 0.55 * 2 * unit / (unit + unit8)) <= 2 ** -12 + 1e-6
    assert calibrate_misread(base, mr, [7, 7]) == sigma
    assert torch.equal(base.tok.weight, clean["tok.weight"])
    with pytest.raises(ValueError, match="cannot reach"):          # a target the noise cannot reach is an error
        calibrate_misread(base, dict(mr, acc=-0.5), 7)
    # a wider range only where the first cannot reach the target: sigma 1.5 (accuracy 1 - sigma = -0.5) within [0, 4]
    assert calibrate_misread(base, mr, 7, tops=(1.0, 4.0)) == sigma
    assert abs(calibrate_misread(base, dict(mr, acc=-0.5), 7, tops=(1.0, 4.0)) - 1.5) <= 4 * 2 ** -12 + 1e-6
    err = pretrain({"seed": 7, "phases": [], "misread": mr}, init=base)
    assert torch.equal(err.tok.weight, misread(copy.deepcopy(base), sigma, 7).tok.weight)


@pytest.mark.slow
def test_verifier_on_oracle_labels_separates_held_out_steps():
    thinker = get_erring_model(0, log=None)
    v = V.train_verifier("prm", thinker, 0, cache="", log=None)
    q = Q.verifier_quality(v, thinker, seed=0, n_per_k=100)
    assert 0.5 < q["step_positive_share"] < 0.97      # both classes present: the thinker errs
    # on the steps PRM800K labels (up to each output's first error), what the PRM trains on: 0.999 on seed 0
    assert q["first_error_auroc"] >= 0.95, q["first_error_auroc"]
    assert q["first_error_ece"] < 0.1, q["first_error_ece"]


def test_a_verifier_trains_on_given_samples_and_caches_them_apart(tmp_path):
    """samples=(problems, outputs) replaces the thinker's own samples; two sample sets keep two cache files, and the
    same set is read back from the cache."""
    torch.manual_seed(0)
    thinker = build_model(0)
    a = ([DIGITS.problem([3, 5, 9])] * 2, [w("S 8 7 A 7 </s>"), w("S 9 7 A 7 </s>")])
    b = ([DIGITS.problem([3, 5, 9])] * 2, [w("S 8 7 A 7 </s>"), w("S 8 6 A 6 </s>")])
    cfg = V.VerifierConfig(steps=2, batch=2)
    va = V.train_verifier("prm", thinker, 0, cfg, cache=str(tmp_path), log=None, samples=a)
    vb = V.train_verifier("prm", thinker, 0, cfg, cache=str(tmp_path), log=None, samples=b)
    assert va.meta["n_outputs"] == vb.meta["n_outputs"] == 2
    assert len(list(tmp_path.rglob("*.safetensors"))) == 2
    again = V.train_verifier("prm", thinker, 0, cfg, cache=str(tmp_path), log=None, samples=a)
    assert again.meta["seconds"] == va.meta["seconds"]                   # loaded, not retrained
