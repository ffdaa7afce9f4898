"""The reward adapters give core.rewards' numbers, on outputs a model samples and on arbitrary token strings, called
as TRL, verl and OpenRLHF call them."""
import json
import os
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from reasonlab import tasks
from reasonlab.core import rewards as core
from reasonlab.core.sampling import generate_n
from reasonlab.core.task import (
    BUDGETS,
    ID,
    L1_VOCAB,
    VOCAB,
    budget_prompt_ids,
    check_chain,
    make_digits,
    parse,
    prompt_ids,
    solution,
)
from reasonlab.hf import rewards as R
from reasonlab.hf.data import rows
from reasonlab.methods.budget import l1_reward, steps_of
from reasonlab.tasks import FMT_NAMES, Problem

from .hfkit import need

EOS = ID["</s>"]


def expected(kind, digits, parsed, budget=None):
    """What the lab's own code says, each kind by its own function."""
    if kind == "rule":
        return core.rule_reward(digits, parsed)
    if kind == "correct":
        return core.correct(digits, parsed)
    if kind == "template":
        return 1.0 if parsed["ok"] else 0.0
    if kind == "chain":
        c = check_chain(digits, parsed)
        return None if c is None else float(c)
    return l1_reward(kind[3:], core.correct(digits, parsed), budget, steps_of(parsed), 0.25, 0.5)


@pytest.fixture(scope="module")
def cases(shipped):
    """Outputs the erring thinker samples at temperature 1.5 (right and wrong answers, chains, broken templates),
    the right outputs, and their corruptions: (digits, budget, ids as TRL passes them: cut after the first </s>)."""
    rng = random.Random(0)
    digits = [make_digits(rng, rng.randint(2, 8)) for _ in range(150)]
    outs = generate_n(shipped["err-seed0"], [prompt_ids(d) for d in digits], 4, torch.Generator().manual_seed(0), 1.5)
    out = [(digits[i // 4], rng.choice(BUDGETS), o) for i, o in enumerate(outs)]
    for d in digits[:50]:
        for f in FMT_NAMES:
            right = [ID[w] for w in solution(d, f)]
            wrong = list(right)
            wrong[rng.randrange(len(right) - 1)] = ID[str(rng.randrange(10))]
            out += [(d, rng.choice(BUDGETS), right), (d, 3, wrong), (d, 5, right[:-1])]
    return out


def test_the_cases_are_varied(cases):
    ps = [parse(o) for _, _, o in cases]
    assert {p["fmt"] for p in ps} >= {"direct", "short", "full", None}
    assert 0.2 < sum(p["ok"] for p in ps) / len(ps) < 0.95
    assert 0.2 < sum(core.correct(d, p) for (d, _, _), p in zip(cases, ps)) / len(ps) < 0.95


@pytest.mark.parametrize("kind", R.KINDS)
def test_trl_rewards_equal_the_labs_on_ids_and_text(cases, base_dir, kind):
    """Called as TRL calls them: prompts, completions (decoded with special tokens skipped, by the exported
    tokenizer), completion_ids and the dataset's columns as keyword lists."""
    transformers = need("transformers")
    tok = transformers.AutoTokenizer.from_pretrained(base_dir, local_files_only=True)
    digits, budgets, ids = zip(*cases)
    texts = tok.batch_decode(ids, skip_special_tokens=True)
    assert any(EOS in i for i in ids) and not any("</s>" in t for t in texts)
    cols = dict(prompts=[" ".join(VOCAB[i] for i in prompt_ids(d)) for d in digits], completion_ids=list(ids),
                completions=texts, digits=list(digits), budget=list(budgets), k=[len(d) for d in digits],
                trainer_state=None, log_extra=None, log_metric=None)
    want = [expected(kind, d, parse(o), b) for d, b, o in cases]
    assert R.trl_reward(kind)(**cols) == want
    # the text variant reads an output without </s> as ended: equal wherever the ids end with </s>, as TRL's do
    # unless cut at max_completion_length, and otherwise equal to the lab's reward of the output closed with </s>
    text = R.trl_reward(kind, text=True)(**cols)
    closed = [expected(kind, d, parse(o if EOS in o else o + [EOS]), b) for d, b, o in cases]
    assert text == closed
    assert [t for t, w, (_, _, o) in zip(text, want, cases) if EOS in o] == [w for w, (_, _, o) in zip(want, cases)
                                                                            if EOS in o]


def test_trl_functions_are_named_and_checked():
    assert R.rule_reward.__name__ == "rule_reward" and R.chain_reward_text.__name__ == "chain_reward_text"
    with pytest.raises(ValueError, match="unknown reward"):
        R.trl_reward("length")
    with pytest.raises(ValueError, match="digits"):
        R.rule_reward(prompts=["x"], completions=["A 1"], completion_ids=[[4, 9, 2]])
    with pytest.raises(ValueError, match="budget"):
        R.l1_exact_reward(prompts=["x"], completions=["A 1"], completion_ids=[[4, 9, 2]], digits=[[1, 0]])
    assert R.trl_reward("rule", format_bonus=0.5)(completion_ids=[[4, 9, 2]], digits=[[1, 0]]) == [1.5]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, len(L1_VOCAB) - 1), max_size=16), st.lists(st.integers(0, 9), min_size=2, max_size=8),
       st.sampled_from(R.KINDS), st.sampled_from(BUDGETS))
def test_any_token_string_scores_as_the_lab_scores_it(ids, digits, kind, budget):
    """Arbitrary ids (any of the 46 words, pads and special tokens anywhere): the ids variant is the lab's reward of
    the ids; the text variant is the lab's reward of the words with <pad> and <s> dropped, closed at the first </s>."""
    fn = R.trl_reward(kind)
    assert fn(completion_ids=[ids], digits=[digits], budget=[budget]) == [expected(kind, digits, parse(ids), budget)]
    kept = [i for i in ids if i not in (ID["<pad>"], ID["<s>"])]
    closed = kept[:kept.index(EOS) + 1] if EOS in kept else kept + [EOS]
    text = " ".join(L1_VOCAB[i] for i in ids)
    assert R.trl_reward(kind, text=True)(completions=[text], digits=[digits], budget=[budget]) == [
        expected(kind, digits, parse(closed), budget)]


def test_verl_compute_score_as_verl_calls_it(cases):
    """verl's reward manager: compute_score(data_source=..., solution_str=..., ground_truth=..., extra_info=...) with
    the row's reward_model.ground_truth and extra_info, on the response decoded without special tokens; reward_kwargs
    pick the reward."""
    for kind in R.KINDS:
        for d, b, o in cases[:200]:
            row = {"data_source": "reasonlab/sum-mod-10", "reward_model": {"ground_truth": str(sum(d) % 10)},
                   "extra_info": {"digits": d, "k": len(d), "budget": b, "split": "train", "index": 0}}
            text = " ".join(L1_VOCAB[i] for i in o if i != EOS)
            got = R.compute_score(data_source=row["data_source"], solution_str=text,
                                  ground_truth=row["reward_model"]["ground_truth"], extra_info=row["extra_info"],
                                  reward=kind)
            want = expected(kind, d, parse(o if EOS in o else o + [EOS]), b)
            assert isinstance(got, float) and got == (0.0 if want is None else want)
    r = rows("test", 2, style="verl")[0]
    text = " ".join(solution(r["extra_info"]["digits"], "short")[:-1])      # "S 8 9 6 A 6": </s> skipped
    assert R.compute_score(r["data_source"], text, r["reward_model"]["ground_truth"], r["extra_info"]) == 1.1
    with pytest.raises(ValueError, match="extra_info"):
        R.compute_score("reasonlab/sum-mod-10", "A 3", "3")
    with pytest.raises(ValueError, match="ground_truth"):
        R.compute_score("reasonlab/sum-mod-10", "A 3", "4", {"digits": [1, 2]})
    with pytest.raises(ValueError, match="unknown reward_kwargs format_bonis: choose from reward, alpha"):
        R.compute_score(r["data_source"], text, r["reward_model"]["ground_truth"], r["extra_info"], format_bonis=0.2)


def test_verl_loads_the_reward_file_as_a_lone_module(tmp_path):
    """verl's load_reward_manager: importlib.util.spec_from_file_location on custom_reward_function.path, the module
    executed with no parent package, then getattr(module, name)."""
    import importlib.util

    from reasonlab.hf import verl_reward
    spec = importlib.util.spec_from_file_location("custom_module", verl_reward.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    r = rows("test", 2, style="verl")[0]
    text = " ".join(solution(r["extra_info"]["digits"], "short")[:-1])
    assert getattr(module, "compute_score")(r["data_source"], text, r["reward_model"]["ground_truth"],
                                            r["extra_info"]) == 1.1
    rewards_file = os.path.join(os.path.dirname(verl_reward.__file__), "rewards.py")
    lone = importlib.util.spec_from_file_location("custom_module_2", rewards_file)
    with pytest.raises(ImportError, match="relative import"):                   # why the lone file exists
        lone.loader.exec_module(importlib.util.module_from_spec(lone))


def test_openrlhf_reward_func_as_openrlhf_calls_it(cases):
    """OpenRLHF's remote reward file: reward_func(queries, prompts, labels) with queries = prompt + response text
    (special tokens kept or not), labels from --label_key answer; a dict of tensors comes back."""
    for kind in ("rule", "chain", "l1_max"):
        fn = R.openrlhf_reward(kind)
        queries, prompts, labels, want = [], [], [], []
        for i, (d, b, o) in enumerate(cases[:100]):
            p = budget_prompt_ids(d, b) if kind.startswith("l1") else prompt_ids(d)
            prompt = " ".join(L1_VOCAB[t] for t in p)
            resp = " ".join(L1_VOCAB[t] for t in o)
            if i % 2:      # decoded with special tokens skipped: no <s>, no </s>
                query = " ".join(w for w in f"{prompt} {resp}".split() if w not in ("<s>", "</s>"))
            else:          # decoded as they are, padded
                query = f"{prompt} {resp} <pad> <pad>"
            queries.append(query)
            prompts.append(prompt)
            labels.append(str(sum(d) % 10))
            v = expected(kind, d, parse(o if EOS in o else o + [EOS]), b)
            want.append(0.0 if v is None else v)
        out = fn(queries, prompts, labels)
        assert set(out) == {"rewards", "scores", "extra_logs"}
        assert out["rewards"].tolist() == pytest.approx(want) and out["rewards"].dtype == torch.float32
        assert set(out["scores"].tolist()) <= {0.0, 1.0} and out["extra_logs"]["template"].shape == (100,)
    assert R.reward_func(["<s> 1 2 _ _ _ _ _ _ = A 3 </s>"], ["<s> 1 2 _ _ _ _ _ _ ="], ["3"])["rewards"].tolist() == \
        pytest.approx([1.1])
    with pytest.raises(ValueError, match="label"):
        R.reward_func(["<s> 1 2 _ _ _ _ _ _ = A 3"], ["<s> 1 2 _ _ _ _ _ _ ="], ["4"])
    with pytest.raises(ValueError, match="does not start with its prompt"):
        R.reward_func(["<s> 1 3 _ _ _ _ _ _ = A 3"], ["<s> 1 2 _ _ _ _ _ _ ="], None)


# ---------------------------------------------------------------------------------------------------------------
# Every task: the row says which, and its own rule scores it.

def task_cases(name: str):
    """Rows of the task's test part, and per row the right output in each format, one with a wrong answer and one
    with a wrong first chain state: (row, verl row, problem, budget, output words with </s>)."""
    task = tasks.get(name)
    rng = random.Random(1)
    out = []
    for r, v in zip(rows("test", 3, seed=3, task=name), rows("test", 3, seed=3, style="verl", task=name)):
        p = Problem.from_json(json.loads(r["problem"]))
        a = task.answer(p)
        other = (a + 1) % task.n_answers if task.n_answers else a + 1
        for f in FMT_NAMES:
            right = task.solution(p, f)
            wrong = right[:-1 - task.answer_len(p.k)] + task.write_answer(p, other) + ["</s>"]
            out += [(r, v, p, rng.choice(task.budgets), right), (r, v, p, rng.choice(task.budgets), wrong)]
            if f != "direct":
                s = task.state_words.index(right[1])
                broken = [right[0], task.state_words[(s + 1) % len(task.state_words)]] + right[2:]
                out.append((r, v, p, rng.choice(task.budgets), broken))
    return out


def lab_reward(kind, p, parsed, budget):
    """The lab's own reward of a problem of any task."""
    if kind == "chain":
        c = tasks.task_of(p).check_chain(p, parsed)
        return None if c is None else float(c)
    return expected(kind, p, parsed, budget)


@pytest.mark.parametrize("name", tasks.names())
def test_the_adapters_score_each_tasks_rows_by_its_rule(name):
    """TRL (ids and text), verl and OpenRLHF read the task from the row (the problem's JSON; OpenRLHF's from the
    prompt, by the task its function was made for) and give the lab's reward of that task's parse: the right
    outputs 1.1 under the rule reward, a wrong answer 0.1, a wrong chain state a failed chain check."""
    task = tasks.get(name)
    cases = task_cases(name)
    parsed = [task.parse([task.id[w] for w in o]) for *_, o in cases]
    right = [o == task.solution(p, fmt) for (_, _, p, _, o), fmt in zip(cases, [q["fmt"] for q in parsed])]
    assert sum(right) == len(task_cases(name)) // 8 * 3 and all(q["ok"] for q in parsed)
    rule = [R.score("rule", p, q) for (_, _, p, _, _), q in zip(cases, parsed)]
    assert [x for x, ok in zip(rule, right) if ok] == [pytest.approx(1.1)] * sum(right)
    assert {round(x, 6) for x, ok in zip(rule, right) if not ok} == {0.1, 1.1}    # wrong answers, wrong states
    cols = dict(prompts=[r["prompt"] for r, *_ in cases], problem=[r["problem"] for r, *_ in cases],
                task=[r["task"] for r, *_ in cases], k=[r["k"] for r, *_ in cases],
                budget=[b for _, _, _, b, _ in cases], completion_ids=[[task.id[w] for w in o] for *_, o in cases],
                completions=[" ".join(o[:-1]) for *_, o in cases])
    for kind in R.KINDS:
        want = [lab_reward(kind, p, q, b) for (_, _, p, b, _), q in zip(cases, parsed)]
        assert R.trl_reward(kind)(**cols) == want, kind
        assert R.trl_reward(kind, text=True)(**cols) == want, kind
        got = [R.compute_score(v["data_source"], " ".join(o[:-1]), v["reward_model"]["ground_truth"],
                               dict(v["extra_info"], budget=b), reward=kind) for _, v, _, b, o in cases]
        assert got == [0.0 if w is None else w for w in want], kind
    for kind in ("rule", "chain", "l1_max"):
        prompts = [" ".join(task.l1_vocab[i] for i in (task.max_budget_prompt_ids(p, b) if kind == "l1_max"
                                                        else task.prompt_ids(p))) for _, _, p, b, _ in cases]
        queries = [f"{pr} {' '.join(o)}" for pr, (*_, o) in zip(prompts, cases)]
        out = R.openrlhf_reward(kind, task=name)(queries, prompts, [str(r["answer"]) for r, *_ in cases])
        want = [lab_reward(kind, p, q, b) for (_, _, p, b, _), q in zip(cases, parsed)]
        assert out["rewards"].tolist() == pytest.approx([0.0 if w is None else w for w in want]), kind


def test_one_batch_may_mix_tasks_and_a_wrong_label_is_refused():
    """Each row is parsed and scored by its own problem's task; a ground truth or label that is not the answer is
    refused."""
    mixed = task_cases("digits")[:6] + task_cases("add")[:6] + task_cases("compose:n_f=2")[:6]
    got = R.rule_reward(problem=[r["problem"] for r, *_ in mixed],
                        completion_ids=[[tasks.task_of(p).id[w] for w in o] for _, _, p, _, o in mixed])
    want = [core.rule_reward(p, tasks.task_of(p).parse([tasks.task_of(p).id[w] for w in o]))
            for _, _, p, _, o in mixed]
    assert got == want and len(set(got)) == 2
    _, v, p, _, o = task_cases("add")[0]
    with pytest.raises(ValueError, match="ground_truth"):
        R.compute_score(v["data_source"], " ".join(o), "1", v["extra_info"])
    prompt = " ".join(tasks.get("add").vocab[i] for i in tasks.get("add").prompt_ids(p))
    with pytest.raises(ValueError, match="label"):
        R.openrlhf_reward("rule", task="add")([f"{prompt} A 1 </s>"], [prompt], ["1"])
    with pytest.raises(ValueError, match="not a prompt of the digits task"):
        R.reward_func([f"{prompt} A 1 </s>"], [prompt])
