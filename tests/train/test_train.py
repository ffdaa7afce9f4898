"""Batches and the trainer."""
import numpy as np
import pytest
import torch

import reasonlab as R
from reasonlab import tasks
from reasonlab.core import fast
from reasonlab.core.task import ID, IGNORE, VOCAB, parse
from reasonlab.train.sft import (
    QUICK_CFG,
    base_cfg,
    batch_fn,
    build_model,
    lr_at,
    make_sequences,
    misread,
    pretrain,
    train_on_batches,
)


def rows_as_words(inp, tgt):
    """Rebuild each full sequence from (inputs, targets) and return (digits, output ids)."""
    out = []
    for x, t in zip(inp.tolist(), tgt.tolist()):
        seq = x + [t[-1] if t[-1] != IGNORE else ID["<pad>"]]
        digits = [int(VOCAB[i]) for i in seq[1:9] if VOCAB[i].isdigit()]
        out.append((digits, [i for i in seq[10:]]))
    return out


def test_batch_fn_shapes_targets_and_solutions():
    inp, tgt = R.batch_fn(0, 256)
    assert inp.shape == tgt.shape == (256, R.MAX_LEN - 1) and inp.dtype == torch.long
    assert (tgt[:, :9] == IGNORE).all()                       # nothing before "=" is a target
    assert (inp[:, 9] == ID["="]).all()
    assert (tgt[:, 8:][tgt[:, 8:] != IGNORE] != ID["<pad>"]).all()
    for (digits, out), x, t in zip(rows_as_words(inp, tgt), inp, tgt):
        assert 2 <= len(digits) <= 8
        p = parse(out)
        assert p["ok"] and p["answer"] == sum(digits) % 10 and R.check_chain(digits, p) is not False
        # targets are the inputs shifted by one wherever they count
        n = (t != IGNORE).sum().item()
        assert torch.equal(t[9:9 + n], torch.tensor(R.encode(digits, p["fmt"])[0][10:10 + n]))


def test_batches_models_and_recipes_serve_another_task():
    """add: every row a train-part problem with its right output, targets from "=" on; the model sized to the task;
    misread blurs the task's own words only; a digits recipe carried to it names it and keeps its phases."""
    add = tasks.get("add")
    seq = make_sequences(np.random.default_rng(0), 64, task=add)
    assert seq.shape == (64, add.max_len)
    for row in seq.tolist():
        p = add.read_prompt([add.vocab[t] for t in row[1:add.prompt_len - 1]])
        q = add.parse(row[add.prompt_len:])
        assert add.part_of(p) == "train" and add.check(p, q).template_ok and add.correct(p, q)
    inp, tgt = batch_fn(0, 8, task=add)
    assert inp.shape == (8, add.max_len - 1) and (tgt[:, :add.prompt_len - 1] == IGNORE).all()
    m = build_model(0, task=add)
    assert m.cfg.vocab_size == len(add.vocab) and m.cfg.max_len == add.max_len
    before = m.tok.weight.detach().clone()
    moved = (misread(m, 0.5, 0, add).tok.weight.detach() != before).any(1)
    assert moved.tolist() == [i in add.task_ids() for i in range(len(add.vocab))]
    cfg = base_cfg(0, quick=True, task=add)                                  # k = 2..8 mapped onto add's 2..5
    assert cfg["task"] == "add" and [ph[:4] for ph in cfg["phases"]] == [ph[:3] + [[2, 5]] for ph in QUICK_CFG["phases"]]
    full = base_cfg(0, task=add)                   # the gated phase runs at most recipe_steps times its steps
    assert [ph[1] for ph in full["phases"]] == [200, 1500 * add.recipe_steps, 300] and full["phases"][1][5]["extra"][0][1] == [3, 5]
    assert base_cfg(0, quick=True) == dict(QUICK_CFG, seed=0)                # digits' recipe as it was
    with pytest.raises(ValueError, match="no hint tokens"):                 # add's answers are too many for hints
        make_sequences(np.random.default_rng(0), 8, hint_frac=0.1, task=add)


def test_batch_fn_is_deterministic_in_seed():
    a, b, c = R.batch_fn(5, 64), R.batch_fn(5, 64), R.batch_fn(6, 64)
    assert torch.equal(a[0], b[0]) and not torch.equal(a[0], c[0])


def test_batch_mix_and_k_range():
    seq = make_sequences(np.random.default_rng(0), 20000, mix=(0.5, 0.3, 0.2), k_range=(3, 5))
    fmt = seq[:, 10]
    shares = [(fmt == ID[t]).mean() for t in "AST"]
    assert np.allclose(shares, [0.5, 0.3, 0.2], atol=0.02)
    k = (seq[:, 1:9] != ID["_"]).sum(1)
    assert set(np.unique(k)) == {3, 4, 5}
    only_t = make_sequences(np.random.default_rng(0), 100, mix=(0, 0, 1))
    assert (only_t[:, 10] == ID["T"]).all()


def test_fixed_data_and_fixed_frac():
    fixed = [([1, 2, 3], ["T", "1", "3", "6", "A", "6", "</s>"])]
    inp, tgt = R.batch_fn(0, 400, fixed=fixed, fixed_frac=1.0)
    assert (inp[:, 1:4] == torch.tensor([ID["1"], ID["2"], ID["3"]])).all()
    inp, _ = R.batch_fn(0, 4000, fixed=fixed, fixed_frac=0.25)
    share = (inp[:, 1:5] == torch.tensor([ID["1"], ID["2"], ID["3"], ID["_"]])).all(1).float().mean()
    assert 0.2 < share < 0.3


def test_lr_schedule():
    assert lr_at(0, 100, 1.0, 10) == pytest.approx(0.1)
    assert lr_at(9, 100, 1.0, 10) == pytest.approx(1.0)
    assert lr_at(99, 100, 1.0, 10) == pytest.approx(0.1, abs=0.01)
    assert all(lr_at(s, 100, 1.0, 10) >= lr_at(s + 1, 100, 1.0, 10) for s in range(10, 99))


def test_constant_and_decay_schedules():
    # constant: the warmup's ramp, then the peak; decay: cosine from the peak at step 0 down to min_frac at the end
    assert [lr_at(s, 100, 2.0, 4, schedule="constant") for s in (0, 3, 4, 99)] == [0.5, 2.0, 2.0, 2.0]
    assert lr_at(0, 100, 2.0, 4, schedule="decay") == pytest.approx(2.0)
    assert lr_at(50, 100, 2.0, 4, schedule="decay") == pytest.approx(2.0 * (0.1 + 0.9 * 0.5))
    assert lr_at(100, 100, 2.0, 4, schedule="decay") == pytest.approx(0.2)


def test_a_phases_extra_parts_fill_their_share_of_every_batch(monkeypatch):
    from reasonlab.train import sft as train
    seen, orig = [], train.split_targets
    monkeypatch.setattr(train, "split_targets", lambda seq, *a: (seen.append(seq), orig(seq, *a))[1])
    cfg = {"seed": 0, "lr": 1e-3, "batch": 20, "phases": [
        [[0.0, 0.0, 1.0], 2, 1, [2, 8], 1.0, {"extra": [[[1.0, 0.0, 0.0], [2, 2], 0.25], [[0.0, 1.0, 0.0], [8, 8], 0.1]]}]]}
    pretrain(cfg)
    assert len(seen) == 2
    for seq in seen:   # 20 rows: 13 of the phase's own T rows, then 5 A rows at k = 2, then 2 S rows at k = 8
        fmt = seq[:, 10]
        assert (fmt[:13] == ID["T"]).all() and (fmt[13:18] == ID["A"]).all() and (fmt[18:] == ID["S"]).all()
        assert (seq[13:18, 3] == ID["_"]).all() and (seq[18:, 8] != ID["_"]).all()


def test_a_gated_phase_stops_at_its_first_passing_test(monkeypatch):
    from reasonlab.train import sft as train
    tests = []
    monkeypatch.setattr(train, "gate_passes", lambda model, gate, *a: tests.append(gate) or len(tests) == 2)
    gate = {"min": 4, "every": 2}
    cfg = {"seed": 0, "lr": 1e-3, "batch": 8, "keep_optimizer": True, "phases": [
        [[0.0, 0.5, 0.5], 20, 1, [2, 8], 1.0, {"schedule": "constant", "until": gate}], [[0.5, 0.3, 0.2], 3, 0, [2, 8]]]}
    stats = {}
    pretrain(cfg, stats=stats)
    assert len(tests) == 2 and tests[0].min == 4 and tests[0].S == 0.95   # tested after steps 4 and 6
    assert stats["phase_steps"] == [6, 3]
    stats = {}
    pretrain(cfg, quick=True, stats=stats)                                  # quick: 30 steps a phase, no gate
    assert stats["phase_steps"] == [30, 30] and len(tests) == 2


def test_a_kept_optimizer_carries_adams_moments_across_phases():
    one = {"seed": 0, "lr": 1e-3, "batch": 8, "phases": [[[0.0, 0.5, 0.5], 6, 0, [2, 8], 1.0, {"schedule": "constant"}]]}
    two = dict(one, phases=[[[0.0, 0.5, 0.5], 3, 0, [2, 8], 1.0, {"schedule": "constant"}]] * 2)
    same = [pretrain(c).state_dict() for c in (one, dict(two, keep_optimizer=True))]
    fresh = pretrain(two).state_dict()
    assert all(torch.equal(same[0][k], same[1][k]) for k in same[0])   # one phase of 6 = two of 3 with one AdamW
    assert not all(torch.equal(same[0][k], fresh[k]) for k in fresh)   # a fresh AdamW a phase (the spec's) differs


def test_bad_phase_options_are_errors_before_any_training(monkeypatch):
    from reasonlab.train import sft as train
    steps = []
    monkeypatch.setattr(train, "train_on_batches", lambda *a, **kw: steps.append(1) or [])
    base = [[0.0, 0.5, 0.5], 2, 1, [2, 8], 1.0]
    for opts, match in [({"schedul": "constant"}, "unknown phase option"), ({"schedule": "linear"}, "schedule"),
                        ({"until": {"S": 0.9, "acc": 1}}, "unknown gate field"),
                        ({"extra": [[[1, 0, 0], 0.5]]}, "are \\[mix"),
                        ({"extra": [[[1, 0, 0], [2, 2], 0.6], [[0, 1, 0], [2, 2], 0.5]]}, "fracs sum below 1")]:
        with pytest.raises(ValueError, match=match):
            pretrain({"seed": 0, "phases": [base, base + [opts]]})   # the second phase's option: phase 1 not run
    assert steps == []


def test_the_gate_tests_validation_problems(monkeypatch):
    import importlib

    from reasonlab.core.problems import part_of
    from reasonlab.train.sft import Gate, gate_passes
    E = importlib.import_module("reasonlab.core.evaluate")
    seen, orig = [], E.evaluate
    monkeypatch.setattr(E, "evaluate", lambda model, probs, **kw: (seen.extend(probs), orig(model, probs, **kw))[1])
    assert not gate_passes(build_model(0), Gate(n_val=5))     # an untrained model fails it
    assert seen and all(part_of(d) == "val" for d in seen)


def test_a_step_changes_every_parameter():
    m = build_model(0)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    train_on_batches(m, lambda s: R.batch_fn(s, 32), 1, lr=1e-3, log=None)
    for k, v in m.state_dict().items():
        assert not torch.equal(before[k], v), k


def test_nan_stops_training_naming_the_step():
    m = build_model(0)
    with torch.no_grad():
        m.head.weight[0, 0] = float("nan")
    with pytest.raises(FloatingPointError, match="step 0"):
        train_on_batches(m, lambda s: R.batch_fn(s, 8), 3, log=None)


def test_pretrain_is_deterministic_and_logs(tmp_path):
    cfg = {"seed": 3, "lr": 1e-3, "phases": [[[0.0, 0.5, 0.5], 5, 2, [2, 8]], [[0.5, 0.3, 0.2], 4, 1, [2, 8]]]}
    path = tmp_path / "metrics.jsonl"
    a = pretrain(cfg, metrics_path=str(path), log_every=2, log=None)
    b = pretrain(cfg)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert len(path.read_text().splitlines()) == 3 + 3   # steps 0, 2, 4 then 0, 2, 3


def test_hints_replace_bos_with_the_answer_and_change_nothing_when_off():
    import numpy as np

    from reasonlab.core.task import DIGIT0, HINT0, ID
    from reasonlab.train.sft import make_sequences
    plain = make_sequences(np.random.default_rng(0), 256)
    off = make_sequences(np.random.default_rng(0), 256, hint_frac=0.0)
    assert (plain == off).all()                                   # hint-free recipes: identical batches
    on = make_sequences(np.random.default_rng(0), 256, hint_frac=0.5)
    hinted = on[:, 0] >= HINT0
    assert 0.3 < hinted.mean() < 0.7 and (on[~hinted, 0] == ID["<s>"]).all()
    assert (on[:, 1:] == plain[:, 1:]).all()                      # only the first token changes
    for row in on[hinted]:
        digits = [t - DIGIT0 for t in row[1:9] if DIGIT0 <= t < DIGIT0 + 10]
        assert row[0] - HINT0 == sum(digits) % 10


@pytest.mark.parametrize("wd,betas", [(0.0, (0.9, 0.999)), (0.1, (0.9, 0.98))])
def test_our_adamw_is_torchs_fused_adamw_bit_for_bit(wd, betas):
    """Same weights after five steps with a changing lr (weight decay 0: Adam, as RL uses it), and each loads the
    other's state_dict (RL checkpoints written with torch.optim.Adam resume)."""
    from reasonlab.train.sft import AdamW, batch_fn
    a, b = build_model(0), build_model(0)
    ours = AdamW(a.parameters(), lr=3e-3, betas=betas, weight_decay=wd)
    theirs = torch.optim.AdamW(b.parameters(), lr=3e-3, betas=betas, weight_decay=wd, fused=True)
    for s in range(5):
        inp, tgt = batch_fn(s, 16)
        for m, o in ((a, ours), (b, theirs)):
            o.param_groups[0]["lr"] = 1e-3 * (s + 1)
            o.zero_grad()
            fast.loss(m, inp, tgt).backward()
            o.step()
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    back = AdamW(b.parameters())
    back.load_state_dict(theirs.state_dict())
    assert back.param_groups[0] == ours.param_groups[0]
    assert all(torch.equal(back.state[i][k], ours.state[i][k]) for i in ours.state for k in ours.state[i])
    fresh = torch.optim.AdamW(a.parameters(), fused=True)
    fresh.load_state_dict(ours.state_dict())
    assert torch.equal(fresh.state_dict()["state"][0]["exp_avg"], theirs.state_dict()["state"][0]["exp_avg"])


def test_training_does_not_import_torch_dynamo():
    """torch.optim imports torch._dynamo on first use (1.5-2 s a process); pretraining does not (RL and the
    verifiers use the same optimizer, train.AdamW)."""
    import subprocess
    import sys
    code = ("import sys, copy; from reasonlab.train.sft import pretrain, BASE_CFG; from reasonlab.train import rl; "
            "from reasonlab.methods import verifier; "
            "pretrain(dict(copy.deepcopy(BASE_CFG), phases=[[[0, 0, 1], 3, 1, [2, 8]]])); "
            "print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_recipes_convert_to_and_from_the_spec_dicts_exactly():
    """Recipe(phases=[Phase(...)]) gives back the very dict it was read from (the model cache's key), for every
    recipe the package trains; phases are edited by name, not by index."""
    from reasonlab.methods.star import few_chains_cfg
    from reasonlab.train.erring import ERR_CFG
    from reasonlab.train.sft import BASE_CFG, QUICK_CFG, SPEC_CFG, Phase, Recipe
    for d in (BASE_CFG, SPEC_CFG, QUICK_CFG, dict(ERR_CFG, seed=3), few_chains_cfg(0, 50)):
        assert Recipe.from_dict(d).to_dict() == d
    r = Recipe.from_dict(BASE_CFG)
    assert [ph.steps for ph in r.phases] == [200, 1500, 300] and r.phases[1].options["schedule"] == "constant"
    cut = r.with_steps([10, 20, 5]).to_dict()
    assert [ph[1:3] for ph in cut["phases"]] == [[10, 10], [20, 20], [5, 0]] and BASE_CFG["phases"][0][1] == 200
    assert Phase((0, 0, 1), 5, 1, (2, 8)).to_list() == [[0, 0, 1], 5, 1, [2, 8]]
    with pytest.raises(ValueError, match="one number per phase"):
        r.with_steps([1])


def test_the_erring_target_is_one_the_tasks_noise_can_reach():
    """Misreading can only bring a model down to its blind-guess rate: on digits (chance 0.1 at k = 8) the recipe's
    0.45 stands and the recipe is the very dict it was (its cache key); on modprod, whose blind guess is right on
    about 0.58 at k = 8, the target is chance + 0.1."""
    from reasonlab.train.erring import ERR_CFG, reachable
    from reasonlab.train.sft import for_task
    assert for_task(ERR_CFG, "digits") is ERR_CFG and reachable(ERR_CFG["misread"], "digits") == ERR_CFG["misread"]
    m = for_task(ERR_CFG, "modprod")["misread"]
    chance = tasks.get("modprod").chance(m["k"])
    assert chance > 0.45 and m["acc"] == pytest.approx(chance + 0.1, abs=1e-4) and m["k"] == tasks.get("modprod").k_max


def test_a_shipped_model_with_the_recipes_key_is_copied_not_trained(tmp_path, monkeypatch):
    """The package's starting models: a cache miss whose key matches a shipped model copies it (no training);
    REASONLAB_RETRAIN=1, or another recipe, trains."""
    from reasonlab.io.checkpoint import cache_key, load_model, save_model
    from reasonlab.train import zoo
    cfg = {"seed": 3, "phases": [["T", 5, 1e-3]]}
    ship = tmp_path / "models"
    ship.mkdir()
    made = build_model(3)
    save_model(str(ship / "base-seed3"), made, {"key": cache_key(cfg)})
    monkeypatch.setattr(zoo, "SHIPPED", str(ship))
    trained = []
    monkeypatch.setattr(zoo, "pretrain", lambda *a, **k: trained.append(1) or build_model(4))
    monkeypatch.delenv("REASONLAB_RETRAIN", raising=False)
    m = zoo.get_model("base-seed3", cfg, cache=str(tmp_path / "c1"), log=None)
    assert not trained and all(torch.equal(a, b) for a, b in zip(m.state_dict().values(), made.state_dict().values()))
    assert load_model(str(tmp_path / "c1" / "base-seed3"))[1]["shipped"] is True      # now in the cache
    zoo.get_model("base-seed3", dict(cfg, seed=4), cache=str(tmp_path / "c2"), log=None)   # another recipe
    assert trained == [1]
    monkeypatch.setenv("REASONLAB_RETRAIN", "1")
    zoo.get_model("base-seed3", cfg, cache=str(tmp_path / "c3"), log=None)
    assert trained == [1, 1]
