"""The entropy lesson: the loop's entropy bonus (it raises the exact entropy, and at 0 changes nothing), the probe,
and the claims on hand-made results (hold, fail, untestable)."""
import copy
import math
from dataclasses import asdict, replace

import numpy as np
import pytest
import torch

from reasonlab import tasks
from reasonlab.core.problems import problems_per_k
from reasonlab.core.sampling import output_logits
from reasonlab.experiments import entropy as E
from reasonlab.stats import findings
from reasonlab.train import rl
from reasonlab.train.rl import RLConfig, entropy, train
from reasonlab.train.sft import build_model

DIGITS = tasks.get("digits")


def flat_reward(digits, parsed):
    """Every completion gets the same reward: advantages are 0, so only the bonus moves the policy."""
    return 1.0


def cfg(**kw):
    base = {"steps": 1, "prompts_per_step": 4, "num_generations": 6, "log_every": 0, "seed": 1, "beta": 0.0,
            "learning_rate": 1e-2}
    return RLConfig.preset("grpo", **{**base, **kw})


def format_entropy(model, probs) -> float:
    with torch.no_grad():
        logits, _, _ = output_logits(model, [DIGITS.prompt_ids(p) for p in probs], [[DIGITS.id["A"]]] * len(probs))
    return entropy(logits[:, 0]).mean().item()


def test_entropy_is_the_categorical_entropy():
    logits = torch.log(torch.tensor([[0.5, 0.25, 0.25], [1.0, 1e-30, 1e-30]]))
    assert torch.allclose(entropy(logits), torch.tensor([1.5 * math.log(2), 0.0]), atol=1e-6)


def test_the_bonus_raises_the_exact_entropy_and_nothing_moves_without_it(noisy_model, monkeypatch):
    monkeypatch.setattr(rl, "AdamW", lambda params, lr, **kw: torch.optim.SGD(params, lr=lr))
    probs = problems_per_k(5, seed=0)
    before = format_entropy(noisy_model, probs)
    m = copy.deepcopy(noisy_model)
    train(m, None, cfg(entropy_coef=0.5, grad_clip=1e9), reward_fn=flat_reward, log=None)
    assert format_entropy(m, probs) > before + 1e-3
    still = copy.deepcopy(noisy_model)
    train(still, None, cfg(), reward_fn=flat_reward, log=None)
    for x, y in zip(still.parameters(), noisy_model.parameters()):
        assert torch.equal(x, y)


def test_a_zero_coefficient_leaves_a_seeded_run_bit_identical(noisy_model):
    runs = []
    for kw in ({}, {"entropy_coef": 0.0}):
        m = copy.deepcopy(noisy_model)
        hist = train(m, copy.deepcopy(noisy_model), cfg(steps=2, beta=0.04, **kw), log=None)
        runs.append(([{k: v for k, v in h.items() if k not in ("step_time", "tokens_per_s")} for h in hist],
                     [p.detach().clone() for p in m.parameters()]))
    assert runs[0][0] == runs[1][0]
    assert all(torch.equal(x, y) for x, y in zip(runs[0][1], runs[1][1]))


@pytest.mark.parametrize("coef", [-1e-3, math.nan, math.inf])
def test_a_negative_or_non_finite_coefficient_is_rejected(coef):
    with pytest.raises(ValueError, match="entropy_coef|finite"):
        cfg(entropy_coef=coef)


def test_the_probe_is_exact_on_a_model(noisy_model):
    probs = problems_per_k(2, seed=0)
    p = E.probe(noisy_model, probs)
    assert abs(p["format_H"] - format_entropy(noisy_model, probs)) < 1e-6
    assert set(p["roles"]) == {"direct", "short", "full"} and "chain" in p["roles"]["full"]
    assert 0 <= p["acc"] <= 1 and 0 < sum(p["p_format"].values()) <= 1 + 1e-6


@pytest.mark.parametrize("task", ["digits", "add"])
def test_the_probe_reads_the_answer_and_the_chain_positions(noisy_model, task):
    """Replay with one plain forward per problem: the entropy at the answer's words (digits: the one digit at output
    position n - 2; add: k + 1 digits, their mean) and at the chain's states (positions 1 up to "A") of each
    format's correct solution, averaged as the probe says."""
    task = tasks.get(task)
    model = noisy_model if task.name == "digits" else build_model(1, task=task).eval()
    probs = problems_per_k(2, seed=1) if task.name == "digits" else problems_per_k(1, seed=1, ks=[2, 3], task=task)
    p = E.probe(model, probs)
    for name in ("direct", "short", "full"):
        answer, chain = [], []
        for d in probs:
            out = [task.id[w] for w in task.solution(d, name)]
            L = task.answer_len(d.k)
            with torch.no_grad():
                lg = model(torch.tensor([task.prompt_ids(d) + out]))[0][0].float()
            pr = torch.softmax(lg, -1)
            h = -(pr * torch.log_softmax(lg, -1)).sum(-1)
            at = lambda j: h[task.prompt_len - 1 + j].item()              # noqa: E731  (logits before output j)
            answer.append(np.mean([at(j) for j in range(len(out) - 1 - L, len(out) - 1)]))
            if name != "direct":
                chain.append(np.mean([at(j) for j in range(1, len(out) - 2 - L)]))
        assert p["roles"][name]["answer"] == pytest.approx(np.mean(answer), abs=1e-5)
        if chain:
            assert p["roles"][name]["chain"] == pytest.approx(np.mean(chain), abs=1e-5)


def point(h: float, acc: float, step: int) -> dict:
    roles = {"direct": {"answer": 2.0}, "short": {"chain": 0.1, "answer": 0.1}, "full": {"chain": 0.1, "answer": 0.1}}
    return {"step": step, "format_H": h, "acc": acc, "roles": roles,
            "p_format": {"direct": 0.1, "short": 0.4, "full": 0.5}}


def arm(h_end: float, acc_end: float = 0.9, solved=None, zs=(0.2, 0.8), steps: int = 40) -> dict:
    curve = [point(1.0 - (1.0 - h_end) * s / steps, acc_end, s) for s in range(10, steps + 1, 10)]
    hist = [{"step": s, "frac_reward_zero_std": zs[0] if s <= steps // 2 else zs[1], "entropy": 0.2, "acc": 0.5,
             "clip_high": 0.0, "clip_low": 0.0} for s in range(1, steps + 1)]
    return {"curve": curve, "solved": solved, "seconds": 1.0, "hist": hist}


def result(s: int, grpo=0.3, clip=0.5, bonus=0.6, start=1.05, acc=(0.9, 0.95), solved=(30, 20), zs=(0.2, 0.8)) -> dict:
    e = 0.01 * s     # seed-to-seed spread
    return {"start": point(start, 0.2, 0), "start_model": "erring thinker", "steps": 40,
            "settings": {"learning_rate": 3e-4, "num_iterations": 4, "epsilon_high": 0.28, "entropy_coef": 5e-3},
            "arms": {"grpo": arm(grpo + e, acc[0], solved[0], zs),
                     "clip_higher": arm(clip - e, acc[1] + e / 10, solved[1]),
                     "bonus": arm(bonus + e, acc[0], solved[0])}}


def verdicts(rs: list[dict]) -> tuple[list[str], list[str]]:
    """The premises' verdicts and the gated claims' verdicts (primary first)."""
    fs = findings.gate(E.claims(rs))
    return ([f["verdict"] for f in fs if findings.kind_of(f) == findings.PREMISE],
            [f["verdict"] for f in fs if findings.kind_of(f) != findings.PREMISE])


def test_claims_hold_fail_and_are_untestable():
    fs = E.claims([result(s) for s in range(5)])
    assert [findings.kind_of(f) for f in fs] == [findings.PREMISE] * 4 + [findings.PRIMARY] + [findings.SECONDARY] * 4
    assert verdicts([result(s) for s in range(5)]) == ([findings.HOLDS] * 4, [findings.HOLDS] * 5)
    assert fs[4]["control"] == "GRPO" and "epsilon_high" not in fs[4]["claim"] and "0.28" in fs[4]["claim"]
    worse = [result(s, clip=0.1, bonus=0.2, acc=(0.95, 0.85), solved=(20, 40), zs=(0.8, 0.2)) for s in range(5)]
    assert verdicts(worse) == ([findings.HOLDS] * 4, [findings.FAILS] * 5)
    # GRPO at the ceiling from its first probe: the accuracy and steps claims rest on premises that fail
    pre, ceiling = verdicts([result(s, acc=(1.0, 1.0), solved=(10, 10)) for s in range(5)])
    assert pre == [findings.HOLDS, findings.HOLDS, findings.FAILS, findings.FAILS]
    assert ceiling == [findings.HOLDS, findings.UNTESTABLE, findings.UNTESTABLE, findings.HOLDS, findings.HOLDS]
    # the start has no format entropy to lose: every claim is untestable, naming the premise
    gated = findings.gate(E.claims([result(s, start=0.3) for s in range(5)]))
    assert all(f["verdict"] == findings.UNTESTABLE and "entropy to lose" in f["untestable"]
               for f in gated if findings.kind_of(f) != findings.PREMISE)


def test_the_control_differs_only_in_the_upper_clip_and_the_placebo_is_grpo_again(noisy_model):
    """Clip-higher's RLConfig differs from GRPO's in epsilon_high alone; under the placebo (epsilon_high = GRPO's
    epsilon) the clip-higher arm is GRPO's config on a seed of its own: with that seed, a step is GRPO's bit for bit,
    and with its own seed it is another draw (an independent replicate); the room is +-ln V."""
    cfg = E.Config()
    grpo, clip = (asdict(E.arm_config(a, cfg, 0)) for a in ("grpo", "clip_higher"))
    assert {k for k in grpo if grpo[k] != clip[k]} == {"epsilon_high"} and clip["epsilon_high"] == 0.28
    assert {E.arm_config(a, E.Config(task="modprod"), 0).task for a in E.ARMS} == {"modprod"}
    pl = E.placebo(cfg)
    assert pl.epsilon_high == 0.2 and pl != cfg
    pl.validate()
    grpo, clip = (asdict(E.arm_config(a, pl, 0)) for a in ("grpo", "clip_higher"))
    assert {k for k in grpo if grpo[k] != clip[k]} - {"epsilon_high"} == {"seed"}     # the clip: GRPO's (below)
    assert clip["seed"] == E.replicate_seed(0) != 0
    small = {"steps": 2, "prompts_per_step": 4, "num_generations": 4}
    models, samples = [], []
    for c in (E.arm_config("grpo", pl, 0), E.arm_config("clip_higher", pl, 0),
              replace(E.arm_config("clip_higher", pl, 0), seed=0)):
        m = copy.deepcopy(noisy_model)
        hist = train(m, None, replace(c, **small), log=None)
        models.append([p.detach().clone() for p in m.parameters()])
        samples.append([(h["acc"], h["length"]) for h in hist])
    assert all(torch.equal(x, y) for x, y in zip(models[0], models[2])) and samples[0] == samples[2]
    assert samples[0] != samples[1]                                     # other problems and samples
    assert E.room(cfg) == pytest.approx((-math.log(18), math.log(18)))
    assert E.room(E.Config(task="compose")) == pytest.approx((-math.log(26), math.log(26)))   # its 26 words
    assert findings.out_of_room(E.room(cfg), 0.0) is None


def test_the_result_check_and_the_report(tmp_path):
    rs = [result(s) for s in range(3)]
    E.check(rs[0])
    with pytest.raises(ValueError):
        E.check({"arms": {"grpo": rs[0]["arms"]["grpo"]}, "start": rs[0]["start"]})
    [(md, _)] = E.render(rs, str(tmp_path))
    assert md.startswith("## Entropy") and "Holds" in md and (tmp_path / "entropy" / "curves.png").exists()
    with pytest.raises(ValueError, match="multiple"):
        E.Config(steps=42, eval_every=5).validate()
