"""A task as a dataset: the lab's disjoint parts, the right outputs, TRL's columns and verl's layout, for every task."""
import json
import os

import pytest

from reasonlab import tasks
from reasonlab.core.problems import part_of
from reasonlab.hf.data import DATA_SOURCE, SPLITS, rows
from reasonlab.hf.rewards import read_prompt
from reasonlab.tasks import FMT_NAMES, Problem

from .hfkit import need

DIGITS = tasks.get("digits")
K_MIN, K_MAX = DIGITS.k_min, DIGITS.k_max


def solution(d, fmt):
    return DIGITS.solution(DIGITS.problem(d), fmt)


def test_the_splits_are_the_labs_disjoint_parts():
    parts = {s: rows(s, 50, seed=1) for s in SPLITS}
    for split, rs in parts.items():
        assert {part_of(DIGITS.problem(r["digits"])) for r in rs} == {SPLITS[split]}
        assert {r["k"] for r in rs} == set(range(K_MIN, K_MAX + 1))
    seen = [{tuple(r["digits"]) for r in rs} for rs in parts.values()]
    assert not (seen[0] & seen[1] or seen[0] & seen[2] or seen[1] & seen[2])
    # training draws every k equally often (with repeats); evaluation problems are distinct
    assert len(parts["train"]) == 50 * 7 and sum(r["k"] == 2 for r in parts["train"]) == 50
    assert len(seen[2]) == len(parts["test"]) and sum(r["k"] == 2 for r in parts["test"]) == 25


@pytest.mark.parametrize("name", tasks.names())
def test_every_tasks_splits_are_disjoint_parts_of_it(name):
    """Each row carries its problem as JSON and the task's spec; the splits are the task's parts, so disjoint; the
    prompt reads back to the problem, the outputs are the task's right ones and the ground truth is the answer as
    the task writes it."""
    task = tasks.get(name)
    parts = {s: rows(s, 30, seed=2, task=name) for s in SPLITS}
    seen = []
    for split, rs in parts.items():
        probs = [Problem.from_json(json.loads(r["problem"])) for r in rs]
        assert {r["task"] for r in rs} == {task.spec} and {p.task for p in probs} == {name}
        assert {task.part_of(p) for p in probs} == {SPLITS[split]}
        assert {r["k"] for r in rs} == set(task.ks())
        for r, p in zip(rs, probs):
            assert read_prompt(r["prompt"], task) == (p, None) and r["k"] == p.k and r["answer"] == task.answer(p)
            assert all(r[f] == " ".join(task.solution(p, f)) for f in FMT_NAMES)
            assert ("digits" in r) == (name == "digits")
        seen.append({p.x for p in probs})
        if split != "train":
            assert len(seen[-1]) == len(rs)            # evaluation problems are distinct
    assert not (seen[0] & seen[1] or seen[0] & seen[2] or seen[1] & seen[2])
    for i, r in enumerate(rows("validation", 5, style="verl", budget="max", task=name)):
        p = Problem.from_json(json.loads(r["extra_info"]["problem"]))
        assert r["reward_model"]["ground_truth"] == " ".join(task.write_answer(p, task.answer(p)))
        assert r["extra_info"]["task"] == task.spec and r["extra_info"]["index"] == i
        assert read_prompt(r["prompt"][0]["content"], task) == (p, r["extra_info"]["budget"])
        assert r["data_source"] == (DATA_SOURCE if name == "digits" else f"reasonlab/{name}")


def test_a_tasks_knobs_ride_in_its_rows():
    rs = rows("test", 5, task="compose:n_f=2")
    p = Problem.from_json(json.loads(rs[0]["problem"]))
    assert rs[0]["task"] == "compose:n_f=2" and dict(p.knobs) == {"n_f": 2}
    assert tasks.task_of(p).spec == "compose:n_f=2" and all(f < 2 for r in rs
                                                              for f in json.loads(r["problem"])["x"][1:])


def test_trl_rows_hold_the_prompt_the_answer_and_every_right_output():
    for r in rows("validation", 20, seed=2):
        d = r["digits"]
        assert read_prompt(r["prompt"]) == (DIGITS.problem(d), None)
        assert r["prompt"].startswith("<s> ") and r["prompt"].endswith(" =")
        assert r["answer"] == sum(d) % 10 and r["k"] == len(d)
        assert all(r[f] == " ".join(solution(d, f)) for f in FMT_NAMES)


@pytest.mark.parametrize("budget,token", [("exact", "B"), ("max", "M")])
def test_budget_rows_carry_their_budget_in_the_prompt(budget, token):
    rs = rows("train", 30, seed=0, budget=budget)
    assert {r["budget"] for r in rs} == set(range(9))
    for r in rs:
        assert r["prompt"].split()[-1] == f"{token}{r['budget']}"
        assert read_prompt(r["prompt"]) == (DIGITS.problem(r["digits"]), r["budget"])


def test_verl_rows_follow_verls_layout():
    for i, r in enumerate(rows("test", 10, style="verl", budget="exact")):
        assert set(r) == {"data_source", "prompt", "ability", "reward_model", "extra_info"}
        assert r["data_source"] == DATA_SOURCE and r["prompt"][0]["role"] == "user"
        assert r["reward_model"] == {"style": "rule", "ground_truth": str(sum(r["extra_info"]["digits"]) % 10)}
        assert r["extra_info"]["index"] == i and r["extra_info"]["split"] == "test"
        assert read_prompt(r["prompt"][0]["content"])[1] == r["extra_info"]["budget"]


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="split"):
        rows("dev", 5)
    with pytest.raises(ValueError, match="budget"):
        rows("train", 5, budget="loose")
    with pytest.raises(ValueError, match="unknown task"):
        rows("train", 5, task="nope")
    with pytest.raises(ValueError, match="not a prompt of the modprod task"):
        read_prompt(rows("test", 1, task="compose")[0]["prompt"], "modprod")


def test_dataset_dict_and_verl_parquet_round_trip(tmp_path):
    datasets = need("datasets")
    from reasonlab.hf import dataset
    dd = dataset(n_train=10, n_test=5, seed=4)
    assert list(dd) == ["train", "validation", "test"] and dd["train"].num_rows == 70
    assert dd["train"][0] == rows("train", 10, seed=4)[0]
    dd.save_to_disk(str(tmp_path / "trl"))
    assert datasets.load_from_disk(str(tmp_path / "trl"))["test"][:] == dd["test"][:]
    verl = dataset("verl", n_train=10, n_test=5)
    path = str(tmp_path / "test.parquet")
    verl["test"].to_parquet(path)
    back = datasets.load_dataset("parquet", data_files=path, split="train", cache_dir=str(tmp_path / "c"))
    assert back[0] == rows("test", 5, style="verl")[0] and os.path.getsize(path) > 0
    for name in ("modprod:p_zero=0.25", "add"):      # knobs and long answers survive Arrow and parquet
        verl = dataset("verl", n_train=3, n_test=2, task=name)
        path = str(tmp_path / f"{name[:3]}.parquet")
        verl["validation"].to_parquet(path)
        back = datasets.load_dataset("parquet", data_files=path, split="train", cache_dir=str(tmp_path / "c"))
        assert back[:] == verl["validation"][:] and back[0] == rows("validation", 2, style="verl", task=name)[0]
