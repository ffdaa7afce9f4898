"""The `reasonlab` command line. Every command's flags are generated from its dataclass (`cli.commands`: field
docstring = help, Literal = choices); parsing, `--help` and usage errors load neither torch nor matplotlib, and the
command itself (`cli.run`, or `cli.jobs` for the lab, the experiments, sweeps and RL runs) is imported only once its
arguments have passed their checks. Each experiment of the registry is a command whose flags are its Config's
fields (generated when that command is named, so `reasonlab --help` stays torch-free). Bad input gets one line on
stderr and exit code 2.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import signal
import sys
import threading

from .. import __version__
from .. import experiments as X
from ..core.config import add_flags, check_numbers, field_list, given, make
from ..runner.executor import keep_freed_memory
from .commands import COMMANDS, EXPERIMENT_SKIP, SKIP, VALIDATED_LATER, RunExperiment
from .guard import UsageError, preflight


class Terminated(BaseException):
    """SIGTERM, raised where the command is, so that every finally runs (pool workers stopped, locks released)."""


def _terminate(signum, frame):
    raise Terminated()


class Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **{"allow_abbrev": False, **kwargs})   # --n is not --no-quick: a flag is spelled whole

    def error(self, message):  # argparse prints usage + message; we want one line
        raise UsageError(message)


def build_parser(argv: list[str] | None = None) -> Parser:
    """The parser of every command. The experiments are listed by name and question; the flags of the one that
    argv names come from its Config (which loads that experiment's module, and torch): `reasonlab --help` and the
    other commands load neither."""
    ap = Parser(prog="reasonlab", description="A laptop-scale lab for reasoning models.")
    ap.add_argument("--version", action="version", version=f"reasonlab {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=Parser)
    groups: dict[str, argparse._SubParsersAction] = {}
    for name, (cls, help_) in COMMANDS.items():
        if " " in name:                                   # a command with actions: `findings diff`
            group, action = name.split()
            if group not in groups:
                g = sub.add_parser(group, help=f"{group} {' | '.join(n.split()[1] for n in COMMANDS if n.startswith(group + ' '))}")
                groups[group] = g.add_subparsers(dest="action", required=True, parser_class=Parser)
            p = groups[group].add_parser(action, help=help_, description=help_)
        else:
            p = sub.add_parser(name, help=help_, description=help_)
        add_flags(p, cls, skip=SKIP.get(name, ()))
        p.set_defaults(command=name)
    words = [a for a in argv or [] if not a.startswith("-")]
    named = words[0] if words else None
    if named == "sweep" and len(words) > 1 and words[1] in X.BUILTIN:       # `sweep NAME --help`: NAME's fields
        sweep_p = sub.choices["sweep"]
        sweep_p.formatter_class = argparse.RawDescriptionHelpFormatter
        sweep_p.epilog = "\n".join([f"fields of {words[1]}'s config that --grid and --set may name:",
                                     *field_list(X.get(words[1]).Config)])
    for name, question in X.BUILTIN.items():
        p = sub.add_parser(name, help=f"experiment: {question}", description=f"The {name} experiment: {question}")
        p.set_defaults(command=name)
        if name == named:
            add_flags(p.add_argument_group(f"{name}'s config"), X.get(name).Config)
            add_flags(p.add_argument_group("where and how it runs"), RunExperiment, skip=EXPERIMENT_SKIP)
            one_worker_per_cpu(p)
    one_worker_per_cpu(sub.choices["lab"])
    return ap


def one_worker_per_cpu(p: argparse.ArgumentParser) -> None:
    """The lab and the experiment commands run one worker per CPU unless told (`jobs.lab_config`): their --workers
    help says the value that will run here, not the config's default of 1."""
    for action in p._actions:
        if "--workers" in action.option_strings and action.help:
            action.help = action.help.replace("(default 1)", f"(default here: {os.cpu_count() or 1}, one per CPU)")


def leaves(obj) -> dict:
    """Every leaf field of a command's arguments, nested configs flattened: the names the commands read."""
    out = {}
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        out.update(leaves(v) if dataclasses.is_dataclass(v) else {f.name: v})
    return out


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The command's namespace: every field with its value (the user's or the default), `given` (what the user set),
    `cmd` (the command's name); each config's validate() has run. An experiment's command (cmd "experiment", its
    name in `exp`) also carries `config`: the experiment's Config from its flags, over its default or quick one."""
    argv = sys.argv[1:] if argv is None else argv
    ns = build_parser(argv).parse_args(argv)
    if ns.command in X.BUILTIN:
        return parse_experiment(ns)
    cls = COMMANDS[ns.command][0]
    user = given(cls, ns, SKIP.get(ns.command, ()))
    obj = make(cls, user)
    cmd, _, action = ns.command.partition(" ")
    args = argparse.Namespace(**leaves(obj), given=user, cmd=cmd, action=action or None)
    check_numbers(obj, cmd, flags=True)
    for part in [obj] + [getattr(obj, f.name) for f in dataclasses.fields(obj)]:
        if dataclasses.is_dataclass(part) and hasattr(part, "validate") and not isinstance(part, VALIDATED_LATER):
            part.validate()
    return args


def parse_experiment(ns: argparse.Namespace) -> argparse.Namespace:
    """An experiment's command: the lab's options and the experiment's Config, both from the flags."""
    exp = X.get(ns.command)
    user = given(RunExperiment, ns, EXPERIMENT_SKIP)
    obj = make(RunExperiment, user)
    check_numbers(obj, ns.command, flags=True)
    base = exp.config(user.get("lab", {}).get("quick", False))
    config = make(exp.Config, {**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)},
                               **given(exp.Config, ns)})
    check_numbers(config, ns.command, flags=True)           # the config that runs: the user's values on its base
    return argparse.Namespace(**leaves(obj), given=user, cmd="experiment", action=None, exp=ns.command, config=config)


def one_line(e: BaseException) -> str:
    """An exception as one line: messages that quote multi-line text (a JSON error, a torch message) collapsed."""
    return " ".join(str(e).split()) or type(e).__name__


def close_bars() -> None:
    """Close any live tqdm bar, so an error is printed on its own line, not after the bar's carriage return."""
    tq = sys.modules.get("tqdm")
    for bar in list(getattr(getattr(tq, "tqdm", None), "_instances", None) or []):
        bar.close()


def main(argv: list[str] | None = None) -> int:
    """Run one command. Exit codes: 0 done; 2 bad input or an unusable path (one line on stderr, before any long
    work where it can be known then); 1 a run stopped by a numeric fault, or an internal error (one line; the
    traceback only with REASONLAB_DEBUG=1); 130 interrupted."""
    args = None
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)

    def fail(msg: str, code: int) -> int:
        close_bars()
        print(f"reasonlab: {msg}", file=sys.stderr)
        return code
    try:
        args = parse(argv)
        keep_freed_memory()   # an application's allocator setting: the command is one
        preflight(args)       # the device, memory estimates and usable paths: before any work
        run = importlib.import_module(".run", __name__)       # the commands that print; then those that draw
        fn = getattr(run, f"cmd_{args.cmd}", None) or getattr(importlib.import_module(".jobs", __name__), f"cmd_{args.cmd}")
        fn(args)
    except ValueError as e:  # bad input: invalid values, names, configs, paths, run dirs, checkpoints
        return fail(f"error: {one_line(e)}", 2)
    except FloatingPointError as e:  # a NaN stopped a run: not bad input, but no traceback either
        return fail(f"run stopped: {one_line(e)}", 1)
    except OSError as e:  # a failed read or write (full disk, read-only, vanished directory): nothing partial left
        where = f" {e.filename}" if e.filename else ""
        return fail(f"error: cannot read or write{where}: {e.strerror or one_line(e)}", 2)
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    except Terminated:
        return fail("terminated", 143)
    except (KeyError, TypeError, IndexError, AttributeError) as e:
        if args is not None and getattr(args, "report_only", False):   # a results file of another shape
            return fail(f"error: --report-only: {args.out} does not hold results this version can read "
                        f"({type(e).__name__}: {one_line(e)})", 2)
        if os.environ.get("REASONLAB_DEBUG"):
            raise
        return fail(f"internal error: {type(e).__name__}: {one_line(e)} (REASONLAB_DEBUG=1 shows the traceback)", 1)
    except Exception as e:
        if os.environ.get("REASONLAB_DEBUG"):
            raise
        return fail(f"internal error: {type(e).__name__}: {one_line(e)} (REASONLAB_DEBUG=1 shows the traceback)", 1)
    finally:
        runs = sys.modules.get("reasonlab.io.runs")    # a command that took a run directory's lock loaded it
        if runs is not None:
            runs.unlock_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
