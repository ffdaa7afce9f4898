"""The task: solutions, parsing and the chain verifier, against the spec's examples and as properties."""
import random

from hypothesis import given, settings
from hypothesis import strategies as st

import reasonlab as R
from reasonlab.core.task import FORMATS, ID, VOCAB, check_chain, encode, parse, prompt_ids, solution


def ids(words):
    return [ID[w] for w in words.split()]


def test_spec_examples():
    d = [3, 5, 9, 2, 7]
    assert solution(d, "direct") == ["A", "6", "</s>"]
    assert solution(d, "short") == ["S", "8", "9", "6", "A", "6", "</s>"]
    assert solution(d, "full") == ["T", "3", "8", "7", "9", "6", "A", "6", "</s>"]
    assert [VOCAB[i] for i in prompt_ids(d)] == "<s> 3 5 9 2 7 _ _ _ =".split()
    seq, start = encode(d, "short")
    assert VOCAB[seq[start]] == "=" and seq[start + 1] == ID["S"] and len(seq) == 10 + 7


def test_make_digits_uses_the_rng():
    assert R.make_digits(random.Random(3), 6) == R.make_digits(random.Random(3), 6)
    assert all(0 <= x <= 9 for x in R.make_digits(random.Random(0), 100))


digit_lists = st.integers(R.K_MIN, R.K_MAX).flatmap(lambda k: st.lists(st.integers(0, 9), min_size=k, max_size=k))


@settings(max_examples=300, deadline=None)
@given(digit_lists, st.sampled_from(list(FORMATS)))
def test_solution_round_trips(digits, fmt):
    out = [ID[w] for w in solution(digits, fmt)]
    p = parse(out)
    assert p["fmt"] == fmt and p["answer"] == sum(digits) % 10 and p["ok"] and p["length"] == len(out)
    assert check_chain(digits, p) is (None if fmt == "direct" else True)
    assert len(prompt_ids(digits)) + len(out) <= R.MAX_LEN


@settings(max_examples=500, deadline=None)
@given(st.lists(st.integers(-50, 50), max_size=30))
def test_parse_never_raises(xs):
    p = parse(xs)
    assert set(p) == {"fmt", "chain", "answer", "ok", "length", "answer_end", "answer_len"}
    assert p["ok"] is False or p["answer"] is not None


def test_parse_edge_cases():
    assert parse([]) == {"fmt": None, "chain": [], "answer": None, "ok": False, "length": 0, "answer_end": 0,
                         "answer_len": 0}
    # no </s>: the answer is read, the template is not ok
    p = parse(ids("T 3 8 A 1"))
    assert p["answer"] == 1 and not p["ok"] and p["chain"] == [3, 8] and p["length"] == 5
    # no "A" after the chain: no answer
    p = parse(ids("S 8 9 </s>"))
    assert p["answer"] is None and p["fmt"] == "short" and p["chain"] == [8, 9]
    # a direct answer followed by a chain is not ok
    p = parse(ids("A 6 3 4 </s>"))
    assert p["fmt"] == "direct" and p["answer"] == 6 and not p["ok"]
    # trailing junk after </s> is cut and does not count towards the length
    p = parse(ids("A 6 </s> 7 7 = T"))
    assert p["ok"] and p["length"] == 3
    # a thinking format with no chain is not ok, though it has an answer
    p = parse(ids("T A 5 </s>"))
    assert p["answer"] == 5 and not p["ok"]
    # not starting with a format token
    assert parse(ids("3 A 5 </s>"))["fmt"] is None
    # unknown ids do not raise
    assert parse([99, -1, 4])["fmt"] is None


def test_check_chain_catches_a_wrong_step_with_the_right_answer():
    d = [3, 5, 9, 2, 7]
    p = parse(ids("T 3 8 7 0 6 A 6 </s>"))
    assert p["answer"] == 6 and check_chain(d, p) is False
    assert check_chain(d, parse(ids("T 3 8 7 9 6 A 5 </s>"))) is False  # answer differs from the last step
    assert check_chain(d, parse(ids("A 6 </s>"))) is None
    assert check_chain(d, parse(ids("T 3 8 7 9 6 A 6"))) is False      # no </s>


def test_rule_reward():
    d = [3, 5, 9, 2, 7]
    assert R.rule_reward(d, parse(ids("A 6 </s>"))) == 1.1
    assert R.rule_reward(d, parse(ids("A 6"))) == 1.0
    assert R.rule_reward(d, parse(ids("A 5 </s>"))) == 0.1
    assert R.rule_reward(d, parse(ids("A 5 </s>")), format_bonus=0.0) == 0.0
