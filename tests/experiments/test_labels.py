"""The process-labels lesson: its rates and claims on hand-made results (hold, fail, untestable)."""
import pytest

from reasonlab import experiments as X
from reasonlab.experiments import labels
from reasonlab.stats import findings

PRM = {"exact": {"auroc": 0.94, "bon": 0.67}, "mc1": {"auroc": 0.81, "bon": 0.64}, "mc8": {"auroc": 0.82, "bon": 0.66}}


def result(fp: dict, tp: dict, n_wrong: int = 200, n_right: int = 800, prm: dict = PRM, majority: float = 0.6,
           wrong_chain_steps: int = 50) -> dict:
    """One seed: at k = 5, n_wrong wrong steps and n_right right ones; fp[R] / tp[R] of them labelled right by R
    rollouts; the PRMs' AUROC and best-of-16 as given."""
    cells = {}
    if n_wrong:
        cells["5/0"] = {"n": n_wrong, **{f"any{R}": round(fp[R] * n_wrong) for R in labels.ROLLOUTS}}
    if n_right:
        cells["5/1"] = {"n": n_right, **{f"any{R}": round(tp[R] * n_right) for R in labels.ROLLOUTS}}
    return {"cells": cells, "steps": n_wrong + n_right, "prm": prm, "majority": majority, "single": 0.57,
            "wrong_chain_steps": wrong_chain_steps, "best_of": 16, "prm_n": 200}


RISE = {1: 0.04, 2: 0.05, 4: 0.06, 8: 0.07, 16: 0.09}
TP = {1: 0.7, 2: 0.8, 4: 0.85, 8: 0.9, 16: 0.95}


def test_rates_read_the_cells():
    r = result(RISE, TP)
    assert labels.rate(r, 0, 8) == 0.07 and labels.rate(r, 1, 1) == 0.7 and labels.rate(r, 0, 8, k=3) == 0.0


def test_claims_hold_fail_and_are_untestable():
    fs = labels.claims([result({R: v + 0.002 * s for R, v in RISE.items()}, TP) for s in range(5)])
    assert [f["verdict"] for f in fs][:3] == [findings.HOLDS, findings.HOLDS, findings.HOLDS]
    flat = {R: 0.01 for R in labels.ROLLOUTS}                      # rollouts never rescue a wrong step
    fs = labels.claims([result({R: v + 0.002 * s for R, v in flat.items()}, {R: 0.9 for R in labels.ROLLOUTS})
                        for s in range(5)])
    assert fs[0]["verdict"] == findings.FAILS and fs[2]["verdict"] == findings.FAILS and fs[1]["verdict"] == findings.FAILS
    fs = labels.claims([result(RISE, TP, n_wrong=0) for _ in range(5)])   # a thinker that never errs
    assert fs[0]["verdict"] == findings.UNTESTABLE and fs[2]["verdict"] == findings.UNTESTABLE and fs[1]["verdict"] != findings.UNTESTABLE


def jitter(prm: dict, s: int) -> dict:
    return {name: {key: v + 0.002 * ((s * 7 + i * 3) % 5) for key, v in c.items()}
            for i, (name, c) in enumerate(prm.items())}


def test_prm_claims_hold_fail_and_are_untestable():
    fs = labels.prm_claims([result(RISE, TP, prm=jitter(PRM, s)) for s in range(5)])
    assert [f["verdict"] for f in fs] == [findings.HOLDS] * 4
    assert abs(fs[0]["value"] - 0.12) < 0.02 and abs(fs[3]["value"] - 0.06) < 0.02
    worse = {"exact": {"auroc": 0.78, "bon": 0.56}, "mc1": {"auroc": 0.82, "bon": 0.6},   # exact labels lose
             "mc8": {"auroc": 0.8, "bon": 0.6}}
    fs = labels.prm_claims([result(RISE, TP, prm=jitter(worse, s), majority=0.65) for s in range(5)])
    assert [f["verdict"] for f in fs] == [findings.FAILS] * 4
    fs = labels.prm_claims([result(RISE, TP, wrong_chain_steps=0) for _ in range(5)])
    assert [f["verdict"] for f in fs][:2] == [findings.UNTESTABLE] * 2


def test_the_result_check_asks_for_the_prms():
    labels.check(result(RISE, TP))
    with pytest.raises(ValueError, match="each PRM"):
        labels.check({"cells": {}, "steps": 0})


@pytest.mark.parametrize("bad", [dict(best_of=0), dict(prm_n=0), dict(n=0)])
def test_config_rejects_what_cannot_run(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        X.get("labels").validate(labels.Config(**bad))
    X.get("labels").validate(labels.Config())
