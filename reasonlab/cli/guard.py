"""Checks on a parsed command line that cost nothing and come before any work: bounds on numbers, finite floats,
memory estimates for batch sizes, and usable paths. Each failure is a ValueError with one line naming the flag;
`reasonlab.cli.main` turns it into exit code 2. (Wrong values caught only after minutes of training, or as a
traceback from deep inside torch, are what this module exists to prevent.)
"""
from __future__ import annotations

import os
import re

from ..core.config import GEN_ROW, TRAIN_ROW, fits
from ..io.files import cache_dir, check_name, regular_file, resolve, writable_dir, writable_file
from ..tasks import Problem, Task, format_name, get

TASK_COMMANDS = ("sample", "eval", "pretrain", "train", "export", "import")
"""The commands that work on one task (--task, or a --checkpoint's)."""


class UsageError(ValueError):
    """Bad input from the user: reported as one line, exit code 2. (A ValueError, so that main() catches it even
    when raised by a second copy of the CLI's module.)"""


def read_problem(task: Task, text: str) -> Problem:
    """The problem the user typed, read by the task (Task.read_text); UsageError, one line, if it is none."""
    try:
        return task.read_text(text)
    except ValueError as e:
        raise UsageError(str(e)) from None


def _checkpoint_files(stem: str) -> None:
    for ext in (".json", ".safetensors"):   # regular files only: a FIFO named X.json would hang the reader
        if os.path.lexists(stem + ext):
            regular_file(stem + ext, "checkpoint")


def command_task(args) -> Task | None:
    """The task the command works on, its spec put in args.task: --task, or with --checkpoint the checkpoint's
    (train.zoo.checkpoint_task), which a --task the user gave must name (UsageError otherwise; its knobs may differ:
    they change the problems drawn, not the rule, and the user's are taken). None for the commands without one, and
    for `import hf` without --task (the directory's config.json names it)."""
    if args.cmd not in TASK_COMMANDS or (args.cmd == "import" and args.task is None):
        return None
    given = (args.given.get("rl", {}) if args.cmd == "train" else args.given).get("task")
    task = get(args.task)
    checkpoint = getattr(args, "checkpoint", None)
    if checkpoint and os.path.lexists(resolve(checkpoint) + ".json"):   # a missing one is said where it is loaded
        stem = resolve(checkpoint)
        _checkpoint_files(stem)
        from ..train.zoo import checkpoint_task  # loads torch: only where a checkpoint is named
        saved = get(checkpoint_task(stem))
        if given is not None and task.name != saved.name:
            raise UsageError(f"--task {task.spec}: the checkpoint {stem} is a model of task {saved.spec}")
        task = task if given is not None else saved
    args.task = task.spec
    return task


def check_device(device: str) -> str:
    m = re.fullmatch(r"cuda(?::(\d{1,3}))?", device)
    if device != "cpu" and not m:
        raise UsageError(f"unknown device {device!r}: use cpu, cuda or cuda:N")
    if m:
        import torch  # only a cuda device needs torch to check it
        if not torch.cuda.is_available():
            raise UsageError(f"--device {device}: no CUDA device is available")
        if m.group(1) is not None and int(m.group(1)) >= torch.cuda.device_count():
            raise UsageError(f"--device {device}: there are only {torch.cuda.device_count()} CUDA devices")
    return device


def _sizes(args, task: Task | None) -> None:
    cmd = args.cmd
    n_k = len(task.ks()) if task is not None else 0     # evaluation commands draw n problems per k
    if cmd in ("eval", "pretrain"):
        fits("--n-test", args.n_test * n_k, GEN_ROW, n_k)
    if cmd == "pretrain" and args.batch:
        fits("--batch", args.batch, TRAIN_ROW)
    if cmd == "sample":
        fits("--samples", args.samples, GEN_ROW)
    if cmd == "train":
        rows = args.prompts_per_step * args.num_generations
        fits("--prompts-per-step", rows, TRAIN_ROW, args.num_generations)
        fits("--num-generations", rows, TRAIN_ROW, args.prompts_per_step)
        fits("--n-val", args.n_val * n_k, GEN_ROW, n_k)


def _paths(args) -> None:
    cmd = args.cmd
    report_only = getattr(args, "report_only", False)
    no_checkpoint = not getattr(args, "checkpoint", None)
    uses_cache = {"pretrain": not args.quick if cmd == "pretrain" else False, "eval": no_checkpoint,
                  "sample": no_checkpoint, "train": no_checkpoint, "lab": not report_only,
                  "experiment": not report_only, "sweep": not report_only}.get(cmd, False)
    if uses_cache or getattr(args, "cache_dir", None):
        writable_dir(cache_dir(getattr(args, "cache_dir", None)), "model cache")
    if getattr(args, "checkpoint", None):
        _checkpoint_files(resolve(args.checkpoint))
    if cmd == "sweep" and args.config is not None:   # a FIFO would hang the reader
        regular_file(args.config, "--config")
    out = getattr(args, "out", None)
    if cmd == "import" and out is not None:   # a checkpoint stem, not a directory
        writable_file(resolve(out) + ".json", "--out")
        out = None
    if out is not None:
        writable_dir(out, "--out", create=False)       # made by the command once its input is valid
    if getattr(args, "json", None):
        writable_file(args.json, "--json")


def preflight(args) -> None:
    """What needs the OS or the inputs' contents: the device, the task (a checkpoint's), the problem, names, memory
    estimates, paths."""
    if hasattr(args, "device"):
        check_device(args.device)
    task = command_task(args)
    if args.cmd == "sample":
        read_problem(task, args.problem)
        if args.force is not None:
            format_name(args.force)
        if args.budget is not None and args.budget not in task.budgets:
            raise UsageError(f"--budget must be in {task.budgets[0]}..{task.budgets[-1]}, got {args.budget}")
    if args.cmd == "pretrain" and args.name is not None:
        check_name(args.name)
    _sizes(args, task)
    _paths(args)

