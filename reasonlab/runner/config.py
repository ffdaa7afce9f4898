"""The lab's and sweeps' configs, and a sweep's grid, typed by the swept experiment's own Config. Torch-free to
import, so that the command line can offer their fields without loading torch (validating them loads the
experiments)."""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

import tomllib

from .. import experiments as X
from .. import tasks as T
from ..core.config import Count, Seed, check_numbers, parse_value, with_values
from ..io import tblog
from ..io.files import resolve
from .executor import ExecConfig


def group_of(exp: str, task: str) -> str:
    """Where an experiment's results on a task go in a lab's store: <exp>/ for digits (the lab's first task, where
    its results always were), <task>/<exp>/ for any other ("compose,n_f=4/rl": a task's knobs after commas)."""
    return exp if task == "digits" else f"{task.replace(':', ',')}/{exp}"


def split_group(group: str) -> tuple[str, str]:
    """(experiment, task) of a lab's store group (group_of's inverse)."""
    head, _, tail = group.rpartition("/")
    return tail, head.replace(",", ":") if head else "digits"


@dataclass
class RunConfig:
    """The fields every run of experiments has, the lab's and a sweep's (each adds its own): declared once, each a
    flag of both commands."""
    quick: bool = False
    """smoke-test sizes (each experiment's quick config) and a small base model: checks the pipeline, the numbers
    mean nothing"""
    cache_dir: str | None = None
    """model cache (default $REASONLAB_CACHE or ~/.cache/reasonlab); on a cluster, a path every node sees"""
    device: str = "cpu"
    """cpu or cuda"""
    checkpoint: str | None = None
    """a saved model (stem, .json or .safetensors) every seed starts from in place of its base model, e.g. one
    brought in by `reasonlab import hf`; only experiments that start from the base model take it"""
    experiment: tuple[str, ...] = ()
    """experiment files to register first (your idea in one file: docs/your_idea.md)"""
    task_file: tuple[str, ...] = ()
    """task files to register first (your task in one file: docs/your_task.md)"""
    fresh: bool = False
    """rerun every unit even where a finished result with the same settings exists"""
    wait: bool = False
    """if another process is running on --out, wait for it instead of stopping"""
    report_to: Literal["none", "tensorboard"] = "none"
    """tensorboard: event files of the RL runs under the run directory (<out>/tensorboard/, a sweep's per cell)"""
    execution: ExecConfig = field(default_factory=ExecConfig)
    """where the units run: this process (default), a local process pool, or Ray"""


@dataclass
class LabConfig(RunConfig):
    seeds: tuple[Seed, ...] = (0, 1, 2, 3, 4)
    """base-model seeds; every experiment runs once per seed, and each claim's interval is a t interval over them"""
    out: str = "runs/lab"
    """run directory: one folder per experiment, report.md and report.html"""
    retrain: bool = False
    """train the starting models (base models, erring thinkers) on this machine instead of copying the ones the
    package ships (give an empty --cache-dir): the findings then move with this CPU (docs/methods.md)"""
    all: bool = False
    """every tier: the core experiments and the lessons beyond them (each states its time in the report); by default
    the core tier only"""
    only: tuple[str, ...] = ()
    """the experiments to run (default: the core tier, every registered one with `all`; the report covers those that
    have results)"""
    tasks: tuple[str, ...] = ()
    """the tasks every experiment runs on, each its own results and its own column of the report ("all": every
    registered task; knobs after colons, "compose:n_f=4"); none given: each experiment's config's own task (digits
    unless a config says otherwise)"""
    configs: dict[str, Any] = field(default_factory=dict)
    """experiment name -> its Config; an experiment not named here runs its default (or, with quick, its quick) one"""
    pack: bool = False
    """store the per-seed results gzipped and write report.md without report.html (the committed results/)"""
    placebo: bool = False
    """run each experiment's placebo: its primary's treatment arm replaced by its control arm, run a second time on
    streams of its own (experiments with no primary are left out); the primaries must not hold"""
    power_seeds: bool = False
    """run each experiment with a primary at the seeds its power asks for: 80 % on every task at the effect it must
    detect, planned from the placebo lab's first seeds (<out>/placebo; for a placebo lab, its own findings: `make
    results` runs it at --seeds first), if at most most_seeds; the run's seeds continue past the last one. Without
    it every experiment runs at --seeds"""
    most_seeds: Count = 10
    """with power_seeds: the most seeds an experiment may run (the time budget); one that needs more keeps --seeds,
    and its report says underpowered"""
    seeds_per: dict[str, int] = field(default_factory=dict)
    """experiment -> its seed count where more than --seeds (power_seeds plans it before the run; kept in
    config.json, so a rebuilt report reads the same seeds)"""

    def selected(self) -> tuple[str, ...]:
        names = self.only or tuple(n for n in X.names() if self.all or X.get(n).tier == "core")
        return tuple(n for n in names if X.get(n).placebo is not None) if self.placebo else names

    def task_list(self) -> tuple[str, ...]:
        """The tasks named (every registered one for "all"), as their specs; () when none were."""
        if "all" in self.tasks:
            return T.names()
        return tuple(dict.fromkeys(T.get(t).spec for t in self.tasks))

    def runs(self) -> list[tuple[str, Any]]:
        """(store group, config) of every selected experiment on every task, in the report's order: task by task,
        experiments in the registry's order."""
        out = []
        for task in self.task_list() or (None,):
            for name in self.selected():
                cfg = self.configs.get(name) or X.get(name).config(self.quick)
                if task is not None and hasattr(cfg, "task"):
                    cfg = replace(cfg, task=task)
                cfg = X.get(name).placebo(cfg) if self.placebo else cfg
                out.append((group_of(name, getattr(cfg, "task", "digits")), cfg))
        return out

    def config_of(self, group: str):
        """The config a store group of this lab runs (a group: an experiment's name, or <task>/<experiment>)."""
        found = dict(self.runs()).get(group)
        if found is not None:
            return found
        exp, task = split_group(group)
        cfg = self.configs.get(exp) or X.get(exp).config(self.quick)
        cfg = replace(cfg, task=task) if hasattr(cfg, "task") else cfg
        return X.get(exp).placebo(cfg) if self.placebo else cfg

    def seeds_of(self, group: str) -> tuple[int, ...]:
        """The seeds a store group runs: the run's, continued past the last one to its experiment's seeds_per."""
        extra = self.seeds_per.get(split_group(group)[0], 0) - len(self.seeds)
        return tuple(self.seeds) + tuple(range(max(self.seeds) + 1, max(self.seeds) + 1 + max(extra, 0)))

    def env(self) -> X.Env:
        return X.Env(cache=self.cache_dir, device=self.device, quick=self.quick, checkpoint=self.checkpoint)

    def validate(self) -> None:
        self.execution.validate()
        tblog.check(self.report_to)
        for path in self.task_file:
            T.load_file(path)
        X.load_plugins(self.experiment)
        for name in self.only:
            X.get(name)
        for name in self.configs:
            X.get(name)
        if not self.seeds:
            raise ValueError("the lab needs at least one seed")
        for name, n in self.seeds_per.items():
            X.get(name)
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise ValueError(f"seeds_per: {name}'s seed count must be an integer >= 1, got {n!r}")
        check_numbers(self, "lab")
        self.task_list()                              # an unknown task or knob: ValueError naming the choices
        runs = self.runs()
        check_checkpoint(self.checkpoint, self.selected(), {getattr(c, "task", "digits") for _, c in runs})
        for group, cfg in runs:
            X.get(split_group(group)[0]).validate(cfg)


def check_checkpoint(checkpoint: str | None, names, tasks=("digits",)) -> None:
    """A checkpoint replaces the base model: it must load (a CheckpointError names what is wrong), it must have been
    trained on the task the experiments run on, and only experiments that start from the base model may take one."""
    if checkpoint is None:
        return
    from ..io.checkpoint import load_model  # torch, needed only here
    _, meta = load_model(resolve(checkpoint))
    own = meta.get("task", "digits")
    other = sorted(t for t in tasks if t != own)
    if other:
        raise ValueError(f"--checkpoint: {checkpoint} was trained on task {own}, the experiments run on {other[0]}")
    others = [n for n in names if not X.get(n).takes_checkpoint]
    if others:
        raise ValueError(f"--checkpoint: {', '.join(others)} start from another model (the erring thinker), not from "
                         "the base model a checkpoint replaces; pick experiments that do with --only (e.g. base rl "
                         "faithful)")


@dataclass
class SweepConfig(RunConfig):
    exp: str = ""
    """the experiment swept (a registered one, or one from --experiment files)"""
    grid: dict = field(default_factory=dict)
    """field -> list of values; the cells are the product (fields of the experiment's Config, dotted into nested
    configs)"""
    fixed: dict = field(default_factory=dict)
    """field -> value set in every cell"""
    seeds: tuple[Seed, ...] = (0, 1, 2)
    """every cell runs once per seed (base model, problems and sampling all follow it)"""
    out: str | None = None
    """run directory: cells/<cell>/seed<s>.json, table.md, findings.json, report.html (default runs/sweep-<name>)"""
    max_units: int = 10_000
    """refuse a grid of more (cell, seed) units than this"""

    @property
    def run_dir(self) -> str:
        return self.out or f"runs/sweep-{self.exp}"

    def cells(self) -> list[dict]:
        keys = list(self.grid)
        return [{**self.fixed, **dict(zip(keys, vals))} for vals in itertools.product(*(self.grid[k] for k in keys))]

    def config_of(self, cell: dict):
        """The experiment's Config for a cell: its default (or quick) config with the cell's values."""
        return with_values(X.get(self.exp).config(self.quick), cell)

    def validate(self) -> None:
        """Every cell's config is built and checked here, before any work."""
        self.execution.validate()
        tblog.check(self.report_to)
        for path in self.task_file:
            T.load_file(path)
        X.load_plugins(self.experiment)
        exp = X.get(self.exp)
        if not self.seeds:
            raise ValueError("a sweep needs at least one seed")
        check_numbers(self, "sweep")
        check_checkpoint(self.checkpoint, [self.exp], {getattr(self.config_of(c), "task", "digits") for c in self.cells()})
        if not self.grid and not self.fixed:
            raise ValueError(f"an empty sweep: give --grid FIELD=V1,V2 (fields of {self.exp}'s config: "
                             f"{', '.join(grid_fields(self.exp))})")
        for k, vs in self.grid.items():
            if not isinstance(vs, list) or not vs:
                raise ValueError(f"grid field {k!r} needs a non-empty list of values")
        units = len(self.seeds)
        for vs in self.grid.values():
            units *= len(vs)
        if units > self.max_units:
            raise ValueError(f"the grid has {units:,} (cell, seed) units, more than --max-units {self.max_units:,}")
        for cell in self.cells():
            exp.validate(self.config_of(cell))


def grid_fields(name: str) -> list[str]:
    return [f.name for f in fields(X.get(name).Config)]


def parse_assignments(name: str, items: list[str], many: bool) -> dict:
    """["field=v1,v2", ...] -> {field: [v1, v2]} (many) or ["field=v"] -> {field: v}, typed by the experiment's
    Config; "-" in a field name reads as "_" (flag spelling)."""
    cls = X.get(name).Config
    out = {}
    for item in items or []:
        if "=" not in item:
            raise ValueError(f"expected field=value{'s' if many else ''}, got {item!r}")
        k, v = item.split("=", 1)
        k = k.strip().replace("-", "_")
        if k == "seed":
            raise ValueError("seeds are not a grid field: use --seeds (or seeds = [...] in the TOML file)")
        vals = [parse_value(cls, k, x.strip()) for x in v.split(",")] if many else parse_value(cls, k, v.strip())
        out[k] = vals
    return out


TOML_KEYS = {"grid": dict, "set": dict, "seeds": list, "quick": bool}


def load_toml(path: str, name: str) -> dict:
    """{grid, fixed, seeds?, quick?} from a TOML grid file, typed by the experiment's Config; ValueError naming the
    problem.

        seeds = [0, 1, 2]
        [grid]
        beta = [0.0, 0.04]
        [set]
        steps = 30
    """
    try:
        with open(path, "rb") as f:
            d = tomllib.load(f)
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: {e}") from None
    extra = set(d) - set(TOML_KEYS)
    if extra:
        raise ValueError(f"{path}: unknown key {sorted(extra)[0]!r} (use {', '.join(TOML_KEYS)})")
    for key, kind in TOML_KEYS.items():
        if key in d and (not isinstance(d[key], kind) or (kind is not bool and isinstance(d[key], bool))
                         or (key == "seeds" and not all(isinstance(s, int) and not isinstance(s, bool) for s in d[key]))):
            raise ValueError(f"{path}: {key} must be {'a list of integers' if key == 'seeds' else kind.__name__}, got "
                             f"{d[key]!r}")
    cls = X.get(name).Config
    grid = {k: [parse_value(cls, k, x) for x in (v if isinstance(v, list) else [v])]
            for k, v in d.get("grid", {}).items()}
    out = {"grid": grid, "fixed": {k: parse_value(cls, k, v) for k, v in d.get("set", {}).items()}}
    if "seeds" in d:
        out["seeds"] = tuple(d["seeds"])
    if "quick" in d:
        out["quick"] = d["quick"]
    return out
