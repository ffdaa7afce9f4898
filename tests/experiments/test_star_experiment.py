"""The star experiment: its variants and config checks, the chain filter's skip rule, the cached fine-tunes and the
memoized round evaluation."""
import pytest
import torch

from reasonlab.experiments import Env
from reasonlab.experiments import star as E
from reasonlab.methods import star
from reasonlab.methods.config import StarConfig
from reasonlab.train.sft import build_model


def test_every_variant_is_a_valid_star_config_and_the_defaults_are_the_labs():
    assert E.star_config(E.Config(), "main", seed=3) == StarConfig(rounds=2, problems=5000, steps=300, seed=3)
    assert E.star_config(E.Config(), "chain", seed=3).filter == "chain"
    few = E.Config(start="few-chains", variants=tuple(E.VARIANTS))
    few.validate()
    for v in E.VARIANTS:
        sc = E.star_config(few, v, seed=0)
        sc.validate()
        assert sc.mix == (1.0, 0.0, 0.0)                              # no worked chains in the fresh rows
    assert E.star_config(few, "greedy-1", 0).samples == 1 and E.star_config(few, "continue", 0).restart is False


@pytest.mark.parametrize("values,match", [
    (dict(variants=("chain",)), "must include main"),
    (dict(variants=("main", "bogus")), "got 'bogus'"),
    (dict(variants=("main", "think+rationalize")), "needs start few-chains"),
    (dict(steps=10**6, growth=10.0, rounds=3), "more than 10,000,000"),
])
def test_bad_configs_are_one_line_errors(values, match):
    with pytest.raises(ValueError, match=match) as e:
        E.Config(**values).validate()
    assert "\n" not in str(e.value)


def test_the_chain_filter_runs_only_where_it_would_keep_other_data(monkeypatch):
    ran = []

    def fake_rounds(model, start, sc, eval_n, cache, progress=False):
        ran.append((start, sc.filter, sc.restart, eval_n))
        return [{"round": 0}, {"round": 1, "false_positive_rate": fp}]
    monkeypatch.setattr(E, "star_rounds", fake_rounds)
    env = type("Env", (), {"base": lambda self, s: "model", "quick": True, "cache": None, "checkpoint": None})()
    cfg = E.Config(variants=("chain", "continue", "main"), eval_n=7)
    fp = 0.0                                               # no wrong chains kept: the filters keep the same data
    assert list(E.run(cfg, 0, env)) == ["main", "continue"]
    assert ran == [("lab-quick-seed0", "answer", True, 7), ("lab-quick-seed0", "answer", False, 7)]
    fp = 0.5
    assert list(E.run(cfg, 0, env)) == ["main", "chain", "continue"]


def test_the_few_chains_start_refuses_a_checkpoint():
    with pytest.raises(ValueError, match="checkpoint"):
        E.start_model(E.Config(start="few-chains"), 0, Env(checkpoint="some/model"))


def test_filters_that_keep_the_same_data_train_one_model(monkeypatch, tmp_path):
    """A fine-tuned model is named by its recipe, kept data and init, not by the filter: a run whose filter kept
    the same outputs as an earlier run loads that run's model; other kept data train another."""
    from reasonlab.train import zoo as train
    data = [([1, 2], ["A", "3", "</s>"])]
    monkeypatch.setattr(star, "collect", lambda *a, **k: {"kept": list(data), "used": 1.0, "n_kept": 1, "fmt_mix": {},
                                                           "false_positive_rate": 0.0, "rationalized": 0.0})
    monkeypatch.setattr(E, "evaluate_round", lambda model, n: {"free": 0.0})
    trained, real = [], train.pretrain
    monkeypatch.setattr(train, "pretrain", lambda *a, **k: trained.append(1) or real(*a, **k))
    base = build_model(0)
    run = lambda f: E.star_rounds(base, "b", StarConfig(rounds=1, problems=1, steps=2, filter=f), 5,  # noqa: E731
                                  cache=str(tmp_path))
    for f in ("answer", "chain", "answer"):
        hist = run(f)
    assert len(trained) == 1 and [h["round"] for h in hist] == [0, 1] and hist[1]["n_kept"] == 1
    assert any(p.name.startswith("star-b-r1-") for p in tmp_path.iterdir())
    data[:] = [([4, 4], ["A", "8", "</s>"])]
    run("chain")
    assert len(trained) == 2


def test_round_evaluation_is_memoized_on_the_weights(monkeypatch):
    """Runs that share a model (the base; a fine-tune two filters both trained) evaluate it once; other weights,
    or another eval size, evaluate again; callers get their own copy."""
    calls = []
    monkeypatch.setattr(E, "_ROUND_EVALS", {})
    monkeypatch.setattr(E, "_evaluate_round", lambda m, n: calls.append(n) or {"free": 0.5, "share": {}})
    a, b = build_model(0), build_model(0)
    first = E.evaluate_round(a, 7)
    first["free"] = 1.0
    assert E.evaluate_round(b, 7) == {"free": 0.5, "share": {}} and calls == [7]     # same weights: once
    E.evaluate_round(b, 8)
    with torch.no_grad():
        b.head.weight[0, 0] += 1.0
    E.evaluate_round(b, 7)
    assert calls == [7, 8, 7]


def test_the_table_has_a_row_per_variant_and_round():
    rec = lambda r: {"round": r, "free": 0.5, "A": 0.1, "S": 1.0, "T": 1.0,  # noqa: E731
                     "share": {"direct": 1.0, "short": 0.0, "full": 0.0}, "used": 0.9, "rationalized": 0.0,
                     "fmt_mix": {"direct": 0.2, "short": 0.5, "full": 0.3}, "false_positive_rate": 0.01, "round_s": 3.0}
    md = E.star_table({"main": [[rec(0), rec(1)], [rec(0), rec(1)]]}).splitlines()
    assert len(md) == 4 and md[1] == "|" + "---|" * 10
    assert md[2].startswith("| main | 0 (base) | 0.500 ± 0.000 |") and md[3].startswith("| main | 1 |")
    assert md[3].endswith("| 0.010 ± 0.000 | 0.00 ± 0.00 | 3.0 ± 0.0 |")
