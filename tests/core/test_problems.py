"""The one problem module: parts, distinct draws, enumeration of small k."""
import pytest

from reasonlab.core.problems import PARTS, part_of, problems_per_k


def test_parts_are_disjoint_and_hold_their_share_where_k_is_enumerated():
    sets = {p: set(problems_per_k(10_000, seed=1, ks=[2, 3], split=p)) for p in PARTS}
    assert sum(len(s) for s in sets.values()) == 100 + 1000 == len(set().union(*sets.values()))
    for p, (lo, hi) in PARTS.items():
        assert sum(d.k == 2 for d in sets[p]) == round(100 * (hi - lo))
        assert all(part_of(d) == p for d in sets[p])


def test_evaluation_draws_never_repeat_a_problem():
    for split in (None, "test"):
        probs = problems_per_k(300, seed=0, split=split)
        assert len({d.x for d in probs}) == len(probs)
        per_k = {k: sum(d.k == k for d in probs) for k in range(2, 9)}
        assert per_k[2] == (100 if split is None else 25) and all(per_k[k] == 300 for k in range(4, 9))
    # training data may repeat, and has exactly n per k
    train = problems_per_k(300, seed=0, ks=[2], split="train", repeat=True)
    assert len(train) == 300 and len({d.x for d in train}) == 50


def test_draws_are_seeded_and_parts_fixed_beyond_enumeration():
    assert problems_per_k(20, seed=3, split="val") == problems_per_k(20, seed=3, split="val")
    assert problems_per_k(20, seed=3) != problems_per_k(20, seed=4)
    big = problems_per_k(4000, seed=0, ks=[6])
    share = sum(part_of(d) == "test" for d in big) / len(big)
    assert 0.2 < share < 0.3                  # a hash threshold beyond enumeration: about a quarter
    with pytest.raises(ValueError):
        problems_per_k(5, split="holdout")


def test_the_draws_serve_another_task():
    """The same draws on add (two k-digit numbers): Problems of the task, disjoint parts, no repeats."""
    sets = {p: problems_per_k(30, seed=0, ks=[2, 3], split=p, task="add") for p in PARTS}
    for p, probs in sets.items():
        assert len(probs) == 60 and len(set(probs)) == 60
        assert all(d.task == "add" and len(d.x) == 2 * d.k and part_of(d) == p for d in probs)
    assert not set(sets["train"]) & set(sets["test"])


def test_a_part_the_knobs_draw_fewer_of_is_given_whole_not_waited_on():
    """compose's default pool has 810 instances at k = 4 (not enumerated), about 200 of them "test": a draw of 300
    gives those, each once; modprod with p_zero = 0 draws no instance with a 0, whole parts included."""
    got = problems_per_k(300, seed=0, ks=[4], split="test", task="compose")
    assert 150 < len(got) < 300 and len(set(got)) == len(got) and all(part_of(d) == "test" for d in got)
    none = problems_per_k(50, seed=0, ks=[2, 3], split="test", task="modprod:p_zero=0.0")
    assert none and all(0 not in d.x for d in none) and all(part_of(d) == "test" for d in none)
    assert sum(d.k == 3 for d in none) < 50                    # k = 3's test part holds 42 such instances
