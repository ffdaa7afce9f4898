"""The lab, at its old import path: `reasonlab.runner.lab` (the runner) and `reasonlab.experiments` (the
experiments, one module each)."""
from .experiments import REGISTRY, names
from .experiments.rl import base_eval, rl_run
from .runner.lab import (LabConfig, lab_findings, load_results, render, render_all, run, unit_key,
                         write_report)

EXPERIMENTS = names()
"""The built-in experiments, in the report's order."""

__all__ = ["LabConfig", "run", "load_results", "write_report", "render", "render_all", "unit_key", "lab_findings",
           "rl_run", "base_eval", "EXPERIMENTS", "REGISTRY"]
