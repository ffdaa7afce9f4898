"""The rl experiment: the presets' overrides a sweep varies, their checks, and the table."""
import pytest

from reasonlab.experiments import rl as E
from reasonlab.train.config import ALGOS


def test_the_defaults_are_the_presets():
    cfg = E.Config()
    assert cfg.overrides() == {} and cfg.algos == ("grpo", "reinforce", "reinforce_baseline", "dr_grpo")
    E.Config(algos=ALGOS).validate()


def test_overrides_reach_every_algorithm_and_stay_in_the_result(monkeypatch):
    """Each set override replaces the preset's value in every algorithm's RLConfig; the run keeps them (a run without
    any has no such key), and its updates to solve count the overridden updates per batch."""
    seen = []

    def fake_train(policy, ref, cfg, callback=None, **kw):
        seen.append(cfg)
        rec = {"step": 1, "acc": 0.5, "length": 3.0, "kl_exact": 0.0, "entropy": 1.0, "share": {"direct": 1.0}}
        return [rec]
    monkeypatch.setattr(E, "train", fake_train)
    monkeypatch.setattr(E, "evaluate", lambda model, probs: {"acc": 0.5, "share": {}, "length": 3.0, "per_k": {}})
    cfg = E.Config(algos=("grpo", "dapo"), steps=1, eval_every=1, learning_rate=1e-4, beta=0.1, num_iterations=3,
                   prompts_per_step=4, num_generations=2, temperature=0.7, epsilon=0.1)
    cfg.validate()
    env = type("Env", (), {"base": lambda self, s: __import__("torch").nn.Linear(1, 1)})()
    out = E.run(cfg, 0, env)
    for rl in seen:
        assert (rl.learning_rate, rl.beta, rl.num_iterations, rl.prompts_per_step, rl.num_generations,
                rl.temperature, rl.epsilon) == (1e-4, 0.1, 3, 4, 2, 0.7, 0.1)
    assert seen[1].loss_type == "dapo" and seen[1].epsilon_high == 0.28           # the rest stays the preset's
    assert out["grpo"]["overrides"] == cfg.overrides() and E.updates_to_solve(out["grpo"]) == 3
    plain = E.run(E.Config(algos=("grpo",), steps=1, eval_every=1), 0, env)["grpo"]
    assert "overrides" not in plain and E.updates_to_solve(plain) == 2             # the stored format as before


@pytest.mark.parametrize("values,match", [
    (dict(algos=("ppo",)), "got 'ppo'"),
    (dict(algos=()), "must be among"),
    (dict(num_iterations=2), "reinforce: invalid RL config: clip=False"),          # REINFORCE takes one update
    (dict(algos=("grpo",), num_generations=1), "grpo: invalid RL config"),
    (dict(algos=("grpo",), learning_rate=-1.0), "learning_rate must be positive"),
])
def test_overrides_a_preset_cannot_take_are_one_line_errors(values, match):
    with pytest.raises(ValueError, match=match) as e:
        E.Config(**values).validate()
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
