"""Checks on a parsed command line that cost nothing and come before any work: bounds on numbers, finite floats,
memory estimates for batch sizes, and usable paths. Each failure is a ValueError with one line naming the flag;
`reasonlab.cli.main` turns it into exit code 2. (Wrong values caught only after minutes of training, or as a
traceback from deep inside torch, are what this module exists to prevent.)
"""
from __future__ import annotations

import os
import re

from ..core.config import GEN_ROW, N_K, TRAIN_ROW, fits
from ..core.task import K_MAX, K_MIN, format_name
from ..io.files import cache_dir, check_name, regular_file, resolve, writable_dir, writable_file


class UsageError(ValueError):
    """Bad input from the user: reported as one line, exit code 2. (A ValueError, so that main() catches it even
    when raised by a second copy of the CLI's module.)"""


def parse_digits(text: str) -> list[int]:
    parts = text.replace(",", " ").split()
    if len(parts) == 1 and len(parts[0]) > 1 and re.fullmatch(r"[0-9]+", parts[0]):
        parts = list(parts[0])
    # ASCII digits only: str.isdigit() also accepts "٣" (Arabic-Indic) and "²", which int() reads or rejects
    if not all(re.fullmatch(r"[0-9]", p) for p in parts):
        raise UsageError(f"problem {text!r}: digits must be single digits 0-9, e.g. \"3 5 9 2 7\"")
    if not K_MIN <= len(parts) <= K_MAX:
        raise UsageError(f"problem {text!r} has {len(parts)} digits; k must be in {K_MIN}..{K_MAX}")
    return [int(p) for p in parts]


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


def _sizes(args) -> None:
    cmd = args.cmd
    if cmd in ("eval", "pretrain"):
        fits("-n", args.n * N_K, GEN_ROW, N_K)
    if cmd == "pretrain" and args.batch:
        fits("--batch", args.batch, TRAIN_ROW)
    if cmd == "sample":
        fits("-n", args.n, GEN_ROW)
    if cmd == "train":
        rows = args.prompts_per_step * args.num_generations
        fits("--prompts-per-step", rows, TRAIN_ROW, args.num_generations)
        fits("--num-generations", rows, TRAIN_ROW, args.prompts_per_step)
        fits("--eval-n", args.eval_n * N_K, GEN_ROW, N_K)


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
        stem = resolve(args.checkpoint)
        for ext in (".json", ".safetensors"):   # regular files only: a FIFO named X.json would hang the reader
            if os.path.lexists(stem + ext):
                regular_file(stem + ext, "checkpoint")
    if cmd == "sweep" and args.config is not None:   # a FIFO would hang the reader
        regular_file(args.config, "--config")
    out = getattr(args, "out", None)
    if cmd == "import" and out is not None:   # a checkpoint stem, not a directory
        writable_file(resolve(out) + ".json", "--out")
        out = None
    if out is not None:
        writable_dir(out, "--out")
    if getattr(args, "json", None):
        writable_file(args.json, "--json")


def preflight(args) -> None:
    """What needs the OS or the inputs' contents: the device, the problem, names, memory estimates, paths."""
    if hasattr(args, "device"):
        check_device(args.device)
    if args.cmd == "sample":
        parse_digits(args.problem)
        if args.force is not None:
            format_name(args.force)
    if args.cmd == "pretrain" and args.name is not None:
        check_name(args.name)
    _sizes(args)
    _paths(args)

