"""The reward adapters give core.rewards' numbers, on outputs a model samples and on arbitrary token strings, called
as TRL, verl and OpenRLHF call them."""
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from reasonlab.core import rewards as core
from reasonlab.core.sampling import generate_n
from reasonlab.core.task import (
    BUDGETS,
    FMT_NAMES,
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
