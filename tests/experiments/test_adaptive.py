"""The adaptive experiment: its analysis by hand (the methods' summary, the mean of the fixed formats, the table)
and its config's checks."""
import pytest

from reasonlab.experiments import adaptive as E
from reasonlab.methods.adaptive import METHODS


def test_adaptive_summarize_and_mean_points_by_hand():
    share = {2: {"direct": 1.0, "short": 0.0, "full": 0.0}, 3: {"direct": 0.0, "short": 1.0, "full": 0.0}}
    run = lambda m, acc, tok, s: {"method": m, "acc": acc, "tokens": tok, "share_by_k": share,  # noqa: E731
                                  "acc_by_k": {2: acc, 3: acc}, "direct_acc_by_k": {2: 1.0, 3: 0.1 * s}}
    runs = [run("a", 1.0, 5.0, 0), run("a", 0.8, 7.0, 1), run("b", 0.5, 9.0, 0), run("b", 0.5, 9.0, 1)]
    fixed = {"A": {"acc": 0.3, "tokens": 3.0}, "S": {"acc": 0.9, "tokens": 6.7}}
    out = E.summarize(runs, fixed)
    assert out["a"]["acc"] == pytest.approx((0.9, 0.1 * 2 ** 0.5))   # sample std (ddof 1)
    assert out["a"]["tokens"] == pytest.approx((6.0, 2 ** 0.5))
    assert out["a"]["direct_acc_by_k"][3] == pytest.approx(0.05) and out["a"]["share_by_k"][3]["short"] == 1.0
    assert out["a"]["on_front"] and out["a"]["beats_always_S"]          # 0.9 at 6.0 tokens: ties S, cheaper
    assert not out["b"]["on_front"] and not out["b"]["beats_always_S"]  # 0.5 at 9 tokens: beaten by S
    pts = E.mean_points([{"S": {"acc": 1.0, "tokens": 6.0, "acc_by_k": {2: 1.0}}},
                         {"S": {"acc": 0.5, "tokens": 8.0, "acc_by_k": {2: 0.0}}}])
    assert pts == {"S": {"acc": 0.75, "tokens": 7.0, "acc_by_k": {2: 0.5}}}
    summary = {"methods": out, "fixed": {"A": {"acc": 0.3, "tokens": 3.0, "acc_by_k": {2: 0.5, 3: 0.1}},
                                         "S": {"acc": 0.9, "tokens": 6.7}},
               "tts": {"A maj@8": {"acc": 0.4, "tokens": 24.0}}, "seeds": [0, 1]}
    lines = E.adaptive_table(summary).splitlines()
    assert lines[0].endswith("| A-share by k (2, 3) |") and lines[1] == "|" + "---|" * 6
    assert lines[2] == "| a | 0.900 ± 0.141 | 6.00 ± 1.41 | yes | yes | 1.00 0.00 |"
    assert lines[4].startswith("| always A (forced, greedy) | 0.300 | 3.00 |")
    assert lines[6].startswith("| A maj@8 (sampling, seed 0) | 0.400 | 24.00 |")
    assert lines[-5:] == ["", "Forced-A (direct) accuracy per k after training, mean over seeds (base model: "
                          "0.50 0.10):", "", "- a: 1.00 0.05", "- b: 1.00 0.05"]


def test_config_defaults_and_checks():
    cfg = E.Config()
    assert (cfg.steps, cfg.lr, cfg.beta, cfg.eval_n, cfg.methods) == (200, 1e-4, 0.04, 300, ("thinkless_fmt",))
    E.Config(methods=METHODS).validate()
    for bad, match in ((dict(methods=("nope",)), "got 'nope'"), (dict(methods=()), "must be among"),
                       (dict(lr=0.0), "lr must be > 0"), (dict(beta=-1.0), "beta >= 0")):
        with pytest.raises(ValueError, match=match):
            E.Config(**bad).validate()


def test_run_passes_lr_and_beta_to_every_method(monkeypatch):
    seen = []
    monkeypatch.setattr(E, "reference_accuracy", lambda model: {"ref": 1})
    monkeypatch.setattr(E, "run_method", lambda model, m, seed, **kw: seen.append((m, kw)) or {"method": m})
    monkeypatch.setattr(E, "fixed_points", lambda bases, n: {"n": n})
    monkeypatch.setattr(E, "tts_points", lambda base, n: {"n": n})
    env = type("Env", (), {"base": lambda self, s: "model"})()
    out = E.run(E.Config(methods=("grpo", "kimi"), lr=3e-4, beta=0.0, steps=5, eval_n=7), 2, env)
    assert [r["method"] for r in out["runs"]] == ["grpo", "kimi"] and out["fixed"] == out["tts"] == {"n": 7}
    assert seen[0][1] == dict(steps=5, lr=3e-4, n_eval=7, ref_acc={"ref": 1}, beta=0.0, progress=True)
