"""RL: hand-computed advantages and losses, exact on-policy ratio, KL estimators, micro-batch invariance, resume."""
import copy
import json
import math

import pytest
import torch
import torch.nn.functional as F

import reasonlab as R
from reasonlab import tasks
from reasonlab.train import rl
from reasonlab.train.rl import RLConfig, advantages, aggregate, kl_terms, policy_loss_terms, train
from reasonlab.train.sft import build_model


def length_reward(problem, parsed):
    """Always varies within a group, so every step has a learning signal."""
    return float(parsed["length"])


@pytest.fixture
def sgd(monkeypatch):
    """Swap Adam for plain SGD so parameter changes are the gradient itself (Adam hides scale errors)."""
    monkeypatch.setattr(rl, "AdamW", lambda params, lr, **kw: torch.optim.SGD(params, lr=lr))


def cfg(algo="grpo", **kw):
    base = dict(steps=1, prompts_per_step=4, num_generations=6, log_every=0, seed=1)
    return RLConfig.preset(algo, **{**base, **kw})


# -- advantages ---------------------------------------------------------------------------------------------------

R4 = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.1, 0.1, 1.1, 0.1]])


def test_grpo_advantage_by_hand():
    a = advantages(R4, cfg("grpo"))
    s = math.sqrt(1 / 3)                    # unbiased std of (1, 0, 0, 1)
    assert torch.allclose(a[0], torch.tensor([0.5, -0.5, -0.5, 0.5]) / (s + 1e-4))
    assert torch.allclose(a[1], torch.tensor([-0.25, -0.25, 0.75, -0.25]) / (0.5 + 1e-4))


def test_dr_grpo_and_reinforce_baseline_advantage_is_centred_only():
    for algo in ("dr_grpo", "reinforce_baseline"):
        assert torch.allclose(advantages(R4, cfg(algo)), torch.tensor([[0.5, -0.5, -0.5, 0.5], [-0.25, -0.25, 0.75, -0.25]]))


def test_rloo_advantage_is_leave_one_out():
    a = advantages(R4, cfg("rloo"))
    want = torch.tensor([[r - (R4[i].sum() - r) / 3 for r in R4[i]] for i in range(2)])
    assert torch.allclose(a, want)
    assert torch.allclose(a[0], torch.tensor([2 / 3, -2 / 3, -2 / 3, 2 / 3]))


def test_reinforce_advantage_is_the_reward():
    assert torch.equal(advantages(R4, cfg("reinforce")), R4)


def test_batch_scaling():
    a = advantages(R4, cfg("grpo", scale_rewards="batch"))
    assert torch.allclose(a, (R4 - R4.mean(1, keepdim=True)) / (R4.std() + 1e-4))


# -- losses -------------------------------------------------------------------------------------------------------

def test_clipped_surrogate_by_hand():
    c = cfg("grpo")                               # epsilon 0.2
    lp = torch.log(torch.tensor([[1.5, 1.1, 0.5]]))
    old = torch.zeros(1, 3)
    mask = torch.ones(1, 3)
    loss, lo, hi = policy_loss_terms(lp, old, torch.tensor([1.0]), mask, c)
    assert torch.allclose(loss, torch.tensor([[-1.2, -1.1, -0.5]]))   # min(rA, clip(r)A)
    assert hi.tolist() == [[True, False, False]] and not lo.any()
    loss, lo, hi = policy_loss_terms(lp, old, torch.tensor([-1.0]), mask, c)
    assert torch.allclose(loss, torch.tensor([[1.5, 1.1, 0.8]]))
    assert lo.tolist() == [[False, False, True]] and not hi.any()


def test_dapo_clip_higher():
    c = cfg("dapo")                               # epsilon 0.2, epsilon_high 0.28
    lp = torch.log(torch.tensor([[1.25, 1.4]]))
    loss, _, hi = policy_loss_terms(lp, torch.zeros(1, 2), torch.tensor([2.0]), torch.ones(1, 2), c)
    assert torch.allclose(loss, torch.tensor([[-2.5, -2.56]])) and hi.tolist() == [[False, True]]


def test_gspo_sequence_ratio():
    """One ratio per completion, exp of the MEAN log ratio over its real tokens: a sum (exp 0.2), or the padding
    token counted (exp(9.2 / 3)), would give another loss. Unclipped first, then clipped by GSPO's tiny range."""
    lp = torch.tensor([[0.2, 0.0, 9.0], [-0.3, 0.0, 0.0]])   # row 0's third token and row 1's last two are padding
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    wide = cfg("gspo", epsilon=0.9, epsilon_high=10.0)
    loss, lo, hi = policy_loss_terms(lp, torch.zeros(2, 3), torch.tensor([1.0, -2.0]), mask, wide)
    assert torch.allclose(loss[0, :2], torch.tensor([-math.exp(0.1)] * 2))
    assert torch.allclose(loss[1, :1], torch.tensor([2 * math.exp(-0.3)])) and not lo.any() and not hi.any()
    c = cfg("gspo")                               # clip to [1 - 3e-4, 1 + 4e-4]
    loss, lo, hi = policy_loss_terms(lp, torch.zeros(2, 3), torch.tensor([1.0, -2.0]), mask, c)
    assert torch.allclose(loss[0, :2], torch.tensor([-(1 + 4e-4)] * 2)) and hi[0, :2].all()
    assert torch.allclose(loss[1, :1], torch.tensor([2 * (1 - 3e-4)])) and lo[1, 0]   # -min(rA, clip(r)A), A < 0


def test_gspo_honours_loss_type():
    """The sequence ratio does not override the aggregation: dapo weights completions by their length."""
    per = torch.tensor([[2.0, 2.0, 0.0], [5.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    assert aggregate(per, mask, 2, 3, cfg("gspo")).item() == pytest.approx((2 + 5) / 2)
    assert aggregate(per, mask, 2, 3, cfg("gspo", loss_type="dapo")).item() == pytest.approx((2 + 2 + 5) / 3)


def test_reinforce_loss_is_minus_a_log_pi():
    lp = torch.tensor([[-0.5, -2.0]])
    loss, lo, hi = policy_loss_terms(lp, lp * 0, torch.tensor([3.0]), torch.ones(1, 2), cfg("reinforce"))
    assert torch.allclose(loss, torch.tensor([[1.5, 6.0]])) and not lo.any() and not hi.any()


def test_aggregations_by_hand():
    per = torch.tensor([[1.0, 2.0, 7.0], [3.0, 5.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    assert aggregate(per, mask, 2, 3, cfg("grpo")).item() == pytest.approx(((1 + 2) / 2 + 3) / 2)
    assert aggregate(per, mask, 2, 3, cfg("dapo")).item() == pytest.approx(6 / 3)
    assert aggregate(per, mask, 2, 3, cfg("dr_grpo")).item() == pytest.approx(6 / (2 * tasks.get("digits").max_out))
    assert tasks.get("digits").max_out == 14                                 # the course module's MAX_OUT
    add = tasks.get("add")                                                  # another task: its longest output
    assert aggregate(per, mask, 2, 3, cfg("dr_grpo", task="add")).item() == pytest.approx(6 / (2 * add.max_out))


# -- KL -----------------------------------------------------------------------------------------------------------

def test_kl_estimators_on_hand_computed_numbers_and_k3_nonnegative():
    # log pi = -1.0, log pi_ref = -0.5 at the sampled token: log(pi/pi_ref) = -0.5
    lp, ref = torch.tensor([-1.0]), torch.tensor([-0.5])
    assert kl_terms(lp, ref, None, None, "k1").item() == pytest.approx(-0.5)
    assert kl_terms(lp, ref, None, None, "k2").item() == pytest.approx(0.125)                  # (-0.5)^2 / 2
    assert kl_terms(lp, ref, None, None, "k3").item() == pytest.approx(0.1487212707)           # e^0.5 - 0.5 - 1
    x = torch.linspace(-20, 5, 200)
    assert (kl_terms(x, torch.zeros(200), None, None, "k3") >= 0).all()


def test_exact_kl_is_the_categorical_kl_and_the_estimators_match_it_on_samples():
    """`exact` against torch.distributions (an independent computation over the vocabulary); k1 and k3 are
    unbiased on samples; k2 is biased when the two are far apart and close to the KL when they are near."""
    g = torch.Generator().manual_seed(0)
    logits, ref_logits = torch.randn(18, generator=g), torch.randn(18, generator=g)
    Cat = torch.distributions.Categorical
    for lg, rlg in ((logits, ref_logits), (logits, logits + 0.1 * torch.randn(18, generator=g))):
        exact = kl_terms(None, None, lg, rlg, "exact").item()
        assert exact == pytest.approx(torch.distributions.kl_divergence(Cat(logits=lg), Cat(logits=rlg)).item(), rel=1e-4)
        tok = torch.multinomial(F.softmax(lg, -1), 400_000, replacement=True, generator=g)
        lp, rlp = F.log_softmax(lg, -1)[tok], F.log_softmax(rlg, -1)[tok]
        for est in ("k1", "k3"):                  # within 4 standard errors of the exact value
            x = kl_terms(lp, rlp, None, None, est)
            assert abs(x.mean().item() - exact) < 4 * x.std().item() / len(x) ** 0.5, est
        k2 = kl_terms(lp, rlp, None, None, "k2")
        far = abs(k2.mean().item() - exact) > 10 * k2.std().item() / len(k2) ** 0.5
        assert far == (rlg is ref_logits)         # biased far apart; near, k2 ~ KL to second order
        if not far:
            assert k2.mean().item() == pytest.approx(exact, rel=0.1)


def test_grpo_loss_with_kl_on_a_hand_computed_example():
    """One completion of two tokens, first update (ratio 1), A = 1, beta 0.04, k3:
    per token -A + beta (e^d - d - 1) with d = log pi_ref - log pi = (-0.2, 0.4); grpo takes their mean."""
    c = cfg("grpo")
    logp, ref_logp = torch.tensor([[-0.5, -1.0]]), torch.tensor([[-0.7, -0.6]])
    mask = torch.ones(1, 2)
    per_tok, _, _ = policy_loss_terms(logp, logp, torch.tensor([1.0]), mask, c)
    per_tok = per_tok + c.beta * kl_terms(logp, ref_logp, None, None, "k3")
    k3 = [0.0187307531, 0.0918246976]            # e^-0.2 + 0.2 - 1, e^0.4 - 0.4 - 1
    want = ((-1 + 0.04 * k3[0]) + (-1 + 0.04 * k3[1])) / 2
    assert aggregate(per_tok, mask, 1, 2, c).item() == pytest.approx(want, abs=1e-7)


# -- the loop -----------------------------------------------------------------------------------------------------

def test_parameters_change_after_a_step():
    m = build_model(0)
    before = copy.deepcopy(m.state_dict())
    train(m, copy.deepcopy(m), cfg("grpo"), reward_fn=length_reward, log=None)
    changed = [k for k, v in m.state_dict().items() if not torch.equal(v, before[k])]
    assert len(changed) == len(before)


def test_a_step_on_another_task_draws_its_problems_and_scores_its_answers(monkeypatch):
    """cfg.task picks the problems (add, k in k_range), the rollouts' parse and the step's accuracy: the default rule
    reward pays a right multi-digit answer."""
    ro = []
    orig = rl.sample_groups
    monkeypatch.setattr(rl, "sample_groups", lambda *a, **k: ro.append(orig(*a, **k)) or ro[-1])
    add = tasks.get("add")
    h = train(build_model(0, task=add), None, cfg("grpo", task="add", k_range=(2, 3), beta=0.0), log=None)
    assert all(p.task == "add" and p.k in (2, 3) and add.part_of(p) == "train" for p in ro[0].problems)
    right = [add.correct(ro[0].problems[i // 6], q) for i, q in enumerate(ro[0].parsed)]
    assert h[0]["acc"] == pytest.approx(sum(right) / len(right))
    assert ro[0].parsed == [add.parse(o) for o in ro[0].outs]
    assert RLConfig(task="add").ks() == (add.k_min, add.k_max)


def test_ratio_is_exactly_one_on_the_first_update(sgd):
    """With a vanishing clip range a ratio of 1 + 1e-7 would be clipped: nothing is, and the step equals the plain
    policy gradient with the same advantages. The second update is off-policy and does clip."""
    a, b = build_model(0), build_model(0)
    h = train(a, None, cfg("grpo", beta=0.0, epsilon=1e-12, num_iterations=1, learning_rate=0.1, grad_clip=1e9),
              reward_fn=length_reward, log=None)
    assert h[0]["clip_low"] == 0 and h[0]["clip_high"] == 0
    train(b, None, cfg("grpo", beta=0.0, clip=False, num_iterations=1, learning_rate=0.1, grad_clip=1e9),
          reward_fn=length_reward, log=None)
    for x, y in zip(a.parameters(), b.parameters()):
        assert torch.allclose(x, y, atol=1e-7)
    h = train(build_model(0), None, cfg("grpo", beta=0.0, epsilon=1e-12, num_iterations=2, learning_rate=0.1),
              reward_fn=length_reward, log=None)
    assert h[0]["clip_low"] + h[0]["clip_high"] > 0


@pytest.mark.parametrize("algo", ["grpo", "dr_grpo", "dapo", "gspo", "reinforce", "rloo"])
def test_gradient_does_not_depend_on_micro_batching(sgd, algo):
    ref = build_model(1)
    runs = []
    for micro in (0, 5):
        m = build_model(0)
        train(m, ref if algo in ("grpo", "dr_grpo", "rloo") else None,
              cfg(algo, micro_batch=micro, learning_rate=0.05, grad_clip=1e9, kl_estimator="k3"),
              reward_fn=length_reward, log=None)
        runs.append(torch.cat([p.flatten() for p in m.parameters()]))
    start = torch.cat([p.flatten() for p in build_model(0).parameters()])
    assert not torch.equal(runs[0], start)
    assert torch.allclose(runs[0] - start, runs[1] - start, atol=1e-6, rtol=1e-4)


def test_resume_is_bit_identical(tmp_path):
    base = build_model(0)
    full = copy.deepcopy(base)
    train(full, copy.deepcopy(base), cfg("grpo", steps=4), reward_fn=length_reward, run_dir=str(tmp_path / "a"), log=None)
    part = copy.deepcopy(base)
    train(part, copy.deepcopy(base), cfg("grpo", steps=2), reward_fn=length_reward, run_dir=str(tmp_path / "b"), log=None)
    with open(tmp_path / "b" / "metrics.jsonl", "a") as f:   # a step logged after the checkpoint, then a crash
        f.write(json.dumps({"step": 3}) + "\n")
    fresh = copy.deepcopy(base)                          # a new process: only the run directory carries state
    hist = train(fresh, copy.deepcopy(base), cfg("grpo", steps=4), reward_fn=length_reward,
                 run_dir=str(tmp_path / "b"), resume=True, log=None)
    for (k, x), y in zip(full.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(x, y), k
    assert [h["step"] for h in hist] == [1, 2, 3, 4]
    lines = (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(s)["step"] for s in lines] == [1, 2, 3, 4]


def test_nan_reward_stops_naming_the_step_and_keeps_the_last_checkpoint(tmp_path):
    calls = []

    def flaky(problem, parsed):
        calls.append(1)
        return float("nan") if len(calls) > 2 * 4 * 6 else 1.0 + parsed["length"]

    with pytest.raises(FloatingPointError, match="step 3"):
        train(build_model(0), None, cfg("grpo", steps=5, beta=0.0, checkpoint_every=1), reward_fn=flaky,
              run_dir=str(tmp_path), log=None)
    meta = json.loads((tmp_path / "ckpt-000002" / "state.json").read_text())
    assert meta["step"] == 2


def test_nan_parameters_stop_the_run():
    m = build_model(0)
    with torch.no_grad():
        m.head.weight[3, 3] = float("inf")
    with pytest.raises(FloatingPointError, match="step 1"):
        train(m, None, cfg("grpo", beta=0.0), reward_fn=length_reward, log=None)


def test_dynamic_sampling_drops_flat_groups_and_refills():
    """Groups of odd k get reward 0 whatever they write (no signal): they are dropped and new problems drawn until
    the step has prompts_per_step groups with signal."""
    seen = []

    def even_only(problem, parsed):
        seen.append(problem.k)
        return float(problem.k % 2 == 0) * parsed["length"]

    h = train(build_model(0), None, cfg("dapo", steps=1, max_resample=20), reward_fn=even_only, log=None)
    assert h[0]["groups"] == 4 and 0 < h[0]["frac_reward_zero_std"] < 1
    assert len(seen) > 4 * 6 and any(k % 2 for k in seen)          # refilled after dropping odd-k groups
    ro = []
    orig = rl.sample_groups
    rl.sample_groups = lambda *a, **k: ro.append(orig(*a, **k)) or ro[-1]
    try:
        train(build_model(0), None, cfg("dapo", steps=1, max_resample=20), reward_fn=even_only, log=None)
    finally:
        rl.sample_groups = orig
    assert all(d.k % 2 == 0 for d in ro[0].problems)
    assert (ro[0].rewards.max(1).values > ro[0].rewards.min(1).values).all()


def flat_at_step_2(r, groups, step, steps):
    """group_fn: every group's rewards agree at the second step, so DAPO's dynamic sampling skips it."""
    return torch.zeros_like(r) if step == 1 else r


def test_a_skipped_step_is_logged_checkpointed_and_called_back(tmp_path):
    """A run whose last step is skipped still writes that step's metrics line and its final checkpoint, the
    callback sees it, and the history marks it."""
    calls = []
    h = train(build_model(0), None, cfg("dapo", steps=2, max_resample=1), reward_fn=length_reward,
              group_fn=flat_at_step_2, run_dir=str(tmp_path), callback=lambda rec, pol: calls.append(rec["step"]),
              log=None)
    assert [x.get("skipped", False) for x in h] == [False, True] and calls == [1, 2]
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [1, 2] and lines[1]["skipped"]
    assert json.loads((tmp_path / "ckpt-000002" / "state.json").read_text())["step"] == 2


def test_resume_across_a_skipped_step_is_bit_identical(tmp_path):
    base = build_model(0)
    full = copy.deepcopy(base)
    c4 = cfg("dapo", steps=4, max_resample=1)
    train(full, None, c4, reward_fn=length_reward, group_fn=flat_at_step_2, log=None)
    part = copy.deepcopy(base)
    train(part, None, cfg("dapo", steps=2, max_resample=1), reward_fn=length_reward, group_fn=flat_at_step_2,
          run_dir=str(tmp_path), log=None)
    fresh = copy.deepcopy(base)
    hist = train(fresh, None, c4, reward_fn=length_reward, group_fn=flat_at_step_2, run_dir=str(tmp_path),
                 resume=True, log=None)
    assert [x.get("skipped", False) for x in hist] == [False, True, False, False]
    for (k, x), y in zip(full.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(x, y), k


@pytest.mark.parametrize("fn", ["kimi_length_reward", "arm_format_scaling", "constant_ramp"])
def test_group_fn_shapes_the_rewards_the_loop_trains_on(fn):
    """group_fn gets the (P, G) rewards, each group's parses, the step and the step count, and what it returns is
    what the step's advantages and metrics use."""
    from reasonlab.core import rewards
    got = []

    def spy(r, groups, step, steps):
        assert r.shape == (4, 6) and len(groups) == 4 and all(len(g) == 6 for g in groups) and steps == 2
        out = (r * 0 + torch.arange(6.0) + step) if fn == "constant_ramp" else getattr(rewards, fn)(r, groups, step, steps)
        got.append(out)
        return out

    h = train(build_model(0), None, cfg("grpo", steps=2, beta=0.0), reward_fn=length_reward, group_fn=spy, log=None)
    assert len(got) == 2
    for rec, out in zip(h, got):
        assert rec["reward"] == pytest.approx(out.mean().item())


def test_in_loop_exact_kl_equals_a_direct_computation(monkeypatch):
    """kl_exact in the step's record is the token mean of the full-vocabulary KL(pi || pi_ref), computed here
    directly, one sequence at a time, from the policy before its update."""
    policy, ref = build_model(0), build_model(1)
    start = copy.deepcopy(policy)
    ro = []
    orig = rl.sample_groups
    monkeypatch.setattr(rl, "sample_groups", lambda *a, **k: ro.append(orig(*a, **k)) or ro[-1])
    h = train(policy, ref, cfg("grpo", num_generations=3), reward_fn=length_reward, log=None)
    total, n = 0.0, 0
    for i, out in enumerate(ro[0].outs):
        ids = torch.tensor([tasks.get("digits").prompt_ids(ro[0].problems[i // 3]) + out])
        with torch.no_grad():
            p, q = start(ids)[0][0], ref(ids)[0][0]
        P = len(ids[0]) - len(out)
        for t in range(P - 1, len(ids[0]) - 1):             # the positions that predict the output tokens
            total += torch.distributions.kl_divergence(torch.distributions.Categorical(logits=p[t]),
                                                       torch.distributions.Categorical(logits=q[t])).item()
            n += 1
    assert h[0]["kl_exact"] == pytest.approx(total / n, rel=1e-4)


def test_rollouts_at_a_temperature_train_on_the_tempered_distribution(sgd):
    """Sampling at temperature 2 from model A is sampling at temperature 1 from model B, whose head is A's halved
    (logits / 2, exact in floating point). The loss must then see the same distribution, so the two runs move
    every parameter below the head alike; without tempering the loss, A would train off-policy."""
    a = build_model(0)
    b = copy.deepcopy(a)
    with torch.no_grad():
        b.head.weight.mul_(0.5)
    kw = dict(beta=0.0, learning_rate=0.05, grad_clip=1e9, num_iterations=1)   # one update: the heads then differ
    ha = train(a, None, cfg("grpo", temperature=2.0, **kw), reward_fn=length_reward, log=None)
    hb = train(b, None, cfg("grpo", **kw), reward_fn=length_reward, log=None)
    assert ha[0]["length"] == hb[0]["length"] and ha[0]["reward"] == hb[0]["reward"]   # the same samples
    moved = 0
    for (name, x), y, x0 in zip(a.named_parameters(), b.parameters(), build_model(0).parameters()):
        if not name.startswith("head"):
            assert torch.allclose(x - x0, y - x0, atol=1e-6, rtol=1e-4), name
            moved += not torch.equal(x, x0)
    assert moved > 0


@pytest.mark.parametrize("kw,msg", [
    (dict(loss_type="nope"), "loss_type"),
    (dict(num_generations=1), "num_generations"),
    (dict(clip=False, num_iterations=2), "num_iterations"),
    (dict(learning_rate=-1.0), "learning_rate"),
    (dict(k_range=(1, 9)), "k_range"),
    (dict(kl_estimator="k4"), "kl_estimator"),
    (dict(steps=0), "steps"),
    (dict(forced_trains="none"), "forced_trains"),
    (dict(forced_trains="format"), "force_direct > 0"),
    (dict(forced_trains="format", force_direct=0.05), "at least one forced rollout"),
    (dict(forced_trains="format", force_direct=0.25, importance_sampling_level="sequence"), "GSPO"),
])
def test_invalid_configs_are_rejected(kw, msg):
    with pytest.raises(ValueError, match=msg):
        RLConfig.preset("grpo", **kw)
    with pytest.raises(ValueError, match="unknown algo"):
        RLConfig.preset("ppo")


def test_forced_rollouts_train_what_forced_trains_says():
    from reasonlab.train.rl import forced_weights
    forced = [False, True]
    want = {"all": [[1, 1, 1], [1, 1, 1]], "format": [[1, 1, 1], [1, 0, 0]], "answer": [[1, 1, 1], [0, 1, 1]]}
    for what, w in want.items():
        c = RLConfig.preset("grpo", force_direct=0.25, forced_trains=what)
        assert forced_weights(forced, c, 3).tolist() == w


def test_forced_answer_tokens_get_no_gradient_when_only_the_format_trains():
    """With forced_trains='format', a forced rollout's answer tokens get no gradient; its "A" and the free rollout's
    tokens do."""
    from reasonlab.train.rl import aggregate, forced_weights, policy_loss_terms
    c = RLConfig.preset("grpo", force_direct=0.25, forced_trains="format", beta=0.0)
    lp = torch.tensor([[-0.1, -0.5, -0.2], [-0.3, -0.4, -0.9]], requires_grad=True)
    mask = torch.ones(2, 3)
    per_tok, _, _ = policy_loss_terms(lp, lp.detach(), torch.tensor([1.0, -1.0]), mask, c)
    aggregate(per_tok * forced_weights([False, True], c, 3), mask, 2, 6, c).backward()
    assert lp.grad[1, 1:].abs().sum() == 0 and lp.grad[1, 0] != 0 and (lp.grad[0] != 0).all()


def test_beta_needs_a_reference():
    with pytest.raises(ValueError, match="reference"):
        train(build_model(0), None, cfg("grpo"), log=None)


def test_spec_rl_train_surface():
    policy = R.get_model("b", R.BASE_CFG, quick=True, log=None)
    ref = copy.deepcopy(policy)
    seen = []
    hist = R.rl_train(policy, ref, 2, prompts_per_step=4, group=4, callback=lambda s, p: seen.append(s), every=1)
    assert [h["step"] for h in hist] == [1, 2] and seen == [1, 2]
    for h in hist:
        assert set(h) >= {"step", "reward", "acc", "length", "share", "kl"} and set(h["share"]) == set(R.FORMATS)
    hist = R.rl_train(copy.deepcopy(ref), ref, 1, algo="reinforce", prompts_per_step=4, group=4)
    assert hist[0]["clip_low"] == 0 and hist[0]["step"] == 1


def test_rl_train_shows_its_steps_when_asked_or_on_a_terminal(capsys):
    """A long rl_train call shows a bar of its steps on stderr (progress=True; None: where stderr is a terminal,
    not here)."""
    policy = build_model(0)
    R.rl_train(policy, None, 2, prompts_per_step=2, group=2, beta=0.0, progress=True)
    assert "/2 [" in capsys.readouterr().err                     # the bar of 2 steps
    R.rl_train(policy, None, 1, prompts_per_step=2, group=2, beta=0.0)
    assert "step/s" not in capsys.readouterr().err


def test_rl_train_applies_or_rejects_knobs_the_preset_sets():
    """beta / clip / inner at the spec's defaults take the preset's values; other values are applied, or refused
    where the preset cannot take them (they used to be dropped silently)."""
    seen = {}
    orig = rl.train
    rl.train = lambda policy, ref, cfg, **kw: seen.setdefault("cfg", cfg) and []
    try:
        R.rl_train(build_model(0), None, 1, algo="dapo")
        assert seen.pop("cfg").beta == 0.0
        R.rl_train(build_model(0), build_model(0), 1, algo="dapo", beta=0.1, clip=0.3)
        c = seen.pop("cfg")
        assert c.beta == 0.1 and c.epsilon == 0.3 and c.epsilon_high == 0.28
        R.rl_train(build_model(0), None, 1, algo="gspo", inner=3)
        assert seen.pop("cfg").num_iterations == 3
        with pytest.raises(ValueError, match="num_iterations"):
            R.rl_train(build_model(0), None, 1, algo="reinforce", inner=3)
        with pytest.raises(ValueError, match="does not clip"):
            R.rl_train(build_model(0), None, 1, algo="reinforce", clip=0.3)
    finally:
        rl.train = orig
