"""The pass@k lesson: exact pass@N, and its claims on hand-made results (hold, fail, untestable)."""
import numpy as np
import pytest
import torch

from reasonlab.core.exact import pass_exact, right_probs
from reasonlab.core.model import GPT
from reasonlab.core.task import encode
from reasonlab.experiments import passk
from reasonlab.stats import findings


def arm(p_by_k: dict) -> tuple[dict, dict]:
    """One model's result entries from each k's per-problem probability of a right chain."""
    return ({k: {"pass": {N: float(pass_exact(np.array(p), N).mean()) for N in passk.NS}, "direct": 0.0}
             for k, p in p_by_k.items()}, {k: list(p) for k, p in p_by_k.items()})


def result(start: dict, rl: dict) -> dict:
    (s, sp), (r, rp) = arm(start), arm(rl)
    return {"start": s, "start_p": sp, "rl": r, "rl_p": rp, "steps": 100, "pass_n": 256}


def test_pass_exact_is_one_minus_the_chance_of_n_misses():
    p = np.array([0.0, 1e-9, 0.3, 1.0])
    assert np.allclose(pass_exact(p, 1), p)
    assert np.allclose(pass_exact(p, 4), 1 - (1 - p) ** 4)
    assert pass_exact(np.array([1e-9]), 256)[0] > 2.5e-7          # no underflow to 0 for tiny p


def test_right_probs_replay_one_forward_pass_per_output():
    """right_probs against the chain rule read off a plain forward pass over each whole sequence (no packing)."""
    torch.manual_seed(0)
    model = GPT(d_model=32, n_layers=1, n_heads=2).eval()
    probs = [[3, 4], [1, 2, 3, 4, 5, 6, 7, 8]]
    for temp in (1.0, 0.5):
        got = right_probs(model, probs, temperature=temp)
        for i, d in enumerate(probs):
            for j, fmt in enumerate(("direct", "short", "full")):
                ids, start = encode(d, fmt)
                with torch.no_grad():
                    logp = torch.log_softmax(model(torch.tensor([ids]))[0][0] / temp, -1)
                want = sum(logp[t, ids[t + 1]].item() for t in range(start, len(ids) - 1))
                assert np.isclose(np.log(got[i, j]), want, atol=1e-4), (d, fmt, temp)


KS = (5, 6, 7)


def per_k(*groups) -> dict:
    """The same problems at every k: (count, p) groups."""
    return {k: [p for n, p in groups for _ in range(n)] for k in KS}


def verdicts(rs: list[dict]) -> list[str]:
    """The premise's, then the gated claims' verdicts."""
    return [f["verdict"] for f in findings.gate(passk.claims(rs))]


H, P, F = findings.HOLDS, findings.PRIMARY, findings.FAILS


def test_rl_that_reaches_the_problems_out_of_the_starts_reach_expands():
    """The start never samples 5 of 20 problems (p = 1e-5) and samples the rest at 0.3; RL solves those 5 at 0.5
    and keeps the rest near-certain: the primary holds, the start does not catch up, nothing is lost."""
    rs = [result(per_k((15, 0.3), (5, 1e-5)), per_k((15, 0.95), (5, 0.5 - 0.01 * s))) for s in range(5)]
    fs = passk.claims(rs)
    assert [findings.kind_of(f) for f in fs] == [findings.PREMISE, P, findings.SECONDARY, findings.SECONDARY]
    assert fs[1]["control"].startswith("the start") and fs[1]["per_seed"][0] == pytest.approx(
        1 - 0.5 ** 256 - pass_exact(np.array([1e-5]), 256)[0], abs=1e-4)
    assert verdicts(rs) == [H, H, F, F]


def test_sharpening_or_drift_in_the_tail_is_not_expansion():
    """RL that sharpens only what the start samples leaves the out-of-reach problems where they were: the primary
    does not hold. Nor does RL that moves them within the tail (1e-5 to 8e-4: pass@256 0.0026 -> 0.19): less than
    the margin."""
    sharpen = [result(per_k((15, 0.3), (5, 1e-5)), per_k((15, 0.95 - 0.01 * s), (5, 1e-5))) for s in range(5)]
    assert verdicts(sharpen) == [H, F, F, F]
    drift = [result(per_k((15, 0.3), (5, 1e-5)), per_k((15, 0.95), (5, 8e-4 + 1e-5 * s))) for s in range(5)]
    assert verdicts(drift)[1] == F


def test_rl_that_loses_problems_shrinks_coverage_and_the_start_catches_up():
    """Yue et al.'s picture: RL sharpens 11 problems, loses 4 the start samples at 0.3 and reaches none of the 5 out
    of reach: no expansion, the start catches up at N = 256, coverage shrinks."""
    rs = [result(per_k((15, 0.3), (5, 1e-5)), per_k((11, 0.95 - 0.01 * s), (9, 1e-5))) for s in range(5)]
    assert verdicts(rs) == [H, F, H, H]


def test_without_problems_out_of_reach_the_primary_is_untestable():
    rs = [result(per_k((20, 0.3)), per_k((20, 0.95))) for _ in range(5)]
    fs = findings.gate(passk.claims(rs))
    assert fs[0]["verdict"] == F and fs[1]["verdict"] == findings.UNTESTABLE and fs[1]["ungated"] == F
    assert "never samples" in fs[1]["untestable"] and fs[1]["per_seed"] == [0.0] * 5


def test_the_placebo_is_rl_for_no_steps_and_cannot_hold(monkeypatch):
    """rl_steps = 0: the RL arm is the start (train is never called), so the primary reads 0 on every seed; the room
    leaves it space to pass and to fail."""
    cfg = passk.Config()
    pl = passk.placebo(cfg)
    assert pl.rl_steps == 0 and pl != cfg
    pl.validate()
    torch.manual_seed(0)
    model = GPT(d_model=16, n_layers=1, n_heads=2).eval()
    monkeypatch.setattr(passk, "thinker_model", lambda *a, **kw: model)
    monkeypatch.setattr(passk, "train", lambda *a, **kw: (_ for _ in ()).throw(AssertionError("trained")))
    rs = [passk.run(passk.Config(rl_steps=0, n=2), s, type("Env", (), {"cache": None, "device": "cpu"})())
          for s in range(3)]
    assert rs[0]["rl_p"] == rs[0]["start_p"] and passk.out_of_reach(rs[0]).any() and "task" not in rs[0]
    f = findings.gate(passk.claims(rs))[1]
    assert f["per_seed"] == [0.0] * 3 and f.get("ungated", f["verdict"]) == F
    lo, hi = passk.room(cfg)
    assert lo == pytest.approx(-(1 - 0.999 ** 256)) and hi == 1.0
    assert findings.out_of_room(passk.room(cfg), passk.TH["passk.expands"].value) is None
    with pytest.raises(ValueError):
        passk.Config(pass_n=100).validate()


def test_check_rejects_a_result_without_its_arms():
    passk.check(result(per_k((20, 0.3)), per_k((20, 0.3))))
    try:
        passk.check({"start": {}})
    except ValueError as e:
        assert "passk" in str(e)
    else:
        raise AssertionError("a result without rl passed the check")


def test_the_guessing_control_is_the_tasks_chance(tmp_path):
    """The answer-only control: on digits a guess is right with 0.1 per sample (1 - 0.9^N); on modprod with its
    chance at each k (the share of problems whose answer is 0, about a half), weighted by the draw's problems."""
    from reasonlab import tasks
    r = result(per_k((20, 0.3)), per_k((20, 0.3)))
    assert all(passk.guessing(r, N) == pytest.approx(1 - 0.9 ** N) for N in (1, 4, 64))
    m = {**r, "task": "modprod"}
    want = np.mean([1 - (1 - tasks.get("modprod").chance(k)) ** 4 for k in KS])
    assert passk.guessing(m, 4) == pytest.approx(want) and 0.45 < passk.guessing(m, 1) < 0.55
    [(md, _)] = passk.render([m, m], str(tmp_path))
    assert (tmp_path / "passk" / "pass_at_n.png").exists() and md.startswith("## Does RL only sharpen?")


def test_run_on_another_task_reads_its_problems_and_names_it(monkeypatch):
    """On modprod the start is modprod's erring thinker and the test draw modprod's; the result names its task."""
    from reasonlab.train.sft import build_model
    asked = []
    model = build_model(0, task="modprod").eval()
    monkeypatch.setattr(passk, "thinker_model", lambda *a, **kw: asked.append(kw.get("task")) or model)
    r = passk.run(passk.Config(task="modprod", rl_steps=0, n=1), 0, type("Env", (), {"cache": None, "device": "cpu"})())
    assert asked == ["modprod"] and r["task"] == "modprod" and sorted(r["start_p"]) == list(range(2, 9))
    passk.check(r)
