"""The base experiment (a demonstration): its premise on hand-made results, its table and plot from per-seed results,
and its Config's bounds."""
import os

import pytest

from reasonlab import experiments as X
from reasonlab.core import config
from reasonlab.experiments import base
from reasonlab.stats import findings


def one_seed(acc: float) -> dict:
    share = {"direct": 0.5, "short": 0.3, "full": 0.2}
    return {c: {"acc": acc, "length": 3.0, "share": share, "acc_by_k": {k: acc for k in range(2, 9)}}
            for c in ("free", "A", "S", "T")}


def test_a_demonstration_whose_premise_is_the_recipes_stopping_rule():
    """No primary, no room, no placebo; chains beating direct answers at every k >= 3 is a premise: it holds when S
    beats A at every such k, fails when A matches S at one of them (k = 2 never counts)."""
    e = X.get("base")
    assert e.room is None and e.placebo is None
    rs = [one_seed(0.5) for _ in range(5)]
    for s, r in enumerate(rs):
        r["S"]["acc_by_k"] = {k: 1.0 - 0.01 * s for k in range(2, 9)}
        r["A"]["acc_by_k"] = {k: 1.0 if k == 2 else 0.1 for k in range(2, 9)}
    [f] = base.claims(rs)
    assert findings.kind_of(f) == findings.PREMISE and f["name"] == "chains_beat_direct" and f["verdict"] == findings.HOLDS
    for r in rs:
        r["A"]["acc_by_k"][5] = r["S"]["acc_by_k"][5]
    assert base.claims(rs)[0]["verdict"] == findings.FAILS


def test_render_writes_the_table_and_the_plot(tmp_path):
    [(md, head)] = base.render([one_seed(0.5), one_seed(0.7)], str(tmp_path))
    assert md.startswith("## The base model: does writing a chain help?\n")
    assert ("| generation | accuracy (k = 2..8) | worst k | mean tokens | free share A / S / T |\n|---|---|---|---|---|\n"
            "| free (the model picks) | 0.600 ± 0.141 | 0.600 ± 0.141 | 3.00 ± 0.00 | 0.50 ± 0.00 / 0.30 ± 0.00 / "
            "0.20 ± 0.00 |\n| forced A | 0.600 ± 0.141 | 0.600 ± 0.141 | 3.00 ± 0.00 |  |") in md
    assert head.startswith("forced S 0.600 ± 0.141")
    assert os.path.getsize(tmp_path / "base" / "accuracy_by_k.png") > 1000


def test_config_refuses_more_problems_than_k5_has_or_memory_holds(monkeypatch):
    monkeypatch.setattr(config, "mem_available", lambda: 1 << 40)
    X.get("base").validate(base.Config(n_test=config.N_TEST_MAX))
    with pytest.raises(ValueError, match="n_test must be at most 25,000"):
        X.get("base").validate(base.Config(n_test=config.N_TEST_MAX + 1))
    monkeypatch.setattr(config, "mem_available", lambda: 100 << 20)   # 100 MiB: 500 x 7 decoded rows do not fit
    with pytest.raises(ValueError, match="^n_test: about"):
        base.Config().validate()


def test_runs_and_renders_on_another_task(tmp_path):
    """On modprod the run reads its task's problems and model, names the task in its result (a digits result does
    not), and the section reads chance and the premise's k off the task."""
    from reasonlab import tasks
    from reasonlab.train.sft import build_model
    seen = []
    env = type("Env", (), {"base": lambda self, s, task="digits": seen.append(task) or build_model(s, task=task)})()
    cfg = base.Config(task="modprod", n_test=2)
    X.get("base").validate(cfg)
    r = base.run(cfg, 0, env)
    assert seen == ["modprod"] and r["task"] == "modprod" and set(r["S"]["acc_by_k"]) == set(tasks.get("modprod").ks())
    X.get("base").check_result(r)
    [(md, head)] = base.render([r, r], str(tmp_path))
    assert head.endswith("(chance 0.5)") and "k >= 3" in base.claims([r])[0]["claim"]
    assert "task" not in one_seed(0.5) and base.task_of(one_seed(0.5)).name == "digits"
