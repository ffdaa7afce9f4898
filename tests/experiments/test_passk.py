"""The pass@k lesson: exact pass@N, and its claims on hand-made results (hold, fail, untestable)."""
import numpy as np
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
    return {"start": s, "start_p": sp, "rl": r, "rl_p": rp}


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


WEAK = {k: [0.3] * 20 for k in (5, 6, 7)}


def test_claims_hold_fail_and_are_untestable():
    # the start samples every problem now and then (p = 0.3), RL makes 18 of 20 near-certain and loses 2: the start
    # catches up at N = 256 and RL shrinks coverage; it gains nothing the start could not sample
    rs = [result(WEAK, {k: [0.95 - 0.01 * s] * 18 + [1e-5, 1e-5] for k in WEAK}) for s in range(5)]
    assert [len(passk.weak_ks(r)) for r in rs] == [3] * 5
    fs = passk.claims(rs)
    assert [f["verdict"] for f in fs] == [findings.HOLDS, findings.FAILS, findings.HOLDS]
    # the start never samples 5 of 20 problems; RL solves 4 of them: RL expands coverage, the start does not catch up
    rs = [result({k: [0.3] * 15 + [1e-5] * 5 for k in WEAK}, {k: [0.9 + 0.01 * s] * 19 + [5e-3] for k in WEAK})
          for s in range(5)]
    fs = passk.claims(rs)
    assert [f["verdict"] for f in fs] == [findings.FAILS, findings.HOLDS, findings.FAILS]
    # RL that does not lift pass@1 by 0.2 anywhere: the precondition fails and every claim says so
    rs = [result(WEAK, {k: [0.35] * 20 for k in WEAK}) for _ in range(5)]
    fs = passk.claims(rs)
    assert all(f["verdict"] == findings.UNTESTABLE and "precondition" in f["untestable"] for f in fs)


def test_catching_up_is_untestable_when_rl_is_at_the_ceiling():
    rs = [result(WEAK, {k: [1.0 - 1e-12] * 20 for k in WEAK}) for _ in range(5)]
    assert passk.claims(rs)[0]["verdict"] == findings.UNTESTABLE


def test_check_rejects_a_result_without_its_arms():
    passk.check(result(WEAK, WEAK))
    try:
        passk.check({"start": {}})
    except ValueError as e:
        assert "passk" in str(e)
    else:
        raise AssertionError("a result without rl passed the check")
