"""The lab's problem sets: the parts of every task's space, the named evaluation draws, and drawing.

A problem belongs to one part, a fixed function of its instance (a hash: tasks/base.py), so sets drawn from different
parts are disjoint whatever the seeds:

    train   half of the space   everything trained draws its problems here (the base recipe, RL, STaR, budgets,
                                verifiers: `Task.train_problem`, `Task.sequences`)
    val     a quarter           selection: stopping tests, hyper-parameters, compute-optimal choices
    test    a quarter           scoring: each (experiment, seed) draws its own (`test_problems`)

Evaluation sets never repeat a problem: where a k has no more problems than asked for (digits' k = 2 has 100 in all,
25 of them in "test"), the draw is that whole part of k, in a seeded order, and the set is smaller than asked.
Training data may repeat problems (`repeat=True`).
"""
from __future__ import annotations

from ..tasks import PARTS, Problem, Task, get, task_of  # noqa: F401  (the lab's names for them)

TEST_SEED = 12345   # `reasonlab eval`'s default test draw (one model, one table)
PROBE_SEED = 999    # "probe": RL's greedy checks during training (time to solve), never reported as a final score
GATE_SEED = 31337   # "gate": the base recipe's stopping tests, drawn from the "val" part only


def as_task(task: str | Task) -> Task:
    return task if isinstance(task, Task) else get(task)


def problems_per_k(n: int, seed=0, ks=None, split: str | None = None, repeat: bool = False,
                   task: str | Task = "digits") -> list[Problem]:
    """Up to n distinct problems of `task` for each k (default: the task's range) from one part of the space
    (`split`: "train", "val", "test"; None: all of it), drawn from `seed`. Small k are enumerated, so a k with fewer
    than n problems gives them all. repeat=True draws n with replacement (training data)."""
    return as_task(task).draw(n, seed, ks, split, repeat)


def test_problems(n: int, exp: str, seed: int, ks=None, task: str | Task = "digits") -> list[Problem]:
    """The test problems one (experiment, seed) is scored on: up to n per k from the test part, drawn with a seed of
    the experiment and the seed's own, so that each seed scores its own draw and an interval over seeds covers the
    sampling of problems. A k whose test part holds no more than n problems (digits' k = 2: 25, k = 3: 250) is
    enumerated whole: every seed scores that k's whole test population."""
    return problems_per_k(n, seed=f"{exp}-test-{seed}", ks=ks, split="test", task=task)


def part_of(p: Problem) -> str:
    """The part ("train", "val" or "test") a problem belongs to."""
    return task_of(p).part_of(p)
