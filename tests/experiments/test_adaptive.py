"""The adaptive experiment: its analysis by hand (the methods' summary, the mean of the fixed formats, the table)
and its config's checks."""
import pytest

from reasonlab import experiments as X
from reasonlab.core import problems as P
from reasonlab.core.problems import part_of
from reasonlab.experiments import adaptive as E
from reasonlab.methods.adaptive import METHODS
from reasonlab.stats import findings


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
    assert (cfg.steps, cfg.learning_rate, cfg.beta, cfg.n_test, cfg.n_val, cfg.methods) == (200, 1e-4, 0.04, 300, 300,
                                                                                   ("thinkless_fmt",))
    E.Config(methods=METHODS).validate()
    E.Config(methods=("fixed_per_k",)).validate()
    for bad, match in ((dict(methods=("nope",)), "got 'nope'"), (dict(methods=()), "must be among"),
                       (dict(learning_rate=0.0), "learning_rate must be > 0, got 0.0"),
                       (dict(beta=-1.0), "beta must be >= 0, got -1.0")):
        with pytest.raises(ValueError, match=match):
            X.get("adaptive").validate(E.Config(**bad))        # the bounds sit in the fields' types


KS = (2, 3)


def forced(acc: dict, tokens: dict, n: int = 10) -> dict:
    """One format's forced point: accuracy and tokens per k (k = 2, 3), n problems per k."""
    return {"acc": sum(acc.values()) / len(acc), "tokens": sum(tokens.values()) / len(tokens), "acc_by_k": acc,
            "tokens_by_k": tokens, "n_by_k": {k: n for k in acc},
            "share_by_k": {k: {"direct": 0.0, "short": 1.0, "full": 0.0} for k in acc}}


def fixed_formats(a2: float) -> dict:
    """A at k = 2 right on a2 of the problems (3 tokens), at chance at k = 3; S right everywhere (5 and 6 tokens);
    T right everywhere and longer."""
    return {"A": forced({2: a2, 3: 0.1}, {2: 3.0, 3: 3.0}), "S": forced({2: 1.0, 3: 1.0}, {2: 5.0, 3: 6.0}),
            "T": forced({2: 1.0, 3: 1.0}, {2: 6.0, 3: 8.0})}


def fake_run(monkeypatch, sel_a2: float, test_a2: float):
    """E.run with the models faked: the forced points are fixed_formats(sel_a2) on the val draw and
    fixed_formats(test_a2) on the test draw; each method run records its problems and is S everywhere but A at
    k = 2 (4 tokens on average, as accurate as the test's A there)."""
    seen = {}

    def fixed_points(model, probs):
        split = {part_of(d) for d in probs}
        assert len(split) == 1
        seen[split.pop()] = probs
        return fixed_formats(sel_a2 if part_of(probs[0]) == "val" else test_a2)

    def run_method(model, m, seed, probs, **kw):
        seen["method"] = (probs, kw)
        return {"method": m, "acc": (test_a2 + 1.0) / 2, "tokens": (3.0 + 6.0) / 2}
    monkeypatch.setattr(E, "fixed_points", fixed_points)
    monkeypatch.setattr(E, "run_method", run_method)
    monkeypatch.setattr(E, "reference_accuracy", lambda model, task="digits": seen.setdefault("ref", task) and {"ref": 1})
    monkeypatch.setattr(E, "tts_points", lambda base, probs: {"n": len(probs)})
    return seen


def test_the_control_picks_on_val_and_is_scored_on_the_seeds_test_draw(monkeypatch):
    """A is perfect at k = 2 on the selection set, so the control picks A there; on the test draw A is right on 0.8
    of k = 2: the control is scored with that 0.8, not re-picked on the test numbers (the oracle would pick S)."""
    seen = fake_run(monkeypatch, sel_a2=1.0, test_a2=0.8)
    cfg = E.Config(n_test=7, n_val=9, learning_rate=3e-4, beta=0.0, steps=5, methods=("grpo", "kimi"))
    out = E.run(cfg, 2, type("Env", (), {"base": lambda self, s, task="digits": "model"})())
    assert out["control"]["per_k"] == {2: "A", 3: "S"}
    assert out["control"]["acc"] == pytest.approx(0.9) and out["control"]["tokens"] == pytest.approx(4.5)
    assert seen["test"] == P.test_problems(7, "adaptive", 2) and seen["method"][0] == seen["test"]
    assert seen["val"] == E.selection_set(9, 2) and E.selection_set(9, 3) != seen["val"]
    assert seen["method"][1] == dict(steps=5, lr=3e-4, ref_acc={"ref": 1}, beta=0.0, progress=True)
    assert [r["method"] for r in out["runs"]] == ["grpo", "kimi"] and out["tts"] == {"n": len(seen["test"])}
    oracle = E.score_per_k(out["fixed"], E.pick_per_k(out["fixed"]))      # picked on the test numbers: S at k = 2
    assert oracle["per_k"] == {2: "S", 3: "S"} and oracle["acc"] == 1.0


def adaptive_result(acc, tokens, control=(1.0, 5.0)) -> dict:
    ctl = {"acc": control[0], "tokens": control[1], "per_k": {2: "A", 3: "S"}}
    return {"runs": [{"method": "m", "acc": acc, "tokens": tokens}], "fixed": fixed_formats(1.0), "control": ctl}


def test_the_primary_holds_fails_and_is_inconclusive():
    """Non-inferior accuracy and fewer tokens than the control (both parts must hold)."""
    ok = [adaptive_result(1.0 - e, 4.5 + e) for e in (0.0, 0.001, 0.002)]
    f = E.claims(ok)[0]
    assert f["verdict"] == findings.HOLDS and findings.kind_of(f) == findings.PRIMARY
    assert f["control"].startswith("best fixed format per k") and f["control_per_k"][0] == {"2": "A", "3": "S"}
    dearer = [adaptive_result(1.0, 5.5 + e) for e in (0.0, 0.05, 0.1)]              # as accurate, more tokens
    assert E.claims(dearer)[0]["verdict"] == findings.FAILS
    worse = [adaptive_result(0.9 - e, 4.0) for e in (0.0, 0.01, 0.02)]              # fewer tokens, less accurate
    assert E.claims(worse)[0]["verdict"] == findings.FAILS
    noisy = [adaptive_result(1.0, 5.0 + e) for e in (-0.3, 0.2, -0.1)]
    assert E.claims(noisy)[0]["verdict"] == findings.UNSURE
    assert E.room(E.Config()) == (-1.0, 1.0) and findings.out_of_room(E.room(E.Config()), -0.01) is None


def test_the_placebo_puts_the_control_in_the_methods_place_and_cannot_pass(monkeypatch):
    """fixed_per_k is the control's procedure again: its formats picked on a selection draw of its own
    (replicate_seed), scored on the same outputs; where it picks what the control picked, accuracy and tokens equal
    the control's, no token is saved and the primary does not hold."""
    cfg = E.Config()
    pl = E.placebo(cfg)
    assert pl.methods == ("fixed_per_k",) and pl != cfg
    pl.validate()
    fake_run(monkeypatch, sel_a2=1.0, test_a2=0.9)
    drawn, draw = [], E.selection_set
    monkeypatch.setattr(E, "selection_set", lambda n, seed, task="digits": drawn.append(seed) or draw(n, seed, task))
    rs = [E.run(E.Config(methods=pl.methods), s, type("Env", (), {"base": lambda self, s, task="digits": "model"})())
          for s in range(3)]
    assert drawn[:2] == [0, E.replicate_seed(0, "select")]
    assert rs[0]["runs"][0]["acc_by_k"] == {2: 0.9, 3: 1.0} and rs[0]["runs"][0]["direct_acc_by_k"][2] == 0.9
    f = E.claims(rs)[0]
    assert f["per_seed"] == [0.0] * 3 and f["tokens_saved"]["per_seed"] == [0.0] * 3
    assert f["verdict"] == findings.FAILS


def test_every_draw_is_the_configs_task(monkeypatch):
    """On modprod: the selection set, the test draw and AdaptThink's reference are the task's, the methods train on
    it (their RLConfig reads the task off the problems), and the result names it (a digits result does not)."""
    seen = fake_run(monkeypatch, sel_a2=1.0, test_a2=0.8)
    env = type("Env", (), {"base": lambda self, s, task="digits": seen.setdefault("base", task) and "model"})()
    out = E.run(E.Config(task="modprod", n_test=3, n_val=4, methods=("grpo",)), 1, env)
    assert seen["base"] == seen["ref"] == "modprod" and out["task"] == "modprod"
    assert seen["test"] == E.test_problems(3, "adaptive", 1, task="modprod") and seen["method"][0] == seen["test"]
    assert seen["val"] == E.selection_set(4, 1, "modprod") and {p.task for p in seen["val"]} == {"modprod"}
    probs = seen["test"]
    assert "task" not in E.run(E.Config(n_test=3, n_val=4, methods=("grpo",)), 1, env)
    monkeypatch.undo()
    trained = []
    monkeypatch.setattr(E, "train", lambda policy, ref, cfg, **kw: trained.append(cfg.task) or [])
    monkeypatch.setattr(E, "point", lambda model, probs, force=None: {"acc_by_k": {}})
    E.run_method(__import__("torch").nn.Linear(1, 1), "grpo", 0, probs, steps=1)
    assert trained == ["modprod"]
