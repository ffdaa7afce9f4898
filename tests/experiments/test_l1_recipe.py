"""L1's own recipe: the Max tokens, reachable budgets, the mixed reward, the pre-check's arithmetic, the lesson's
claims on hand-made results (hold, fail, untestable by a premise), its room and placebo (0 Exact steps: the Exact
model is a second SFT start, trained on draws of its own), and each seed's own test problems."""
import itertools
import random
from dataclasses import asdict, replace

import numpy as np
import pytest
import torch

from reasonlab import tasks
from reasonlab.core.model import GPT
from reasonlab.core.problems import part_of
from reasonlab.core.task import (
    BUDGET_VOCAB,
    BUDGETS,
    K_MAX,
    K_MIN,
    L1_VOCAB,
    MAX_BUDGET0,
    budget_prompt_ids,
    max_budget_prompt_ids,
)
from reasonlab.experiments import l1_recipe as E
from reasonlab.methods import budget as B
from reasonlab.stats import findings


def test_max_prompts_differ_from_exact_prompts_only_in_the_budget_token():
    d = [3, 5, 9, 1]
    assert max_budget_prompt_ids(d, 2)[:-1] == budget_prompt_ids(d, 2)[:-1]
    assert max_budget_prompt_ids(d, 2)[-1] == MAX_BUDGET0 + 2 == len(BUDGET_VOCAB) + 2
    assert len(L1_VOCAB) == MAX_BUDGET0 + 9
    with pytest.raises(ValueError):
        max_budget_prompt_ids(d, 9)


def test_l1_model_reads_exact_prompts_as_before_and_max_prompts_apart():
    torch.manual_seed(0)
    bm = B.budget_model(GPT(d_model=32, n_layers=1, n_heads=2))
    m = B.l1_model(bm)
    d = [3, 5, 9, 1]
    ids = torch.tensor([budget_prompt_ids(d, 3)])
    with torch.no_grad():
        a, b = bm(ids)[0], m(ids)[0]
    assert torch.allclose(a, b[..., :len(BUDGET_VOCAB)], atol=1e-6)     # B<b> prompts: the budget model's logits
    tok = m.tok.weight.detach()
    shift = tok[MAX_BUDGET0:] - tok[MAX_BUDGET0 - len(BUDGETS):MAX_BUDGET0]
    assert torch.allclose(shift, shift[:1].expand_as(shift)) and abs(shift[0].norm().item() - 4.0) < 1e-4
    with pytest.raises(ValueError, match="budget model"):
        B.l1_model(GPT(d_model=32, n_layers=1, n_heads=2))


def test_reachable_draws_and_the_mixed_reward():
    rng = random.Random(0)
    draw = B.draw_reachable(("exact", "max"))
    ps = [draw(rng, k) for k in range(K_MIN, K_MAX + 1) for _ in range(50)]
    assert all(0 <= p.budget <= p.k for p in ps) and {p.kind for p in ps} == {"exact", "max"}
    assert {p.budget for p in ps if p.k == 8} == set(range(9))
    r = B.reward_fn("mixed", 0.25, 0.5)
    p = B.with_budget(tasks.get("digits").problem([3, 5, 9]), 1, "exact")
    right_s = {"answer": 7, "chain": [8, 7]}                    # 2 steps, one over
    assert r(p, right_s) == B.l1_exact(1.0, 1, 2, 0.25) == 0.75
    p = B.with_budget(p, 1, "max")
    assert r(p, right_s) == B.l1_max(1.0, 1, 2, 0.25, 0.5) == 0.25


def test_best_policies_replays_enumeration():
    """The best blind and aware rewards against brute force over every policy (an option per k; per (k, b))."""
    opts = [[(1.0, 0.0), (1.0, 2.0)], [(0.3, 0.0), (1.0, 2.0), (1.0, 3.0)]] + [[(0.1, 0.0), (1.0, 4.0)]] * 5
    for kind in ("exact", "max"):
        R = (lambda a, b, n: B.l1_exact(a, b, n, 0.25)) if kind == "exact" else \
            (lambda a, b, n: B.l1_max(a, b, n, 0.25, 0.5))
        blind, aware = [], []
        for i, o in enumerate(opts):
            bs = list(range(K_MIN + i + 1))
            blind.append(max(np.mean([R(a, b, n) for b in bs]) for a, n in o))
            aware.append(max(np.mean([R(o[c][0], b, o[c][1]) for c, b in zip(choice, bs)])
                             for choice in itertools.product(range(len(o)), repeat=len(bs))))
        got = B.best_policies(opts, kind, 0.25, 0.5)
        assert got["blind"] == pytest.approx(np.mean(blind)) and got["aware"] == pytest.approx(np.mean(aware))
        assert got["aware"] >= got["blind"]


def result(exact_gain=0.05, max_gap=0.1, spread_max=3.0, apart=0.5, exact_gap=0.12, blind=0.42, s=0) -> dict:
    """One seed's result, built so that each claim's statistic is the given value (plus a little per seed)."""
    j = 0.002 * s
    cell = lambda acc, steps, er, mr: {"acc": acc, "steps": steps, "exact_r": er, "max_r": mr}  # noqa: E731
    ks = list(range(K_MIN, K_MAX + 1))

    def curve(steps0, steps_top, er, mr):
        return [[cell(0.9, steps_top if b == k else steps0 + (b > 0) * 1.0, er, mr) for k in ks] for b in BUDGETS]
    return {"start": curve(0.0, 4.0, 0.4, 0.4), "exact": curve(0.0, 4.0, 0.4 + exact_gain + j, 0.4),
            "max_exact": curve(0.0, spread_max + apart + 3 * j, 0.6, 0.4),
            "max_max": curve(0.0, spread_max + j, 0.6, 0.45 + j), "fixed": [[(0.9, 0.0)] * 3] * 7,
            "precheck": {"exact_from_base": {"blind": blind, "aware": blind + exact_gap + j},
                         "max_from_base_0to8": {"blind": 0.65, "aware": 0.67},
                         "max_from_exact": {"blind": 0.4, "aware": 0.4 + max_gap + j}},
            "alpha": 0.25, "delta": 0.5, "seconds": 12.0, "config": asdict(E.Config())}


def verdicts(**kw):
    return [f["verdict"] for f in E.checked([result(s=s, **kw) for s in range(5)])]


H, F, U = findings.HOLDS, findings.FAILS, findings.UNTESTABLE


def test_claims_hold_fail_and_are_untestable_where_their_premise_fails():
    """Premises first (reading pays before Exact, before Max), the primary (GRPO over the better of the best
    budget-blind policy and its SFT start), GRPO over its SFT start, the Max stage's three claims. A premise that
    does not hold makes the claims that rest on it untestable, and only them: the Max claims on the Max premise
    (their ungated verdicts kept: L1-Max at the best budget-blind policy does not hold), the Exact stage's two on the
    Exact premise."""
    fs = E.checked([result(s=s) for s in range(5)])
    assert [findings.kind_of(f) for f in fs] == [findings.PREMISE] * 2 + [findings.PRIMARY] + [findings.SECONDARY] * 4
    assert [f["verdict"] for f in fs] == [H] * 7 and fs[2]["control"].startswith("the better of the best budget-blind")
    assert fs[2]["value"] == pytest.approx(0.4 + 0.05 + 0.004 - 0.42) and fs[3]["control"] == "the SFT start"
    assert verdicts(exact_gain=-0.1, spread_max=0.0, apart=-0.5) == [H, H, F, F, F, H, F]
    assert verdicts(exact_gain=0.01, blind=0.45)[2:4] == [F, H]      # past its start, below the blind policy
    # the start (0.4) above the blind policy: past the blind policy, below the start, does not hold
    fs = E.checked([result(exact_gain=-0.02, blind=0.3, s=s) for s in range(5)])
    assert fs[2]["value"] == pytest.approx(0.4 - 0.02 + 0.004 - 0.4) and [f["verdict"] for f in fs[2:4]] == [F, F]
    assert verdicts(exact_gain=0.02, blind=0.3)[2] == H               # past both
    fs = E.checked([result(max_gap=0.01, s=s) for s in range(5)])        # nothing for L1-Max to learn
    assert [f["verdict"] for f in fs] == [H, F, H, H, U, U, U]
    assert all("premise 'Before the L1-Max stage" in f["untestable"] for f in fs[4:])
    fs = E.checked([{**result(max_gap=0.01, s=s), "max_max": result(s=s)["start"]} for s in range(5)])
    assert fs[5]["verdict"] == U and fs[5]["ungated"] == F          # no more than the blind policy: does not hold
    assert verdicts(exact_gap=0.01) == [F, H, U, U, H, H, H]


def test_room_and_placebo_are_fixed_by_the_design():
    """The room is ±(1 + alpha MAX_STEPS), from the config alone; the placebo is the config with 0 Exact steps and
    nothing else changed; the room leaves the primary's threshold (> 0) space to pass and to fail."""
    for cfg in (E.Config(), E.Config(alpha=0.1, exact_steps=3)):
        pl = E.placebo(cfg)
        assert pl.exact_steps == 0 and replace(pl, exact_steps=cfg.exact_steps) == cfg
        pl.validate()
        assert E.room(cfg) == pytest.approx((-(1 + 13 * cfg.alpha), 1 + 13 * cfg.alpha))
        assert findings.out_of_room(E.room(cfg), 0.0, ">") is None
    with pytest.raises(ValueError):
        E.Config(exact_steps=-1).validate()


def test_the_placebo_trains_no_exact_step_so_the_exact_model_is_its_start(quick_cache):
    """budget.train_recipe with exact_steps = 0: the Exact model is the SFT start, weight for weight (the
    primary's control arm); the Max stage still trains from it."""
    from reasonlab.train.zoo import base_model
    base = base_model(0, quick=True, cache=quick_cache, log=None)
    tr = B.train_recipe(base, 0, exact_steps=0, max_steps=1, sft_steps=2, prompts_per_step=2, num_generations=2)
    for a, b in zip(tr["start"].parameters(), tr["exact"].parameters()):
        assert torch.equal(a, b)
    assert tr["max"].cfg.vocab_size == len(L1_VOCAB)


def test_each_seed_scores_its_own_test_problems(monkeypatch):
    """run() scores every model on the seed's own draw from the test part (test_problems), never a draw that all
    seeds share."""
    seen = []
    monkeypatch.setattr(E.budget, "train_recipe", lambda base, seed, **kw: {"start": None, "exact": None,
                                                                           "max": None, "seconds": 0.0})
    ks = range(K_MIN, K_MAX + 1)
    monkeypatch.setattr(E.budget, "eval_fixed", lambda base, probs: seen.append(probs) or
                        {f: {k: {"acc": 1.0, "steps": 1.0} for k in ks} for f in "AST"})
    monkeypatch.setattr(E.budget, "eval_recipe", lambda m, probs, kind, a, d: seen.append(probs) or
                        [[{"acc": 1.0, "steps": 1.0, "exact_r": 1.0, "max_r": 1.0} for _ in ks] for _ in BUDGETS])
    env = type("Env", (), {"base": lambda self, s, task="digits": None})()
    res = E.run(E.Config(), 0, env)
    E.run(E.Config(), 1, env)
    stored = {k: v for k, v in asdict(E.Config()).items() if k != "task"}   # a digits result keeps its keys
    assert res["config"] == stored and all(p == seen[0] for p in seen[:5]) and seen[5] != seen[0]
    assert all(part_of(d) == "test" for d in seen[0] + seen[5]) and len(seen) == 10
    E.check(res)
    E.checked([res])                                     # the room from the stored config, task and all


def test_the_placebos_exact_arm_is_the_start_trained_again_on_draws_of_its_own(monkeypatch):
    """Under the placebo (0 Exact steps) run() trains a second SFT start from the replicate's seed, and scores it as
    the Exact arm; the start, the Max stage and the settings stay the seed's."""
    calls, scored = [], []

    def train_recipe(base, seed, **kw):
        calls.append((seed, kw))
        return {"start": f"start-{seed}", "exact": f"exact-{seed}", "max": f"max-{seed}", "seconds": 0.0}
    monkeypatch.setattr(E.budget, "train_recipe", train_recipe)
    ks = range(K_MIN, K_MAX + 1)
    monkeypatch.setattr(E.budget, "eval_fixed", lambda base, probs: {f: {k: {"acc": 1.0, "steps": 1.0} for k in ks}
                                                                      for f in "AST"})
    monkeypatch.setattr(E.budget, "eval_recipe", lambda m, probs, kind, a, d: scored.append(m) or
                        [[{"acc": 1.0, "steps": 1.0, "exact_r": 1.0, "max_r": 1.0} for _ in ks] for _ in BUDGETS])
    env = type("Env", (), {"base": lambda self, s, task="digits": None})()
    E.run(E.placebo(E.Config()), 2, env)
    (s1, kw1), (s2, kw2) = calls
    assert s1 == 2 and s2 == E.replicate_seed(2) != 2 and kw1["exact_steps"] == kw2["exact_steps"] == 0
    assert {k: v for k, v in kw1.items() if k != "max_steps"} == {k: v for k, v in kw2.items() if k != "max_steps"}
    assert scored[:2] == ["start-2", f"start-{s2}"] and scored[2:] == ["max-2", "max-2"]


def test_reachable_cells_are_weighted_as_training_draws_them():
    """The mean over k of the mean over b = 0..k (best_policies' weighting), not a pool of all b <= k cells: with a
    reward that grows with b, the two differ."""
    r = result()
    for b in BUDGETS:
        for i, k in enumerate(range(K_MIN, K_MAX + 1)):
            r["exact"][b][i]["exact_r"] = b / 8
    want = np.mean([np.mean([b / 8 for b in range(k + 1)]) for k in range(K_MIN, K_MAX + 1)])
    pooled = np.mean([b / 8 for k in range(K_MIN, K_MAX + 1) for b in range(k + 1)])
    assert E.reachable(r, "exact", "exact_r") == pytest.approx(want) and abs(want - pooled) > 0.01


def test_check_needs_every_curve_the_prechecks_and_the_config():
    E.check(result())
    for key in ("precheck", "config"):
        with pytest.raises(ValueError, match="pre-checks"):
            E.check({k: v for k, v in result().items() if k != key})


def test_another_task_reaches_the_training_the_draws_and_the_stored_config(monkeypatch):
    """On modprod: the base model, the recipe's training and the test draw are the task's; the stored config names
    the task, and the result reads its k and budgets back from it."""
    seen, asked = [], []
    ks = range(K_MIN, K_MAX + 1)
    monkeypatch.setattr(E.budget, "train_recipe", lambda base, seed, **kw: asked.append(kw["task"].spec) or
                        {"start": None, "exact": None, "max": None, "seconds": 0.0})
    monkeypatch.setattr(E.budget, "eval_fixed", lambda base, probs: seen.append(probs) or
                        {f: {k: {"acc": 1.0, "steps": 1.0} for k in ks} for f in "AST"})
    monkeypatch.setattr(E.budget, "eval_recipe", lambda m, probs, kind, a, d: seen.append(probs) or
                        [[{"acc": 1.0, "steps": 1.0, "exact_r": 1.0, "max_r": 1.0} for _ in ks] for _ in BUDGETS])
    env = type("Env", (), {"base": lambda self, s, task="digits": asked.append(task)})()
    res = E.run(E.Config(task="modprod"), 0, env)
    assert asked == ["modprod", "modprod"] and res["config"]["task"] == "modprod"
    assert {p.task for p in seen[0]} == {"modprod"} and E.task_of(res).name == "modprod"
    E.check(res)
    assert E.reachable(res, "exact", "exact_r") == 1.0 and E.checked([res])[2]["room"] == [-4.25, 4.25]
