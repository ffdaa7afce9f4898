"""The l1 experiment: its config and command-line refusals, the claims' controls on hand-made results, the readers'
variant order, and a tiny run that saves its budget models in the model cache, where
scripts/eval_budget_models.py reads them."""
import importlib.util
import json
import os
import shutil

import pytest

from reasonlab import experiments as X
from reasonlab.cli import main
from reasonlab.core.task import BUDGETS
from reasonlab.experiments import Env, l1
from reasonlab.stats import findings
from reasonlab.train.sft import base_name

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "eval_budget_models.py")


def l1_result(reads: bool, seed: int):
    """One seed of the l1 experiment, by hand: the base model's fixed formats (A right at k = 2 only, S and T right
    everywhere), s1 forcing (a T or S chain cut at b: right only once the chain is whole), and one budget model that
    either reads its budget (an S chain when b allows one, else a direct answer) or ignores it (always an S chain)."""
    ks, jitter = range(2, 9), 0.002 * seed

    def cell(acc, steps, b):
        return {"acc": acc, "tokens": steps + (3 if steps == 0 else 4), "steps": steps,
                "within": float(b is None or steps <= b), "abs_err": 0.0 if b is None else abs(steps - b),
                "acc_within": acc * float(b is None or steps <= b), "strides": {}}
    fixed = {"A": {k: cell(1.0 if k == 2 else 0.1, 0, None) for k in ks},
             "S": {k: cell(1.0, (k + 1) // 2, None) for k in ks}, "T": {k: cell(1.0, k, None) for k in ks}}
    forcing = {f: {b: {k: cell(1.0 if b >= n else 0.1, min(b, n), b) for k in ks for n in [k if f == "T" else (k + 1) // 2]}
                   for b in BUDGETS} for f in "TS"}
    model = {b: {k: (cell(1.0 - jitter, (k + 1) // 2, b) if (b >= (k + 1) // 2 or not reads)
                     else cell(1.0 if k == 2 else 0.1 + jitter, 0, b)) for k in ks} for b in BUDGETS}
    return {"config": {"variants": ["max"]}, "fixed": fixed, "forcing": forcing["T"], "forcing_S": forcing["S"],
            "base_free": {b: fixed["A"] for b in BUDGETS}, "variants": {"max": {"eval": model}}}


def test_l1_claims_need_the_budget_blind_control_and_s_forcing():
    """A budget model that ignores b and always writes S chains beats s1's truncated T chain at equal tokens, but
    not the budget-blind control, the fixed formats (it *is* always-S): the equal-token claim does not hold for it,
    and its primary claim (reads its budget) does not hold. Forcing an S chain is a control of its own."""
    blind = l1.claims([l1_result(False, s) for s in range(5)])
    assert blind[0]["claim"].startswith("L1-max reads its budget") and blind[0]["verdict"] == findings.FAILS
    eq = next(f for f in blind if f["claim"].startswith("at equal tokens"))
    assert all(g > 0 for g in eq["s1 forcing (T cut at b)"])            # it beats the T forcing ...
    assert all(g <= 0 for g in eq["fixed formats"]) and eq["verdict"] == findings.FAILS   # ... but not the control
    reads = l1.claims([l1_result(True, s) for s in range(5)])
    assert reads[0]["verdict"] == findings.HOLDS


def test_methods_keep_the_runs_variant_order_after_a_json_round_trip():
    """A re-plot reads results whose keys JSON sorted: the report's rows still follow the order the run asked for."""
    r = {"config": {"variants": ["max", "exact+sft"]}, "forcing": {}, "forcing_S": {}, "fixed": {f: {} for f in "AST"},
         "variants": {"exact+sft": {"eval": {}}, "max": {"eval": {}}}}
    assert list(l1.methods_of(r))[:3] == ["L1-max", "L1-exact+sft", "s1 forcing (T cut at b)"]


def test_the_config_keeps_the_labs_settings_and_refuses_bad_values(capsys):
    """The lab's defaults (the test problems' seed, a log record every steps // 5 GRPO steps) are what a result
    records; a bad value is one line and exit code 2 before any work."""
    cfg = l1.Config()
    stored = l1.stored_config(cfg)
    assert stored["eval_seed"] == 777 and stored["log_every"] == 20 and stored["variants"] == ("max", "max+sft")
    assert l1.stored_config(l1.Config(steps=4))["log_every"] == 1
    assert l1.stored_config(l1.Config(log_every=3))["log_every"] == 3
    for bad in (dict(variants=()), dict(num_generations=1), dict(alpha=0.0), dict(sft_steps=-1), dict(log_every=0)):
        with pytest.raises(ValueError):
            l1.Config(**bad).validate()
    for argv in (["l1", "--variants", "nope"], ["l1", "--num-generations", "1"], ["l1", "--eval-n", "0"],
                 ["l1", "--seeds", "0", "--report-only", "--out", "/nonexistent/dir"]):
        assert main(argv) == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_a_run_saves_its_models_where_the_evaluation_script_reads_them(tmp_path, quick_cache, capsys):
    """A tiny l1 run returns the stored result's keys and saves each variant's model in the model cache under
    model_name; scripts/eval_budget_models.py evaluates the cache's budget models at every budget on fresh problems
    and writes its JSON (greedy: the same weights give the same cells); a cache without budget models is one line
    and exit code 2."""
    spec = importlib.util.spec_from_file_location("eval_budget_models", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    cache, out = tmp_path / "cache", str(tmp_path / "eval.json")
    cache.mkdir()
    assert script.main(["--cache-dir", str(cache), "--n", "2", "--out", out]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    for ext in (".json", ".safetensors"):                  # the session's quick base model, in a cache of our own
        shutil.copy(os.path.join(quick_cache, base_name(0, True) + ext), cache)
    cfg = l1.Config(variants=("max+sft",), steps=2, sft_steps=2, eval_n=2, n_examples=1)
    res = l1.run(cfg, 0, Env(cache=str(cache), quick=True))
    X.get("l1").check_result(res)
    assert list(res["variants"]) == ["max+sft"] and sorted(res["variants"]["max+sft"]["eval"]) == list(BUDGETS)
    assert l1.model_name("max+sft", 0, quick=True) == "l1-quick-max-sft-seed0"
    for ext in (".json", ".safetensors"):                  # the same weights as another seed's
        shutil.copy(cache / ("l1-quick-max-sft-seed0" + ext), cache / ("l1-quick-max-sft-seed1" + ext))
    assert script.main(["--cache-dir", str(cache), "--n", "2", "--out", out]) == 0
    got = json.load(open(out))
    assert got["n_per_k"] == 2 and set(got["variants"]) == {"quick-max-sft"}
    cells = got["variants"]["quick-max-sft"]["0"]
    assert sorted(map(int, cells)) == list(BUDGETS) and all(0 <= c["acc"] <= 1 for c in cells.values())
    assert cells == got["variants"]["quick-max-sft"]["1"]          # the same weights on the same fresh problems
    assert "reads its budget" in capsys.readouterr().out
