"""The sampling experiment: the grid's numbers agree with one another and with the pools they come from, its two
sections render, and its Config refuses what it cannot run."""
import dataclasses
import os
import re

import numpy as np
import pytest

from reasonlab import experiments as X
from reasonlab.core import config
from reasonlab.core.pool import sample_pool
from reasonlab.experiments import sampling
from reasonlab.stats import findings


def test_the_grid_reads_its_curves_off_the_pools(noisy_model, tmp_path):
    cfg = sampling.Config(n_problems=8, n_max=4, formats=("A", "free"), budgets=True)
    res = sampling.grid(noisy_model, cfg, seed=3)
    assert res["formats"] == ["A", "free"] and set(res["curves"]) == {"A", "free"}
    problems = sampling.problem_set(8, 3)
    pool = sample_pool(noisy_model, problems, 4, force=["A"], temperature=1.0, seed=3)
    assert res["curves"]["A"]["maj"][1]["acc"] == pool.correct[:, 0].mean()     # the seed's pool, first sample
    assert res["curves"]["A"]["tokens"] == {N: float(pool.length[:, :N].sum(1).mean()) for N in (1, 2, 4)}
    for f in cfg.formats:
        c, per_k = res["curves"][f], res["per_k"][f]
        assert set(per_k) == set(range(2, 9))                          # 8 problems at every k: means of means
        for m in ("maj", "weighted", "verifier", "pass", "verified_pass"):
            for N in (1, 2, 4):
                assert c[m][N]["lo"] <= c[m][N]["acc"] <= c[m][N]["hi"]
                assert c[m][N]["acc"] == pytest.approx(np.mean([per_k[k][m][N] for k in per_k]))
        assert all(per_k[k]["pass"][4] >= per_k[k]["maj"][4] for k in per_k)   # an oracle, on all n_max samples
        assert c["greedy"]["acc"] == pytest.approx(np.mean([per_k[k]["greedy"] for k in per_k]))
    fr = res["frontier"]
    assert fr["n_val"] == fr["n_test"] == 28
    assert {p["format"] for p in fr["points"]} == {"A", "free"}         # no S or T pool: no capped chains
    assert [(b["format"], b["kind"]) for b in res["budgets"]] == (
        [("T", "max")] * 9 + [("S", "max")] * 5 + [("T", "min")] * 4 + [("S", "min")] * 4)
    assert "budgets" not in sampling.grid(noisy_model, dataclasses.replace(cfg, budgets=False), seed=3)


def test_both_sections_render_with_their_tables_and_plots(noisy_model, tmp_path):
    rs = [sampling.grid(noisy_model, sampling.Config(n_problems=4, n_max=2, formats=("A", "S")), seed=s) for s in (0, 1)]
    (voting, head), (verifiers, _) = sampling.render(rs, str(tmp_path))
    assert voting.startswith("## Sampling more: voting\n") and verifiers.startswith("## Verifiers and the compute")
    assert "| format | greedy | maj@1 | maj@2 | maj@2 | pass@2 (oracle) | tokens@2 |\n|---|---|---|---|---|---|---|" in voting
    assert re.search(r"^\| chance \| 0\.100 \| 0\.100 \| 0\.100 \| 0\.100 \| 0\.190 \|  \|$", voting, re.M)
    assert "| format | maj@2 | best-of-2, process verifier | verified pass@2 |" in verifiers
    assert "| target accuracy | compute-optimal per k: tokens |" in verifiers and head.startswith("A maj@2 ")
    for png in ("acc_vs_n", "per_k", "frontier"):
        assert os.path.getsize(tmp_path / "sampling" / f"{png}.png") > 1000


def hand_made(voted: float, saved: float = 0.8, gap: float = 0.0, chosen: str = "S/maj@4", chain: float = 1.0) -> dict:
    """One seed: direct answers right on `voted` by maj@4 and the greedy S chain on `chain` at every k >= 3; at the
    frontier's one target the per-k choice spends `saved` of the single strategy's tokens, test accuracy `gap` off."""
    per_k = {"A": {k: {"greedy": 1.0 if k == 2 else 0.1, "maj": {4: 1.0 if k == 2 else voted}} for k in range(2, 9)},
             "S": {k: {"greedy": chain, "maj": {4: chain}} for k in range(2, 9)}}
    target = {"target": 0.9, "reachable": True, "fixed": {"tokens": 10.0, "acc": 0.95, "strategy": "S/greedy@1"},
              "adaptive": {"tokens": 10.0 * saved, "acc": 0.95 + gap, "per_k": {2: "A/greedy@1", 3: chosen}}}
    return {"n_max": 4, "curves": {"A": {}, "S": {}}, "per_k": per_k, "frontier": {"targets": [target]}}


def test_a_demonstration_its_premise_and_its_frontier_secondary():
    """No primary: the premise (voted direct answers stay below the greedy chain at every k >= 3) holds or fails; the
    frontier's saving is a log token ratio that needs the test accuracy kept; whatever strategies a run happens to
    pick, its verdict is read off its interval (untestable is the design's to say, not the data's)."""
    assert X.get("sampling").room is None and X.get("sampling").placebo is None
    rs = [hand_made(0.11, saved=0.8 + 0.01 * s) for s in range(5)]
    prem, front = findings.gate(sampling.claims(rs))
    assert findings.kind_of(prem) == findings.PREMISE and prem["verdict"] == findings.HOLDS
    assert prem["value"] == pytest.approx(0.89)
    assert findings.kind_of(front) == findings.SECONDARY and front["verdict"] == findings.HOLDS
    assert front["value"] == pytest.approx(np.mean([-np.log(0.8 + 0.01 * s) for s in range(5)]), abs=1e-4)
    rescued = [hand_made(0.95 + 0.01 * s, chain=0.9) for s in range(5)]    # the vote reaches what the chain does
    assert sampling.claims(rescued)[0]["verdict"] == findings.FAILS
    worse = [hand_made(0.1, gap=-0.05 - 0.01 * s) for s in range(5)]       # cheaper, but less accurate on test
    assert sampling.claims(worse)[1]["verdict"] == findings.FAILS
    greedy = [hand_made(0.1, chosen="S/greedy@1") for _ in range(5)]
    assert sampling.claims(greedy)[1]["verdict"] != findings.UNTESTABLE


@pytest.mark.parametrize("change,msg", [
    ({"n_max": 3}, "n_max must be one of 1, 2, 4"),
    ({"formats": ()}, "formats must be distinct"),
    ({"formats": ("A", "A")}, "formats must be distinct"),
    ({"formats": ("A", "Q")}, "formats may hold only A, S, T, free, got 'Q'"),
    ({"n_problems": sampling.N_MOST + 1}, "n_problems must be at most 50,000"),
    ({"n_problems": 0}, "n_problems must be positive"),
])
def test_config_refuses_what_the_grid_cannot_run(change, msg):
    with pytest.raises(ValueError, match=msg):
        X.get("sampling").validate(dataclasses.replace(sampling.Config(), **change))


def test_config_accepts_every_format_and_refuses_a_pool_past_memory(monkeypatch):
    monkeypatch.setattr(config, "mem_available", lambda: 1 << 40)
    X.get("sampling").validate(sampling.Config(n_max=64, formats=("free", "T", "S", "A"), budgets=True))
    monkeypatch.setattr(config, "mem_available", lambda: 100 << 20)   # 100 MiB: 500 x 7 x 32 x 3 samples do not fit
    with pytest.raises(ValueError, match="^n_problems: about .* use at most 304$"):
        sampling.Config().validate()


def test_the_grid_and_its_sections_on_another_task(tmp_path):
    """On modprod: the grid draws the task's problems, caps its chains below the task's full chain, names its task (a
    digits result does not), and the voting table's chance row is the task's (the commonest answer, about 0.5)."""
    from reasonlab import tasks
    from reasonlab.io.report import chance_at
    from reasonlab.train.sft import build_model
    task = tasks.get("modprod")
    res = sampling.grid(build_model(0, task=task), sampling.Config(task="modprod", n_problems=2, n_max=2, formats=("A", "S")),
                      seed=0)
    assert res["task"] == "modprod" and set(res["per_k"]["A"]) == set(task.ks()) and "budgets" not in res
    assert {p["method"] for p in res["frontier"]["points"] if p["format"] == "S"} >= {"S<=0", "S<=3"}
    c = sampling.chance(task, "maj", 1)
    assert 0.45 < c < 0.55 and sampling.chance(task, "pass", 2) == pytest.approx(
        np.mean([1 - (1 - chance_at(task, k)) ** 2 for k in task.ks()]))
    (voting, _), _ = sampling.render([res, res], str(tmp_path))
    assert re.search(rf"^\| chance \| {c:.3f} \| {c:.3f} \|", voting, re.M)
    digits = tasks.get("digits")
    assert sampling.chance(digits, "maj", 1) == 0.1 and sampling.chance(digits, "pass", 8) == 1 - 0.9 ** 8
