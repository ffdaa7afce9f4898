"""Bounds live next to their field, in its type (`n_test: NTest = 100`), and one function checks them: a count, a
seed, a step count, a temperature or a cadence typed as a bare int or float is a bound forgotten."""
import dataclasses
import re
import typing

import numpy as np
import pytest

from reasonlab.core import config as C
from tests.test_names import package_dataclasses

BOUNDED_NAMES = re.compile(r"^(n_\w+|\w+_n|steps|\w+_steps|\w*rounds|problems|\w*samples|seeds?|problem_seed|temperature"
                           r"|\w+_every|n_layers|n_heads|\w+_draws|best_of|batch|rollouts|\w+_eps|\w*learning_rate"
                           r"|beta|epsilon\w*|\w+_coef|prompts_per_step|num_generations|num_iterations|workers|retries"
                           r"|threads|micro_batch|max_resample|\w+_clip|cap|force_direct)$")
RECORDS = {"reasonlab.tasks.records.Verdict", "reasonlab.core.pool.Pool"}
"""results, not configs: nothing sets them from a command line"""


def number_fields(cls):
    for f in dataclasses.fields(cls):
        tp = C._unwrap(C.hints(cls)[f.name])[0]
        item = typing.get_args(tp)[0] if typing.get_origin(tp) is tuple else tp
        if item in (int, float):
            yield f.name


def test_every_count_seed_step_and_temperature_field_carries_a_bound():
    missing = [f"{path}.{name}" for path, cls in package_dataclasses().items() if path not in RECORDS
               and not path.startswith("reasonlab.stats.")            # beneath core: its null designs check nothing
               for name in number_fields(cls) if BOUNDED_NAMES.match(name) and name not in C.bounds(cls)]
    assert not missing


@pytest.mark.parametrize("alias, value, said", [
    (C.Count, 0, "must be positive, got 0"), (C.NTest, 25_001, "must be at most 25,000 (k = 5 has no more test "
                                                               "problems), got 25,001"),
    (C.Steps, 10**8, "= 100,000,000 is more than 10,000,000"), (C.Steps0, -1, "must be >= 0, got -1"),
    (C.Seed, 2**32, "must be in 0..4294967295, got 4294967296"), (C.Every, -2, "must be >= 0, got -2"),
    (C.Temperature, 1e-9, "must be 0 (greedy) or in 0.001..1000, got 1e-09"), (C.Temperature, 0.0, None),
    (C.NTest, 25_000, None), (C.Steps0, 0, None),
    (C.Sampled, 0.0, "must be in 0.001..1000 (it samples: 0, greedy, is out), got 0"), (C.Sampled, 1.0, None),
    (C.Probability, 1.0, "must be < 1, got 1.0"), (C.Probability, 0.0, "must be > 0, got 0.0"),
    (C.Probability, 1e-4, None), (C.Count0, -1, "must be >= 0, got -1"), (C.Count0, 0, None),
    (C.Share0, 1.0, "must be < 1, got 1.0"), (C.Share0, -0.5, "must be >= 0, got -0.5"), (C.Share0, 0.0, None)])
def test_a_bound_says_what_is_wrong(alias, value, said):
    (bound,) = alias.__metadata__
    assert bound.problem(value) == said


@pytest.mark.parametrize("alias, text", [(C.Count, ">= 1"), (C.NTest, "1 to 25,000"), (C.Positive, "> 0"),
                                         (C.Fraction, "> 0 and <= 1"), (C.Probability, "> 0 and < 1"),
                                         (C.Temperature, "0 or 0.001 to 1,000"), (C.Sampled, "0.001 to 1,000"),
                                         (C.Share0, ">= 0 and < 1")])
def test_help_shows_a_bound_as_it_is_checked(alias, text):
    assert alias.__metadata__[0].text() == text


def test_check_numbers_reads_the_bound_inside_optional_and_tuple_fields():
    @dataclasses.dataclass
    class Cfg:
        seeds: tuple[C.Seed, ...] = (0, 1)
        k: C.Count | None = None
        rate: float = 0.5
    C.check_numbers(Cfg(), "toy")
    C.check_numbers(Cfg(seeds=(np.int64(3),), k=np.int64(2), rate=1), "toy")     # numpy's integers are integers
    for bad, said in ((Cfg(seeds=(0, -1)), "seeds must be in 0.."), (Cfg(k=0), "k must be positive"),
                      (Cfg(rate=float("nan")), "rate must be a finite number"),
                      (Cfg(k=2.0), "k must be an integer, got 2.0"), (Cfg(seeds=(0, "1")), "seeds must be an integer"),
                      (Cfg(k=True), "k must be an integer, got True")):
        with pytest.raises(ValueError, match=said):
            C.check_numbers(bad, "toy")


def test_check_choices_reads_each_item_of_a_tuple_of_literals():
    """A tuple-of-Literal field's items are checked as a Literal field is (a config built in Python or from TOML,
    where argparse's choices never ran); None and the empty tuple are the config's own business."""
    @dataclasses.dataclass
    class Cfg:
        algos: tuple[typing.Literal["a", "b"], ...] = ("a",)
        pick: typing.Literal["x", "y"] = "x"
        kinds: tuple[typing.Literal["p", "q"], ...] | None = None
    assert C.item_choices(Cfg) == {"algos": ("a", "b"), "kinds": ("p", "q")} and C.choices(Cfg) == {"pick": ("x", "y")}
    for ok in (Cfg(), Cfg(algos=("b", "a")), Cfg(algos=()), Cfg(kinds=("q",))):
        C.check_choices(ok, "toy")
    for bad, said in ((Cfg(algos=("a", "c")), "algos may hold only a, b, got 'c'"),
                      (Cfg(kinds=("r",)), "kinds may hold only p, q, got 'r'"), (Cfg(pick="z"), "pick='z'")):
        with pytest.raises(ValueError, match=f"invalid toy config: {said}"):
            C.check_choices(bad, "toy")
