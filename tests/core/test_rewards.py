"""Rewards as pure functions, against hand-computed values."""
import math

import pytest
import torch

from reasonlab.core import rewards
from reasonlab.core.task import ID, parse
from reasonlab.methods.adaptive import method_parts
from reasonlab.stats.summary import pareto

D = [3, 5, 9, 2, 7]   # answer 6


def P(words):
    return parse([ID[w] for w in words.split()])


RIGHT_A, RIGHT_S, RIGHT_T = P("A 6 </s>"), P("S 8 9 6 A 6 </s>"), P("T 3 8 7 9 6 A 6 </s>")
WRONG_A = P("A 5 </s>")


def test_token_cost():
    assert rewards.token_cost_reward(D, RIGHT_A, alpha=0.0) == 1.0
    assert rewards.token_cost_reward(D, RIGHT_A, alpha=0.5) == pytest.approx(1 - 0.5 * 3 / 14)
    assert rewards.token_cost_reward(D, RIGHT_T, alpha=0.5) == pytest.approx(1 - 0.5 * 9 / 14)
    assert rewards.token_cost_reward(D, WRONG_A, alpha=0.5) == 0.0


def test_thinkless_format_values():
    assert [rewards.format_reward(D, p) for p in (RIGHT_A, RIGHT_S, RIGHT_T, WRONG_A)] == [1.0, 0.75, 0.5, -1.0]


def test_overlong_shaping():
    assert rewards.overlong_reward(D, RIGHT_T, max_len=14, buffer=4) == 1.0              # 9 tokens: inside
    assert rewards.overlong_reward(D, RIGHT_T, max_len=10, buffer=4) == pytest.approx(1 + (6 - 9) / 4)
    assert rewards.overlong_reward(D, P("T 3 8 7 9 6 A 6 6 6 6 6 6 6"), max_len=14) == pytest.approx(1 - 1)  # cut off


def test_adaptthink():
    ref = {5: 0.9}
    assert rewards.adaptthink_reward(D, RIGHT_A, ref, delta=0.05) == pytest.approx(1 - 0.9 + 0.05)
    assert rewards.adaptthink_reward(D, RIGHT_S, ref, delta=0.05) == pytest.approx(0.1)
    assert rewards.adaptthink_reward(D, WRONG_A, ref, delta=0.05) == pytest.approx(-0.85)


def test_kimi_group_length_reward():
    r = torch.tensor([[1.0, 1.0, 0.0, 0.0]])
    ps = [[RIGHT_A, RIGHT_T, WRONG_A, P("T 1 1 1 1 1 A 1 </s>")]]   # lengths 3, 9, 3, 9
    out = rewards.kimi_length_reward(r, ps, weight=1.0)
    # lam = 0.5 - (n - 3) / 6: 0.5 for 3 tokens, -0.5 for 9; wrong answers only get min(0, lam)
    assert torch.allclose(out, torch.tensor([[1.5, 0.5, 0.0, -0.5]]))
    same = rewards.kimi_length_reward(r, [[RIGHT_A] * 4], weight=1.0)
    assert torch.equal(same, r)


def test_arm_scaling_boosts_rare_formats_then_fades():
    r = torch.ones(1, 4)
    ps = [[RIGHT_S, RIGHT_S, RIGHT_S, RIGHT_A]]
    start = rewards.arm_format_scaling(r, ps, step=0, steps=10)
    assert torch.allclose(start, torch.tensor([[4 / 3, 4 / 3, 4 / 3, 4.0]]))       # alpha = G / F at t = 0
    end = rewards.arm_format_scaling(r, ps, step=10, steps=10)
    assert torch.allclose(end, torch.ones(1, 4))                                     # decay = F / G at t = T
    mid = rewards.arm_format_scaling(r, ps, step=5, steps=10)
    assert mid[0, 3].item() == pytest.approx(4 * (0.25 + 0.5 * 0.75 * (1 + math.cos(math.pi / 2))))


def test_methods_and_pareto():
    from reasonlab.methods.adaptive import METHODS
    from reasonlab.train.rl import RLConfig
    for m in METHODS:
        fn, group, fields = method_parts(m, ref_acc={k: 0.5 for k in range(2, 9)})
        assert callable(fn) and 0 < fields["force_direct"] < 1
        RLConfig.preset("grpo", **fields)   # valid RL settings
    with pytest.raises(ValueError):
        method_parts("nope")
    pts = [(3.0, 0.3), (6.7, 1.0), (9.0, 1.0), (6.4, 1.0), (5.0, 0.2)]
    assert sorted(pareto(pts)) == [0, 3]


def test_random_reward_is_a_fair_coin_that_reads_nothing():
    """Shao et al.'s random reward: 0 or 1, 1 about gamma of the time, the same draws for the same seed whatever
    the problem and output, other draws for another seed."""
    a, b, c = rewards.random_reward(7), rewards.random_reward(7), rewards.random_reward(8)
    xa = [a(D, RIGHT_A) for _ in range(4000)]
    xb = [b([1, 2], WRONG_A) for _ in range(4000)]
    xc = [c(D, RIGHT_A) for _ in range(4000)]
    assert xa == xb and xa != xc and set(xa) == {0.0, 1.0}
    assert abs(sum(xa) / len(xa) - 0.5) < 0.03                       # 4 binomial SEs (0.0079 each)
    low = rewards.random_reward(7, gamma=0.1)
    assert abs(sum(low(D, RIGHT_A) for _ in range(4000)) / 4000 - 0.1) < 0.02
