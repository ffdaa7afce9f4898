"""Short learning tests (slow: run with `make test-slow`)."""
import copy

import pytest

import reasonlab as R
from reasonlab.core.evaluate import evaluate
from reasonlab.core.problems import problems_per_k
from reasonlab.train.sft import pretrain


@pytest.mark.slow
def test_full_chain_is_learned_in_300_steps():
    """The fast part of the recipe: T alone, default init, lr 3e-3, 300 steps -> >= 0.95 at every k."""
    model = pretrain({"seed": 0, "lr": 3e-3, "phases": [[[0.0, 0.0, 1.0], 300, 30, [2, 8]]]})
    r = evaluate(model, problems_per_k(50, seed=5), force=["T"])
    assert min(v["acc"] for v in r["per_k"].values()) >= 0.95


@pytest.mark.slow
def test_grpo_moves_a_direct_answerer_towards_thinking():
    """A model that prefers A (right only at k = 2) but can think: a few GRPO steps raise the share of S/T."""
    model = pretrain({"seed": 0, "lr": 3e-3, "phases": [[[0.0, 0.0, 1.0], 300, 30, [2, 8]],
                                                        [[0.7, 0.0, 0.3], 150, 20, [2, 8]]]})
    before = evaluate(model, problems_per_k(50, seed=5), gen=None)
    policy = copy.deepcopy(model)
    hist = R.rl_train(policy, model, 30, lr=3e-4)
    assert hist[-1]["share"]["full"] > hist[0]["share"]["full"]
    assert hist[-1]["reward"] > hist[0]["reward"]
    assert before["share"]["direct"] >= 0.5
