"""Probe the command line as a hostile user and a crashing machine would, and count what is handled cleanly.

    python benchmarks/probe_reliability.py [--kills 10] [--steps 16] [--seed 0]

1. Bad inputs (about 200, across every subcommand), run in-process with every expensive step stubbed out: clean
   means exit code 2, exactly one line on stderr starting "reasonlab: error:", no traceback, no hang, and no work
   started.
2. Kill trials: real `reasonlab rl` subprocesses killed with SIGKILL at random times, then resumed with --resume:
   recovered means the resumed run finishes, its metrics.jsonl holds steps 1..N once each, and its final policy is
   bit-identical to an uninterrupted run's.
3. Injected faults at the unsafe points (a writer dying mid-checkpoint, a full disk, a torn log line, a corrupt
   checkpoint, two writers, a cache race, ...): recovered means the run or cache ends in the right state.
4. The lab and sweeps: result files of the wrong shape, two drivers on one --out, a stale lock, SIGTERM and Ctrl-C
   to a 2-worker lab, bad configs through TOML and --set, a FIFO config, a grid too large, a cache that is a file,
   an unwritable HOME, file modes: clean means handled as the reliability doc says (one line, exit 2, rerun, ...).

Needs the cached base model of seed 0 (~/.cache/reasonlab/base-seed0.*): it is copied into a temporary cache, so
nothing is trained and the real cache is never written.
"""
from __future__ import annotations

import argparse
import copy
import errno
import importlib
import io
import json
import multiprocessing as mp
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stderr, redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from reasonlab.cli import main  # noqa: E402
from reasonlab.io import checkpoint, files, runs  # noqa: E402
from reasonlab.train import zoo  # noqa: E402

FORK = mp.get_context("fork")


class Reached(BaseException):
    """Raised by stubbed-out work: a bad input got past every check."""


def stub_work():
    def stop(*a, **kw):
        raise Reached()
    for mod, name in [("train.sft", "pretrain"), ("train.zoo", "pretrain"), ("train.rl", "train"),
                      ("methods.tts", "run"), ("methods.star", "train"), ("runner.lab", "run"), ("runner.sweep", "run"),
                      ("core.evaluate", "eval_table"), ("core.sampling", "generate"),
                      ("experiments.adaptive", "fixed_points"), ("train.zoo", "get_model")]:
        setattr(importlib.import_module(f"reasonlab.{mod}"), name, stop)


# ---------------------------------------------------------------------------------------------------------------
# 1. Bad inputs

def bad_inputs(d: dict) -> list[list[str]]:
    """Every argv here is wrong in exactly one way (or more); each must be refused cleanly."""
    out: list[list[str]] = []
    for prob in ["", " ", "3", "x", "3 5 x", "3 5 12", "1 2 3 4 5 6 7 8 9", "٣ ٥ ٧", "3 ²", "3,5,-1", "3.5 2",
                 "0x3 5", "3\x005", "1 2 3 4 5 6 7 8 9 0", "½ 2", "3 5 ９", "-3 5", "+3 5", "3 5 ⁹", "III V"]:
        out.append(["sample", prob])
    pos_int = ["0", "-1", "x", "1.5", "", "1e100", "99999999999999"]
    for cmd, flags in {"sample": ["-n"], "eval": ["-n"], "pretrain": ["--batch", "-n", "--steps"],
                       "rl": ["--steps", "--prompts-per-step", "--num-generations", "--eval-n", "--checkpoint-every"],
                       "tts": ["--n-per-k", "--n-max"], "star": ["--rounds", "--samples", "--problems", "--n-chains"],
                       "adaptive": ["--n-eval", "--steps"]}.items():
        for flag in flags:
            for v in pos_int:
                if flag == "--checkpoint-every" and v in ("0", "99999999999999"):
                    continue        # 0 (only at the end: RLConfig's doc) and a cadence longer than the run are valid
                if flag in ("--rounds",) and v == "99999999999999":
                    pass            # steps x growth^rounds explodes: must be refused
                out.append([cmd] + ([d["prob"]] if cmd == "sample" else []) + [flag, v])
    for cmd in ["sample", "eval", "rl", "pretrain"]:
        for v in ["-1", str(2**70), "x", "1.5", str(2**32)]:
            out.append([cmd] + ([d["prob"]] if cmd == "sample" else []) + ["--seed", v])
    for v in ["-1", str(2**70), "x"]:
        out += [["star", "--seeds", "0", v], ["adaptive", "--seeds", v], ["lab", "--seeds", v],
                ["eval", "--problem-seed", v]]
    for cmd, flag in [("sample", "--temperature"), ("rl", "--temperature"), ("star", "--temperature"),
                      ("rl", "--lr"), ("rl", "--beta"), ("rl", "--epsilon"), ("rl", "--force-direct"),
                      ("star", "--growth"), ("pretrain", "--lr"), ("adaptive", "--lr"), ("adaptive", "--beta")]:
        for v in ["nan", "inf", "-1", "x", "1e309"] + (["1e-300", "1e300"] if flag == "--temperature" else []):
            out.append([cmd] + ([d["prob"]] if cmd == "sample" else []) + [flag, v])
    for cmd in ["sample", "eval", "rl", "tts", "pretrain", "star", "adaptive", "lab"]:
        for dev in ["tpu", "cuda:0", "cuda:x", "gpu"]:
            out.append([cmd] + ([d["prob"]] if cmd == "sample" else []) + ["--device", dev])
    for cmd in ["sample", "eval", "rl", "tts"]:
        pre = [cmd] + ([d["prob"]] if cmd == "sample" else [])
        for ck in [d["missing"], d["fifo"], d["dir"], d["garbage"], d["crafted"], d["nan"], d["truncated"]]:
            out.append(pre + ["--checkpoint", ck])
        out.append(pre + ["--cache-dir", d["file"]])
        out.append(pre + ["--cache-dir", "/proc/reasonlab-cache"])
    out += [["pretrain", "--cache-dir", d["file"]], ["star", "--cache-dir", d["file"]],
            ["adaptive", "--cache-dir", d["file"]], ["lab", "--cache-dir", d["file"]]]
    for flag_cmd in [("rl", "--run-dir"), ("tts", "--out"), ("star", "--out"), ("adaptive", "--out"), ("lab", "--out")]:
        for p in [d["file"], "/proc/reasonlab-x", "/proc/self/status"]:
            out.append([flag_cmd[0], flag_cmd[1], p])
    for p in [d["dir"], "/proc/x/e.json", "/proc/self/status/e.json"]:
        out.append(["eval", "--checkpoint", d["good"], "-n", "2", "--json", p])
    for name in ["ok\n", "../x", "", "a/b", ".x", "x" * 200, "a..b", "a b"]:
        out.append(["pretrain", "--name", name, "--recipe", "spec", "--steps", "1", "1"])
    out += [["rl", "--algo", "ppo"], ["rl", "--kl-estimator", "k9"], ["rl", "--loss-type", "x"],
            ["rl", "--num-generations", "1"], ["rl", "--no-clip", "--num-iterations", "2"],
            ["rl", "--forced-trains", "format"], ["rl", "--force-direct", "1.5"], ["rl", "--scale-rewards", "x"],
            ["rl", "--algo", "gspo", "--no-clip"], ["rl", "--eval-every", "-3"],
            ["sample", d["prob"], "--force", "Q"], ["tts", "--formats", "X"], ["tts", "--n-max", "3"],
            ["adaptive", "--methods", "bogus"], ["lab", "--only", "bogus"], ["star", "--filter", "x"],
            ["star", "--start", "x"], ["pretrain", "--recipe", "x"], ["pretrain", "--steps", "5"],
            ["star", "--growth", "5", "--rounds", "40"], ["frobnicate"], [], ["--bogus"],
            ["tts", "--replot", "--out", d["schema"]], ["adaptive", "--replot", "--out", d["schema"]],
            ["tts", "--replot", "--out", d["dir"]], ["adaptive", "--replot", "--out", d["fifo_dir"]],
            ["lab", "--report-only", "--out", d["dir"]]]
    return out


def make_fixtures(root: str, base_stem: str) -> dict:
    d = {"prob": "3 5 9", "missing": os.path.join(root, "no", "such"), "file": os.path.join(root, "afile"),
         "dir": os.path.join(root, "adir"), "fifo": os.path.join(root, "afifo.json")}
    open(d["file"], "w").write("x")
    os.makedirs(d["dir"])
    os.mkfifo(d["fifo"])
    d["garbage"] = os.path.join(root, "garbage")
    open(d["garbage"] + ".json", "w").write("{not json")
    open(d["garbage"] + ".safetensors", "wb").write(b"\0" * 100)
    model, _ = checkpoint.load_model(base_stem)
    d["good"] = os.path.join(root, "good")
    checkpoint.save_model(d["good"], model, {})
    d["crafted"] = os.path.join(root, "crafted")
    checkpoint.save_model(d["crafted"], model, {})
    meta = json.load(open(d["crafted"] + ".json"))
    meta["model"]["n_layers"] = 10**6
    json.dump(meta, open(d["crafted"] + ".json", "w"))
    bad = copy.deepcopy(model)
    with torch.no_grad():
        bad.head.weight[0, 0] = float("nan")
    d["nan"] = os.path.join(root, "nan")
    checkpoint.save_model(d["nan"], bad, {})
    d["truncated"] = os.path.join(root, "truncated")
    checkpoint.save_model(d["truncated"], model, {})
    with open(d["truncated"] + ".safetensors", "r+b") as f:
        f.truncate(1000)
    d["schema"] = os.path.join(root, "schema")
    os.makedirs(d["schema"])
    open(os.path.join(d["schema"], "results.json"), "w").write('{"grid": 1}')
    open(os.path.join(d["schema"], "summary.json"), "w").write("[1, 2]")
    d["fifo_dir"] = os.path.join(root, "fifo_dir")
    os.makedirs(d["fifo_dir"])
    os.mkfifo(os.path.join(d["fifo_dir"], "summary.json"))
    return d


def probe_inputs(root: str, base_stem: str) -> tuple[int, int, list]:
    d = make_fixtures(root, base_stem)
    argvs = bad_inputs(d)
    stub_work()
    unclean = []
    cwd = os.getcwd()
    os.chdir(root)
    try:
        for argv in argvs:
            err, out = io.StringIO(), io.StringIO()
            signal.alarm(20)
            try:
                with redirect_stderr(err), redirect_stdout(out):
                    rc = main(argv)
            except Reached:
                rc = "work started"
            except SystemExit as e:
                rc = f"exit {e.code}"
            except BaseException as e:   # a traceback would reach the user
                rc = f"{type(e).__name__}: {e}"
            finally:
                signal.alarm(0)
            e = err.getvalue()
            if not (rc == 2 and e.count("\n") == 1 and e.startswith("reasonlab: error:")):
                unclean.append((argv, rc, e.strip()[:200]))
    finally:
        os.chdir(cwd)
    return len(argvs), len(argvs) - len(unclean), unclean


# ---------------------------------------------------------------------------------------------------------------
# 2. Kill trials

def rl_argv(run_dir: str, cache: str, steps: int, seed: int, resume: bool = False) -> list[str]:
    return ([sys.executable, "-m", "reasonlab.cli", "rl", "--seed", str(seed), "--cache-dir", cache, "--steps",
             str(steps), "--prompts-per-step", "4", "--num-generations", "4", "--checkpoint-every", "2", "--run-dir",
             run_dir] + (["--resume"] if resume else []))


def final_policy(run_dir: str) -> dict:
    t, _ = checkpoint.load_tensors(runs.latest(run_dir))
    return {k: v for k, v in t.items() if k.startswith("policy.")}


def kill_trials(root: str, cache: str, n: int, steps: int, seed: int, rng: random.Random) -> tuple[int, int, list]:
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
           "OMP_NUM_THREADS": "1"}
    ref_dir = os.path.join(root, "kill-ref")
    subprocess.run(rl_argv(ref_dir, cache, steps, seed), env=env, capture_output=True, check=True)
    ref = final_policy(ref_dir)
    ok, notes = 0, []
    for i in range(n):
        run = os.path.join(root, f"kill-{i}")
        p = subprocess.Popen(rl_argv(run, cache, steps, seed), env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        # kill once `target` steps are logged (0: during start-up), a random 0-150 ms later: anywhere in the run
        target, t_start = rng.randint(0, steps - 1), time.perf_counter()
        log = os.path.join(run, "metrics.jsonl")
        while p.poll() is None and target and (not os.path.exists(log) or sum(1 for _ in open(log)) < target):
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.15) if target else rng.uniform(0.5, 3.0))
        finished = p.poll() is not None
        p.send_signal(signal.SIGKILL)
        p.wait()
        at = time.perf_counter() - t_start
        ckpts = [s for s, _ in runs.checkpoints(run)] if os.path.isdir(run) else []
        r = subprocess.run(rl_argv(run, cache, steps, seed, resume=True), env=env, capture_output=True, text=True)
        try:
            got = [json.loads(s)["step"] for s in open(os.path.join(run, "metrics.jsonl"))]
            same = all(torch.equal(ref[k], v) for k, v in final_policy(run).items())
            good = r.returncode == 0 and got == list(range(1, steps + 1)) and same
        except Exception as e:   # noqa: BLE001 (a probe: any failure is a finding)
            good, got, same = False, str(e), False
        ok += good
        resumed = [s for s in r.stdout.splitlines() if "resumed" in s or "starting at step 0" in s]
        notes.append(f"kill {i}: at {at:.1f}s{' (already finished)' if finished else ''}, after {target} logged "
                     f"steps (checkpoints then: {ckpts or 'none'}), resume rc {r.returncode}, "
                     f"{resumed[0] if resumed else r.stderr.strip()[-120:]}, bit-identical {same}")
    return n, ok, notes


# ---------------------------------------------------------------------------------------------------------------
# 3. Injected faults (in-process, the standard model untrained: what is checked is bookkeeping, not learning)

def small_run(run_dir, resume=False, steps=4, **kw):
    from reasonlab.train.rl import RLConfig, train
    from reasonlab.train.sft import build_model
    base = build_model(0)
    pol = copy.deepcopy(base)
    cfg = RLConfig.preset("grpo", **{**dict(steps=steps, prompts_per_step=2, num_generations=4, log_every=0, seed=3,
                                           checkpoint_every=2), **kw})
    logs: list[str] = []
    hist = train(pol, base, cfg, run_dir=run_dir, resume=resume, log=logs.append)
    return pol, hist, logs


def same_model(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def child_dies(run_dir, target: str, when):
    """In a forked child: make `target` (a checkpoint module function) exit the process when when(args) holds."""
    real = getattr(checkpoint, target)

    def dying(*a, **kw):
        if when(a):
            os._exit(9)
        return real(*a, **kw)
    setattr(checkpoint, target, dying)
    small_run(run_dir)


def faults(root: str) -> list[tuple[str, bool]]:
    ref, _, _ = small_run(os.path.join(root, "f-ref"))
    res = []

    def trial(name, fn):
        try:
            res.append((name, bool(fn(os.path.join(root, "f-" + name.split()[0])))))
        except Exception as e:   # noqa: BLE001
            res.append((f"{name} ({type(e).__name__}: {e})", False))

    def died_then_resumes(target, when):
        def fn(run):
            p = FORK.Process(target=child_dies, args=(run, target, when))
            p.start()
            p.join(120)
            pol, hist, _ = small_run(run, resume=True)
            return p.exitcode == 9 and same_model(pol, ref) and [h["step"] for h in hist] == [1, 2, 3, 4]
        return fn

    trial("json-kill: writer killed between the tensor file and the JSON of step 4",
          died_then_resumes("write_json", lambda a: a[0].endswith("state.json") and a[1].get("step") == 4))
    trial("tensor-kill: writer killed as it writes step 4's tensor file",
          died_then_resumes("atomic_write", lambda a: a[0].endswith("state.safetensors") and "ckpt" in a[0]
                            and os.path.exists(os.path.join(os.path.dirname(os.path.dirname(a[0])), "ckpt-000002"))))
    trial("first-kill: killed before the first checkpoint",
          died_then_resumes("write_json", lambda a: a[0].endswith("state.json") and a[1].get("step") == 2))

    def torn(run):
        small_run(run, steps=2)
        with open(os.path.join(run, "metrics.jsonl"), "a") as f:
            f.write('{"step": 3, "rew')
        pol, _, logs = small_run(run, resume=True)
        return same_model(pol, ref) and any("torn" in s for s in logs)
    trial("torn: torn final line in metrics.jsonl", torn)

    def enospc_ckpt(run):
        real, calls = checkpoint.atomic_write, []

        def full(path, write):
            if path.endswith("state.safetensors"):
                calls.append(1)
                if len(calls) == 2:
                    raise OSError(errno.ENOSPC, "No space left on device", path)
            real(path, write)
        checkpoint.atomic_write = full
        try:
            small_run(run)
        except OSError:
            pass
        finally:
            checkpoint.atomic_write = real
        clean = not any(f.startswith(".tmp-") for f in os.listdir(run))
        pol, _, _ = small_run(run, resume=True)
        return clean and same_model(pol, ref)
    trial("enospc-ckpt: full disk writing a checkpoint", enospc_ckpt)

    def enospc_log(run):
        real = runs.append_metric

        def full(run_dir, rec):
            if rec["step"] == 3:
                with open(os.path.join(run_dir, "metrics.jsonl"), "a") as f:
                    f.write(json.dumps(rec)[:17])
                raise OSError(errno.ENOSPC, "No space left on device")
            real(run_dir, rec)
        runs.append_metric = full
        try:
            small_run(run)
        except OSError:
            pass
        finally:
            runs.append_metric = real
        pol, _, _ = small_run(run, resume=True)
        return same_model(pol, ref)
    trial("enospc-log: full disk mid-line in metrics.jsonl", enospc_log)

    def corrupt(run):
        small_run(run, steps=2)
        keep = os.path.join(root, "f-corrupt-ckpt2")
        shutil.copytree(os.path.join(run, "ckpt-000002"), keep)
        small_run(run, resume=True, steps=3, checkpoint_every=1)   # ckpt-000003 replaces ckpt-000002 ...
        shutil.copytree(keep, os.path.join(run, "ckpt-000002"))    # ... which we put back beside it
        with open(os.path.join(run, "ckpt-000003", "state.safetensors"), "r+b") as f:
            f.seek(-20, 2)
            f.write(b"\xff" * 20)
        pol, _, logs = small_run(run, resume=True)
        return same_model(pol, ref) and any("falling back" in s for s in logs)
    trial("corrupt: newest checkpoint has flipped bytes", corrupt)

    def two_writers(run):
        ev = FORK.Event()

        def hold():
            runs.lock(run)
            ev.set()
            time.sleep(30)
        p = FORK.Process(target=hold)
        p.start()
        ev.wait(30)
        try:
            small_run(run)
            return False
        except runs.RunError as e:
            return f"process {p.pid}" in str(e)
        finally:
            p.kill()
            p.join()
    trial("two-writers: a second process on one run directory", two_writers)

    def race(cache):
        import reasonlab.train.zoo as T
        real = T.pretrain
        T.pretrain = lambda *a, **kw: (time.sleep(1.0), real(*a, **kw))[1]
        tiny = {"seed": 0, "lr": 1e-3, "phases": [[[0.0, 0.5, 0.5], 3, 1, [2, 8]]]}
        q = FORK.Queue()

        def get():
            logs = []
            zoo.get_model("tiny", tiny, cache=cache, log=logs.append)
            q.put(logs)
        try:
            ps = [FORK.Process(target=get) for _ in range(2)]
            ps[0].start()
            time.sleep(0.4)
            ps[1].start()
            logs = [s for _ in ps for s in q.get(timeout=120)]
            for p in ps:
                p.join()
        finally:
            T.pretrain = real
        return sum("training it" in s for s in logs) == 1 and any("loaded cached" in s for s in logs)
    trial("cache-race: two processes want one cache name", race)

    def resume_changed(run):
        small_run(run, steps=2)
        try:
            small_run(run, resume=True, learning_rate=1e6)
            return False
        except runs.RunError as e:
            return "learning_rate" in str(e)
    trial("changed-config: --resume with another learning rate", resume_changed)

    def orphan(cache):
        os.makedirs(cache)
        f = os.path.join(cache, ".tmp-xyz" + "tiny.safetensors")
        open(f, "wb").write(b"half")
        os.utime(f, (time.time() - 3600,) * 2)
        tiny = {"seed": 0, "lr": 1e-3, "phases": [[[0.0, 0.5, 0.5], 3, 1, [2, 8]]]}
        zoo.get_model("tiny", tiny, cache=cache, log=None)
        return not os.path.exists(f)
    trial("orphan: a killed writer's temp file in the cache", orphan)

    def plot_enospc(out):
        import matplotlib.pyplot as plt

        from reasonlab.io import report
        os.makedirs(out)
        fig = plt.figure()
        real = type(fig).savefig

        def full(self, path, **kw):
            open(path, "wb").write(b"half")
            raise OSError(errno.ENOSPC, "No space left on device")
        type(fig).savefig = full
        try:
            report.save(fig, os.path.join(out, "acc_vs_n.png"))
        except OSError:
            pass
        finally:
            type(fig).savefig = real
        return os.listdir(out) == []
    trial("plot-enospc: full disk while saving a plot", plot_enospc)
    return res


# ---------------------------------------------------------------------------------------------------------------
# 4. The lab and sweeps: their store, run directory, signals and configs.

SLOW = """import os, time
from dataclasses import dataclass
from reasonlab.experiments import Experiment, register
from reasonlab.stats.findings import seed_check

@dataclass
class Config:
    sleep: float = 0.0
    \"\"\"seconds each seed takes\"\"\"

def run(cfg, seed, env):
    time.sleep(float(os.environ.get("PROBE_SLEEP", cfg.sleep)))
    return {"value": 1.0 + seed}

register(Experiment("probe", Config, run, lambda rs: [seed_check("probe", "c", "v", [r["value"] for r in rs], 0)],
                    lambda rs, out: [("## Probe\\n", "probe")], uses_base=False))
"""


def cli(argv, env=None, timeout=120):
    """(exit code, stdout, stderr) of `reasonlab argv` in its own process."""
    p = subprocess.run([sys.executable, "-m", "reasonlab", *argv], capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, **(env or {})})
    return p.returncode, p.stdout, p.stderr


def one_line(rc, err, code=2, word="reasonlab: error"):
    return rc == code and err.count("\n") == 1 and err.startswith(word) and "Traceback" not in err


def lab_and_sweeps(root: str) -> list[tuple[str, bool]]:
    """Each fault class of the layer above single commands, tried as a user would: True when handled cleanly."""
    out: list[tuple[str, bool]] = []
    os.makedirs(root, exist_ok=True)
    exp = os.path.join(root, "probe_exp.py")
    with open(exp, "w") as f:
        f.write(SLOW)
    lab = lambda d, *x, **kw: cli(["lab", "--experiment", exp, "--only", "probe", "--seeds", "0", "1", "--out", d,  # noqa: E731
                                   *x], **kw)

    def trial(name, fn):
        d = os.path.join(root, "lab-" + name.split(":")[0])
        try:
            ok = bool(fn(d))
        except Exception as e:           # a trial that raises is a fault not handled
            ok = False
            name += f" ({type(e).__name__}: {e})"
        out.append((name, ok))

    def bad_record(content):
        def fn(d):
            if lab(d)[0] != 0:
                return False
            with open(os.path.join(d, "probe", "seed0.json"), "w") as f:
                f.write(content)
            rc, so, _ = lab(d)
            return rc == 0 and "running it again" in so and json.load(open(os.path.join(d, "probe", "seed0.json")))[
                "result"]["value"] == 1.0
        return fn
    for what, content in (("list", "[1, 2]"), ("no-result", '{"key": "k", "seconds": 1}'), ("not-json", "{"),
                          ("garbage-result", None)):
        if content is None:
            def garbage(d):
                if lab(d)[0] != 0:
                    return False
                rec = json.load(open(os.path.join(d, "probe", "seed0.json")))
                rec["result"] = [1, 2]                        # the current key, a result of the wrong shape
                json.dump(rec, open(os.path.join(d, "probe", "seed0.json"), "w"))
                rc, so, _ = lab(d)
                return rc == 0 and "running it again" in so
            trial(f"store-{what}: a per-seed result of the wrong shape is rerun, and said", garbage)
        else:
            trial(f"store-{what}: a per-seed result of the wrong shape is rerun, and said", bad_record(content))

    def report_only_bad(d):
        os.makedirs(os.path.join(d, "probe"))
        with open(os.path.join(d, "probe", "seed0.json"), "w") as f:
            f.write("[1]")
        rc, _, err = lab(d, "--report-only")
        return one_line(rc, err) and "seed0.json" in err
    trial("report-only-record: --report-only on a bad result file", report_only_bad)

    def report_only_timing(d):
        if lab(d)[0] != 0:
            return False
        with open(os.path.join(d, "timing.json"), "w") as f:
            f.write("[]")
        rc, _, err = lab(d, "--report-only")
        return one_line(rc, err) and "timing.json" in err
    trial("report-only-timing: --report-only on a timing.json that is a list", report_only_timing)

    def two_drivers(d):
        p = subprocess.Popen([sys.executable, "-m", "reasonlab", "lab", "--experiment", exp, "--only", "probe",
                              "--seeds", "0", "--out", d], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env={**os.environ, "PROBE_SLEEP": "30"}, start_new_session=True)
        try:
            end = time.time() + 60
            while time.time() < end and not os.path.exists(os.path.join(d, "logs")) \
                    and not os.path.exists(os.path.join(d, "config.json")):
                time.sleep(0.2)
            rc, _, err = lab(d)
            return one_line(rc, err) and f"process {p.pid}" in err
        finally:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    trial("two-drivers: a second lab on one --out", two_drivers)

    def stale(d):
        p = FORK.Process(target=lambda: (runs.lock(d, "--out"), time.sleep(60)))
        p.start()
        time.sleep(1.0)
        os.kill(p.pid, signal.SIGKILL)
        p.join()
        rc, so, _ = lab(d)
        return rc == 0 and f"took over the lock of process {p.pid}" in so
    trial("stale-lock: a lock left by a killed driver is taken over, and said", stale)

    def stop(sig, code, word):
        def fn(d):
            p = subprocess.Popen([sys.executable, "-m", "reasonlab", "lab", "--experiment", exp, "--only", "probe",
                                  "--seeds", "0", "1", "2", "--workers", "2", "--out", d], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env={**os.environ, "PROBE_SLEEP": "60"},
                                 start_new_session=True)
            logs = os.path.join(d, "logs")
            end = time.time() + 90
            while time.time() < end and not (os.path.isdir(logs) and sum(
                    "=== attempt" in open(os.path.join(logs, f)).read() for f in os.listdir(logs)) >= 2):
                time.sleep(0.2)
            t = time.time()
            os.killpg(p.pid, sig) if sig == signal.SIGINT else p.send_signal(sig)
            try:
                _, err = p.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                return False
            took = time.time() - t
            end = time.time() + 5.0
            while True:                                   # every process of the group gone within 5 s
                try:
                    os.killpg(p.pid, 0)
                except ProcessLookupError:
                    break
                if time.time() > end:
                    os.killpg(p.pid, signal.SIGKILL)
                    return False
                time.sleep(0.1)
            return p.returncode == code and err.strip().splitlines()[-1] == f"reasonlab: {word}" and \
                "Traceback" not in err and took < 5.0
        return fn
    trial("sigterm: SIGTERM to a 2-worker lab", stop(signal.SIGTERM, 143, "terminated"))
    trial("sigint: Ctrl-C to a 2-worker lab", stop(signal.SIGINT, 130, "interrupted"))

    def sweep_refuses(toml, argv, msg):
        def fn(d):
            os.makedirs(d, exist_ok=True)
            extra = []
            if toml is not None:
                path = os.path.join(d, "grid.toml")
                if toml == "FIFO":
                    os.mkfifo(path)
                else:
                    with open(path, "w") as f:
                        f.write(toml)
                extra = ["--config", path]
            rc, _, err = cli(["sweep", *extra, *argv, "--base", "tiny", "--out", os.path.join(d, "o")], timeout=30)
            return one_line(rc, err) and msg in err and not os.path.exists(os.path.join(d, "o", "cells"))
        return fn
    for name, toml, argv, msg in (
            ("toml-grid-5", "grid = 5\n", [], "grid must be a table"),
            ("toml-seeds", "seeds = [-1]\n[grid]\nbeta = [0.0]\n", [], "seeds must be in"),
            ("toml-nan", "[grid]\nbeta = [nan]\n", [], "finite"),
            ("toml-steps", "[grid]\nbeta = [0.0]\n[set]\nsteps = 100000000\n", [], "more than 10,000,000"),
            ("set-nan", None, ["--set", "beta=nan", "--grid", "algo=grpo"], "finite"),
            ("set-steps", None, ["--set", "steps=100000000"], "more than 10,000,000"),
            ("grid-size", None, ["--grid", "beta=" + ",".join(str(i / 1e4) for i in range(200)),
                                 "--grid", "learning_rate=" + ",".join(str((i + 1) * 1e-6) for i in range(60))],
             "36,000 (cell, seed) units"),
            ("fifo", "FIFO", [], "not a regular file")):
        trial(f"sweep-{name}: a bad sweep value or path, refused before any work", sweep_refuses(toml, argv, msg))

    def cache_file(d):
        os.makedirs(d)
        open(os.path.join(d, "afile"), "w").close()
        rc, _, err = cli(["sweep", "--grid", "beta=0", "--out", os.path.join(d, "o")],
                         env={"REASONLAB_CACHE": os.path.join(d, "afile")})
        return one_line(rc, err) and "not a directory" in err
    trial("cache-file: REASONLAB_CACHE is a file", cache_file)

    def budget_steps(d):
        rc, _, err = cli(["budget", "--sft-steps", "100000000000", "--out", d])
        return one_line(rc, err) and "more than 10,000,000" in err
    trial("budget-steps: budget --sft-steps 1e11", budget_steps)

    def home(d):
        os.makedirs(os.path.join(d, "probe"))
        with open(os.path.join(d, "probe", "seed0.json"), "w") as f:
            f.write("[1]")
        env = {"HOME": "/proc", "XDG_CONFIG_HOME": "", "MPLCONFIGDIR": ""}
        a = lab(d, "--report-only", env=env)
        b = cli(["sample", "1 2", "--checkpoint", os.path.join(d, "missing")], env=env)
        return one_line(a[0], a[2]) and one_line(b[0], b[2])
    trial("home: an unwritable HOME, one line only", home)

    def modes(d):
        os.makedirs(d)
        old = os.umask(0o022)
        try:
            checkpoint.write_json(os.path.join(d, "a.json"), {})
        finally:
            os.umask(old)
        return oct(os.stat(os.path.join(d, "a.json")).st_mode & 0o777) == oct(0o644)
    trial("modes: an atomic write keeps the umask's mode", modes)
    return out


def main_probe():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    base = os.path.join(files.cache_dir(), f"base-seed{a.seed}")
    if not os.path.exists(base + ".json"):
        sys.exit(f"probe: needs the cached base model {base}.json (run `reasonlab pretrain --seed {a.seed}`)")
    root = tempfile.mkdtemp(prefix="reasonlab-probe-")
    cache = os.path.join(root, "cache")
    os.makedirs(cache)
    for ext in (".json", ".safetensors"):
        shutil.copy(base + ext, os.path.join(cache, f"base-seed{a.seed}{ext}"))
    os.environ["REASONLAB_CACHE"] = cache
    # the faults fork this process after it has run torch: with more than one thread, libgomp's pool does not
    # survive the fork and the child hangs in its first parallel op (pytorch/pytorch#17199)
    torch.set_num_threads(1)
    rng = random.Random(1234)
    t0 = time.perf_counter()
    # the kill trials and the faults first: the input probe stubs out the library's work in this process
    kn, kok, knotes = kill_trials(root, cache, a.kills, a.steps, a.seed, rng)
    t1 = time.perf_counter()
    fres = faults(root)
    t2 = time.perf_counter()
    os.makedirs(os.path.join(root, "inputs"))
    lres = lab_and_sweeps(os.path.join(root, "lab-sweeps"))
    t25 = time.perf_counter()
    n, clean, unclean = probe_inputs(os.path.join(root, "inputs"), os.path.join(cache, f"base-seed{a.seed}"))
    t3 = time.perf_counter()
    for s in knotes:
        print("  " + s)
    for name, ok in fres:
        print(f"  fault {'recovered' if ok else 'NOT RECOVERED'}: {name}")
    for name, ok in lres:
        print(f"  lab and sweeps {'clean' if ok else 'NOT CLEAN'}: {name}")
    for argv, rc, e in unclean[:40]:
        print(f"  unclean input: {argv!r} -> {rc} {e!r}")
    if a.verbose:
        for argv in bad_inputs(make_fixtures(tempfile.mkdtemp(), os.path.join(cache, f"base-seed{a.seed}"))):
            print(f"  tried {argv!r}")
    print(f"inputs tried / clean: {n} / {clean}; kill trials / recovered: {kn} / {kok}; "
          f"injected faults / recovered: {len(fres)} / {sum(ok for _, ok in fres)}; "
          f"lab and sweep cases / clean: {len(lres)} / {sum(ok for _, ok in lres)}")
    print(f"({t1 - t0:.0f} s kill trials, {t2 - t1:.0f} s faults, {t25 - t2:.0f} s lab and sweeps, {t3 - t25:.0f} s "
          f"inputs; files in {root})")
    shutil.rmtree(root, ignore_errors=True)
    return 0 if clean == n and kok == kn and all(ok for _, ok in fres) and all(ok for _, ok in lres) else 1


if __name__ == "__main__":
    sys.exit(main_probe())
