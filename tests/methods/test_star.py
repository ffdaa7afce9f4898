"""STaR: the filter, the cap, the statistics, the loop's restart / continue / pool, and its config's bounds."""
import random

import pytest
import torch

from reasonlab import tasks
from reasonlab.core.task import ID
from reasonlab.methods import star
from reasonlab.train.sft import build_model

DIGITS = tasks.get("digits")


def fake_collect(monkeypatch, outputs):
    """Make sample_tree return the given outputs (list of word strings) for every problem, in order."""
    def sample_tree(model, prompts, n, gen, temperature, force=None, **kw):
        rows = []
        for _ in prompts:
            for j in range(n):
                rows.append([ID[w] for w in outputs[j].split()])
        L = max(len(r) for r in rows)
        return torch.tensor([r + [0] * (L - len(r)) for r in rows]), torch.zeros(len(rows))
    monkeypatch.setattr(star, "sample_tree", sample_tree)


PROB = [DIGITS.problem([3, 5, 9, 2, 7])]   # answer 6; S chain 8 9 6


def test_answer_filter_keeps_right_answers_and_counts_false_positives(monkeypatch):
    fake_collect(monkeypatch, ["S 8 9 6 A 6 </s>", "S 1 1 6 A 6 </s>", "A 6 </s>", "A 5 </s>"])
    d = star.collect(None, PROB, star.StarConfig(samples=4, cap=10), None)
    assert d["n_kept"] == 3 and d["used"] == 1.0
    assert d["false_positive_rate"] == pytest.approx(0.5)          # one of two right S answers has a wrong chain
    assert d["fmt_mix"] == pytest.approx({"direct": 1 / 3, "short": 2 / 3, "full": 0.0})


def test_chain_filter_drops_wrong_chains(monkeypatch):
    fake_collect(monkeypatch, ["S 8 9 6 A 6 </s>", "S 1 1 6 A 6 </s>", "A 6 </s>", "A 5 </s>"])
    d = star.collect(None, PROB, star.StarConfig(samples=4, cap=10, filter="chain"), None)
    kept = [" ".join(w) for _, w in d["kept"]]
    assert kept == ["S 8 9 6 A 6 </s>", "A 6 </s>"]


def test_cap_and_duplicates(monkeypatch):
    fake_collect(monkeypatch, ["A 6 </s>", "A 6 </s>", "T 3 8 7 9 6 A 6 </s>"])
    assert star.collect(None, PROB, star.StarConfig(samples=3, cap=1), None)["n_kept"] == 1
    assert star.collect(None, PROB, star.StarConfig(samples=3, cap=5), None)["n_kept"] == 2   # duplicates once
    fake_collect(monkeypatch, ["A 1 </s>", "A 2 </s>"])
    d = star.collect(None, PROB, star.StarConfig(samples=2), None)
    assert d["n_kept"] == 0 and d["used"] == 0.0


def test_invalid_config():
    with pytest.raises(ValueError, match="filter"):
        star.StarConfig(filter="both").validate()
    with pytest.raises(ValueError, match="rounds"):
        star.StarConfig(rounds=0).validate()
    star.StarConfig(steps=10**6, growth=10.0, rounds=2).validate()          # 10^7 steps in the last round: the bound
    with pytest.raises(ValueError, match="last round, more than 10,000,000"):
        star.StarConfig(steps=10**6, growth=10.0, rounds=3).validate()
    with pytest.raises(ValueError, match="fine-tuning steps"):
        star.StarConfig(steps=300, growth=1e300, rounds=10**6).validate()  # no float overflow on the way


def test_one_small_round_end_to_end(noisy_model):
    seen = []
    hist = star.train(noisy_model, star.StarConfig(rounds=1, problems=40, samples=2, steps=3),
                      callback=lambda rec, model: seen.append((rec["round"], model)))
    assert [h["round"] for h in hist] == [1] and [r for r, _ in seen] == [1]
    assert set(hist[0]) == {"round", "used", "n_kept", "fmt_mix", "false_positive_rate", "rationalized", "steps",
                            "sample_s", "round_s"}
    assert hist[0]["steps"] == 3 and 0 <= hist[0]["used"] <= 1


def test_the_default_fine_tune_trains_a_new_model_from_the_base(monkeypatch, noisy_model):
    kept = [([3, 5, 9, 2, 7], "S 8 9 6 A 6 </s>".split())]
    monkeypatch.setattr(star, "collect", lambda *a, **k: {"kept": kept, "used": 1.0, "n_kept": 1, "fmt_mix": {},
                                                           "false_positive_rate": 0.0, "rationalized": 0.0})
    before = [p.clone() for p in noisy_model.parameters()]
    seen = []
    star.train(noisy_model, star.StarConfig(rounds=1, problems=1, steps=3), callback=lambda rec, m: seen.append(m))
    new = seen[0]
    assert new is not noisy_model and new.cfg == noisy_model.cfg
    assert all(torch.equal(a, b) for a, b in zip(before, noisy_model.parameters()))          # the base untouched
    assert not all(torch.equal(a, b) for a, b in zip(before, new.parameters()))


def test_rationalization_samples_failed_problems_with_the_hint_and_keeps_them_without_it(monkeypatch):
    from reasonlab.core.task import HINT0, hint_prompt_ids, prompt_ids
    seen_prompts = []

    def sample_tree(model, prompts, n, gen, temperature, force=None, **kw):
        seen_prompts.extend(prompts)
        rows = []
        for p in prompts:      # without the hint the model is wrong; with it, it writes the right chain
            out = "S 8 9 6 A 6 </s>" if p[0] >= HINT0 else "A 5 </s>"
            rows += [[ID[w] for w in out.split()]] * n
        return torch.tensor(rows), torch.zeros(len(rows))
    monkeypatch.setattr(star, "sample_tree", sample_tree)
    probs = PROB + [DIGITS.problem([1, 1])]
    d = star.collect(None, probs, star.StarConfig(samples=2, rationalize=True), None)
    assert seen_prompts[:2] == [prompt_ids(list(p.x)) for p in probs]
    assert seen_prompts[2:] == [hint_prompt_ids(list(p.x)) for p in probs]          # both failed: both hinted
    x = list(PROB[0].x)
    assert hint_prompt_ids(x)[0] == HINT0 + 6 and hint_prompt_ids(x)[1:] == prompt_ids(x)[1:]
    assert d["kept"] == [(x, ["S", "8", "9", "6", "A", "6", "</s>"])]   # stored under the plain problem
    assert d["rationalized"] == 1.0 and d["used"] == 0.5
    without = star.collect(None, probs, star.StarConfig(samples=2), None)
    assert without["n_kept"] == 0


def test_rationalization_needs_a_model_that_read_hints(noisy_model):
    with pytest.raises(ValueError, match="hints"):
        star.train(noisy_model, star.StarConfig(rounds=1, problems=10, rationalize=True))


def test_few_chains_recipe_shows_only_its_worked_chains():
    from reasonlab.core.task import ID as I
    from reasonlab.core.task import check_chain, parse
    cfg = star.few_chains_cfg(seed=0, n_chains=50)
    assert cfg["phases"][0][0] == [1.0, 0.0, 0.0] and len(cfg["fixed"]) == 50 and cfg["hint_frac"] > 0
    for d, words in cfg["fixed"]:
        p = parse([I[w] for w in words])
        assert p["fmt"] in ("short", "full") and check_chain(d, p) is True


def test_outputs_with_hint_tokens_are_not_kept(monkeypatch):
    from reasonlab.core.task import HINT0

    def sample_tree(model, prompts, n, gen, temperature, force=None, **kw):
        row = [ID["A"], ID["6"], HINT0 + 6]          # right answer, then a hint token instead of </s>
        return torch.tensor([row] * (len(prompts) * n)), torch.zeros(len(prompts) * n)
    monkeypatch.setattr(star, "sample_tree", sample_tree)
    d = star.collect(None, PROB, star.StarConfig(samples=2, cap=5), None)
    assert d["n_kept"] == 0


def test_only_complete_templates_count_or_are_kept(monkeypatch):
    """A right chain without </s> is neither a false positive nor training data; the false positive is a complete
    template with a wrong step."""
    fake_collect(monkeypatch, ["S 8 9 6 A 6", "S 8 9 6 A 6 </s>", "S 1 9 6 A 6 </s>", "A 6"])
    d = star.collect(None, PROB, star.StarConfig(samples=4, cap=10), None)
    assert [" ".join(w) for _, w in d["kept"]] == ["S 8 9 6 A 6 </s>", "S 1 9 6 A 6 </s>"]
    assert d["false_positive_rate"] == pytest.approx(0.5)          # of the two complete right S outputs, one errs
    d = star.collect(None, PROB, star.StarConfig(samples=4, cap=10, filter="chain"), None)
    assert [" ".join(w) for _, w in d["kept"]] == ["S 8 9 6 A 6 </s>"]


@pytest.mark.parametrize("restart,pool", [(True, False), (False, False), (True, True)])
def test_restart_continue_and_pool_semantics(monkeypatch, restart, pool):
    """restart: every round fine-tunes from the base; continue: from the last round's model. pool: the data of
    all rounds so far; otherwise the last round's alone. The callback sees each round's model."""
    calls, seen = [], []

    def fine_tune(r, recipe, init):
        calls.append({"round": r, "init": init, "fixed": list(recipe["fixed"])})
        return f"model-r{len(calls)}"

    rounds_data = iter([[([1, 2], ["A", "3", "</s>"])], [([4, 4], ["A", "8", "</s>"])], [([5, 5], ["A", "0", "</s>"])]])
    monkeypatch.setattr(star, "collect", lambda *a, **k: {"kept": next(rounds_data), "used": 1.0, "n_kept": 1,
                                                           "fmt_mix": {}, "false_positive_rate": 0.0, "rationalized": 0.0})
    monkeypatch.setattr(torch, "Generator", lambda device=None: type("G", (), {"manual_seed": lambda self, s: self})())
    fake_base = type("B", (), {"parameters": lambda self: iter([torch.zeros(1)]), "cfg": type("C", (), {"vocab_size": 18})})()
    hist = star.train(fake_base, star.StarConfig(rounds=3, problems=1, restart=restart, pool=pool), fine_tune,
                      callback=lambda rec, model: seen.append(model))
    assert [c["round"] for c in calls] == [1, 2, 3] and seen == ["model-r1", "model-r2", "model-r3"]
    assert [c["init"] for c in calls] == ([fake_base] * 3 if restart else [fake_base, "model-r1", "model-r2"])
    sizes = [len(c["fixed"]) for c in calls]
    assert sizes == ([1, 2, 3] if pool else [1, 1, 1])
    assert calls[2]["fixed"][-1] == ([5, 5], ["A", "0", "</s>"])
    assert [h["steps"] for h in hist] == [300, 360, 432]                    # +20 % a round


def test_a_round_that_keeps_nothing_keeps_the_model(monkeypatch):
    monkeypatch.setattr(star, "collect", lambda *a, **k: {"kept": [], "used": 0.0, "n_kept": 0, "fmt_mix": {},
                                                           "false_positive_rate": 0.0, "rationalized": 0.0})
    seen = []
    base = type("B", (), {"parameters": lambda self: iter([torch.zeros(1)]), "cfg": None})()
    star.train(base, star.StarConfig(rounds=2, problems=1), lambda *a: pytest.fail("nothing to fine-tune on"),
               callback=lambda rec, model: seen.append(model))
    assert seen == [base, base]


def test_each_filter_keeps_what_it_says_on_one_draw_of_samples():
    """On hand-written samples (a right chain, a chain whose errors cancel, a wrong answer): the chain filter keeps
    the first, the answer filter the first two, no filter every one; `select` on the draw keeps what `collect`
    keeps when it samples the same rows."""
    d = DIGITS.problem([3, 5, 9])                              # running sums 8, 7 (S), answer 7
    rows = [["S", "8", "7", "A", "7", "</s>"], ["S", "9", "7", "A", "7", "</s>"], ["S", "8", "6", "A", "6", "</s>"]]
    samples = [[[ID[w] for w in r] + [ID["<pad>"]] * 2 for r in rows]]
    kept = {f: [tuple(w) for _, w in star.select([d], samples, star.StarConfig(filter=f, samples=3, cap=3))["kept"]]
            for f in ("chain", "answer", "none")}
    assert kept == {"chain": [tuple(rows[0])], "answer": [tuple(r) for r in rows[:2]], "none": [tuple(r) for r in rows]}
    assert star.select([d], samples, star.StarConfig(filter="none", samples=3, cap=3))["false_positive_rate"] == 0.5


def test_select_keeps_what_collect_keeps_from_the_same_samples(monkeypatch):
    fake_collect(monkeypatch, ["S 8 9 6 A 6 </s>", "S 1 1 6 A 6 </s>", "A 6 </s>", "A 5 </s>"])
    cfg = star.StarConfig(samples=4, cap=10, filter="chain")
    assert star.select(PROB, star.sample(None, PROB, cfg, None), cfg) == star.collect(None, PROB, cfg, None)


def test_without_chains_keeps_the_problems_and_answers_and_drops_the_chains():
    data = [([3, 5, 9, 2, 7], "S 8 9 6 A 6 </s>".split()), ([1, 2], "T 1 3 A 3 </s>".split()), ([4, 4], ["A", "8", "</s>"])]
    assert star.without_chains(data) == [([3, 5, 9, 2, 7], ["A", "6", "</s>"]), ([1, 2], ["A", "3", "</s>"]),
                                         ([4, 4], ["A", "8", "</s>"])]


def test_a_rounds_recipe_is_the_kept_data_with_the_steps_grown():
    cfg = star.StarConfig(steps=100, growth=1.5, seed=2, fixed_frac=1.0)
    r = star.round_recipe(cfg, 3, [([1, 2], ["A", "3", "</s>"])])
    assert r["phases"][0][1] == 225 and r["fixed"] == [([1, 2], ["A", "3", "</s>"])] and r["fixed_frac"] == 1.0
    assert r["seed"] == 2003 and "hint_frac" not in r


def test_filters_rounds_and_recipes_serve_another_task():
    """add: the filters read its (digit, carry) chains and multi-digit answers, without_chains keeps the whole
    answer, a round draws train-part problems of the task, its recipes name it, and rationalization is refused (a
    task of many answers has no hint tokens)."""
    add = tasks.get("add")
    p = add.problem([4, 7, 3, 2, 1, 5])                         # 473 + 215 = 688
    rows = ["T 8c0 8c0 6c0 A 0 6 8 8 </s>", "T 8c0 9c0 6c0 A 0 6 8 8 </s>", "A 0 6 8 7 </s>"]
    samples = [[[add.id[w] for w in r.split()] for r in rows]]

    def kept(f):
        return star.select([p], samples, star.StarConfig(filter=f, samples=3, cap=3))
    assert {f: [" ".join(w) for _, w in kept(f)["kept"]] for f in ("chain", "answer", "none")} == \
        {"chain": rows[:1], "answer": rows[:2], "none": rows}
    data = kept("answer")
    assert data["false_positive_rate"] == 0.5 and [x for x, _ in data["kept"]] == [list(p.x)] * 2
    assert star.without_chains(data["kept"]) == [(list(p.x), "A 0 6 8 8 </s>".split())] * 2
    modprod = tasks.get("modprod")
    assert all(q.task == "modprod" and modprod.part_of(q) == "train"
               for q in star.problems_of_round(random.Random(0), 20, modprod))
    r = star.round_recipe(star.StarConfig(), 1, data["kept"], add)
    assert r["task"] == "add" and r["fixed"] == data["kept"]
    few = star.few_chains_cfg(0, n_chains=20, task=modprod)
    assert few["task"] == "modprod" and all(
        modprod.check_chain(modprod.problem(x), modprod.parse([modprod.id[w] for w in words])) is True
        for x, words in few["fixed"])
    assert "hint_frac" not in star.few_chains_cfg(0, n_chains=5, task=add)   # add has no hint tokens to teach
    with pytest.raises(ValueError, match="hints"):
        star.train(build_model(0, task=add), star.StarConfig(rounds=1, rationalize=True), task=add)
