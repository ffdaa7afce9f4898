"""The lab's and sweeps' configs, and the parsing of a sweep's grid: torch-free, so that the command line can offer
their fields without loading torch."""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field, fields
from typing import Any, Literal

import tomllib

from .. import experiments as X
from ..core.config import TRAIN_ROW, check_numbers, fits
from ..io import tblog
from ..methods.config import ADAPTIVE_METHODS, adaptive_fields
from ..train.config import RLConfig
from .executor import ExecConfig

SPECIAL = ("algo", "method")


NOT_SWEPT = ("seed", "log_every", "table_every", "checkpoint_every", "k_range")   # set by the sweep, or not scalar


ADAPTIVE_DEFAULTS = dict(steps=200, learning_rate=1e-4, beta=0.04)   # adaptive.run_method's


@dataclass
class SweepConfig:
    grid: dict = field(default_factory=dict)
    """key -> list of values; the cells are the product (keys: RLConfig fields, algo, method)"""
    fixed: dict = field(default_factory=dict)
    """key -> value set in every cell"""
    seeds: tuple[int, ...] = (0, 1, 2)
    """every cell runs once per seed (base model, problems and sampling all follow it)"""
    base: Literal["standard", "quick", "tiny"] = "standard"
    """base model recipe: the lab's standard one, the quick lab's, or a tiny one for tests (numbers mean nothing)"""
    eval_n: int = 200
    """greedy evaluation problems per k after training"""
    out: str = "runs/sweep"
    """run directory: cells/, logs/, table.md, plots, report.html"""
    cache_dir: str | None = None
    """model cache (default $REASONLAB_CACHE or ~/.cache/reasonlab); on a cluster, a path every node sees"""
    device: str = "cpu"
    """cpu or cuda"""
    fresh: bool = False
    """rerun every unit even where a finished result with the same settings exists"""
    wait: bool = False
    """if another process is running a sweep on --out, wait for it instead of stopping"""
    max_units: int = 10_000
    """refuse a grid of more (cell, seed) units than this"""
    report_to: Literal["none", "tensorboard"] = "none"
    """tensorboard: event files per RL run under <out>/tensorboard/<cell>/seed<s>"""
    execution: ExecConfig = field(default_factory=ExecConfig)
    """where the units run"""

    def cells(self) -> list[dict]:
        keys = list(self.grid)
        return [{**self.fixed, **dict(zip(keys, vals))} for vals in itertools.product(*(self.grid[k] for k in keys))]

    def validate(self) -> None:
        """Every cell's RLConfig is built (and so checked) here, before any training."""
        self.execution.validate()
        tblog.check(self.report_to)
        if not self.seeds:
            raise ValueError("a sweep needs at least one seed")
        check_numbers(self, "sweep")
        units = len(self.seeds)
        for vs in self.grid.values():
            units *= len(vs) if isinstance(vs, list) else 1
        if units > self.max_units:
            raise ValueError(f"the grid has {units:,} (cell, seed) units, more than --max-units {self.max_units:,}")
        if self.base not in ("standard", "quick", "tiny"):
            raise ValueError(f"unknown base {self.base!r}: choose from standard, quick, tiny")
        if self.eval_n < 1:
            raise ValueError("eval_n must be positive")
        for k, vs in self.grid.items():
            if not isinstance(vs, list) or not vs:
                raise ValueError(f"grid key {k!r} needs a non-empty list of values")
        for k in list(self.grid) + list(self.fixed):
            check_key(k)
        for cell in self.cells():
            p = dict(cell)
            method, algo = p.pop("method", None), p.pop("algo", "grpo")
            if method is not None:
                if method not in ADAPTIVE_METHODS:
                    raise ValueError(f"unknown adaptive method {method!r}: choose from {', '.join(ADAPTIVE_METHODS)}")
                p = {**ADAPTIVE_DEFAULTS, **adaptive_fields(method), **p}
            rl = RLConfig.preset(algo, **p, seed=0, log_every=0)
            fits("a cell's prompts_per_step x num_generations", rl.prompts_per_step * rl.num_generations, TRAIN_ROW,
                 rl.num_generations)


def field_defaults() -> dict:
    return {f.name: getattr(RLConfig(), f.name) for f in fields(RLConfig) if f.name not in NOT_SWEPT}


def check_key(k: str) -> None:
    if k == "seed":
        raise ValueError("seeds are not a grid key: use --seeds (or seeds = [...] in the TOML file)")
    if k not in SPECIAL and k not in field_defaults():
        raise ValueError(f"unknown sweep key {k!r}: use algo, method or an RLConfig field "
                         f"({', '.join(k for k in field_defaults() if k != 'algo')})")


def parse_value(key: str, text):
    """A value for `key`, typed by its RLConfig default (TOML values arrive typed and are checked the same way)."""
    check_key(key)
    if key in SPECIAL:
        return str(text)
    default = field_defaults()[key]
    try:
        if isinstance(default, bool):
            if isinstance(text, bool):
                return text
            if str(text).lower() in ("true", "1", "yes", "false", "0", "no"):
                return str(text).lower() in ("true", "1", "yes")
            raise ValueError
        if isinstance(default, int):
            if isinstance(text, float) and not text.is_integer():
                raise ValueError
            return int(text)
        if isinstance(default, float) or default is None:
            if default is None and str(text).lower() in ("none", "null"):
                return None
            return float(text)
        return str(text)
    except (TypeError, ValueError):
        raise ValueError(f"bad value {text!r} for {key} (expected {type(default).__name__ if default is not None else 'a number or none'})") from None


def parse_assignments(items: list[str], many: bool) -> dict:
    """["key=v1,v2", ...] -> {key: [v1, v2]} (many) or ["key=v"] -> {key: v}."""
    out = {}
    for item in items or []:
        if "=" not in item:
            raise ValueError(f"expected key=value{'s' if many else ''}, got {item!r}")
        k, v = item.split("=", 1)
        k = k.strip().replace("-", "_")
        vals = [parse_value(k, x.strip()) for x in v.split(",")] if many else parse_value(k, v.strip())
        if many and not vals:
            raise ValueError(f"--grid {k}: no values")
        out[k] = vals
    return out


def load_toml(path: str) -> dict:
    """{grid, fixed, seeds?, base?, eval_n?} from a TOML file; ValueError naming the problem."""
    try:
        with open(path, "rb") as f:
            d = tomllib.load(f)
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: {e}") from None
    extra = set(d) - {"grid", "set", "seeds", "base", "eval_n"}
    if extra:
        raise ValueError(f"{path}: unknown key {sorted(extra)[0]!r} (use grid, set, seeds, base, eval_n)")
    for key, kind, what in (("grid", dict, "a table"), ("set", dict, "a table"), ("seeds", list, "a list of integers"),
                            ("base", str, "a string"), ("eval_n", int, "an integer")):
        if key in d and (not isinstance(d[key], kind) or isinstance(d[key], bool)
                         or (key == "seeds" and not all(isinstance(s, int) and not isinstance(s, bool) for s in d[key]))):
            raise ValueError(f"{path}: {key} must be {what}, got {d[key]!r}")
    grid = {k: [parse_value(k, x) for x in (v if isinstance(v, list) else [v])] for k, v in d.get("grid", {}).items()}
    out = {"grid": grid, "fixed": {k: parse_value(k, v) for k, v in d.get("set", {}).items()}}
    for k in ("seeds", "base", "eval_n"):
        if k in d:
            out[k] = tuple(d[k]) if k == "seeds" else d[k]
    return out


@dataclass
class LabConfig:
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    """base-model seeds; every experiment runs once per seed, and each claim's interval is a t interval over them"""
    quick: bool = False
    """smoke-test sizes (each experiment's quick config) and a small base model: checks the pipeline, the numbers
    mean nothing"""
    out: str = "runs/lab"
    """run directory: one folder per experiment, report.md and report.html"""
    cache_dir: str | None = None
    """model cache (default $REASONLAB_CACHE or ~/.cache/reasonlab)"""
    device: str = "cpu"
    """cpu or cuda"""
    fresh: bool = False
    """rerun every experiment even where a finished result with the same settings exists"""
    retrain: bool = False
    """train the starting models (base models, erring thinkers) on this machine instead of copying the ones the
    package ships (give an empty --cache-dir): the findings then move with this CPU (docs/methods.md)"""
    all: bool = False
    """every tier: the core experiments and the lessons beyond them (each states its time in the report); by default
    the core tier only"""
    only: tuple[str, ...] = ()
    """the experiments to run (default: every registered one; the report covers those that have results)"""
    experiment: tuple[str, ...] = ()
    """extra experiment files to register (your idea in one file: docs/your_idea.md)"""
    configs: dict[str, Any] = field(default_factory=dict)
    """experiment name -> its Config; an experiment not named here runs its default (or, with quick, its quick) one"""
    execution: ExecConfig = field(default_factory=ExecConfig)
    """where the (experiment, seed) units run: this process (default), a local process pool, or Ray"""
    report_to: Literal["none", "tensorboard"] = "none"
    """tensorboard: event files of the RL runs under <out>/tensorboard/"""
    pack: bool = False
    """store the per-seed results gzipped and write report.md without report.html (the committed results/)"""
    wait: bool = False
    """if another process is running a lab on --out, wait for it instead of stopping"""

    def selected(self) -> tuple[str, ...]:
        return self.only or tuple(n for n in X.names() if self.all or X.get(n).tier == "core")

    def config_of(self, name: str):
        return self.configs.get(name) or X.get(name).config(self.quick)

    def env(self) -> X.Env:
        return X.Env(cache=self.cache_dir, device=self.device, quick=self.quick)

    def validate(self) -> None:
        self.execution.validate()
        tblog.check(self.report_to)
        X.load_plugins(self.experiment)
        for name in self.only:
            X.get(name)
        for name in self.configs:
            X.get(name)
        if not self.seeds:
            raise ValueError("the lab needs at least one seed")
        check_numbers(self, "lab")
        for name in self.selected():
            X.get(name).validate(self.config_of(name))
