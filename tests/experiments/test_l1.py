"""The l1 experiment: its config and command-line refusals, the claims on hand-made results (hold, fail, untestable
by the premise), the primary's control (it differs from the treatment only in the reward's budget term), room and
placebo, the readers' variant order, and a tiny run that saves its budget models in the model cache, where
scripts/eval_budget_models.py reads them."""
import importlib.util
import json
import os
import shutil
from dataclasses import asdict, replace

import numpy as np
import pytest

from reasonlab import experiments as X
from reasonlab.cli import main
from reasonlab.core.problems import part_of
from reasonlab.core.task import BUDGETS
from reasonlab.experiments import Env, l1
from reasonlab.stats import findings
from reasonlab.train.sft import base_name

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "eval_budget_models.py")


def cell(acc, steps, b):
    return {"acc": acc, "tokens": steps + (3 if steps == 0 else 4), "steps": steps,
            "within": float(b is None or steps <= b), "abs_err": 0.0 if b is None else abs(steps - b),
            "acc_within": acc * float(b is None or steps <= b), "strides": {}, "stride_labels": {}}


def budget_model(reads: bool, seed: int) -> dict:
    """A budget model's cells: it reads its budget (an S chain when b allows one, else a direct answer) or ignores
    it (always an S chain)."""
    jitter = 0.002 * seed
    return {b: {k: (cell(1.0 - jitter, (k + 1) // 2, b) if (b >= (k + 1) // 2 or not reads)
                    else cell(1.0 if k == 2 else 0.1 + jitter, 0, b)) for k in range(2, 9)} for b in BUDGETS}


def l1_result(reads: bool, seed: int, control_reads: bool = False, alpha: float = 0.25) -> dict:
    """One seed of the l1 experiment, by hand: the base model's fixed formats (A right at k = 2 only, S and T right
    everywhere), s1 forcing (a T or S chain cut at b: right only once the chain is whole), the treatment (L1-exact)
    and its control (the same RL with alpha = 0), each reading its budget or not."""
    ks = range(2, 9)
    fixed = {"A": {k: cell(1.0 if k == 2 else 0.1, 0, None) for k in ks},
             "S": {k: cell(1.0, (k + 1) // 2, None) for k in ks}, "T": {k: cell(1.0, k, None) for k in ks}}
    forcing = {f: {b: {k: cell(1.0 if b >= n else 0.1, min(b, n), b) for k in ks for n in [k if f == "T" else (k + 1) // 2]}
                   for b in BUDGETS} for f in "TS"}
    cfg = {**asdict(l1.Config(variants=("exact",), alpha=alpha)), "log_every": 20}
    return {"config": cfg, "fixed": fixed, "forcing": forcing["T"], "forcing_S": forcing["S"],
            "base_free": {b: fixed["A"] for b in BUDGETS}, "variants": {"exact": {"eval": budget_model(reads, seed)}},
            "control": {"variant": "exact", "alpha": 0.0, "eval": budget_model(control_reads, seed)}}


def by_claim(fs, start):
    return next(f for f in fs if f["claim"].startswith(start))


def test_the_primary_holds_fails_and_is_untestable_where_reading_does_not_pay():
    """Treatment reads, control does not: the primary holds; both read (the budget token and RL alone teach it): it
    does not hold, though the treatment alone reads its budget; with alpha = 0 reading pays nothing under the
    treatment's reward, the premise fails and the primary is untestable, its ungated verdict kept."""
    fs = l1.checked([l1_result(True, s) for s in range(5)])
    assert [findings.kind_of(f) for f in fs[:2]] == [findings.PREMISE, findings.PRIMARY]
    assert fs[0]["name"] == l1.PAYS["exact"] and fs[0]["verdict"] == findings.HOLDS
    prim = fs[1]
    assert prim["verdict"] == findings.HOLDS and prim["control"] == "L1-exact, α = 0" and prim["room"] == [-26, 26]
    assert prim["requires"] == [l1.PAYS["exact"]] and prim["spread_control"] == [0.0] * 5
    both = l1.checked([l1_result(True, s, control_reads=True) for s in range(5)])
    assert both[1]["verdict"] == findings.FAILS and by_claim(both, "L1-exact reads").get("verdict") == findings.HOLDS
    flat = l1.checked([l1_result(True, s, alpha=0.0) for s in range(5)])
    assert flat[0]["verdict"] == findings.FAILS                                # a premise is never gated
    assert flat[1]["verdict"] == findings.UNTESTABLE and flat[1]["ungated"] == findings.HOLDS
    assert "premise 'reading the budget pays under L1-Exact" in flat[1]["untestable"]
    assert all(f["verdict"] == findings.UNTESTABLE for f in flat[1:])          # every claim rests on it


def test_l1_claims_need_the_budget_blind_control_and_s_forcing():
    """A budget model that ignores b and always writes S chains beats s1's truncated T chain at equal tokens, but
    not the budget-blind control, the fixed formats (it *is* always-S): the equal-token claim does not hold for it,
    and neither does "reads its budget". A model that does not vary its compute does not scale (slope 0, not
    untestable: the verdict is read off the data, the room off the design)."""
    fs = l1.checked([l1_result(False, s) for s in range(5)])
    assert by_claim(fs, "L1-exact reads")["verdict"] == findings.FAILS
    eq = by_claim(fs, "at equal tokens")
    assert all(g > 0 for g in eq["s1 forcing (T cut at b)"])            # it beats the T forcing ...
    assert all(g <= 0 for g in eq["fixed formats"]) and eq["verdict"] == findings.FAILS   # ... but not the control
    scal = by_claim(fs, "L1-exact scales")
    assert scal["per_seed"] == [0.0] * 5 and scal["verdict"] == findings.FAILS
    assert by_claim(l1.checked([l1_result(True, s) for s in range(5)]), "L1-exact reads")["verdict"] == findings.HOLDS


def test_reading_pays_is_the_best_aware_minus_the_best_blind_policy_on_the_base_formats():
    """The premise's statistic against brute force: per k, the best budget-blind format's mean reward over b = 0..8
    and the best format at each budget, with A right only at k = 2 and S, T always right (the base model's formats).
    L1-Exact pays for reading the budget; L1-Max pays about 0.013 (under the 0.05 bound: its claims are untestable,
    as the issue found with the base model); alpha = 0 makes every length worth the same: nothing to gain."""
    r = l1_result(True, 0)

    def brute(reward):
        blind, aware = [], []
        for k in range(2, 9):
            opts = [(r["fixed"][f][k]["acc"], r["fixed"][f][k]["steps"]) for f in "AST"]
            blind.append(max(np.mean([reward(a, b, n) for b in BUDGETS]) for a, n in opts))
            aware.append(np.mean([max(reward(a, b, n) for a, n in opts) for b in BUDGETS]))
        return np.mean(aware) - np.mean(blind)
    exact = brute(lambda a, b, n: a - 0.25 * abs(b - n))
    assert l1.pays(r, "exact") == pytest.approx(exact) and exact > 0.15
    mx = brute(lambda a, b, n: a * min(1.0, max(0.0, 0.25 * (b - n) + 0.5)))
    assert l1.pays(r, "max") == pytest.approx(mx) and 0.01 < mx < 0.05
    r["config"]["alpha"] = 0.0
    assert l1.pays(r, "exact") == pytest.approx(0.0) and l1.pays(r, "max") == pytest.approx(0.0)


def test_room_and_placebo_are_fixed_by_the_design():
    """The room is ±2 max_steps (each arm's spread in ±max_steps: the task's, digits' 13) whatever else the config
    says; the placebo is the config with alpha = 0, the control's value, and nothing else changed; both leave the
    primary's threshold reachable either way."""
    assert l1.max_steps("digits") == 13 and l1.room(l1.Config(task="add")) == (-30.0, 30.0)
    for cfg in (l1.Config(), X.get("l1").config(quick=True)):
        pl = l1.placebo(cfg)
        assert pl.alpha == 0.0 and replace(pl, alpha=cfg.alpha) == cfg
        pl.validate()
        assert l1.room(cfg) == l1.room(pl) == (-26.0, 26.0)
        assert findings.out_of_room(l1.room(cfg), 1.0, ">") is None


def test_the_control_arm_differs_from_the_treatment_only_in_alpha(monkeypatch, tmp_path):
    """run() trains the first variant twice, with the same start, seed and settings, alpha (the reward's budget
    term) and the cache name apart; both score the same test problems, the seed's own draw from the test part."""
    calls, scored = [], []
    monkeypatch.setattr(l1.budget, "train_variant", lambda base, v, seed, **kw: calls.append((base, v, seed, kw))
                        or {"model": object(), "seconds": 1.0, "sft_seconds": 0.0, "sft_loss": None, "logs": [],
                            "reward": []})
    monkeypatch.setattr(l1.budget, "eval_budget_model", lambda m, probs, n=0: scored.append(probs) or {})
    monkeypatch.setattr(l1.budget, "eval_baselines", lambda base, probs: scored.append(probs) or {})
    monkeypatch.setattr(l1, "store", lambda name, meta, model, cache=None: calls.append(name))

    class Base:
        def eval(self):
            return self
    base = Base()
    env = type("E", (), {"base": lambda self, s, task="digits": base, "quick": True, "cache": str(tmp_path)})()
    res = l1.run(l1.Config(variants=("exact", "max")), 3, env)
    (b1, v1, s1, k1), n1, _, _, (b2, v2, s2, k2), n2 = calls
    assert (b1, v1, s1) == (b2, v2, s2) == (base, "exact", 3) and n1 != n2 == "l1-quick-exact-alpha0-seed3"
    assert {k: v for k, v in k1.items() if k != "alpha"} == {k: v for k, v in k2.items() if k != "alpha"}
    assert (k1["alpha"], k2["alpha"]) == (0.25, 0.0) and res["control"]["alpha"] == 0.0
    assert all(p == scored[0] for p in scored) and all(part_of(d) == "test" for d in scored[0])
    other = []
    monkeypatch.setattr(l1.budget, "eval_baselines", lambda base, probs: other.append(probs) or {})
    l1.run(l1.Config(variants=("exact",)), 4, env)
    assert other[0] != scored[0]                                  # each seed its own draw
    calls.clear()
    l1.run(l1.placebo(l1.Config(variants=("exact",))), 3, env)     # the first variant: the control on its own draws
    (_, v1, s1, k1), _, (_, v2, s2, k2), _ = calls
    assert (v1, v2, s2) == ("exact", "exact", 3) and s1 == l1.replicate_seed(3) != 3 and k1 == k2


def test_methods_keep_the_runs_variant_order_after_a_json_round_trip():
    """A re-plot reads results whose keys JSON sorted: the report's rows still follow the order the run asked for,
    the control arm after the variants."""
    r = {"config": {"variants": ["max", "exact+sft"]}, "forcing": {}, "forcing_S": {}, "fixed": {f: {} for f in "AST"},
         "variants": {"exact+sft": {"eval": {}}, "max": {"eval": {}}}, "control": {"variant": "max", "eval": {}}}
    assert list(l1.methods_of(r))[:4] == ["L1-max", "L1-exact+sft", "L1-max, α = 0", "s1 forcing (T cut at b)"]


def test_the_config_keeps_the_labs_settings_and_refuses_bad_values(capsys):
    """The lab's defaults (L1-Exact, a log record every steps // 5 GRPO steps) are what a result records; alpha = 0
    is a config (the control's, the placebo's); a bad value is one line and exit code 2 before any work."""
    cfg = l1.Config()
    stored = l1.stored_config(cfg)
    assert stored["log_every"] == 20 and stored["variants"] == ("exact",)
    assert l1.stored_config(l1.Config(steps=4))["log_every"] == 1
    assert l1.stored_config(l1.Config(log_every=3))["log_every"] == 3
    l1.Config(alpha=0.0).validate()
    for bad in (dict(variants=()), dict(num_generations=1), dict(alpha=-0.1), dict(sft_steps=-1), dict(log_every=0)):
        with pytest.raises(ValueError):
            l1.Config(**bad).validate()
    for argv in (["l1", "--variants", "nope"], ["l1", "--num-generations", "1"], ["l1", "--n-test", "0"],
                 ["l1", "--seeds", "0", "--report-only", "--out", "/nonexistent/dir"]):
        assert main(argv) == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_a_run_saves_its_models_where_the_evaluation_script_reads_them(tmp_path, quick_cache, capsys):
    """A tiny l1 run returns the stored result's keys and saves each arm's model in the model cache under
    model_name (the control as <variant>-alpha0); scripts/eval_budget_models.py evaluates the cache's budget models
    at every budget on fresh problems and writes its JSON (greedy: the same weights give the same cells); a cache
    without budget models is one line and exit code 2."""
    spec = importlib.util.spec_from_file_location("eval_budget_models", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    cache, out = tmp_path / "cache", str(tmp_path / "eval.json")
    cache.mkdir()
    assert script.main(["--cache-dir", str(cache), "--n-test", "2", "--out", out]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    for ext in (".json", ".safetensors"):                  # the session's quick base model, in a cache of our own
        shutil.copy(os.path.join(quick_cache, base_name(0, True) + ext), cache)
    cfg = l1.Config(variants=("max+sft",), steps=2, sft_steps=2, n_test=2, n_examples=1)
    res = l1.run(cfg, 0, Env(cache=str(cache), quick=True))
    X.get("l1").check_result(res)
    assert list(res["variants"]) == ["max+sft"] and sorted(res["variants"]["max+sft"]["eval"]) == list(BUDGETS)
    assert res["control"]["variant"] == "max+sft" and sorted(res["control"]["eval"]) == list(BUDGETS)
    assert l1.model_name("max+sft", 0, quick=True) == "l1-quick-max-sft-seed0"
    for ext in (".json", ".safetensors"):                  # the same weights as another seed's
        shutil.copy(cache / ("l1-quick-max-sft-seed0" + ext), cache / ("l1-quick-max-sft-seed1" + ext))
    assert script.main(["--cache-dir", str(cache), "--n-test", "2", "--out", out]) == 0
    got = json.load(open(out))
    assert got["n_test"] == 2 and set(got["variants"]) == {"quick-max-sft", "quick-max-sft-alpha0"}
    cells = got["variants"]["quick-max-sft"]["0"]
    assert sorted(map(int, cells)) == list(BUDGETS) and all(0 <= c["acc"] <= 1 for c in cells.values())
    assert all(0 <= c["within"] <= 1 for c in cells.values())
    assert (cells["0"]["within"] == 1) == (cells["0"]["steps"] == 0)
    assert cells == got["variants"]["quick-max-sft"]["1"]          # the same weights on the same fresh problems
    assert "reads its budget" in capsys.readouterr().out


def test_another_task_reaches_the_models_the_draws_and_the_stored_config(monkeypatch, tmp_path):
    """On modprod: the base model, the training and the test draw are the task's; the stored config names the task
    (a digits one does not, keeping the keys a digits result always had), and a result reads its task back."""
    calls, scored, bases = [], [], []
    monkeypatch.setattr(l1.budget, "train_variant", lambda base, v, seed, **kw: calls.append(kw["task"])
                        or {"model": object(), "seconds": 1.0, "sft_seconds": 0.0, "sft_loss": None, "logs": [],
                            "reward": []})
    monkeypatch.setattr(l1.budget, "eval_budget_model", lambda m, probs, n=0: scored.append(probs) or {})
    monkeypatch.setattr(l1.budget, "eval_baselines", lambda base, probs: scored.append(probs) or {})
    monkeypatch.setattr(l1, "store", lambda name, meta, model, cache=None: None)

    class Base:
        def eval(self):
            return self
    env = type("E", (), {"base": lambda self, s, task="digits": bases.append(task) or Base(), "quick": True,
                         "cache": str(tmp_path)})()
    res = l1.run(l1.Config(task="modprod"), 0, env)
    assert bases == ["modprod"] and calls == ["modprod"] * 2 and res["config"]["task"] == "modprod"
    assert {p.task for p in scored[0]} == {"modprod"} and all(p == scored[0] for p in scored)
    assert l1.task_of(res).name == "modprod" and l1.config_of(res).task == "modprod"
    assert "task" not in l1.stored_config(l1.Config()) and l1.config_of(l1_result(True, 0)).task == "digits"
