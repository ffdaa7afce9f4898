"""Checkpoints: safetensors + JSON round trip, corruption handling, name validation, the get_model cache."""
import json
import os

import pytest
import torch

import reasonlab as R
from reasonlab.io.checkpoint import CheckpointError, load_model, save_model
from reasonlab.io.files import cache_dir, check_name
from reasonlab.train.sft import build_model
from reasonlab.train.zoo import get_model

TINY = {"seed": 0, "lr": 1e-3, "phases": [[[0.0, 0.5, 0.5], 3, 1, [2, 8]]]}


def test_round_trip(tmp_path):
    m = build_model(4)
    save_model(str(tmp_path / "m"), m, {"note": "x"})
    back, meta = load_model(str(tmp_path / "m"))
    assert meta["note"] == "x" and meta["model"]["d_model"] == 64
    for (k, a), (_, b) in zip(m.state_dict().items(), back.state_dict().items()):
        assert torch.equal(a, b), k
    assert sorted(os.listdir(tmp_path)) == ["m.json", "m.safetensors"]  # no temp files left


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage_json", "missing_weights", "wrong_shape"])
def test_damaged_checkpoint_is_an_error(tmp_path, damage):
    stem = str(tmp_path / "m")
    save_model(stem, build_model(0), {})
    if damage == "truncate":
        with open(stem + ".safetensors", "r+b") as f:
            f.truncate(1000)
    elif damage == "flip":
        data = bytearray(open(stem + ".safetensors", "rb").read())
        data[-10] ^= 0xFF
        open(stem + ".safetensors", "wb").write(bytes(data))
    elif damage == "garbage_json":
        open(stem + ".json", "w").write("{not json")
    elif damage == "missing_weights":
        os.remove(stem + ".safetensors")
    elif damage == "wrong_shape":
        meta = json.load(open(stem + ".json"))
        meta["model"]["d_model"] = 32
        json.dump(meta, open(stem + ".json", "w"))
    with pytest.raises(CheckpointError):
        load_model(stem)


@pytest.mark.parametrize("name", ["../evil", "a/b", "/abs", "..", "", ".hidden", "x" * 200, "a\\b", "a..b"])
def test_bad_names_are_rejected(name):
    with pytest.raises(ValueError):
        check_name(name)


def test_good_names():
    for name in ("base", "base-seed0", "star_r1.v2"):
        assert check_name(name) == name


def test_cache_dir_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("REASONLAB_CACHE", str(tmp_path / "c"))
    assert cache_dir() == str(tmp_path / "c")
    assert cache_dir(str(tmp_path / "d")) == str(tmp_path / "d")


def test_get_model_trains_once_then_loads(tmp_path):
    logs = []
    a = get_model("tiny", TINY, log=logs.append)
    assert os.path.exists(os.path.join(cache_dir(), "tiny.safetensors"))
    b = get_model("tiny", TINY, log=logs.append)
    assert any("loaded" in s for s in logs)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert load_model(os.path.join(cache_dir(), "tiny"))[1]["phase_steps"] == [3]   # the steps each phase ran


def test_get_model_retrains_on_new_config_or_data():
    logs = []
    a = get_model("tiny", TINY, log=logs.append)
    b = get_model("tiny", dict(TINY, lr=2e-3), log=logs.append)
    assert not torch.equal(a.head.weight, b.head.weight)
    fixed = [([1, 2], ["A", "3", "</s>"])]
    c = get_model("tiny", dict(TINY, lr=2e-3, fixed=fixed, fixed_frac=0.5), log=logs.append)
    d = get_model("tiny", dict(TINY, lr=2e-3, fixed=fixed + fixed, fixed_frac=0.5), log=logs.append)
    assert not any("loaded" in s for s in logs)
    assert not torch.equal(b.head.weight, c.head.weight) and not torch.equal(c.head.weight, d.head.weight)


def test_get_model_quick_neither_reads_nor_writes():
    get_model("q", TINY, quick=True, log=None)
    assert not os.path.exists(os.path.join(cache_dir(), "q.json"))


def test_get_model_recovers_from_a_corrupt_cache():
    a = get_model("tiny", TINY, log=None)
    with open(os.path.join(cache_dir(), "tiny.safetensors"), "r+b") as f:
        f.truncate(100)
    logs = []
    b = get_model("tiny", TINY, log=logs.append)
    assert any("retraining" in s for s in logs)
    assert torch.equal(a.head.weight, b.head.weight)   # same seed, same recipe: same model
    assert load_model(os.path.join(cache_dir(), "tiny"))  # and the cache is whole again


def test_get_model_init_starts_from_given_weights():
    base = get_model("tiny", TINY, log=None)
    cfg = dict(TINY, phases=[[[0.5, 0.3, 0.2], 1, 1, [2, 8]]], lr=1e-9)
    tuned = get_model("tuned", cfg, init=base, log=None)
    assert torch.allclose(tuned.head.weight, base.head.weight, atol=1e-5)


def test_invalid_name_through_get_model():
    with pytest.raises(ValueError):
        R.get_model("../../etc/x", TINY, log=None)


def test_training_is_announced_by_its_size_not_a_time_from_another_machine(tmp_path):
    from reasonlab.train.zoo import train_size
    cfg = {"phases": [[[0, 0, 1], 200, 30, [2, 8]], [[0, 1, 0], 1500, 30, [2, 8]]]}
    assert train_size(cfg) == "at most 1,700 steps"
    assert train_size({"phases": [], "misread": {"iters": 12}}) == "12 evaluations to place its noise"
