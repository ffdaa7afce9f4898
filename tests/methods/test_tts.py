"""Test-time compute: voting, verifiers, pass@N by hand; budget forcing; the tree sampler."""
from math import comb

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from reasonlab import tasks
from reasonlab.core.pool import Pool, pool_of, sample_pool
from reasonlab.core.sampling import generate_n, output_logits, sample_tree
from reasonlab.core.task import ID, PROMPT_LEN, check_chain, parse, prompt_ids
from reasonlab.methods import tts
from reasonlab.stats import summary

DIGITS = tasks.get("digits")


def pool(answers, problems, verified=None, fmt=None, logp=None):
    a = np.array(answers)
    problems = tasks.problems_of(problems)
    truth = np.array([DIGITS.answer(d) for d in problems])[:, None]
    z = np.zeros(a.shape)
    return Pool(problems, np.array([d.k for d in problems]), a, a == truth,
                    np.zeros(a.shape, bool) if verified is None else np.array(verified),
                    np.ones(a.shape, int) if fmt is None else np.array(fmt), z + 5, z + 3, z if logp is None else np.array(logp))


PROBS = [[1, 2], [3, 4], [5, 5]]   # answers 3, 7, 0


def test_majority_by_hand():
    p = pool([[3, 3, 1, 1], [1, 7, 7, 2], [9, 9, 0, -1]], PROBS)
    assert tts.majority(p, 1).tolist() == [1, 0, 0]
    assert tts.majority(p, 3).tolist() == [1, 1, 0]
    assert tts.majority(p, 4)[1:].tolist() == [1, 0]      # row 0 is a tie between 3 and 1: below
    p3 = pool([[-1, -1]], [[1, 2]])
    assert tts.majority(p3, 2).tolist() == [0]            # no answer at all is wrong, not "0"


def test_ties_are_broken_at_random_with_a_seed():
    """A 2-2 tie between the right answer and another is right half the time, whichever is smaller: ties used to
    go to the smaller answer, so maj@2 could fall below maj@1."""
    probs = [[1, 2]] * 2000                                        # answer 3
    low = pool([[3, 1, 3, 1]] * 2000, probs)                        # tied with a smaller wrong answer
    high = pool([[3, 9, 3, 9]] * 2000, probs)                       # tied with a larger one
    for p in (low, high):
        m = tts.majority(p, 4)
        assert 0.45 < m.mean() < 0.55
        assert np.array_equal(m, tts.majority(p, 4))                # seeded: the same picks every time
        assert not np.array_equal(m, tts.vote(p, 4, seed=1))        # another seed, other picks
    p = pool([[3, 1]] * 2000, probs)
    assert tts.majority(p, 1).mean() == 1.0 and 0.45 < tts.majority(p, 2).mean() < 0.55  # maj@2 = E[tie], not 0


def test_weighted_vote_follows_probability():
    p = pool([[3, 1, 1]], [[1, 2]], logp=np.log([[0.9, 0.2, 0.3]]))
    assert tts.majority(p, 3).tolist() == [0] and tts.weighted_vote(p, 3).tolist() == [1]


def test_verifier_vote_uses_only_checked_chains():
    p = pool([[1, 1, 3], [7, 2, 2]], PROBS[:2], verified=[[False, False, True], [False, False, False]])
    assert tts.best_of_n_verified(p, 3).tolist() == [1, 0]   # row 2: none verified -> plain vote (2): wrong


def test_pass_at_matches_the_combinatorial_formula():
    c = np.arange(0, 65)
    for N in (1, 2, 8, 64):
        want = [1 - comb(64 - x, N) / comb(64, N) for x in c]
        assert np.allclose(tts.pass_at(c, 64, N), want)


def test_pass_at_rejects_more_draws_than_samples():
    assert tts.pass_at(np.array([0]), 4, 4).tolist() == [0.0]
    for N in (0, 5):
        with pytest.raises(ValueError, match="N <= n"):
            tts.pass_at(np.array([0, 1]), 4, N)


def test_chance_levels():
    assert summary.chance("maj", 8, 0.1) == 0.1 and summary.chance("pass", 2, 0.1) == pytest.approx(0.19)
    assert summary.chance("pass", 3, 0.5) == pytest.approx(0.875)


def test_budget_hook_caps_and_extends_the_chain():
    V = 18
    paths = torch.tensor([[0] * PROMPT_LEN + [ID["T"], ID["3"], ID["5"]],
                          [0] * PROMPT_LEN + [ID["A"], ID["3"], ID["</s>"]],
                          [0] * PROMPT_LEN + [ID["S"], ID["3"], ID["A"]]])
    logits = torch.zeros(3, V)
    out = tts.budget_hook(DIGITS, max_chain=2)(logits, paths)
    assert out[0].argmax() == ID["A"] and torch.isinf(out[0]).sum() == V - 1
    assert torch.equal(out[1], logits[1]) and torch.equal(out[2], logits[2])   # direct, or chain already closed
    out = tts.budget_hook("digits", min_chain=3)(logits, paths)
    assert torch.isinf(out[0, ID["A"]]) and torch.isinf(out[0, ID["</s>"]]) and torch.isinf(out[0, ID["_"]])
    assert not torch.isinf(out[0, ID["0"]:ID["9"] + 1]).any()
    assert torch.equal(out[2], logits[2])


def test_votes_pools_and_the_budget_hook_serve_a_task_of_many_answers():
    """add's answers are numbers (no fixed set to tally by value): a vote counts each distinct answer, ties broken
    at random with the seed; pools read and check its multi-word answers; the budget hook counts its (digit, carry)
    states and leaves its answer digits out of a chain."""
    add = tasks.get("add")
    probs = [add.problem([4, 7, 3, 2, 1, 5]), add.problem([9, 9, 9, 9])]     # 473 + 215 = 688, 99 + 99 = 198
    a = np.array([[688, 1000, 688, -1], [198, 197, 197, 198]])
    z = np.zeros(a.shape)
    p = Pool(probs, np.array([3, 2]), a, a == np.array([[688], [198]]), np.zeros(a.shape, bool),
             np.ones(a.shape, int), z + 5, z + 3, z)
    assert p.truth.tolist() == [688, 198]
    assert tts.majority(p, 1).tolist() == [1, 1] and tts.majority(p, 3).tolist() == [1, 0]
    assert tts.majority(p, 4)[0] == 1 and 0.35 < np.mean([tts.vote(p, 4, seed=s)[1] for s in range(200)]) < 0.65
    assert tts.vote(p, 4, weight=np.array([[1.0] * 4, [0.9, 0.2, 0.3, 0.9]]))[1] == 1
    outs = [[[add.id[w] for w in add.solution(q, f)] for f in ("direct", "full")] for q in probs]
    pp = pool_of(probs, outs)
    assert pp.answer.tolist() == [[688, 688], [198, 198]] and pp.correct.all()
    assert pp.verified[:, 1].all() and not pp.verified[:, 0].any() and pp.length.tolist() == [[6, 10], [5, 8]]
    paths = torch.tensor([[0] * add.prompt_len + [add.id[w] for w in ("T", "8c0", "8c0")]])
    logits = torch.zeros(1, len(add.vocab))
    out = tts.budget_hook(add, max_chain=2)(logits, paths)
    assert out[0].argmax() == add.id["A"] and torch.isinf(out[0]).sum() == len(add.vocab) - 1
    out = tts.budget_hook(add, min_chain=3)(logits, paths)
    assert torch.isinf(out[0, add.id["A"]]) and torch.isinf(out[0, add.id["5"]])
    assert not torch.isinf(out[0, add.id["6c1"]])
    assert torch.equal(tts.budget_hook(add, max_chain=3)(logits, paths), logits)


def test_tree_sampler_equals_flat_sampling_and_its_logprobs_are_right(noisy_model, prompts):
    """sample_tree and generate_n are one decoder: the same samples, token for token; the returned sequence
    log-probabilities are those of a full forward pass over the generated tokens (forced ones excluded)."""
    P = prompts[:40]
    for force, temp in ((None, 0.0), (["T"], 0.0), (None, 1.0), (["S"], 1.0), (None, 0.7)):
        toks, logp = sample_tree(noisy_model, P, 8, torch.Generator().manual_seed(4), temp, force)
        flat = generate_n(noisy_model, P, 8, torch.Generator().manual_seed(4), temp, force)
        rows = [r[:r.index(ID["</s>"]) + 1] if ID["</s>"] in r else r for r in toks.tolist()]
        assert rows == flat, (force, temp)
        if temp == 0:
            continue
        nf = len(force or [])
        prompts_rep = [p + [ID[w] for w in (force or [])] for p in P for _ in range(8)]
        logits, tok, mask = output_logits(noisy_model, prompts_rep, [r[nf:] for r in rows])
        want = (F.log_softmax(logits / temp, -1).gather(-1, tok[:, :, None]).squeeze(-1) * mask).sum(1)
        assert torch.allclose(logp, want, atol=1e-4), (force, temp)


def test_sample_pool_records_what_the_samples_say(noisy_model):
    """Every field of the pool agrees with parsing and checking the same samples by hand."""
    probs = [[1, 2], [3, 4, 5], [9, 9, 9, 9]]
    p = sample_pool(noisy_model, probs, 8, force=["T"], seed=0)
    toks, _ = sample_tree(noisy_model, [prompt_ids(d) for d in probs], 8, torch.Generator().manual_seed(0), 1.0, ["T"])
    for r, row in enumerate(toks.tolist()):
        i, j = divmod(r, 8)
        q = parse(row)
        assert p.answer[i, j] == (-1 if q["answer"] is None else q["answer"])
        assert p.correct[i, j] == (q["answer"] == sum(probs[i]) % 10)
        assert p.verified[i, j] == (check_chain(probs[i], q) is True)
        assert p.fmt[i, j] == 2 and p.length[i, j] == q["answer_end"] and p.chain[i, j] == len(q["chain"])
    c = tts.curves(p, Ns=(1, 2, 8))
    assert set(c) == set(tts.METHODS)
    assert np.array_equal(c["maj"][1], p.correct[:, 0].astype(float))      # maj@1 is the first sample
    assert (c["pass"][8] >= c["maj"][8] - 1e-12).all()   # an oracle is never worse than a vote on the same pool


def test_budget_tokens_stop_at_the_end_of_the_answer():
    """Text written after an answer that does not close is not counted: tokens grow with the budget."""
    assert parse([ID["T"], ID["3"], ID["A"], ID["7"], ID["</s>"]])["answer_end"] == 5
    broken = parse([ID["T"], ID["A"], ID["7"], ID["3"], ID["3"], ID["3"]])      # no </s>: junk after the answer
    assert broken["answer_end"] == 3 and broken["length"] == 6
    assert parse([ID["T"], ID["3"], ID["3"]])["answer_end"] == 3                # no answer: all of it


def _frontier_problems():
    """20 problems per k = 2, 3 on each side of the val / test split."""
    from reasonlab.core.problems import problems_per_k
    return problems_per_k(20, seed=1, ks=(2, 3), split="val") + problems_per_k(20, seed=1, ks=(2, 3), split="test")


def _cand(method, score, tokens, fmt="S"):
    return {"format": fmt, "method": method, "N": 1, "score": np.asarray(score, float), "tokens": np.asarray(tokens, float)}


def test_frontier_picks_greedy_when_it_is_cheapest():
    """Greedy S is right everywhere at 6 tokens; a 4-sample vote also is, at 24: the frontier must pick greedy for
    every k and report a ratio of 1 (no gain), not a saving against the vote."""
    probs = _frontier_problems()
    P = len(probs)
    cands = [_cand("greedy", np.ones(P), np.full(P, 6.0)), _cand("maj", np.ones(P), np.full(P, 24.0))]
    fr = tts.frontier(cands, probs)
    t = next(x for x in fr["targets"] if x["target"] == 0.99)
    assert t["reachable"] and t["ratio"] == pytest.approx(1.0)
    assert set(t["adaptive"]["per_k"].values()) == {"S/greedy@1"} and t["fixed"]["strategy"] == "S/greedy@1"


def test_frontier_switches_per_k_when_that_wins():
    """A (3 tokens) is right only at k = 2, S (6 tokens) everywhere: per k, A at k = 2 and S at k = 3, cheaper than
    S everywhere by 6 / 4.5 on test (half the test problems have k = 2)."""
    probs = _frontier_problems()
    k2 = np.array([d.k == 2 for d in probs])
    cands = [_cand("greedy", k2, np.full(len(probs), 3.0), "A"), _cand("greedy", np.ones(len(probs)), np.full(len(probs), 6.0))]
    t = next(x for x in tts.frontier(cands, probs)["targets"] if x["target"] == 0.99)
    assert t["adaptive"]["per_k"] == {2: "A/greedy@1", 3: "S/greedy@1"} and t["fixed"]["strategy"] == "S/greedy@1"
    assert t["ratio"] == pytest.approx(6 / 4.5) and t["adaptive"]["acc"] == 1.0


def test_frontier_selects_on_validation_and_scores_on_test():
    """A strategy right on every validation problem but wrong on every test problem is chosen, and the test
    accuracy shows it: selection never sees the test side."""
    from reasonlab.core.problems import part_of
    probs = _frontier_problems()
    val = np.array([part_of(d) == "val" for d in probs])
    t = next(x for x in tts.frontier([_cand("greedy", val, np.full(len(probs), 3.0))], probs)["targets"]
             if x["target"] == 0.5)
    assert t["reachable"] and t["adaptive"]["acc"] == 0.0 and t["fixed"]["acc"] == 0.0


def test_named_splits_are_disjoint_at_every_k():
    from reasonlab.core.problems import part_of, problems_per_k
    v, t = problems_per_k(200, seed=0, split="val"), problems_per_k(200, seed=0, split="test")
    assert not set(v) & set(t)
    assert all(part_of(d) == "val" for d in v) and {d.k for d in v} == set(range(2, 9))


def test_bootstrap_ci_covers_the_mean_about_95_percent_of_the_time():
    """200 samples of Bernoulli(0.3), 300 times: the 95 % percentile interval holds 0.3 in 90-99 % of them."""
    rng = np.random.default_rng(0)
    hits = sum(lo <= 0.3 <= hi for lo, hi in (summary.bootstrap_ci((rng.random(200) < 0.3).astype(float), seed=i)
                                              for i in range(300)))
    assert 0.90 <= hits / 300 <= 0.99
