"""Thinking on a budget (methods/budget.py): budget vocabulary and prompts, L1's rewards, the stride classifier, the
sample command's refusals, and a short learning run in which adherence rises (the l1 experiment: tests/experiments/
test_l1.py)."""
import random

import numpy as np
import pytest
import torch

from reasonlab import tasks
from reasonlab.cli import main
from reasonlab.core.problems import problems_per_k
from reasonlab.core.sampling import generate
from reasonlab.core.task import (
    BUDGET0,
    BUDGET_VOCAB,
    BUDGETS,
    ID,
    K_MAX,
    MAX_LEN,
    PROMPT_LEN,
    VOCAB,
    budget_prompt_ids,
    make_digits,
    parse,
    prompt_ids,
    solution,
)
from reasonlab.io.checkpoint import save_model
from reasonlab.methods import budget as B
from reasonlab.methods import strides
from reasonlab.stats import findings
from reasonlab.train.sft import build_model
from reasonlab.train.zoo import base_model

DIGITS = tasks.get("digits")


def test_budget_vocabulary_leaves_the_spec_alone():
    assert BUDGET_VOCAB[:len(VOCAB)] == VOCAB and len(VOCAB) == 18
    assert [BUDGET_VOCAB[BUDGET0 + b] for b in BUDGETS] == [f"B{b}" for b in range(K_MAX + 1)]
    assert len(set(BUDGET_VOCAB)) == len(BUDGET_VOCAB)


def test_budget_prompts_fit_max_len():
    rng = random.Random(0)
    for k in range(2, K_MAX + 1):
        d = make_digits(rng, k)
        for b in BUDGETS:
            p = budget_prompt_ids(d, b)
            assert len(p) == PROMPT_LEN and p[:-1] == prompt_ids(d)[:-1] and p[-1] == BUDGET0 + b
            longest = max(len(solution(d, f)) for f in ("direct", "short", "full"))
            assert len(p) + longest <= MAX_LEN
    with pytest.raises(ValueError):
        budget_prompt_ids([1, 2], 9)


def test_model_without_budget_tokens_rejects_a_budget():
    m = build_model(0)
    with pytest.raises(ValueError, match="no budget tokens"):
        generate(m, [prompt_ids([1, 2, 3])], budget=1)
    bm = B.budget_model(m)
    with pytest.raises(ValueError):
        generate(bm, [prompt_ids([1, 2, 3])], budget=9)


def test_budget_model_starts_near_the_base_model():
    """B<b> = "=" + (b - 4)/4 * v: B4 gives exactly the base model's logits, the others distinct, ordered inputs;
    the new output rows score as <pad> (never written)."""
    m = build_model(1).eval()
    bm = B.budget_model(m)
    p = prompt_ids([3, 5, 9, 2, 7])
    with torch.no_grad():
        want = m(torch.tensor([p]))[0][0, -1]
        got = {b: bm(torch.tensor([budget_prompt_ids([3, 5, 9, 2, 7], b)]))[0][0, -1] for b in (0, 4, 8)}
    assert torch.allclose(got[4][:len(VOCAB)], want, atol=1e-5)
    assert not torch.allclose(got[0], got[8])
    for g in got.values():
        assert (g[len(VOCAB):] <= g[ID["<pad>"]] + 1e-5).all()
    E = bm.tok.weight.detach()
    assert torch.allclose(E[BUDGET0 + 8] - E[BUDGET0 + 4], E[BUDGET0 + 4] - E[BUDGET0 + 0], atol=1e-5)


def test_l1_rewards_on_hand_computed_cases():
    # Exact: r = c - alpha |b - n|
    assert B.l1_exact(1.0, 4, 4, 0.25) == 1.0
    assert B.l1_exact(1.0, 2, 4, 0.25) == 0.5
    assert B.l1_exact(0.0, 8, 0, 0.25) == -2.0
    assert B.l1_exact(1.0, 0, 3, 0.1) == pytest.approx(0.7)
    # Max: r = c * clip(alpha (b - n) + delta, 0, 1)
    assert B.l1_max(1.0, 4, 4, 0.25, 0.5) == 0.5          # exactly at the budget: delta
    assert B.l1_max(1.0, 4, 3, 0.25, 0.5) == 0.75
    assert B.l1_max(1.0, 8, 0, 0.25, 0.5) == 1.0           # clipped at 1
    assert B.l1_max(1.0, 2, 4, 0.25, 0.5) == 0.0           # two steps over: nothing
    assert B.l1_max(1.0, 2, 3, 0.25, 0.5) == 0.25
    assert B.l1_max(0.0, 8, 0, 0.25, 0.5) == 0.0           # wrong: nothing, however short


def test_reward_fn_reads_the_budget_and_logs_it():
    d = B.with_budget(DIGITS.problem([3, 5, 9, 2, 7]), 3)
    right_s = parse([ID[w] for w in DIGITS.solution(d, "short")])     # 3 steps, right
    log = {}
    assert B.reward_fn("exact", 0.25, 0.5, log)(d, right_s) == 1.0
    assert B.reward_fn("max", 0.25, 0.5, log)(d, right_s) == 0.5
    assert log[3].tolist() == [2, 2, 0, 2, 2 * 7]                     # n, within, |n - b|, correct, tokens


def test_stride_classifier_on_hand_written_chains():
    d = DIGITS.problem([3, 5, 9, 2, 7, 1, 4, 6])          # running sums 3 8 7 9 6 7 1 7
    assert strides.classify_chain(d, []) == "none"
    assert strides.classify_chain(d, [3, 8, 7, 9, 6, 7, 1, 7]) == "stride 1"        # T
    assert strides.classify_chain(d, [8, 9, 7, 7]) == "stride 2"                    # S: after digits 2, 4, 6, 8
    assert strides.classify_chain(d, [7, 7, 7]) == "stride 3"                       # after digits 3, 6, 8
    assert strides.classify_chain(d, [9, 7]) == "stride 4"                          # after digits 4, 8
    assert strides.classify_chain(d, [7]) == "stride 8"                             # one step: the total
    assert strides.classify_chain(d, [3, 8]) == "truncated 1"                       # T cut after two steps
    assert strides.classify_chain(d, [8, 9]) == "truncated 2"                       # S cut after two steps
    assert strides.classify_chain(d, [8, 6, 7]) == "irregular"                      # after digits 2, 5, 8
    assert strides.classify_chain(d, [5, 5]) == "wrong"
    assert strides.classify_chain(d, [8, 9, 6]) == "wrong"                          # S's steps, then a wrong last one
    P = DIGITS.problem
    assert strides.classify_chain(P([3, 5, 9, 2, 7]), [8, 9, 6]) == "stride 2"      # S for odd k ends at the last digit
    assert strides.classify_chain(P([3, 0, 0, 5]), [3]) == "truncated 1"            # a cut T chain, not one step of 4...
    assert strides.classify_chain(P([3, 0, 0, 5]), [8]) == "stride 4"               # ...which is the total alone
    assert strides.classify_chain(P([3, 0, 0]), [3]) == "truncated 1"               # the total by coincidence: known first
    assert [strides.stride_group(x) for x in ("stride 1", "stride 2", "stride 5", "truncated 2", "wrong")] == \
        ["stride 1 (T)", "stride 2 (S)", "stride >= 3 (new)", "truncated", "wrong"]


def test_annotated_outputs_are_the_longest_format_within_budget():
    d = DIGITS.problem([3, 5, 9, 2, 7])
    assert B.annotated_output(d, 5)[0] == "T" and B.annotated_output(d, 8)[0] == "T"
    assert B.annotated_output(d, 3)[0] == "S" and B.annotated_output(d, 4)[0] == "S"
    assert B.annotated_output(d, 2) == ["A", "6", "</s>"]


def test_budgets_draws_and_strides_serve_another_task():
    """add: a budget model grows add's vocabulary, draws carry a budget among add's, the warm start's target is the
    longest format within budget, strides read add's states, and tokens count its answer's words."""
    add = tasks.get("add")
    p = add.problem([4, 7, 3, 2, 1, 5])                         # columns 8c0 8c0 6c0, answer 0 6 8 8
    bm = B.budget_model(build_model(0, task=add), add)
    assert bm.cfg.vocab_size == len(add.budget_vocab)
    d = B.draw_problem(add)(random.Random(0), 3)
    assert isinstance(d, B.BudgetProblem) and d.task == "add" and d.k == 3 and d.budget in add.budgets
    assert B.prompt_of("max", d, 2)[-1] == add.max_budget0 + 2 and B.prompt_of("exact", d, 2)[-1] == add.budget0 + 2
    assert B.annotated_output(p, 3)[0] == "T" and B.annotated_output(p, 2)[0] == "S"
    assert B.annotated_output(p, 1) == ["A", "0", "6", "8", "8", "</s>"]
    assert strides.classify_chain(p, [8, 8, 6]) == "stride 1" and strides.classify_chain(p, [8, 6]) == "stride 2"
    assert strides.classify_chain(p, [8]) == "truncated 1" and strides.classify_chain(p, [7]) == "wrong"
    for words, want in (("T 8c0 8c0 6c0 A 0 6 8 8 </s>", 3 + 3 + 4), ("A 0 6 8 8 </s>", 2 + 4), ("T 8c0 8c0", 3)):
        assert B.tokens_used(add.parse([add.id[w] for w in words.split()])) == want
    r = B.reward_fn("exact", 0.25, 0.5)(B.with_budget(p, 3), add.parse([add.id[w] for w in add.solution(p, "full")]))
    assert r == 1.0


def test_findings_verdicts_follow_the_interval():
    assert findings.greater((0.1, 0.3), 0.0) == "holds"
    assert findings.greater((-0.3, -0.1), 0.0) == "does not hold"
    assert findings.greater((-0.1, 0.3), 0.0) == "inconclusive"
    m, (lo, hi) = findings.seed_interval([1.0, 2.0, 3.0])
    assert m == 2.0 and hi - m == pytest.approx(4.303 * 1.0 / np.sqrt(3), rel=1e-4)
    assert findings.seed_interval([1.0])[1][0] == -np.inf


def test_cli_budget_without_a_budget_model_is_one_line_exit_2(capsys):
    assert main(["sample", "3 5 9 2 7", "--budget", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "budget model" in err[0]
    assert main(["sample", "3 5 9 2 7", "--budget", "9"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_cli_sample_with_a_plain_checkpoint_and_budget_is_rejected(tmp_path, capsys):
    save_model(str(tmp_path / "plain"), build_model(0), {})
    assert main(["sample", "3 5 9 2 7", "--budget", "1", "--checkpoint", str(tmp_path / "plain")]) == 2
    assert "no budget tokens" in capsys.readouterr().err
    save_model(str(tmp_path / "bm"), B.budget_model(build_model(0)), {})
    assert main(["sample", "3 5 9 2 7", "--budget", "1", "--checkpoint", str(tmp_path / "bm")]) == 0
    assert "problem 3 5 9 2 7" in capsys.readouterr().out


@pytest.mark.slow
def test_training_brings_steps_to_the_budget(quick_cache):
    """Warm start + L1-Exact GRPO (the pipeline that learns to read the budget; RL alone from the base model stays
    budget-blind, see the README): greedy mean |steps - b| over budgets and k falls from the base model's (it answers
    directly: |0 - b|, about 4) by more than 1.5 steps, and steps written grow with the budget."""
    base = base_model(0, quick=True, cache=quick_cache, log=None)
    before = B.quick_adherence(B.budget_model(base), seed=0)
    tr = B.train_variant(base, "exact+sft", 0, steps=10, sft_steps=200, log_every=10)
    after = B.quick_adherence(tr["model"], seed=0)
    err = lambda a: np.mean([c["abs_err"] for c in a.values()])
    assert err(after) < err(before) - 1.5
    probs = problems_per_k(8, seed=3)
    ev = B.eval_budget_model(tr["model"], probs)
    steps = [np.mean([c["steps"] for c in ev[b].values()]) for b in BUDGETS]
    assert steps[8] > steps[0] + 2
