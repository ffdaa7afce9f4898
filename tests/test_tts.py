"""Test-time compute: voting, verifiers, pass@N by hand; budget forcing; the tree sampler."""
from math import comb

import numpy as np
import pytest
import torch

from reasonlab import tts
from reasonlab.sampling import generate_n, sample_tree
from reasonlab.task import ID, PROMPT_LEN


def pool(answers, problems, verified=None, fmt=None, logp=None):
    a = np.array(answers)
    truth = np.array([sum(d) % 10 for d in problems])[:, None]
    z = np.zeros(a.shape)
    return tts.Pool(problems, np.array([len(d) for d in problems]), a, a == truth,
                    np.zeros(a.shape, bool) if verified is None else np.array(verified),
                    np.ones(a.shape, int) if fmt is None else np.array(fmt), z + 5, z + 3, z if logp is None else np.array(logp))


PROBS = [[1, 2], [3, 4], [5, 5]]   # answers 3, 7, 0


def test_majority_by_hand():
    p = pool([[3, 3, 1, 1], [1, 7, 7, 2], [9, 9, 0, -1]], PROBS)
    assert tts.majority(p, 1).tolist() == [1, 0, 0]
    assert tts.majority(p, 3).tolist() == [1, 1, 0]
    assert tts.majority(p, 4).tolist() == [0, 1, 0]      # row 0: 3 and 1 tie, the tie goes to the smaller (1)
    p3 = pool([[-1, -1]], [[1, 2]])
    assert tts.majority(p3, 2).tolist() == [0]            # no answer at all is wrong, not "0"


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


def test_chance_levels():
    assert tts.chance("maj", 8) == 0.1 and tts.chance("pass", 2) == pytest.approx(0.19)


def test_budget_hook_caps_and_extends_the_chain():
    V = 18
    paths = torch.tensor([[0] * PROMPT_LEN + [ID["T"], ID["3"], ID["5"]],
                          [0] * PROMPT_LEN + [ID["A"], ID["3"], ID["</s>"]],
                          [0] * PROMPT_LEN + [ID["S"], ID["3"], ID["A"]]])
    logits = torch.zeros(3, V)
    out = tts.budget_hook(max_chain=2)(logits, paths)
    assert out[0].argmax() == ID["A"] and torch.isinf(out[0]).sum() == V - 1
    assert torch.equal(out[1], logits[1]) and torch.equal(out[2], logits[2])   # direct, or chain already closed
    out = tts.budget_hook(min_chain=3)(logits, paths)
    assert torch.isinf(out[0, ID["A"]]) and torch.isinf(out[0, ID["</s>"]]) and torch.isinf(out[0, ID["_"]])
    assert not torch.isinf(out[0, ID["0"]:ID["9"] + 1]).any()
    assert torch.equal(out[2], logits[2])


def test_tree_sampler_equals_flat_sampling(noisy_model, prompts):
    P = prompts[:40]
    for force, temp in ((None, 0.0), (["T"], 0.0), (None, 1.0), (["S"], 1.0)):
        toks, logp = sample_tree(noisy_model, P, 8, torch.Generator().manual_seed(4), temp, force)
        flat = generate_n(noisy_model, P, 8, torch.Generator().manual_seed(4), temp, force)
        rows = [r[:r.index(ID["</s>"]) + 1] if ID["</s>"] in r else r for r in toks.tolist()]
        rows = [[t for t in r] for r in rows]
        same = sum(a == b[:len(a)] and len(a) == len(b) for a, b in zip(rows, flat)) / len(flat)
        assert same >= 0.99, (force, temp, same)


def test_sample_pool_and_curves_on_a_real_format(noisy_model):
    probs = [[1, 2], [3, 4, 5], [9, 9, 9, 9]]
    p = tts.sample_pool(noisy_model, probs, 8, force=["T"], seed=0)
    assert p.answer.shape == (3, 8) and (p.fmt == 2).all() and (p.length >= 1).all()
    c = tts.curves(p, Ns=(1, 2, 8))
    assert set(c) == set(tts.METHODS) and all(0 <= v.mean() <= 1 for d in c.values() for v in d.values())
    assert (c["pass"][8] >= c["maj"][8] - 1e-12).all()   # an oracle is never worse than a vote on the same pool
