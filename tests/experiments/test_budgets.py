"""The budgets experiment: its premise and primary on hand-made results (hold, fail, untestable), the control arm
(the uncapped chain: no hook at all) against the forced one, the placebo, its table and plot, its Config's bounds."""
import os
from dataclasses import replace

import pytest

from reasonlab import experiments as X
from reasonlab.core import problems
from reasonlab.core.config import N_TEST_MAX
from reasonlab.core.pool import sample_pool
from reasonlab.experiments import budgets
from reasonlab.stats import findings
from reasonlab.tasks import chain_steps
from reasonlab.train.sft import build_model


def one_seed(acc: float, forced: float = 0.3, extend: int = 1, step: float = 0.1, uncapped: float = 0.8) -> dict:
    """One seed: the base model's T capped at b steps right on acc + step x b (at most 1); the erring thinker's
    uncapped chain right on `uncapped`, its chain forced w steps past its end right on `forced`."""
    rows = [("T", "max", b, min(1.0, acc + step * b)) for b in range(0, 9)] + [("S", "max", 0, acc)]
    past = lambda w, a: {"wait": w, "acc": a, "tokens": 9.0 + w, "thinking_tokens": 5.0 + w,  # noqa: E731
                         "acc_by_k": {k: a for k in range(2, 9)}}
    return {"budgets": [{"format": f, "kind": kind, "budget": b, "acc": a, "tokens": 3.0 + b, "thinking_tokens": float(b)}
                        for f, kind, b, a in rows],
            "uncapped": past(0, uncapped), "forced": [past(w, forced) for w in sorted({extend, 2})], "extend": extend,
            "wait_on": "erring", "chain": "S"}


def verdicts(rs):
    return [f["verdict"] for f in findings.gate(budgets.claims(rs))]


def test_the_premises_and_the_primary_hold_fail_and_are_untestable():
    H, F = findings.HOLDS, findings.FAILS
    assert verdicts([one_seed(0.1, forced=0.3 + 0.01 * s) for s in range(5)]) == [H] * 3
    fs = budgets.claims([one_seed(0.1, forced=0.3 + 0.01 * s) for s in range(5)])
    assert [findings.kind_of(f) for f in fs] == [findings.PREMISE, findings.PREMISE, findings.PRIMARY]
    assert abs(fs[2]["value"] - 0.48) < 1e-9 and fs[2]["control"].startswith("the erring thinker's uncapped chain (S")
    assert fs[2]["statistic"] == "acc(S, uncapped) - acc(S, at least its length + 1 steps)"
    # forcing past the end changes nothing: the primary does not hold
    assert verdicts([one_seed(0.1, forced=0.8) for _ in range(5)]) == [H, H, F]
    # caps that cost accuracy: that premise fails, and the primary, which does not rest on it, is still judged
    assert verdicts([one_seed(0.9 - 0.01 * s, forced=0.3, step=-0.01) for s in range(5)]) == [F, H, H]
    # an uncapped chain at the ceiling (the base model's case): no headroom, the primary is untestable
    fs = findings.gate(budgets.claims([one_seed(0.1, forced=0.9 - 0.01 * s, uncapped=1.0) for s in range(5)]))
    assert fs[1]["verdict"] == F and fs[2]["verdict"] == findings.UNTESTABLE and fs[2]["ungated"] == H
    assert "headroom" in fs[2]["untestable"]


def test_the_control_is_the_uncapped_chain_and_the_treatment_only_suppresses_its_end(noisy_model):
    """extend = 0 decodes forced T with no hook (the plain greedy chain); extend = 1 writes at least k + 1 sums."""
    probs = problems.test_problems(3, "budgets", 0)
    plain = sample_pool(noisy_model, probs, 1, force=["T"], temperature=0.0)
    uncapped = budgets.past_the_end(noisy_model, probs, 0)
    assert uncapped["acc"] == pytest.approx(plain.correct[:, 0].mean())
    assert uncapped["tokens"] == pytest.approx(plain.length[:, 0].mean())
    forced = budgets.past_the_end(noisy_model, probs, 1)
    pool = [sample_pool(noisy_model, [d], 1, force=["T"], temperature=0.0,
                        logit_hook=budgets.tts.budget_hook("digits", min_chain=d.k + 1)) for d in probs]
    assert all(p.chain[0, 0] >= d.k + 1 or p.answer[0, 0] < 0 for p, d in zip(pool, probs))
    assert forced["acc"] == pytest.approx(sum(p.correct[0, 0] for p in pool) / len(probs))
    short = budgets.past_the_end(noisy_model, probs, 1, "S")            # S: its own natural length, + 1
    pool = [sample_pool(noisy_model, [d], 1, force=["S"], temperature=0.0, logit_hook=budgets.tts.budget_hook(
        "digits", min_chain=len(chain_steps(d.k, "short")) + 1)) for d in probs]
    assert short["acc"] == pytest.approx(sum(p.correct[0, 0] for p in pool) / len(probs))


def test_the_placebo_forces_nothing_on_a_second_erring_thinker(noisy_model, monkeypatch):
    """The placebo's treatment arm is the control run again: the uncapped chain of an erring thinker made on a
    stream of its own (replicate_seed), so its statistic has a spread; the primary forces the seed's erring thinker,
    and the store's key says when a second one is made."""
    model = build_model(4).eval()
    cfg = budgets.placebo(budgets.Config(n_test=20))
    assert cfg.extend == 0 and cfg != budgets.Config(n_test=20)
    asked = []
    monkeypatch.setattr(budgets, "thinker_model", lambda kind, seed, cache, device, task, stream=None:
                        asked.append((kind, stream)) or (noisy_model if stream is None else model))
    env = type("Env", (), {"base": lambda self, s, task="digits": noisy_model, "cache": None, "device": "cpu"})()
    r = budgets.run(cfg, 0, env)
    assert asked == [("erring", None), ("erring", X.replicate_seed(0, "erring"))] and r["wait_on"] == "erring"
    assert r["forced"][0]["wait"] == 0 and r["forced"][0] == budgets.past_the_end(model, budgets.test_problems(
        20, "budgets", 0), 0, "S")
    assert r["uncapped"] == budgets.past_the_end(noisy_model, budgets.test_problems(20, "budgets", 0), 0, "S")
    asked.clear()
    real = budgets.run(budgets.Config(n_test=20, shown=()), 0, env)
    assert asked == [("erring", None)] and real["forced"][0]["wait"] == 1
    depends = X.get("budgets").depends
    assert "replicate" in depends(cfg) and "replicate" not in depends(budgets.Config())


def test_render_writes_the_table_and_the_plot(tmp_path):
    [(md, head)] = budgets.render([one_seed(0.1), one_seed(0.3)], str(tmp_path))
    assert md.startswith("## Thinking longer: budget forcing and s1's \"Wait\"\n")
    assert ("| format | chain budget | chain steps written | accuracy |\n|---|---|---|---|\n"
            "| T | at most 0 | 0.00 | 0.200 ± 0.141 |") in md
    assert "| S, the erring thinker | uncapped | 5.00 | 0.800 ± 0.000 |" in md
    assert "| S, the erring thinker | at least its length + 1 | 6.00 | 0.300 ± 0.000 |" in md
    assert head == "T capped at 0 steps 0.20 → 8 steps 0.95; the erring thinker's S 0.80, forced 1 past its end 0.30"
    assert os.path.getsize(tmp_path / "budgets" / "budgets.png") > 1000


def test_config_refuses_more_problems_than_k5_has_and_negative_forcing():
    X.get("budgets").validate(budgets.Config(n_test=N_TEST_MAX))
    with pytest.raises(ValueError, match="n_test must be at most 25,000"):
        X.get("budgets").validate(budgets.Config(n_test=N_TEST_MAX + 1))
    assert len(problems.test_problems(N_TEST_MAX, "budgets", 0, ks=[5])) == N_TEST_MAX   # k = 5's test part holds them
    for bad, said in ((dict(extend=-1), "extend must be >= 0, got -1"), (dict(shown=(2, 0)), "shown must be positive")):
        with pytest.raises(ValueError, match=said):
            X.get("budgets").validate(replace(budgets.Config(), **bad))


def test_runs_and_renders_on_another_task(tmp_path):
    """On modprod: the caps and forcings run on the task's problems and budgets, the result names its task (a digits
    result does not), and the plot's chance is the task's."""
    from reasonlab import tasks
    task = tasks.get("modprod")
    env = type("Env", (), {"base": lambda self, s, task="digits": build_model(s, task=task)})()
    r = budgets.run(budgets.Config(task="modprod", n_test=1, shown=(), wait_on="base"), 0, env)
    X.get("budgets").check_result(r)
    assert r["task"] == "modprod" and [b["budget"] for b in r["budgets"] if b["format"] == "T"] == list(task.budgets)
    assert set(r["uncapped"]["acc_by_k"]) == set(task.ks()) and "task" not in one_seed(0.1)
    [(md, _)] = budgets.render([r, r], str(tmp_path))
    assert "| S, the base model | at least its length + 1 |" in md
    assert os.path.getsize(tmp_path / "budgets" / "budgets.png") > 1000
