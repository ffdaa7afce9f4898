"""The budgets experiment: its table and plot averaged over seeds, and its Config's bound."""
import os

import pytest

from reasonlab import experiments as X
from reasonlab.experiments import budgets


def one_seed(acc: float) -> dict:
    rows = [("T", "max", b, min(1.0, acc + 0.1 * b)) for b in range(0, 9)] + [("T", "min", 9, acc)]
    return {"budgets": [{"format": f, "kind": kind, "budget": b, "acc": a, "tokens": 3.0 + b, "thinking_tokens": float(b)}
                        for f, kind, b, a in rows]}


def test_render_writes_the_table_and_the_plot(tmp_path):
    [(md, head)] = budgets.render([one_seed(0.1), one_seed(0.3)], str(tmp_path))
    assert md.startswith("## Thinking longer: forced formats and thinking budgets\n")
    assert ("| format | chain budget | chain steps written | accuracy |\n|---|---|---|---|\n"
            "| T | at most 0 | 0.00 | 0.200 ± 0.141 |") in md
    assert "| T | at least 9 | 9.00 | 0.200 ± 0.141 |" in md
    assert head == "T capped at 0 steps 0.20 → 8 steps 0.95"
    assert os.path.getsize(tmp_path / "budgets" / "budgets.png") > 1000


def test_config_refuses_more_problems_than_k5_has():
    X.get("budgets").validate(budgets.Config(n=budgets.N_MOST))
    with pytest.raises(ValueError, match="n must be at most 100,000"):
        X.get("budgets").validate(budgets.Config(n=budgets.N_MOST + 1))
