"""The process-labels lesson: its rates and claims on hand-made results (hold, fail, untestable)."""
import pytest

from reasonlab import experiments as X
from reasonlab import tasks
from reasonlab.experiments import labels
from reasonlab.stats import findings

PRM = {"exact": {"auroc": 0.94, "bon": 0.67}, "mc1": {"auroc": 0.81, "bon": 0.64}, "mc8": {"auroc": 0.82, "bon": 0.66}}


def result(fp: dict, tp: dict, n_wrong: int = 200, n_right: int = 800, prm: dict = PRM, majority: float = 0.6,
           wrong_chain_steps: int = 50, first: float = 0.57) -> dict:
    """One seed: at k = 5, n_wrong wrong steps and n_right right ones; fp[R] / tp[R] of them labelled right by R
    rollouts; the PRMs' AUROC and best-of-16 as given, best-of-1 `first`."""
    cells = {}
    if n_wrong:
        cells["5/0"] = {"n": n_wrong, **{f"any{R}": round(fp[R] * n_wrong) for R in labels.ROLLOUTS}}
    if n_right:
        cells["5/1"] = {"n": n_right, **{f"any{R}": round(tp[R] * n_right) for R in labels.ROLLOUTS}}
    return {"cells": cells, "steps": n_wrong + n_right, "prm": prm, "majority": majority, "single": 0.57,
            "first": first, "wrong_chain_steps": wrong_chain_steps, "best_of": 16, "n_train": 200}


RISE = {1: 0.04, 2: 0.05, 4: 0.06, 8: 0.07, 16: 0.09}
TP = {1: 0.7, 2: 0.8, 4: 0.85, 8: 0.9, 16: 0.95}


def test_rates_read_the_cells():
    r = result(RISE, TP)
    assert labels.rate(r, 0, 8) == 0.07 and labels.rate(r, 1, 1) == 0.7 and labels.rate(r, 0, 8, k=3) == 0.0


def jitter(prm: dict, s: int) -> dict:
    return {name: {key: v + 0.002 * ((s * 7 + i * 3) % 5) for key, v in c.items()}
            for i, (name, c) in enumerate(prm.items())}


def seeds(**kw) -> list[dict]:
    """Five hand-made seeds: rates rising with the rollouts, the PRMs jittered."""
    return [result({R: v + 0.002 * s for R, v in RISE.items()}, TP, **{"prm": jitter(PRM, s), **kw})
            for s in range(5)]


def test_premises_first_then_one_primary_that_rests_on_wrong_steps_alone():
    fs = labels.claims(seeds())
    kinds = [findings.kind_of(f) for f in fs]
    assert kinds == [findings.PREMISE] * 6 + [findings.PRIMARY] + [findings.SECONDARY] * 4
    assert [f["name"] for f in fs[:6]] == ["wrong_steps", "fp_rise", "fn_fall", "prm_exact", "prm_mc1", "prm_mc8"]
    assert fs[6]["requires"] == ["wrong_steps"] and "8-rollout" in fs[6]["control"]
    assert all(f["verdict"] == findings.HOLDS for f in fs[:7])
    assert abs(fs[6]["value"] - 0.12) < 0.02


def test_the_monotone_rates_are_premises_and_gate_nothing():
    """FP(16) >= FP(1) and FN(16) <= FN(1) hold by construction; rates that do not move leave the premises short
    of holding but every claim standing."""
    flat = {R: 0.01 for R in labels.ROLLOUTS}
    fs = findings.gate(labels.claims([result({R: v + 0.002 * s for R, v in flat.items()},
                                             {R: 0.9 for R in labels.ROLLOUTS}, prm=jitter(PRM, s))
                                      for s in range(5)]))
    assert fs[1]["verdict"] == findings.FAILS and fs[2]["verdict"] == findings.FAILS
    assert not any(f.get("untestable") for f in fs[6:])
    assert fs[7]["verdict"] == findings.FAILS                          # FP(8) at 1 %: not above 5 %


def test_a_thinker_that_never_errs_leaves_the_claims_untestable():
    fs = findings.gate(labels.claims([result(RISE, TP, n_wrong=0, prm=jitter(PRM, s)) for s in range(5)]))
    assert fs[0]["verdict"] == findings.FAILS
    assert [f["verdict"] for f in fs[6:9]] == [findings.UNTESTABLE] * 3
    assert all("wrong steps to label" in f["untestable"] for f in fs[6:9])


def test_prm_claims_hold_and_fail():
    fs = labels.claims(seeds())
    assert [f["verdict"] for f in fs[6:]] == [findings.HOLDS] * 5
    worse = {"exact": {"auroc": 0.78, "bon": 0.56}, "mc1": {"auroc": 0.82, "bon": 0.6},   # exact labels lose
             "mc8": {"auroc": 0.8, "bon": 0.6}}
    fs = labels.claims([result(RISE, TP, prm=jitter(worse, s), majority=0.65, first=0.5) for s in range(5)])
    assert fs[6]["verdict"] == findings.FAILS
    assert [f["verdict"] for f in fs[8:]] == [findings.FAILS] * 3


def test_a_prm_whose_best_of_n_falls_gates_the_claims_that_read_it():
    """Best-of-16 with the exact-label PRM below its first sample on every seed: its premise fails, so the claim
    that compares its best-of-N is untestable, naming it; the AUROC primary does not read best-of-N and stands."""
    fallen = {**PRM, "exact": {"auroc": 0.94, "bon": 0.40}}
    fs = findings.gate(labels.claims([result(RISE, TP, prm=jitter(fallen, s)) for s in range(5)]))
    assert fs[3]["verdict"] == findings.FAILS and fs[6]["verdict"] == findings.HOLDS
    assert fs[9]["verdict"] == findings.UNTESTABLE and "exact labels" in fs[9]["untestable"]
    assert fs[10]["verdict"] == findings.HOLDS


def test_the_room_and_the_placebo_are_fixed_by_the_config():
    cfg = labels.Config()
    assert labels.room(cfg) == (-1.0, 1.0) and labels.placebo(cfg).treatment == "prm-mc"
    assert labels.prms(labels.placebo(cfg))["exact"] == labels.PRMS["mc8"]     # the control's labels,
    assert {n: labels.prm_seed(labels.placebo(cfg), n, 3) for n in labels.PRMS} == {   # trained on draws of its own
        "exact": labels.replicate_seed(3), "mc1": 3, "mc8": 3} and labels.replicate_seed(3) != 3
    assert {labels.prm_seed(cfg, n, 3) for n in labels.PRMS} == {3}
    assert labels.prms(cfg) == labels.PRMS
    X.get("labels").validate(labels.placebo(cfg))


def test_auroc_reads_chain_steps_up_to_the_first_error():
    ids = lambda words: [tasks.get("digits").id[w] for w in words.split()]
    D = tasks.get("digits").problem([3, 5, 9, 2, 7])      # S sums 8 9 6, answer 6
    keep, exact = labels.to_first_error([D] * 3, [ids("S 8 9 6 A 6 </s>"), ids("S 8 1 8 A 8 </s>"),
                                                  ids("S 8 9 6 A 5 </s>")])
    assert keep.tolist() == [True, True, True, False, True, True, False, False, True, True, True, False]
    assert exact.tolist() == [1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 0]


def test_the_result_check_asks_for_the_prms():
    labels.check(result(RISE, TP))
    with pytest.raises(ValueError, match="each PRM"):
        labels.check({"cells": {}, "steps": 0})


@pytest.mark.parametrize("bad", [dict(best_of=0), dict(n_train=0), dict(n_test=0)])
def test_config_rejects_what_cannot_run(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        X.get("labels").validate(labels.Config(**bad))
    for task in tasks.names():
        X.get("labels").validate(labels.Config(task=task))


def test_run_on_another_task_labels_its_chain_steps(monkeypatch):
    """On modprod the thinker is modprod's erring one, and every chain step of its sampled S chains (here an
    untrained model's) is rolled out and counted in a (k, exact label) cell."""
    from reasonlab.train.sft import build_model
    asked = []
    model = build_model(0, task="modprod").eval()
    monkeypatch.setattr(labels, "thinker_model", lambda *a, **kw: asked.append(kw.get("task").spec) or model)
    monkeypatch.setattr(labels, "prm_costs", lambda *a: {})
    env = type("Env", (), {"cache": None, "device": "cpu"})()
    r = labels.run(labels.Config(task="modprod", n_test=1), 0, env)
    assert asked == ["modprod"] and r["steps"] == sum(c["n"] for c in r["cells"].values())
    assert all(2 <= int(kl.split("/")[0]) <= 8 and c[f"any{max(labels.ROLLOUTS)}"] <= c["n"]
               for kl, c in r["cells"].items())
