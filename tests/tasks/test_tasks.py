"""The self-test every task passes (parametrized over the registry, the template task included): the gold solution
checks in every format; every single-step corruption fails at that step; parse(solution) gives back the states and
the answer; prompts read back; the parts are disjoint; problems are plain records."""
import json
import os
import random

import pytest

import reasonlab.tasks as T
from reasonlab.tasks.draws import ENUMERATE_MAX, _ranked
from reasonlab.tasks.records import FMT_NAMES, PARTS, Problem, chain_steps

TEMPLATE = os.path.join(os.path.dirname(T.__file__), "template.py")
T.load_file(TEMPLATE)
ALL = T.names()


def draws(task, n=40, seed=0):
    rng = random.Random(f"selftest {task.name} {seed}")
    return [task.problem(task.sample(rng, k), k) for k in task.ks() for _ in range(n)]


def words_to_ids(task, words):
    return [task.id[w] for w in words]


@pytest.mark.parametrize("name", ALL)
def test_the_gold_solution_checks_in_every_format(name):
    task = T.get(name)
    for p in draws(task):
        assert task.k_of(p.x) == p.k and task.possible(p.x)
        for fmt in FMT_NAMES:
            parsed = task.parse(words_to_ids(task, task.solution(p, fmt)))
            v = task.check(p, parsed)
            assert v.template_ok and v.answer_ok and v.first_error is None and all(v.steps), (p, fmt, parsed)
            assert len(v.steps) == len(chain_steps(p.k, fmt))
            assert task.check_chain(p, parsed) is (None if fmt == "direct" else True)
            assert task.correct(p, parsed)
            # parse o solution: the states and the answer the solution wrote
            assert parsed["chain"] == task.gold_chain(p, fmt) and parsed["answer"] == task.answer(p)
            assert parsed["fmt"] == fmt and parsed["ok"] and parsed["length"] == len(task.solution(p, fmt))
            assert parsed["answer_len"] == task.answer_len(p.k)
            assert len(task.prompt_ids(p)) + parsed["length"] <= task.max_len
        assert task.answer_of(p, task.states(p)) == task.answer(p)
        assert len(task.states(p)) == p.k


@pytest.mark.parametrize("name", ALL)
def test_every_single_step_corruption_fails_at_that_step(name):
    task = T.get(name)
    n_states = len(task.state_words)
    for p in draws(task, n=6):
        gold = task.states(p)
        for fmt in ("short", "full"):
            steps = chain_steps(p.k, fmt)
            for j, t in enumerate(steps):
                for s in range(n_states):
                    if s == gold[t - 1]:
                        continue
                    prefix, implied = task.corrupt(p, fmt, j, s)
                    rest = [task.state_words[x] for x in task.gold_chain(p, fmt)[j + 1:]]
                    out = prefix + rest + ["A", *task.write_answer(p, task.answer(p)), "</s>"]
                    parsed = task.parse(words_to_ids(task, out))
                    v = task.check(p, parsed)
                    assert v.first_error == j and not v.steps[j] and all(v.steps[:j]), (p, fmt, j, s, v)
                    assert task.check_chain(p, parsed) is False
                    # the answer the corrupted chain implies is the answer of the states that follow from it
                    follow = gold[:t - 1] + [s]
                    for u in range(t + 1, p.k + 1):
                        follow.append(task.next_state(p, u, follow[-1]))
                    assert implied == task.answer_of(p, follow)


@pytest.mark.parametrize("name", ALL)
def test_a_wrong_answer_or_a_short_chain_is_the_answer_steps_error(name):
    task = T.get(name)
    for p in draws(task, n=5):
        gold = task.solution(p, "full")
        a = gold.index("A", 1)
        wrong = [w for w in task.answer_words if [w] != task.write_answer(p, task.answer(p))[-1:]][0]
        out = gold[:-2] + [wrong, "</s>"]
        v = task.check(p, task.parse(words_to_ids(task, out)))
        assert not v.answer_ok and v.first_error == p.k and all(v.steps)
        cut = gold[:a - 1] + gold[a:]                          # the last state left out: the answer comes too early
        v = task.check(p, task.parse(words_to_ids(task, cut)))
        assert not v.template_ok and v.first_error == p.k - 1


@pytest.mark.parametrize("name", ALL)
def test_prompts_read_back_and_problems_are_plain_records(name):
    task = T.get(name)
    for p in draws(task, n=10):
        words = [task.vocab[i] for i in task.prompt_ids(p)[1:-1]]
        assert len(words) == task.slots and task.read_prompt(words) == p
        again = Problem.from_json(json.loads(json.dumps(p.to_json())))
        assert again == p and hash(again) == hash(p) and again.knobs == p.knobs
    with pytest.raises(ValueError):
        task.read_prompt(["?"] * task.slots)


@pytest.mark.parametrize("name", ALL)
def test_the_parts_are_disjoint_and_drawn_sets_never_repeat(name):
    task = T.get(name)
    ks = [task.k_min, task.k_min + 1, task.k_max]
    sets = {q: task.draw(300, seed=3, ks=ks, part=q) for q in PARTS}
    for q, ps in sets.items():
        assert all(task.part_of(p) == q for p in ps)
        assert len(set(ps)) == len(ps)                        # an evaluation set repeats no problem
    a, b, c = (set(v) for v in sets.values())
    assert not (a & b) and not (a & c) and not (b & c)
    for k in ks:
        if task.enumerable(k):           # exact shares where k is enumerated (over the support every knob can draw)
            ranked = _ranked(type(task), k)
            assert len(ranked) <= ENUMERATE_MAX and set(task.space(k, None)) <= set(ranked)
            shares = [sum(v == q for v in ranked.values()) / len(ranked) for q in PARTS]
            assert shares == pytest.approx([hi - lo for lo, hi in PARTS.values()], abs=2 / len(ranked))
    # the same (seed, part) draws the same set; another seed another one; a training draw repeats as it likes
    assert task.draw(50, seed=3, ks=ks, part="test") == task.draw(50, seed=3, ks=ks, part="test")
    assert task.draw(50, seed=4, ks=[task.k_max], part="test") != task.draw(50, seed=3, ks=[task.k_max], part="test")
    rng = random.Random(0)
    assert all(task.part_of(task.train_problem(rng, k)) == "train" for k in ks for _ in range(20))


@pytest.mark.parametrize("name", ALL)
def test_the_vocabulary_puts_the_shared_words_first_and_the_budgets_last(name):
    task = T.get(name)
    assert task.vocab[:8] == ["<pad>", "<s>", "</s>", "=", "A", "S", "T", "_"]
    assert task.hint_vocab[:len(task.vocab)] == task.vocab and task.l1_vocab[:len(task.budget_vocab)] == task.budget_vocab
    assert task.budget_vocab[task.budget0:] == [f"B{b}" for b in task.budgets]
    assert task.l1_vocab[task.max_budget0:] == [f"M{b}" for b in task.budgets]
    assert set(task.state_words) <= set(task.words) and set(task.answer_words) <= set(task.words)
    assert 0 < task.chance(task.k_min) <= 1


def test_knobs_change_the_distribution_not_the_rule_nor_the_parts():
    zero = T.get("modprod:p_zero=1.0")
    none = T.get("modprod:p_zero=0.0")
    rng = random.Random(0)
    assert all(0 in zero.sample(rng, 5) for _ in range(200)) and all(0 not in none.sample(rng, 5) for _ in range(200))
    assert T.get("modprod").chance(4) == pytest.approx(0.5, abs=0.03)     # p_zero = 1/2: a blind "0" is right half the time
    few, many = T.get("compose:n_f=2"), T.get("compose:n_f=8")
    p = few.problem([3, 1, 0, 1])
    assert many.answer(p) == few.answer(p) and many.part_of(p) == few.part_of(p)
    assert all(f < 2 for q in few.draw(30, seed=0, ks=[6], part="test") for f in q.x[1:])
    assert few.spec == "compose:n_f=2" and T.get("compose").spec == "compose"
    with pytest.raises(ValueError, match="knobs"):
        T.get("compose:m=3")
    with pytest.raises(ValueError, match="n_f must be"):
        T.get("compose:n_f=99")
    with pytest.raises(ValueError, match="unknown task"):
        T.get("nosuch")


def test_the_new_tasks_say_what_they_are():
    add = T.get("add")
    p = add.problem([4, 7, 3, 2, 1, 5])
    assert add.show(p) == "473 + 215" and add.answer(p) == 688
    assert add.solution(p, "full") == ["T", "8c0", "8c0", "6c0", "A", "0", "6", "8", "8", "</s>"]
    q = add.problem([9, 9, 0, 1])                              # 99 + 01 = 100: the carry runs through every column
    assert add.solution(q, "short") == ["S", "0c1", "A", "1", "0", "0", "</s>"]
    mp = T.get("modprod")
    assert mp.answer(mp.problem([3, 5, 4, 2, 6])) == 3 * 5 * 4 * 2 * 6 % 7
    assert mp.answer(mp.problem([3, 0, 4])) == 0 and mp.shortcut(mp.problem([3, 0, 4]))
    co = T.get("compose")
    from reasonlab.tasks.compose import POOL
    assert co.answer(co.problem([4, 1, 0])) == POOL[0][POOL[1][4]]
    assert len(set(POOL)) == len(POOL) and all(sorted(f) == list(range(10)) for f in POOL)


def test_digits_keeps_the_course_modules_numbers():
    import reasonlab.core.task as spec
    d = T.get("digits")
    assert len(d.vocab) == 18 and len(d.hint_vocab) == 28 and len(d.budget_vocab) == 37 and len(d.l1_vocab) == 46
    assert (d.max_len, d.prompt_len, d.max_out) == (24, 10, 14)
    assert spec.solution([3, 5, 9, 2, 7], "short") == ["S", "8", "9", "6", "A", "6", "</s>"]
    assert spec.prompt_ids([3, 5]) == [1, 11, 13, 7, 7, 7, 7, 7, 7, 3]
    assert [d.chance(k) for k in d.ks()] == [0.1] * 7
