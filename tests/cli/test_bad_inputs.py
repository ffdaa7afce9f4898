"""Bad input, as a hostile user types it: every command line below is wrong in one way (wrong digits, counts that
are not positive, seeds out of range, non-finite floats, devices that do not exist, checkpoints and paths that
cannot be used, bad names and choices, --report-only over results of the wrong shape). Each must exit 2 with
exactly one line on stderr starting "reasonlab: error:": no traceback, no hang, and no work started (the expensive
entry points are stubbed out, so a case that got past every check fails at once, and the whole table runs in
seconds)."""
import copy
import importlib
import json
import os
import shlex
import signal

import pytest
import torch

from reasonlab.cli import main
from reasonlab.cli import run as cli_run
from reasonlab.io.checkpoint import save_model
from reasonlab.train.sft import build_model

PROB = "3 5 9"
COUNTS = ["0", "-1", "x", "1.5", "", "1e100", "99999999999999"]
SEEDS = ["-1", str(2**70), "x", "1.5", str(2**32)]
FLOATS = ["nan", "inf", "-1", "x", "1e309"]
DEVICES = ["tpu", "cuda:99", "cuda:x", "gpu"]      # cuda:99: no such device, with CUDA or without
CHECKPOINTS = ["{missing}", "{fifo}", "{dir}", "{garbage}", "{crafted}", "{nan}", "{truncated}"]
OUTS = ["{file}", "/proc/reasonlab-x", "/proc/self/status"]


def cmd(name: str, *rest: str) -> list[str]:
    """`sample` needs its problem before the flags."""
    return [name] + ([PROB] if name == "sample" else []) + list(rest)


def bad_inputs() -> list[list[str]]:
    out: list[list[str]] = []
    for prob in ["", " ", "3", "x", "3 5 x", "3 5 12", "1 2 3 4 5 6 7 8 9", "٣ ٥ ٧", "3 ²", "3,5,-1", "3.5 2",
                 "0x3 5", "3\x005", "1 2 3 4 5 6 7 8 9 0", "½ 2", "3 5 ９", "-3 5", "+3 5", "3 5 ⁹", "III V"]:
        out.append(["sample", prob])
    counts = {"sample": ["--samples"], "eval": ["--n-test"], "pretrain": ["--batch", "--n-test", "--steps"],
              "train": ["--steps", "--prompts-per-step", "--num-generations", "--n-val", "--checkpoint-every"],
              "sampling": ["--n-test", "--n-max"], "star": ["--rounds", "--problems", "--steps", "--n-test"],
              "adaptive": ["--n-test", "--steps"], "rl": ["--steps", "--n-test"]}
    for name, flags in counts.items():
        for f in flags:
            for v in COUNTS:
                if f == "--checkpoint-every" and v in ("0", "99999999999999"):
                    continue        # 0 (only at the end) and a cadence longer than the run are valid
                out.append(cmd(name, f, v))
    for name in ["sample", "eval", "train", "pretrain"]:
        out += [cmd(name, "--seed", v) for v in SEEDS]
    for v in SEEDS[:3]:
        out += [["star", "--seeds", "0", v], ["adaptive", "--seeds", v], ["lab", "--seeds", v],
                ["eval", "--problem-seed", v]]
    for name, f in [("sample", "--temperature"), ("train", "--temperature"), ("train", "--learning-rate"),
                    ("train", "--beta"), ("train", "--epsilon"), ("train", "--force-direct"), ("pretrain", "--lr")]:
        out += [cmd(name, f, v) for v in FLOATS + (["1e-300", "1e300"] if f == "--temperature" else [])]
    for name in ["sample", "eval", "train", "sampling", "pretrain", "star", "adaptive", "lab"]:
        out += [cmd(name, "--device", d) for d in DEVICES]
    for name in ["sample", "eval", "train", "sampling"]:
        out += [cmd(name, "--checkpoint", c) for c in CHECKPOINTS]
        out += [cmd(name, "--cache-dir", "{file}"), cmd(name, "--cache-dir", "/proc/reasonlab-cache")]
    out += [[name, "--cache-dir", "{file}"] for name in ["pretrain", "star", "adaptive", "lab"]]
    out += [[name, "--out", p] for name in ["train", "sampling", "star", "adaptive", "lab"] for p in OUTS]
    out += [["eval", "--checkpoint", "{good}", "--n-test", "2", "--json", p]
            for p in ["{dir}", "/proc/x/e.json", "/proc/self/status/e.json"]]
    out += [["pretrain", "--name", name, "--recipe", "spec", "--steps", "1", "1"]
            for name in ["ok\n", "../x", "", "a/b", ".x", "x" * 200, "a..b", "a b"]]
    out += [["train", "--algo", "ppo"], ["train", "--kl-estimator", "k9"], ["train", "--loss-type", "x"],
            ["train", "--num-generations", "1"], ["train", "--no-clip", "--num-iterations", "2"],
            ["train", "--forced-trains", "format"], ["train", "--force-direct", "1.5"], ["train", "--scale-rewards", "x"],
            ["train", "--algo", "gspo", "--no-clip"], ["train", "--eval-every", "-3"],
            cmd("sample", "--force", "Q"), ["sampling", "--formats", "X"], ["sampling", "--n-max", "3"],
            ["adaptive", "--methods", "bogus"], ["rl", "--algos", "ppo"], ["lab", "--only", "bogus"],
            ["star", "--filters", "x"], ["pretrain", "--recipe", "x"], ["pretrain", "--steps", "5"],
            ["frobnicate"], [], ["--bogus"],
            ["sampling", "--report-only", "--seeds", "0", "--out", "{bad_sampling}"],
            ["adaptive", "--report-only", "--seeds", "0", "--out", "{bad_adaptive}"],
            ["sampling", "--report-only", "--out", "{dir}"],
            ["adaptive", "--report-only", "--seeds", "0", "--out", "{fifo_dir}"],
            ["lab", "--report-only", "--out", "{dir}"]]
    return out


CASES = bad_inputs()


class Reached(BaseException):
    """Raised by the stubbed-out work: a bad input got past every check."""


class Hung(BaseException):
    """Raised by SIGALRM: a case that hangs (a read of a FIFO) fails instead of stalling the suite. (Not an OSError,
    as TimeoutError is: main() would take that for a failed read and exit 2.)"""


def stop(*a, **kw):
    raise Reached()


def hung(signum, frame):
    raise Hung()


REAL_LOAD_OR_TRAIN = cli_run.load_or_train


def load_then_stop(args, log=print):
    """load_or_train's stand-in: a --checkpoint is loaded for real (loading it is the check a bad checkpoint must
    fail, and the untrained model loads in milliseconds), then the work stops; a base model is never trained."""
    if args.checkpoint:
        REAL_LOAD_OR_TRAIN(args, log)
    raise Reached()


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    """The files the cases name: a file, an empty directory, a FIFO, checkpoints good and bad, result files of
    the wrong shape."""
    root = tmp_path_factory.mktemp("inputs")
    p = {"{file}": str(root / "afile"), "{dir}": str(root / "adir"), "{fifo}": str(root / "afifo.json"),
         "{missing}": str(root / "no" / "such"),
         **{"{" + k + "}": str(root / k) for k in ("garbage", "good", "crafted", "nan", "truncated", "bad_sampling",
                                                  "bad_adaptive", "fifo_dir")}}
    (root / "afile").write_text("x")
    (root / "adir").mkdir()
    os.mkfifo(root / "afifo.json")
    (root / "garbage.json").write_text("{not json")
    (root / "garbage.safetensors").write_bytes(b"\0" * 100)
    model = build_model(0)
    for stem in ("good", "crafted", "truncated"):
        save_model(str(root / stem), model, {})
    meta = json.loads((root / "crafted.json").read_text())
    meta["model"]["n_layers"] = 10**6                 # the tensors' hash stays valid: only the config is crafted
    (root / "crafted.json").write_text(json.dumps(meta))
    with open(root / "truncated.safetensors", "r+b") as f:
        f.truncate(1000)
    bad = copy.deepcopy(model)
    with torch.no_grad():
        bad.head.weight[0, 0] = float("nan")
    save_model(str(root / "nan"), bad, {})
    for exp, result in (("sampling", {"grid": 1}), ("adaptive", [1, 2])):   # the store's layout, the wrong shape
        (root / f"bad_{exp}" / exp).mkdir(parents=True)
        (root / f"bad_{exp}" / exp / "seed0.json").write_text(json.dumps({"key": "k", "seconds": 1, "result": result}))
    (root / "fifo_dir" / "adaptive").mkdir(parents=True)
    os.mkfifo(root / "fifo_dir" / "adaptive" / "seed0.json")
    return p


@pytest.fixture
def stubbed(monkeypatch, tmp_path, paths):
    """The work stubbed out as in tests/io/test_reliability.py, but for what is itself the check: loading a
    --checkpoint (`load_then_stop`), and --report-only's reading of the store (only its rendering, write_report,
    is stubbed)."""
    stubs = [("train.sft", "pretrain", stop), ("train.zoo", "pretrain", stop), ("train.rl", "train", stop),
             ("runner.lab", "run", stop), ("runner.lab", "write_report", stop), ("runner.sweep", "run", stop),
             ("core.evaluate", "eval_table", stop), ("core.sampling", "generate", stop),
             ("train.zoo", "get_model", stop), ("cli.run", "load_or_train", load_then_stop),
             ("cli.jobs", "load_or_train", load_then_stop)]
    modules = {mod: importlib.import_module(f"reasonlab.{mod}") for mod, _, _ in stubs}   # all imported first: a
    for mod, name, fn in stubs:                # module imported after a patch would keep the stub as its own name
        monkeypatch.setattr(modules[mod], name, fn)
    monkeypatch.chdir(tmp_path)                       # the default --out of a case that gets that far
    return paths


@pytest.mark.parametrize("argv", CASES, ids=[shlex.join(a) or "(nothing)" for a in CASES])
def test_every_bad_input_is_refused_on_one_line_before_any_work(stubbed, capsys, argv):
    argv = [stubbed.get(a, a) for a in argv]
    before = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    try:
        rc = main(argv)
    except Reached:
        rc = "work started"
    except Hung:
        rc = "hung"
    except SystemExit as e:
        rc = f"exit {e.code}"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and err.startswith("reasonlab: error:"), (rc, err)


@pytest.mark.parametrize("argv", [["sweep", "kl", "--grid", "probe_beta=0.5"], ["search", "--n-test", "0"],
                                  ["lab", "--only", "nope"], ["train", "--algo", "ppo"]])
def test_a_refused_command_leaves_nothing_on_disk(argv, tmp_path, capsys):
    out = tmp_path / "deep" / "out"
    assert main(argv + ["--out", str(out)]) == 2
    assert capsys.readouterr().err.count("\n") == 1 and not (tmp_path / "deep").exists()
