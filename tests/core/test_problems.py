"""The one problem module: parts, distinct draws, enumeration of small k."""
import pytest

from reasonlab.core.problems import PARTS, part_of, problems_per_k


def test_parts_are_disjoint_and_hold_their_share_where_k_is_enumerated():
    sets = {p: {tuple(d) for d in problems_per_k(10_000, seed=1, ks=[2, 3], split=p)} for p in PARTS}
    assert sum(len(s) for s in sets.values()) == 100 + 1000 == len(set().union(*sets.values()))
    for p, (lo, hi) in PARTS.items():
        assert sum(len(d) == 2 for d in sets[p]) == round(100 * (hi - lo))
        assert all(part_of(list(d)) == p for d in sets[p])


def test_evaluation_draws_never_repeat_a_problem():
    for split in (None, "test"):
        probs = problems_per_k(300, seed=0, split=split)
        assert len({tuple(d) for d in probs}) == len(probs)
        per_k = {k: sum(len(d) == k for d in probs) for k in range(2, 9)}
        assert per_k[2] == (100 if split is None else 25) and all(per_k[k] == 300 for k in range(4, 9))
    # training data may repeat, and has exactly n per k
    train = problems_per_k(300, seed=0, ks=[2], split="train", repeat=True)
    assert len(train) == 300 and len({tuple(d) for d in train}) == 50


def test_draws_are_seeded_and_parts_fixed_beyond_enumeration():
    assert problems_per_k(20, seed=3, split="val") == problems_per_k(20, seed=3, split="val")
    assert problems_per_k(20, seed=3) != problems_per_k(20, seed=4)
    big = problems_per_k(4000, seed=0, ks=[6])
    share = sum(part_of(d) == "test" for d in big) / len(big)
    assert 0.2 < share < 0.3                  # a hash threshold beyond enumeration: about a quarter
    with pytest.raises(ValueError):
        problems_per_k(5, split="holdout")
