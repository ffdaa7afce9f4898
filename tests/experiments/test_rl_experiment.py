"""The rl experiment: its primary's arms differ only in the baseline, the probe runs every step until solved on a
val draw, the claims on hand-made results (hold, fail, inconclusive, untestable by the room, the placebo), the
presets' overrides a sweep varies, their checks, and the table."""
from dataclasses import asdict

import pytest

from reasonlab import experiments as X
from reasonlab.core import problems as P
from reasonlab.experiments import rl as E
from reasonlab.stats import findings
from reasonlab.train.config import ALGOS, RLConfig


class FakeEnv:
    def base(self, seed, task="digits"):
        return __import__("torch").nn.Linear(1, 1)


def test_the_defaults_are_the_presets():
    cfg = E.Config()
    assert cfg.overrides() == {} and cfg.algos == ("grpo", "reinforce", "reinforce_baseline", "dr_grpo")
    assert (cfg.treatment, cfg.control, cfg.eval_every) == ("reinforce_baseline", "reinforce", 1)
    E.Config(algos=ALGOS).validate()


def test_the_primary_arms_differ_only_in_the_baseline():
    """The control is what a skeptic would propose: the same REINFORCE run without the group mean subtracted. Their
    RLConfigs (as the run builds them, overrides included) differ in the advantage alone (and the preset's name)."""
    cfg = E.Config()
    for over in ({}, dict(learning_rate=1e-4, num_generations=4)):
        t, c = (asdict(RLConfig.preset(a, steps=cfg.steps, seed=3, **over)) for a in (cfg.treatment, cfg.control))
        assert {k for k in t if t[k] != c[k]} == {"algo", "advantage"}
        assert (t["advantage"], c["advantage"], t["num_iterations"], t["clip"], t["beta"]) == ("group", "none", 1,
                                                                                               False, 0.0)


def fake_eval(accs):
    """An evaluate that returns the next accuracy of `accs` on each probe, recording every problem set it sees."""
    seen = []

    def evaluate(model, probs):
        seen.append(probs)
        acc = accs[min(len(seen) - 1, len(accs) - 1)]
        return {"acc": acc, "length": 5.0, "share": {"direct": 0.0}, "per_k": {2: {"acc": acc, "share": {}}}}
    return evaluate, seen


def fake_train(steps):
    def train(policy, ref, cfg, callback=None, **kw):
        hist = []
        for s in range(1, steps + 1):
            rec = {"step": s, "acc": 0.5, "length": 3.0, "kl_exact": 0.0, "entropy": 1.0, "share": {"direct": 1.0}}
            hist.append(rec)
            if callback:
                callback(rec, policy)
        return hist
    return train


def test_the_probe_runs_every_step_on_a_val_draw_until_solved(monkeypatch):
    """Greedy probes at steps 1, 2, 3, ... stop at the first >= 0.99 (step 4 here: no rounding to a grid); the probe
    set is the seed's val draw, the final evaluation the seed's own test draw."""
    monkeypatch.setattr(E, "train", fake_train(10))
    evaluate, seen = fake_eval([0.2, 0.5, 0.9, 0.995, 0.999])
    monkeypatch.setattr(E, "evaluate", evaluate)
    run = E.rl_run(FakeEnv().base(0), "reinforce", 1, steps=10, every=1, n_test=3, n_probe=4, start={"acc": 0.1})
    assert run["solved"]["step"] == 4 and [c["step"] for c in run["curve"]] == [1, 2, 3, 4]
    probe, final = seen[0], seen[-1]
    assert len(seen) == 5 and all(s == probe for s in seen[:4])
    assert {P.part_of(d) for d in probe} == {"val"} and final == P.test_problems(3, "rl", 1)
    assert E.probe_set(4, 0) != probe and P.test_problems(3, "rl", 0) != final          # each seed its own draws
    assert E.steps_to_solve(run) == 4 and E.steps_to_solve({**run, "solved": None}) == 10   # censored: the length


def run_of(algo: str, solved):
    return {"algo": algo, "solved": {"step": solved} if solved else None, "steps": 60, "hist": [],
            "sampled_last10": {"length": 6.0}}


def result(baseline, reinforce, grpo=20) -> dict:
    return {"reinforce_baseline": {**run_of("reinforce_baseline", baseline), "roles": ["treatment"]},
            "reinforce": {**run_of("reinforce", reinforce), "roles": ["control"]},
            "grpo": run_of("grpo", grpo), "dr_grpo": run_of("dr_grpo", grpo)}


def test_the_primary_holds_fails_and_is_inconclusive_on_hand_made_results():
    faster = E.claims([result(30 + s, 42 + 2 * s) for s in range(5)])
    assert [findings.kind_of(f) for f in faster] == [findings.PRIMARY, findings.SECONDARY, findings.SECONDARY]
    p = faster[0]
    assert p["verdict"] == findings.HOLDS and p["control"] == "reinforce" and p["per_seed"] == [12, 13, 14, 15, 16]
    assert p["statistic"].startswith("steps to 0.99: reinforce - reinforce_baseline")
    assert E.claims([result(40 + s, 35) for s in range(5)])[0]["verdict"] == findings.FAILS
    assert E.claims([result(40, 40 + d) for d in (-3, 2, 0, 4, -2)])[0]["verdict"] == findings.UNSURE
    censored = E.claims([result(None, None) for _ in range(5)])[0]     # neither solves: the same length, no effect
    assert censored["per_seed"] == [0] * 5 and censored["verdict"] == findings.FAILS
    gone = E.claims([{k: v for k, v in result(30, 40).items() if k != "reinforce"}])[0]
    assert gone["verdict"] == findings.UNSURE and "needs" in gone["statistic"]


def test_grpo_is_compared_in_updates_naming_every_difference():
    f = E.claims([result(30, 40, grpo=14 + s) for s in range(3)])[1]
    assert f["per_seed"] == [30 - 28, 30 - 30, 30 - 32] and f["statistic"].startswith("updates")
    assert all(w in f["claim"] for w in ("std", "two clipped-ratio updates", "KL"))


def test_the_placebo_runs_the_control_again_on_streams_of_its_own(monkeypatch):
    """The placebo config names the control as the treatment: run() trains the control's algorithm a second time,
    its RL seed hashed from the seed (training problems and samples of its own), on the seed's same probe and test
    problems; that replicate is the treatment, so the statistic has the spread two runs of one algorithm have."""
    cfg = E.Config()
    pl = E.placebo(cfg)
    assert (pl.treatment, pl.control) == ("reinforce", "reinforce") and pl != cfg
    pl.validate()
    seeds = []

    def train(policy, ref, rl_cfg, callback=None, **kw):
        seeds.append(rl_cfg.seed)
        return fake_train(3)(policy, ref, rl_cfg, callback=callback)
    monkeypatch.setattr(E, "train", train)
    monkeypatch.setattr(E, "evaluate", fake_eval([0.3, 0.999])[0])
    rs = [E.run(E.Config(steps=3, algos=("reinforce", "reinforce_baseline"), treatment="reinforce"), s, FakeEnv())
          for s in range(2)]
    assert rs[0]["reinforce"]["roles"] == ["control"] and rs[0][E.REPLICATE]["roles"] == ["treatment"]
    assert rs[0][E.REPLICATE]["algo"] == "reinforce" and "roles" not in rs[0]["reinforce_baseline"]
    # each seed: reinforce, reinforce_baseline on the seed, then the replicate on its own hashed stream
    assert seeds[:2] == [0, 0] and seeds[3:5] == [1, 1] and seeds[2] == E.replicate_seed(0) != seeds[5]
    assert len({seeds[2], seeds[5], 0, 1}) == 4
    f = E.claims(rs)[0]
    assert f["control"] == "reinforce" and f["statistic"].startswith("steps to 0.99: reinforce - replicate")
    assert f["verdict"] != findings.HOLDS
    assert E.room(cfg) == (-59.0, 59.0) and findings.out_of_room(E.room(cfg), 0.0) is None
    flat = findings.with_room(E.claims([result(30, 40)] * 3)[0], E.room(E.Config(steps=1)))
    assert flat["verdict"] == findings.UNTESTABLE and "cannot pass" in flat["untestable"]


def test_the_result_check():
    r = result(30, 40)
    E.check(r)
    for bad in ({}, {**r, "grpo": {"solved": None}}):
        with pytest.raises(ValueError):
            E.check(bad)


def test_overrides_reach_every_algorithm_and_stay_in_the_result(monkeypatch):
    """Each set override replaces the preset's value in every algorithm's RLConfig; the run keeps them (a run without
    any has no such key), and its updates to solve count the overridden updates per batch."""
    seen = []

    def train(policy, ref, cfg, callback=None, **kw):
        seen.append(cfg)
        return fake_train(1)(policy, ref, cfg, callback)
    monkeypatch.setattr(E, "train", train)
    monkeypatch.setattr(E, "evaluate", fake_eval([0.5])[0])
    cfg = E.Config(algos=("grpo", "dapo"), steps=1, eval_every=1, learning_rate=1e-4, beta=0.1, num_iterations=3,
                   prompts_per_step=4, num_generations=2, temperature=0.7, epsilon=0.1)
    cfg.validate()
    out = E.run(cfg, 0, FakeEnv())
    for rl in seen:
        assert (rl.learning_rate, rl.beta, rl.num_iterations, rl.prompts_per_step, rl.num_generations,
                rl.temperature, rl.epsilon) == (1e-4, 0.1, 3, 4, 2, 0.7, 0.1)
    assert seen[1].loss_type == "dapo" and seen[1].epsilon_high == 0.28           # the rest stays the preset's
    assert out["grpo"]["overrides"] == cfg.overrides() and E.updates_to_solve(out["grpo"]) == 3
    assert E.claims([out])[0]["verdict"] == findings.UNSURE                       # the primary's arms did not run
    plain = E.run(E.Config(algos=("grpo",), steps=1, eval_every=1), 0, FakeEnv())["grpo"]
    assert "overrides" not in plain and E.updates_to_solve(plain) == 2             # the stored format as before


@pytest.mark.parametrize("values,match", [
    (dict(algos=("ppo",)), "got 'ppo'"),
    (dict(algos=()), "must be among"),
    (dict(num_iterations=2), "reinforce: invalid RL config: clip=False"),          # REINFORCE takes one update
    (dict(algos=("grpo",), num_generations=1), "grpo: invalid RL config"),
    (dict(algos=("grpo",), learning_rate=-1.0), "learning_rate must be > 0"),
    (dict(eval_every=0), "eval_every must be in 1..steps"),
])
def test_overrides_a_preset_cannot_take_are_one_line_errors(values, match):
    with pytest.raises(ValueError, match=match) as e:
        X.get("rl").validate(E.Config(**values))       # the registry's check: choices, bounds, then Config.validate
    assert "\n" not in str(e.value)


def test_the_table_has_a_row_per_algorithm():
    run = lambda algo, seed, solved: {"algo": algo, "seed": seed, "acc": 1.0, "acc_by_k": {2: 1.0}, "length": 5.0,  # noqa: E731
                                      "share": {"direct": 0.0, "short": 1.0, "full": 0.0}, "base_acc": 0.2,
                                      "solved": solved, "sampled_last10": {"acc": 0.9, "direct": 0.1, "kl_exact": 0.01}}
    md = E.rl_table([run("grpo", 0, {"step": 10, "seconds": 2.0}), run("grpo", 1, None)]).splitlines()
    assert md[1] == "|" + "---|" * 11 and len(md) == 5
    assert md[2] == ("| grpo | 1.000 ± 0.000 | 1.000 ± 0.000 | 0.00 ± 0.00 / 1.00 ± 0.00 / 0.00 ± 0.00 | 5.00 ± 0.00 "
                     "| 1/2 | 10 ± 0 | 2.0 ± 0.0 | 0.900 ± 0.000 | 0.10 ± 0.00 | 0.010 ± 0.000 |")
    assert md[4] == "Base model (free, greedy): accuracy 0.200 ± 0.000. Chance: 0.1. Mean ± std over seeds [0, 1]."


def test_the_length_bias_compares_grpo_with_dr_grpo():
    run = lambda length: {"sampled_last10": {"length": length}}   # noqa: E731
    longer = [{"grpo": run(7.3 + e), "dr_grpo": run(7.1)} for e in (0.0, 0.02, 0.05)]
    assert E.length_bias(longer)["verdict"] == findings.HOLDS
    shorter = [{"grpo": run(7.0 + e), "dr_grpo": run(7.2)} for e in (0.0, 0.02, 0.05)]
    assert E.length_bias(shorter)["verdict"] == findings.FAILS
    assert E.length_bias([{"grpo": run(7.0)}])["verdict"] == findings.UNSURE                 # no Dr. GRPO run


def test_every_draw_and_run_is_the_configs_task(monkeypatch):
    """On modprod: the RLConfig, the probe set, the start's and the final evaluation's problems are the task's; a run
    names its task (a digits run does not) and the table's chance is the task's."""
    from reasonlab import tasks
    seen = []

    def train(policy, ref, cfg, callback=None, **kw):
        seen.append(cfg.task)
        return fake_train(2)(policy, ref, cfg, callback)
    monkeypatch.setattr(E, "train", train)
    evaluate, probs = fake_eval([0.5])
    monkeypatch.setattr(E, "evaluate", evaluate)
    cfg = E.Config(task="modprod", algos=("grpo",), steps=2, n_test=2, n_probe=2)
    cfg.validate()
    run = E.run(cfg, 0, FakeEnv())["grpo"]
    assert seen == ["modprod"] and run["task"] == "modprod"
    assert {p.task for ps in probs for p in ps} == {"modprod"} and probs[-1] == P.test_problems(2, "rl", 0, task="modprod")
    assert probs[1] == E.probe_set(2, 0, "modprod") and {P.part_of(p) for p in probs[1]} == {"val"}
    run.update(acc_by_k={2: 0.5}, base_acc=0.5, share={"direct": 1.0, "short": 0.0, "full": 0.0})
    chance = tasks.get("modprod").chance
    assert f"Chance: {sum(chance(k) for k in range(2, 9)) / 7:.2g}." in E.rl_table([run])
    assert "task" not in E.rl_run(FakeEnv().base(0), "grpo", 0, steps=2, every=1, n_test=2, n_probe=2, start={"acc": 0})
