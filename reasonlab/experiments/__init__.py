"""The lab's experiments: one module each, registered once.

An experiment is a name, a `Config` dataclass (every setting: a docstring per field, `Literal` for choices) and three
functions:

    run(config, seed, env) -> result      one seed's numbers, a JSON-able dict (env: cache, device, base model)
    claims(results) -> findings           the checked claims over the per-seed results (findings.finding dicts):
                                          its premises, at most one primary, its secondaries (stats.findings)
    render(results, out) -> sections      the report's sections [(markdown, headline)], plots written under out

An experiment with a primary claim also says, before any run, how that claim could fail: `room(config)`, the range
its statistic can reach by the design, and `placebo(config)`, the config whose treatment arm is the control arm
run again: an independent replicate, on training and sampling streams of its own (`replicate_seed`), so its
statistic has the spread the real comparison has, and the primary must not hold. One with no primary is a
demonstration: its premises only.

The lab, sweeps and the command line iterate the registry (`names()`, `get()`) and read results through one
store (`reasonlab.runner.store`); nothing else lists experiments. Each built-in experiment is a command whose flags
are its Config's fields (`reasonlab rl --steps 30`), a sweep (`reasonlab sweep rl --grid beta=0,0.04`) and a
section of the lab's report. A new experiment is one file that ends with `register(Experiment(...))` and its line
in `BUILTIN`; an idea outside the package is the same file, passed as `reasonlab lab --experiment my_idea.py` (or
`reasonlab sweep my_idea --experiment my_idea.py`) or named in the `reasonlab.experiments` entry-point group
(docs/your_idea.md, template in `reasonlab/experiments/template.py`).
"""
from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import os
import sys
import textwrap
from dataclasses import dataclass
from typing import Any, Callable

from .. import tasks
from ..core.config import check_choices, check_numbers
from ..core.seeds import hashed_seed

ENTRY_POINTS = "reasonlab.experiments"


def replicate_seed(seed: int, purpose: str = "") -> int:
    """The training and sampling seed of a placebo's treatment arm, where a config names the control in the
    treatment's place: the control's procedure once more on streams of its own, hashed from the seed and the
    purpose (never integer arithmetic, so no other seed's runs share them); the problems stay the seed's own."""
    return hashed_seed("replicate", seed, *([purpose] if purpose else []))


_REUSE: dict | None = None
"""while `reusing()`: (function, result's id, arguments) -> (the result, what the function gave)"""


@contextlib.contextmanager
def reusing():
    """While many verdicts are drawn over the same, unchanging results (the null simulation): what a `reused`
    function derives from a result is computed once. Outside, nothing is kept."""
    global _REUSE
    before, _REUSE = _REUSE, {}
    try:
        yield
    finally:
        _REUSE = before


def reused(fn):
    """fn(result, ...) computed once per result object while `reusing()` is active (the object is kept with the value,
    so its id cannot pass to another); called as it is outside."""
    @functools.wraps(fn)
    def wrapper(res, *args, **kw):
        if _REUSE is None:
            return fn(res, *args, **kw)
        key = (fn, id(res), args, tuple(sorted(kw.items())))
        if key not in _REUSE:
            _REUSE[key] = (res, fn(res, *args, **kw))
        return _REUSE[key][1]
    return wrapper


@dataclass(frozen=True)
class Env:
    """Where a unit runs: passed to every `run` (picklable, so it crosses to pool and Ray workers)."""
    cache: str | None = None
    """model cache (an absolute path in workers; None: $REASONLAB_CACHE or ~/.cache/reasonlab)"""
    device: str = "cpu"
    """cpu or cuda"""
    quick: bool = False
    """the quick lab: the small base model"""
    checkpoint: str | None = None
    """a saved model (stem) every seed starts from in place of its base model (one trained elsewhere and brought
    in by `reasonlab import hf`, say); None: the seed's base model"""

    def base(self, seed: int, task: str = "digits"):
        """The seed's starting model for `task`: the checkpoint if one is set (trained on that task: the lab checks
        it before any work), else the seed's base model from the cache (trained under its lock the first time);
        memoized per process."""
        from ..train.sft import base_cfg, base_name  # torch: imported on first use, so `reasonlab --help` stays light
        from ..train.zoo import cached_model, checkpoint_model
        if self.checkpoint is not None:
            return checkpoint_model(self.checkpoint, device=self.device)
        return cached_model(base_name(seed, self.quick, task), base_cfg(seed, self.quick, task=task), cache=self.cache,
                            device=self.device, progress=True)


@dataclass(frozen=True)
class Experiment:
    """One experiment of the lab (see the module docstring)."""
    name: str
    Config: type
    run: Callable[[Any, int, Env], dict]
    claims: Callable[[list[dict]], list[dict]]
    render: Callable[[list[dict], str], list[tuple[str, str]]]
    quick: Any = None
    """the Config of `--quick` (None: Config())"""
    run_cost: float = 0.0
    """typical seconds per seed at full size: the lab hands the longest units out first (results do not depend on it)"""
    render_cost: float = 0.0
    """typical seconds to render: the longest sections go to the rendering processes first"""
    depends: Callable[[Any], dict] | None = None
    """what else a result depends on (models other than the base): part of the store's key"""
    streams: int = 0
    """the version of how run() derives its random streams from the seed: raised when that changes (results move,
    the config does not), so the store's stored results rerun; 0 stays out of the key"""
    keys: tuple[str, ...] = ()
    """the top-level keys every result has: a stored result without one is rerun, never reused"""
    check: Callable[[Any], None] | None = None
    """raise ValueError if a result read back has the wrong shape, beyond `keys` (default: nothing more)"""
    uses_base: bool = True
    """whether run() asks env for the base model (the lab then trains the seed's model first, as a unit of its own)"""
    tier: str = "core"
    """"core": `reasonlab lab` runs it; any other tier ("lesson"): only `reasonlab lab --all` or `--only` does"""
    room: Callable[[Any], tuple[float, float]] | None = None
    """the primary's statistic's range by the design, from the config alone (findings.out_of_room judges it against
    the claim's threshold); None: the experiment has no primary (a demonstration)"""
    placebo: Callable[[Any], Any] | None = None
    """the config with the primary's treatment arm replaced by its control arm, which run() then runs twice, on
    streams of their own (an independent replicate), or, where the control is exact, by the treatment's procedure
    without its information (passk: RL on a random reward): through the same run and claims the primary must not
    hold (`reasonlab lab --placebo`; the tests run it)"""
    placebo_flat: str = ""
    """why the placebo has no spread where it cannot be a replicate, in a few words (both arms one deterministic
    function of one model, e.g. exact probabilities or a greedy decode): its statistic is then the same at every seed
    and it cannot catch a biased statistic; "" for a placebo that replicates the control on streams of its own"""
    negative: str = ""
    """the design's negative control, in words: a known-inert treatment or a known-biased alternative in the
    treatment's place, and what it gives on the primary's statistic; one measured on the run rides on the primary as
    its `negative` detail (`findings.negative`), which the report judges beside it; "" where the design has none"""
    question: str = ""
    """the open question its page opens with, in a few sentences ({field}s filled by the page: a task's words)"""
    papers: str = ""
    """the papers behind it, as its page cites them"""
    explore: str = ""
    """what to try next: commands and functions, as its page ends"""
    takes_checkpoint: bool = True
    """whether run() starts from env.base(seed), which `--checkpoint` replaces (False: it starts elsewhere, e.g. from
    the erring thinker, so a checkpoint would be ignored: the lab refuses it)"""
    supports: Callable[[Any], str | None] | None = None
    """supports(task) -> None where the experiment can run on the task, else why not in a few words (the command
    refuses the task with it before any work; None: every task)"""

    def config(self, quick: bool = False):
        return (self.quick if quick and self.quick is not None else self.Config())

    def validate(self, config) -> None:
        """The config's own validate() if it has one, its Literal choices, and its task: registered, and one the
        experiment can run on (`supports`)."""
        if not isinstance(config, self.Config):
            raise ValueError(f"{self.name}: expected a {self.Config.__name__}, got {type(config).__name__}")
        check_choices(config, self.name)
        check_numbers(config, self.name)
        if hasattr(config, "task"):
            task = tasks.get(config.task)             # an unknown task or knob: ValueError naming the choices
            why = self.supports(task) if self.supports else None
            if why:
                raise ValueError(f"{self.name} cannot run on task {config.task}: {why}")
        if hasattr(config, "validate"):
            config.validate()

    def check_result(self, result) -> None:
        if not isinstance(result, dict):
            raise ValueError(f"a {self.name} result must be a JSON object, got {type(result).__name__}")
        missing = [k for k in self.keys if k not in result]
        if missing:
            raise ValueError(f"a {self.name} result needs {', '.join(missing)}")
        if self.check is not None:
            self.check(result)


def opening(name: str, **fill) -> str:
    """An experiment's question as its page opens with it: a quoted "Question." paragraph (`fill`: the fields its
    text leaves to the page)."""
    q = get(name).question
    return textwrap.fill(q.format(**fill) if fill else q, 116, initial_indent="> **Question.** ", subsequent_indent="> ",
                         break_on_hyphens=False)


def reading(name: str) -> str:
    """An experiment's papers and what to explore, as its page ends."""
    e = get(name)
    return "\n".join(textwrap.fill(f"*{head}:* {text}", 116, break_on_hyphens=False)
                     for head, text in (("Papers", e.papers), ("Explore", e.explore)) if text)


BUILTIN = {
    "base": "how accurate is each format, and which does the model pick?",
    "budgets": "how does accuracy follow a forced cap on the chain, and does s1's \"Wait\" help? (s1)",
    "sampling": "does voting buy what a chain buys; which strategy is cheapest at each k?",
    "star": "on a thinker that errs: do its own right chains teach it more than the same answers alone? (STaR)",
    "rl": "does the group baseline alone speed REINFORCE up; GRPO and Dr. GRPO against it",
    "adaptive": "can the model learn to answer directly where that is reliable?",
    "l1": "does a budget token learned with L1's rewards beat s1 forcing?",
    "search": "on a thinker that errs: do learned verifiers and beam search / DVTS beat voting?",
    "faithful": "corrupt one running sum where it could answer without it: does the answer follow the chain?",
    "labels": "how often are Monte-Carlo step labels wrong, and what does it cost a PRM?",
    "entropy": "does clip-higher or an entropy bonus keep the format choice open under RL?",
    "kl": "how far is k3-in-the-loss's gradient from the KL's, exactly; the reward-KL frontier",
    "passk": "does RL only sharpen? exact chain-verified pass@N, start against GRPO",
    "voting": "does voting help when errors are fixed in the weights, or drawn per sample?",
    "l1_recipe": "L1 as its authors train it: is there anything to learn?",
}
"""The built-in experiments, one module each, in the report's order, with the question each asks (its command's
help): a new one is one more line here."""

REGISTRY: dict[str, Experiment] = {}
_LOADED: set[str] = set()


def _builtins() -> dict[str, Experiment]:
    """The registry, with the built-in experiments imported on first use (they load torch; the command line's
    parsing does not need them)."""
    for name in BUILTIN:
        if f"{__name__}.{name}" not in sys.modules:
            importlib.import_module(f".{name}", __name__)
    return REGISTRY


def task_of(r: dict) -> tasks.Task:
    """The task a result ran on: its "task" key, or its stored config's (a digits result may name none)."""
    return tasks.get(r.get("task") or r.get("config", {}).get("task", "digits"))


def register(exp: Experiment) -> Experiment:
    """Add an experiment to the lab. The same module registering again (a reload) replaces its entry; another
    module taking a registered name is an error."""
    old = REGISTRY.get(exp.name)
    if old is not None and old.run.__module__ != exp.run.__module__:
        raise ValueError(f"two experiments are called {exp.name!r} ({old.run.__module__}, {exp.run.__module__})")
    REGISTRY[exp.name] = exp
    return exp


def get(name: str) -> Experiment:
    try:
        return _builtins()[name]
    except KeyError:
        raise ValueError(f"unknown experiment {name!r}: choose from {', '.join(REGISTRY)}") from None


def names() -> tuple[str, ...]:
    """The registered experiments: the built-ins in the report's order, then the others as they came."""
    reg = _builtins()
    return tuple([n for n in BUILTIN if n in reg] + [n for n in reg if n not in BUILTIN])


def load_file(path: str) -> list[str]:
    """Import an experiment file (a user's idea); returns the names it registered."""
    _builtins()                               # the built-ins first: the report's order
    path = os.path.abspath(os.path.expanduser(path))
    if path in _LOADED:
        return []
    before = set(REGISTRY)
    tasks.run_user_file(path, "--experiment", "reasonlab_user_")
    _LOADED.add(path)
    new = [n for n in REGISTRY if n not in before]
    if not new:
        raise ValueError(f"--experiment {path}: the file registers no experiment (end it with register(Experiment(...)))")
    return new


def load_entry_points() -> list[str]:
    """Import the experiments that installed packages name in the `reasonlab.experiments` entry-point group."""
    before = set(_builtins())
    for ep in importlib.metadata.entry_points(group=ENTRY_POINTS):
        obj = ep.load()
        if isinstance(obj, Experiment):
            register(obj)
    return [n for n in REGISTRY if n not in before]


def load_plugins(files=()) -> None:
    """Entry points and experiment files: what a worker process calls before it looks an experiment up."""
    load_entry_points()
    for f in files:
        load_file(f)
