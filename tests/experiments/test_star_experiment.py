"""The star experiment on the erring thinker: its claims on hand-made results (hold, fail, untestable through the
premises), the arms drawn from one set of samples (the direct control differs from STaR only in the chains), the
placebo, one small run end to end, the table and its Config's checks."""
import os

import pytest

from reasonlab import tasks
from reasonlab.experiments import star as E
from reasonlab.methods import star
from reasonlab.stats import findings


def result(s0: float, s1: dict, fp: float = 0.03, direct_s: float = 0.95) -> dict:
    """One seed: forced S accuracy s0 before STaR and s1[arm] after the round, each arm in its own format (direct:
    forced A, its forced S at direct_s, a format it never trained on)."""
    rec = lambda s: {"S": s, "A": 0.1, "free": s, "S_by_k": {k: s for k in range(2, 9)}}   # noqa: E731
    arms = {a: {**rec(s1[a]), "format": "S", "n_kept": 2000, "used": 0.7, "false_positive_rate": fp} for a in E.ARMS}
    arms["direct"].update(S=direct_s, A=s1["direct"], format="A")
    return {"start": {**rec(s0), "format": "S"}, **arms}


def verdicts(rs):
    return [f["verdict"] for f in findings.gate(E.claims(rs))]


def test_claims_hold_fail_and_are_untestable_through_their_premises():
    rs = [result(0.7, {"star": 0.9 + 0.01 * s, "direct": 0.68, "none": 0.72, "chain": 0.99}) for s in range(5)]
    fs = E.claims(rs)
    assert [findings.kind_of(f) for f in fs] == [findings.PREMISE] * 2 + [findings.PRIMARY] + [findings.SECONDARY] * 2
    assert fs[2]["control"].startswith("direct fine-tuning") and abs(fs[2]["value"] - 0.24) < 1e-9   # direct's A
    assert abs(fs[2]["vs_start"]["value"] - 0.22) < 1e-9
    assert verdicts(rs) == [findings.HOLDS] * 5
    worse = [result(0.7, {"star": 0.6 - 0.01 * s, "direct": 0.5, "none": 0.8, "chain": 0.5}) for s in range(5)]
    assert verdicts(worse) == [findings.HOLDS] * 2 + [findings.FAILS] * 3     # above direct, but below the start
    below_direct = [result(0.7, {"star": 0.8 + 0.01 * s, "direct": 0.9, "none": 0.7, "chain": 0.9}) for s in range(5)]
    assert verdicts(below_direct)[2] == findings.FAILS                      # above the start, below direct (forced A)
    # a start at the ceiling (the base model's case) leaves no room: every claim is untestable
    top = [result(0.95 + 0.01 * s, {"star": 1.0, "direct": 0.9, "none": 0.9, "chain": 1.0}) for s in range(5)]
    assert verdicts(top) == [findings.FAILS, findings.HOLDS] + [findings.UNTESTABLE] * 3
    # filters that keep the same data: only the chain filter's claim is untestable
    same = [result(0.7, {"star": 0.9 + 0.01 * s, "direct": 0.68, "none": 0.72, "chain": 0.99}, fp=0.001)
            for s in range(5)]
    fs = findings.gate(E.claims(same))
    assert [f["verdict"] for f in fs] == [findings.HOLDS, findings.FAILS] + [findings.HOLDS] * 2 + [findings.UNTESTABLE]
    assert "wrong step" in fs[-1]["untestable"]


SAMPLES = {(3, 5, 9): ["S 8 7 A 7 </s>", "S 9 7 A 7 </s>", "S 8 6 A 6 </s>"],    # right, errors cancel, wrong
           (1, 2): ["S 4 A 4 </s>", "S 3 A 3 </s>", "S 3 A 3"]}                 # wrong, right, incomplete


def fake_sample(monkeypatch):
    """The round's problems are the keys of SAMPLES; sampling returns their hand-written outputs."""
    digits = tasks.get("digits")
    probs = [digits.problem(d) for d in SAMPLES]
    monkeypatch.setattr(star, "problems_of_round", lambda rng, n, task="digits": probs)
    monkeypatch.setattr(star, "sample", lambda model, problems, cfg, gen: [
        [[digits.id[w] for w in o.split()] + [digits.id["<pad>"]] * 2 for o in SAMPLES[p.x]] for p in problems])


def test_the_arms_share_one_draw_and_the_direct_control_drops_only_the_chains(monkeypatch, noisy_model):
    fake_sample(monkeypatch)
    data = E.arms_data(noisy_model, E.Config(problems=2, samples=3), seed=0)
    kept = {a: [(d, " ".join(w)) for d, w in data[a]["kept"]] for a in E.ARMS}
    assert kept["star"] == [([3, 5, 9], "S 8 7 A 7 </s>"), ([1, 2], "S 3 A 3 </s>")]      # the first right answer
    assert kept["direct"] == [([3, 5, 9], "A 7 </s>"), ([1, 2], "A 3 </s>")]               # the same, no chains
    assert kept["none"] == [([3, 5, 9], "S 8 7 A 7 </s>"), ([1, 2], "S 4 A 4 </s>")]      # the first complete one
    assert kept["chain"] == [([3, 5, 9], "S 8 7 A 7 </s>"), ([1, 2], "S 3 A 3 </s>")]
    sc = E.star_config(E.Config(), 0)
    recipes = {a: star.round_recipe(sc, 1, data[a]["kept"]) for a in E.ARMS}
    for a in E.ARMS:          # the same recipe, steps and seed: the arms differ in their kept data alone
        assert {k: v for k, v in recipes[a].items() if k != "fixed"} == {k: v for k, v in recipes["star"].items()
                                                                          if k != "fixed"}
    assert recipes["star"]["fixed_frac"] == 1.0 and sc.force == "S" and sc.rounds == 1


def test_the_placebo_trains_the_star_arm_as_the_direct_control_on_its_own_draws(monkeypatch, noisy_model):
    """Under the placebo the STaR arm is the direct control's procedure again: its round's problems and samples drawn
    from the replicate's seed, and its fine-tuning seeded by it; the other arms keep the seed's own draws."""
    fake_sample(monkeypatch)
    seen, recipes = [], {}
    monkeypatch.setattr(star, "problems_of_round", lambda rng, n, task="digits": seen.append(rng.random()) or
                        [tasks.get("digits").problem(d) for d in SAMPLES])
    monkeypatch.setattr(E, "thinker_model", lambda kind, seed, cache, device, task="digits": noisy_model)
    monkeypatch.setattr(E, "evaluation", lambda model, probs: {"S": 0.5})

    def fine_tune(start, cache, progress=False):
        def tune(r, recipe, init):
            recipes[len(recipes)] = recipe
            return init
        return tune
    monkeypatch.setattr(E, "cached_fine_tune", fine_tune)
    env = type("Env", (), {"cache": None, "device": "cpu"})()
    cfg = E.placebo(E.Config(problems=2, samples=3))
    assert cfg.treatment == "direct" and cfg != E.Config(problems=2, samples=3)
    out = E.run(cfg, 0, env)
    assert set(out) == {"start", *E.ARMS} and len(seen) == 2 and seen[0] != seen[1]      # two draws of problems
    by_arm = dict(zip(E.ARMS, recipes.values()))
    assert by_arm["star"]["seed"] == E.replicate_seed(0) * 1000 + 1 and by_arm["direct"]["seed"] == 1
    assert {r["seed"] for a, r in by_arm.items() if a != "star"} == {1}
    assert by_arm["star"]["fixed"] == by_arm["direct"]["fixed"]         # the hand-written samples: the same answers
    assert E.room(cfg) == (-1.0, 1.0)


def test_one_small_run_and_its_placebo_end_to_end(monkeypatch, noisy_model, tmp_path):
    """Every arm trained and evaluated on this seed's test problems; under the placebo the STaR arm is a second
    direct model (its own samples and training), evaluated on the same problems."""
    monkeypatch.setattr(E, "thinker_model", lambda kind, seed, cache, device, task="digits": noisy_model)
    env = type("Env", (), {"cache": str(tmp_path), "device": "cpu"})()
    cfg = E.Config(problems=20, samples=2, steps=2, n_test=2)
    r = E.run(cfg, 0, env)
    assert set(r) == {"start", *E.ARMS} and set(r["star"]["S_by_k"]) == set(range(2, 9))
    E.check(r)
    models = set(os.listdir(tmp_path))
    p = E.run(E.placebo(cfg), 0, env)
    assert p["start"] == r["start"] and p["direct"] == r["direct"]
    assert (r["star"]["format"], r["direct"]["format"], p["star"]["format"]) == ("S", "A", "A")   # each its own format
    assert set(os.listdir(tmp_path)) > models                           # the replicate: a model of its own
    prim = next(f for f in E.claims([p, p]) if f.get("kind") == findings.PRIMARY)
    assert prim["verdict"] != findings.HOLDS


def test_check_needs_the_start_and_every_arm():
    E.check(result(0.7, {a: 0.8 for a in E.ARMS}))
    r = result(0.7, {a: 0.8 for a in E.ARMS})
    del r["direct"]
    with pytest.raises(ValueError, match="every arm"):
        E.check(r)


def test_render_writes_the_table_and_the_plot(tmp_path):
    rs = [result(0.7, {"star": 0.9, "direct": 0.68, "none": 0.72, "chain": 0.99}) for _ in range(2)]
    [(md, head)] = E.render(rs, str(tmp_path))
    assert md.startswith("## STaR where reasoning must improve: the erring thinker\n")
    assert ("| direct: the same right answers, no chains | A: 0.680 ± 0.000 | 0.950 ± 0.000 | 0.680 ± 0.000 | "
            "0.680 ± 0.000 |") in md
    assert head == ("STaR over the thinker before it: 0.200 ± 0.000 forced S in one round (0.700 ± 0.000 → "
                    "0.900 ± 0.000; direct fine-tuning, forced A: 0.680 ± 0.000)")
    assert os.path.getsize(tmp_path / "star" / "star.png") > 1000


def test_bad_configs_are_one_line_errors():
    with pytest.raises(ValueError, match="more than 10,000,000") as e:
        E.Config(steps=10**8).validate()
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="problems must be positive"):
        E.Config(problems=0).validate()


def test_star_rounds_through_the_cache_train_one_model_per_kept_data(monkeypatch, tmp_path):
    """STaR's loop from a model, each round evaluated: a fine-tune is named by its recipe, kept data and init, not
    by the filter, so a run whose filter kept the same outputs loads the earlier run's model; other data train
    another."""
    from reasonlab.methods.config import StarConfig
    from reasonlab.train import zoo
    from reasonlab.train.sft import build_model
    data = [([1, 2], ["A", "3", "</s>"])]
    monkeypatch.setattr(star, "collect", lambda *a, **k: {"kept": list(data), "used": 1.0, "n_kept": 1, "fmt_mix": {},
                                                           "false_positive_rate": 0.0, "rationalized": 0.0})
    monkeypatch.setattr(E, "evaluation", lambda model, probs, fmts: {f: 0.5 for f in fmts})
    trained, real = [], zoo.pretrain
    monkeypatch.setattr(zoo, "pretrain", lambda *a, **k: trained.append(1) or real(*a, **k))
    base = build_model(0)
    run = lambda f: E.star_rounds(base, "b", StarConfig(rounds=1, problems=1, steps=2, filter=f), 5,  # noqa: E731
                                  cache=str(tmp_path))
    for f in ("answer", "chain", "answer"):
        hist = run(f)
    assert len(trained) == 1 and [h["round"] for h in hist] == [0, 1] and hist[1]["n_kept"] == 1
    assert hist[0] == {"round": 0, "S": 0.5, "A": 0.5, "T": 0.5, "free": 0.5}
    assert any(p.name.startswith("star-b-r1-") for p in tmp_path.iterdir())
    data[:] = [([4, 4], ["A", "8", "</s>"])]
    run("chain")
    assert len(trained) == 2


def test_one_small_run_on_another_task(monkeypatch, tmp_path):
    """On modprod: the thinker is the task's, the round's problems and the test draw are the task's, the kept rows
    are its instances, the result names its task (a digits result does not), and the table reads its largest k."""
    from reasonlab.train.sft import build_model
    task = tasks.get("modprod")
    asked = []
    monkeypatch.setattr(E, "thinker_model", lambda kind, seed, cache, device, task="digits":
                        asked.append(task) or build_model(seed, task=task))
    data = E.arms_data(build_model(0, task=task), E.Config(task="modprod", problems=6, samples=1), seed=0)
    assert all(task.possible(tuple(x)) and 2 <= len(x) <= 8 for x, _ in data["none"]["kept"])
    env = type("Env", (), {"cache": str(tmp_path), "device": "cpu"})()
    r = E.run(E.Config(task="modprod", problems=6, samples=1, steps=1, n_test=1), 0, env)
    assert asked == ["modprod"] and r["task"] == "modprod" and set(r["star"]["S_by_k"]) == set(task.ks())
    E.check(r)
    [(md, _)] = E.render([r, r], str(tmp_path))
    assert "| forced S | forced S, k = 8 |" in md and "task" not in result(0.7, {a: 0.8 for a in E.ARMS})
