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


def odds_times(p, c: float) -> np.ndarray:
    p = np.asarray(p, dtype=float)
    return c * p / (c * p + 1 - p)


def sharpened_by_hand(r: dict) -> np.ndarray:
    """The start sharpened to RL's mean p, replayed: the constant found on a grid of log c, then refined by the
    secant method."""
    start = np.concatenate([np.asarray(r["start_p"][k]) for k in r["start_p"]])
    target = np.concatenate([np.asarray(r["rl_p"][k]) for k in r["rl_p"]]).mean()
    f = lambda x: odds_times(start, np.exp(x)).mean() - target      # noqa: E731
    grid = np.linspace(-30, 30, 6001)
    x0 = grid[np.argmin([abs(f(x)) for x in grid])]
    x1 = x0 + 1e-3
    for _ in range(50):
        if f(x1) == f(x0):
            break
        x0, x1 = x1, x1 - f(x1) * (x1 - x0) / (f(x1) - f(x0))
    return odds_times(start, np.exp(x1))


def test_rl_that_reaches_the_problems_out_of_the_starts_reach_beats_sharpening():
    """The start never samples 5 of 20 problems at each of 3 k's (p = 1e-5) and samples the rest at 0.3; RL solves
    those 5 at 0.5 and the rest at 0.5 too: the start sharpened to RL's pass@1 (replayed by hand) stays near 0 on
    the 5, so the primary holds; the start does not catch up, nothing is lost."""
    rs = [result(per_k((15, 0.3), (5, 1e-5)), per_k((15, 0.5), (5, 0.5 - 0.01 * s))) for s in range(5)]
    fs = passk.claims(rs)
    assert [findings.kind_of(f) for f in fs] == [findings.PREMISE, P, findings.SECONDARY, findings.SECONDARY]
    assert fs[0]["per_seed"] == [15] * 5 and fs[1]["control"].startswith("the start sharpened")
    sharp = sharpened_by_hand(rs[0])
    assert np.allclose(passk.sharpened(rs[0]), sharp, atol=1e-9)
    out = np.concatenate([np.asarray(rs[0]["start_p"][k]) for k in KS]) < 1e-3
    assert fs[1]["per_seed"][0] == pytest.approx(1 - 0.5 ** 256 - pass_exact(sharp[out], 256).mean(), abs=1e-4)
    assert fs[1]["per_seed"][0] > 0.9
    assert verdicts(rs) == [H, H, F, F]


def test_pure_sharpening_is_not_beyond_sharpening_though_it_lifts_the_tail():
    """RL that only multiplies every problem's odds by one constant (a different one per seed) reads 0 on the
    primary, which does not hold; the negative control it carries, the sharpened start against the start on the
    same problems, is large: the claim "RL beats the start there" would have passed on sharpening alone."""
    rs = []
    for s in range(5):
        start = per_k((15, 0.3), (5, 1e-4))
        rs.append(result(start, {k: list(odds_times(p, 20.0 + 5 * s)) for k, p in start.items()}))
    f = findings.gate(passk.claims(rs))[1]
    assert all(abs(v) < 1e-3 for v in f["per_seed"]) and f["verdict"] != H
    assert f["sharpening"]["value"] > 0.3 and len(f["sharpening"]["per_seed"]) == 5
    assert f["sharpening"]["verdict"] == H and f["sharpening"]["threshold"] == f["threshold"]


def test_rl_that_loses_problems_shrinks_coverage_and_the_start_catches_up():
    """Yue et al.'s picture: RL sharpens 11 problems, loses 4 the start samples at 0.3 and reaches none of the 5 out
    of reach: nothing beyond sharpening, the start catches up at N = 256, coverage shrinks."""
    rs = [result(per_k((15, 0.3), (5, 1e-5)), per_k((11, 0.95 - 0.01 * s), (9, 1e-5))) for s in range(5)]
    assert verdicts(rs) == [H, F, H, H]


def test_too_few_problems_out_of_reach_leave_the_primary_untestable():
    few = [result(per_k((18, 0.3), (2, 1e-5)), per_k((18, 0.95), (2, 0.5))) for _ in range(5)]   # 6 per seed
    fs = findings.gate(passk.claims(few))
    assert fs[0]["verdict"] == F and fs[0]["per_seed"] == [6] * 5
    assert fs[1]["verdict"] == findings.UNTESTABLE and fs[1]["ungated"] == H
    none = [result(per_k((20, 0.3)), per_k((20, 0.95))) for _ in range(5)]
    fs = findings.gate(passk.claims(none))
    assert fs[0]["verdict"] == F and fs[1]["verdict"] == findings.UNTESTABLE
    assert "at least 10 problems" in fs[1]["untestable"]


def test_the_placebo_trains_rl_on_a_random_reward_with_its_own_stream(monkeypatch):
    """The placebo is RL as the treatment runs it (the same preset, steps and seed) on a reward drawn at random
    (Shao et al.'s spurious reward), from a stream of the seed's own that no other seed shares; the treatment gets
    the rule reward. Both arms are read on the same problems; the room leaves the primary space to pass and fail."""
    from reasonlab.core import rewards
    cfg = passk.Config()
    pl = passk.placebo(cfg)
    assert pl.reward == "random" and pl.rl_steps == cfg.rl_steps and pl != cfg
    pl.validate()
    torch.manual_seed(0)
    model = GPT(d_model=16, n_layers=1, n_heads=2).eval()
    monkeypatch.setattr(passk, "thinker_model", lambda *a, **kw: model)
    trained = []
    monkeypatch.setattr(passk, "train", lambda policy, ref, rl, reward_fn=None, log=None: trained.append((rl, reward_fn)))
    env = type("Env", (), {"cache": None, "device": "cpu"})()
    r = passk.run(passk.Config(n_test=2), 0, env)
    rp = passk.run(passk.Config(n_test=2, reward="random"), 0, env)
    (rl, fn), (rl_p, fn_p) = trained
    assert fn is None and rl == rl_p and rl.seed == 0 and r["reward"] == "rule" and rp["reward"] == "random"
    assert r["start_p"] == rp["start_p"]                     # the same problems, the same start
    draws = [fn_p(None, {}) for _ in range(2000)]
    again = rewards.random_reward(passk.replicate_seed(0, "passk/random-reward"))
    assert draws == [again(None, {}) for _ in range(2000)] and set(draws) == {0.0, 1.0}
    passk.run(passk.Config(n_test=2, reward="random"), 1, env)
    assert [trained[-1][1](None, {}) for _ in range(200)] != draws[:200]       # another seed, another stream
    assert passk.room(cfg) == (-1.0, 1.0)
    assert findings.out_of_room(passk.room(cfg), passk.TH["passk.expands"].value) is None
    with pytest.raises(ValueError):
        passk.Config(pass_n=100).validate()


def test_rl_for_no_steps_leaves_the_start_and_reads_zero(monkeypatch):
    """rl_steps = 0: the RL arm is the start (train is never called), and so is its sharpening: the primary reads 0
    on every seed and does not hold."""
    torch.manual_seed(0)
    model = GPT(d_model=16, n_layers=1, n_heads=2).eval()
    monkeypatch.setattr(passk, "thinker_model", lambda *a, **kw: model)
    monkeypatch.setattr(passk, "train", lambda *a, **kw: (_ for _ in ()).throw(AssertionError("trained")))
    rs = [passk.run(passk.Config(rl_steps=0, n_test=2), s, type("Env", (), {"cache": None, "device": "cpu"})())
          for s in range(3)]
    assert rs[0]["rl_p"] == rs[0]["start_p"] and all(passk.out_of_reach(r).any() for r in rs) and "task" not in rs[0]
    f = findings.gate(passk.claims(rs))[1]
    assert all(abs(v) < 1e-6 for v in f["per_seed"]) and f.get("ungated", f["verdict"]) == F


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
    r = passk.run(passk.Config(task="modprod", rl_steps=0, n_test=1), 0, type("Env", (), {"cache": None, "device": "cpu"})())
    assert asked == ["modprod"] and r["task"] == "modprod" and sorted(r["start_p"]) == list(range(2, 9))
    passk.check(r)
