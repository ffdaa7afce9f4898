"""Reliability, by injecting each fault: kills mid-checkpoint, torn logs, full disks, two writers, a cache race,
crafted checkpoints, NaN weights, hostile paths, and a property-based fuzz of the command line."""
import copy
import errno
import json
import multiprocessing as mp
import os
import signal
import time

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reasonlab.cli import main
from reasonlab.io import checkpoint, runs
from reasonlab.io.checkpoint import CheckpointError, load_model, save_model
from reasonlab.train import rl_log
from reasonlab.train.rl import RLConfig, train
from reasonlab.train.sft import build_model
from reasonlab.train.zoo import get_model

TINY = {"seed": 0, "lr": 1e-3, "phases": [[[0.0, 0.5, 0.5], 3, 1, [2, 8]]]}
FORK = mp.get_context("fork")


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """The forked children below must not enter OpenMP regions the parent set up (libgomp is not fork-safe: a child
    that uses the parent's thread pool hangs), and comparing a child's run with the parent's needs one thread
    count. One torch thread runs every parallel loop inline; restored after the module."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def rl_cfg(**kw):
    """Four small steps. The model is untrained: every reward is 0 and so is every advantage; the entropy bonus
    moves the weights at each step, so that a resumed run equal to the reference proves the optimizer and the RNG
    restored (with weights that never move, any resume would be "bit-identical")."""
    return RLConfig.preset("grpo", **{**dict(steps=4, prompts_per_step=2, num_generations=4, log_every=0, seed=3,
                                            checkpoint_every=2, entropy_coef=0.01), **kw})


def run_rl(run_dir, resume=False, steps=4, logs=None, **kw):
    torch.manual_seed(0)
    base = build_model(0)
    policy = copy.deepcopy(base)
    hist = train(policy, base, rl_cfg(steps=steps, **kw), run_dir=str(run_dir), resume=resume,
                 log=(logs.append if logs is not None else None))
    return policy, hist


def same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted 4-step run: what every recovered run must equal, bit for bit."""
    policy = run_rl(tmp_path_factory.mktemp("ref") / "run")[0]
    assert not same(policy, build_model(0))          # it moved: equal to it says something
    return policy


def one_line_error(capsys, code, rc):
    err = capsys.readouterr().err
    assert rc == code, err
    assert err.count("\n") == 1 and err.startswith("reasonlab: ") and "Traceback" not in err, err
    return err


# -- crash safety of RL run directories ---------------------------------------------------------------------------

def _die_in_checkpoint(run_dir, name, nth):
    """Child process: the nth write of a checkpoint's file `name` dies halfway (os._exit, as kill -9 would): half
    of its bytes in the temp file, nothing renamed into place."""
    real, calls = checkpoint.atomic_write, []

    def dying(path, write):
        if path.endswith(name):
            calls.append(path)
            if len(calls) == nth:
                def half(tmp):
                    write(tmp)
                    os.truncate(tmp, os.path.getsize(tmp) // 2)
                    os._exit(9)
                return real(path, half)
        return real(path, write)
    checkpoint.atomic_write = dying
    run_rl(run_dir)


@pytest.mark.parametrize("name,nth,left", [
    ("state.json", 2, [2]),               # step 4's tensor file written, its JSON not
    ("state.safetensors", 2, [2]),        # halfway through step 4's tensor file
    ("state.json", 1, []),                # before the first checkpoint is complete
], ids=["between-step-4s-files", "inside-step-4s-tensor-file", "before-the-first-checkpoint"])
def test_a_writer_killed_inside_a_checkpoint_resumes_bit_identical(tmp_path, reference, name, nth, left):
    run = tmp_path / "run"
    p = FORK.Process(target=_die_in_checkpoint, args=(run, name, nth))
    p.start()
    p.join(120)
    assert p.exitcode == 9                                        # it really died mid-checkpoint
    assert [s for s, _ in runs.checkpoints(str(run))] == left     # what was complete survived intact
    assert any(f.startswith(".tmp-ckpt-") for f in os.listdir(run))
    logs = []
    policy, hist = run_rl(run, resume=True, logs=logs)
    said = "resumed" if left else "starting at step 0"
    assert any(said in s and f"step {left[0] if left else 0}" in s for s in logs), logs
    assert same(policy, reference) and [h["step"] for h in hist] == [1, 2, 3, 4]
    assert not any(f.startswith(".tmp-") for f in os.listdir(run))        # the dead writer's leftovers are gone
    assert [json.loads(s)["step"] for s in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3, 4]


@pytest.mark.parametrize("damage", ["truncated", "flipped-bytes"])
def test_a_corrupt_newest_checkpoint_falls_back_to_the_previous(tmp_path, reference, damage):
    import shutil
    run = tmp_path / "run"
    run_rl(run, steps=2)
    shutil.copytree(run / "ckpt-000002", tmp_path / "kept")
    run_rl(run, resume=True)                                   # ckpt-000004 replaces ckpt-000002 ...
    shutil.copytree(tmp_path / "kept", run / "ckpt-000002")     # ... which we put back beside it
    with open(run / "ckpt-000004" / "state.safetensors", "r+b") as f:    # the newest is damaged:
        if damage == "truncated":
            f.truncate(100)
        else:                                                  # one low bit of a weight: only the hash can tell
            f.seek(-8, 2)
            b = f.read(1)
            f.seek(-8, 2)
            f.write(bytes([b[0] ^ 1]))
    logs = []
    policy, hist = run_rl(run, resume=True, logs=logs)
    assert any("falling back" in s for s in logs) and any("at step 2" in s for s in logs if "resumed" in s)
    assert same(policy, reference) and [h["step"] for h in hist] == [1, 2, 3, 4]


def test_torn_final_log_line_is_dropped_on_resume(tmp_path, reference):
    run = tmp_path / "run"
    run_rl(run, steps=2)
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 3, "reward": 0.5, "ac')            # a kill or a full disk mid-write
    logs = []
    policy, _ = run_rl(run, resume=True, logs=logs)
    assert any("torn" in s for s in logs) and same(policy, reference)
    assert [json.loads(s)["step"] for s in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3, 4]


def test_a_bad_line_inside_the_log_is_an_error_naming_file_and_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\nnot json\n{"step": 2}\n')
    with pytest.raises(runs.RunError, match="metrics.jsonl, line 2"):
        runs.read_metrics(str(path))


def test_full_disk_mid_line_in_the_log_stops_the_run_and_resume_is_bit_identical(tmp_path, monkeypatch, reference):
    run = tmp_path / "run"
    real = rl_log.append_metric

    def full(run_dir, rec):                  # step 3's line meets a full disk after 17 bytes
        if rec["step"] == 3:
            with open(os.path.join(run_dir, "metrics.jsonl"), "a") as f:
                f.write(json.dumps(rec)[:17])
            raise OSError(errno.ENOSPC, "No space left on device")
        real(run_dir, rec)
    monkeypatch.setattr(rl_log, "append_metric", full)
    with pytest.raises(OSError, match="No space"):
        run_rl(run)
    monkeypatch.setattr(rl_log, "append_metric", real)
    assert [s for s, _ in runs.checkpoints(str(run))] == [2]
    logs = []
    policy, hist = run_rl(run, resume=True, logs=logs)
    assert any("torn" in s for s in logs) and same(policy, reference) and [h["step"] for h in hist] == [1, 2, 3, 4]
    assert [json.loads(s)["step"] for s in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3, 4]


def test_resume_with_no_checkpoint_starts_at_step_0_and_says_so(tmp_path, reference):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 1}\n')        # killed before the first checkpoint
    logs = []
    policy, hist = run_rl(run, resume=True, logs=logs)
    assert any("starting at step 0" in s for s in logs)
    assert same(policy, reference) and [h["step"] for h in hist] == [1, 2, 3, 4]


def test_resume_with_a_changed_run_config_is_refused(tmp_path):
    run = tmp_path / "run"
    run_rl(run, steps=2)
    with pytest.raises(runs.RunError, match="learning_rate"):
        run_rl(run, resume=True, learning_rate=1.0)
    run_rl(run, resume=True, steps=4, checkpoint_every=1)     # more steps, other cadence: allowed


def test_full_disk_in_the_checkpoint_writer_leaves_the_previous_checkpoint(tmp_path, monkeypatch, reference):
    run = tmp_path / "run"
    real = checkpoint.atomic_write

    def full(path, write):                   # the second checkpoint's tensor file meets a full disk
        if path.endswith("state.safetensors"):
            calls.append(path)
            if len(calls) == 2:
                raise OSError(errno.ENOSPC, "No space left on device", path)
        real(path, write)
    calls = []
    monkeypatch.setattr(checkpoint, "atomic_write", full)
    with pytest.raises(OSError, match="No space"):
        run_rl(run)
    monkeypatch.setattr(checkpoint, "atomic_write", real)
    assert [s for s, _ in runs.checkpoints(str(run))] == [2]
    assert not any(f.startswith(".tmp-") for f in os.listdir(run))
    policy, _ = run_rl(run, resume=True)
    assert same(policy, reference)


# -- two writers ---------------------------------------------------------------------------------------------------

def _hold(run_dir, ready):
    runs.lock(run_dir)
    ready.set()
    time.sleep(60)


def test_a_second_process_on_a_run_directory_is_refused_naming_the_holder(tmp_path, capsys):
    run = str(tmp_path / "run")
    ready = FORK.Event()
    holder = FORK.Process(target=_hold, args=(run, ready))
    holder.start()
    try:
        assert ready.wait(30)
        rc = main(["train", "--checkpoint", "/nonexistent", "--out", run, "--steps", "1"])
        err = one_line_error(capsys, 2, rc)
        assert f"in use by process {holder.pid}" in err and "use another --out" in err
    finally:
        holder.kill()
        holder.join()
    assert runs.lock(run)       # the kill released it: the next process gets the directory
    runs.unlock(run)


def _get(cache, q):
    logs = []
    m = get_model("tiny", TINY, cache=cache, log=logs.append)
    q.put((logs, [t.tolist() for t in m.state_dict().values()][:2]))


def test_cache_race_one_process_trains_the_other_waits_and_loads(tmp_path, monkeypatch):
    import reasonlab.train.zoo as T
    real = T.pretrain

    def slow(*a, **kw):                      # widen the race window to a second
        time.sleep(1.0)
        return real(*a, **kw)
    monkeypatch.setattr(T, "pretrain", slow)
    q = FORK.Queue()
    ps = [FORK.Process(target=_get, args=(str(tmp_path), q)) for _ in range(2)]
    ps[0].start()
    time.sleep(0.4)
    ps[1].start()
    got = [q.get(timeout=120) for _ in ps]
    for p in ps:
        p.join(60)
    logs = [s for lg, _ in got for s in lg]
    assert sum("training it" in s for s in logs) == 1, logs       # trained once ...
    assert any("waiting" in s for s in logs) and any("loaded cached" in s for s in logs)
    assert got[0][1] == got[1][1]                                 # ... and both hold the same weights


def test_the_hash_certifies_the_bytes_written_not_a_later_file(tmp_path, monkeypatch):
    stem = str(tmp_path / "m")
    other = str(tmp_path / "other")
    save_model(other, build_model(1), {})
    real = checkpoint.atomic_write

    def racing(path, write):                 # a second writer replaces the tensor file right after our rename
        real(path, write)
        if path.endswith("m.safetensors"):
            os.replace(other + ".safetensors", path)
    monkeypatch.setattr(checkpoint, "atomic_write", racing)
    save_model(stem, build_model(0), {})
    with pytest.raises(CheckpointError, match="corrupt"):
        load_model(stem)


def test_orphan_temp_files_in_the_cache_are_ignored_and_cleaned(tmp_path):
    orphan = tmp_path / ".tmp-abc123tiny.safetensors"
    orphan.write_bytes(b"half a file")
    os.utime(orphan, (time.time() - 3600, time.time() - 3600))
    fresh = tmp_path / ".tmp-def456tiny.json"
    fresh.write_text("{")                     # a live writer's file (recent): left alone
    get_model("tiny", TINY, cache=str(tmp_path), log=None)
    assert not orphan.exists() and fresh.exists()
    get_model("tiny", TINY, cache=str(tmp_path), log=None)


# -- crafted checkpoints -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("field,value", [("n_heads", 3), ("n_heads", 0), ("n_heads", 128), ("n_heads", -4),
                                         ("d_model", 8192), ("n_layers", 10**6), ("n_layers", 3), ("max_len", 10**9),
                                         ("vocab_size", "18"), ("n_heads", True), ("extra", 1)])
def test_crafted_model_configs_are_refused_before_allocating(tmp_path, monkeypatch, field, value):
    stem = str(tmp_path / "m")
    save_model(stem, build_model(0), {})
    meta = json.loads(open(stem + ".json").read())
    meta["model"][field] = value              # the tensor hash stays valid: only the config is crafted
    open(stem + ".json", "w").write(json.dumps(meta))

    def boom(*a, **kw):
        raise AssertionError("a model was built from a crafted config")
    monkeypatch.setattr(checkpoint, "GPT", boom)
    with pytest.raises(CheckpointError, match="invalid model config"):
        load_model(stem)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 1e30])
def test_non_finite_weights_are_reported_naming_the_checkpoint(tmp_path, capsys, value):
    m = build_model(0)
    with torch.no_grad():
        if value == 1e30:                      # finite weights whose logits overflow
            for p in m.parameters():
                p.fill_(value)
        else:
            m.head.weight[2, 5] = value
    stem = str(tmp_path / "nanmodel")
    save_model(stem, m, {})
    with pytest.raises(CheckpointError, match="nanmodel .*non-finite"):
        load_model(stem)
    err = one_line_error(capsys, 2, main(["eval", "--checkpoint", stem, "--n-test", "2"]))
    assert "nanmodel" in err and "non-finite" in err


def test_a_fifo_checkpoint_is_refused_without_hanging(tmp_path, capsys):
    os.mkfifo(tmp_path / "x.json")
    signal.alarm(20)                           # a hang fails the test instead of stalling the suite
    try:
        err = one_line_error(capsys, 2, main(["eval", "--checkpoint", str(tmp_path / "x.json"), "--n-test", "2"]))
    finally:
        signal.alarm(0)
    assert "regular file" in err


# -- paths and writes ----------------------------------------------------------------------------------------------

@pytest.fixture
def ckpt(tmp_path):
    stem = str(tmp_path / "m")
    save_model(stem, build_model(0), {})
    return stem


def no_training(monkeypatch):
    import reasonlab.train.zoo as T

    def refuse(*a, **kw):
        raise AssertionError("training started before the path was checked")
    monkeypatch.setattr(T, "pretrain", refuse)


@pytest.mark.parametrize("make,argv,msg", [
    ("file", ["sample", "3 5 9", "--cache-dir", "{p}"], "is a file"),
    ("none", ["sample", "3 5 9", "--cache-dir", "/proc/reasonlab-cache"], "not writable"),
    ("file", ["train", "--out", "{p}", "--steps", "1"], "is a file"),
    ("none", ["train", "--out", "/proc/reasonlab-run", "--steps", "1"], "not writable"),
    ("file", ["sampling", "--out", "{p}", "--n-problems", "2"], "is a file"),
    ("dir", ["eval", "--json", "{p}", "--n-test", "2", "--checkpoint", "CKPT"], "is a directory"),
    ("none", ["eval", "--json", "/proc/x/e.json", "--n-test", "2", "--checkpoint", "CKPT"], "not writable"),
    ("none", ["sampling", "--report-only", "--out", "{p}"], "no finished experiments"),
])
def test_unusable_paths_fail_at_once_on_one_line(tmp_path, monkeypatch, capsys, ckpt, make, argv, msg):
    no_training(monkeypatch)
    p = tmp_path / "target"
    if make == "file":
        p.write_text("x")
    elif make == "dir":
        p.mkdir()
    argv = [a.replace("{p}", str(p)).replace("CKPT", ckpt) for a in argv]
    err = one_line_error(capsys, 2, main(argv))
    assert msg in err


def test_full_disk_on_eval_json_is_one_line_and_leaves_nothing(tmp_path, monkeypatch, capsys, ckpt):
    def full_dump(obj, f, **kw):
        f.write("{\"free\": ")
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(checkpoint.json, "dump", full_dump)
    out = tmp_path / "out"
    out.mkdir()
    err = one_line_error(capsys, 2, main(["eval", "--checkpoint", ckpt, "--n-test", "2", "--json", str(out / "e.json")]))
    assert "No space left" in err and os.listdir(out) == []
    assert f"cannot read or write {out / 'e.json'}:" in err                    # the error names the file


def test_full_disk_while_saving_a_plot_leaves_no_temp_file(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    from reasonlab.io import report
    fig = plt.figure()

    def full(self, path, **kw):
        open(path, "wb").write(b"\x89PNG half")
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(type(fig), "savefig", full)
    with pytest.raises(OSError):
        report.save(fig, str(tmp_path / "acc_vs_n.png"))
    assert os.listdir(tmp_path) == []


def test_report_only_over_a_result_of_the_wrong_shape_is_exit_2(tmp_path, capsys):
    (tmp_path / "sampling").mkdir()
    (tmp_path / "sampling" / "seed0.json").write_text('{"key": "k", "seconds": 1.0, "result": {"grid": 1}}')
    err = one_line_error(capsys, 2, main(["sampling", "--report-only", "--seeds", "0", "--out", str(tmp_path)]))
    assert "sampling/seed0.json" in err


def test_eval_json_is_strict(tmp_path, ckpt, capsys):
    path = tmp_path / "e.json"
    assert main(["eval", "--checkpoint", ckpt, "--n-test", "2", "--json", str(path)]) == 0

    def no_constants(c):
        raise AssertionError(f"non-strict JSON constant {c}")
    json.loads(path.read_text(), parse_constant=no_constants)
    assert checkpoint.strict_json({"a": [float("nan"), 1.0, float("-inf")]}) == {"a": [None, 1.0, None]}


@pytest.mark.parametrize("argv,msg", [
    (["sample", "٣ ٥ ٧"], "write it as"), (["sample", "3 ²"], "write it as"), (["sample", "3 5", "--temperature", "1e-300"], "temperature"),
    (["sample", "3 5", "--seed", str(2**70)], "--seed"), (["sample", "3 5", "--device", "cuda:0"], "cuda"),
    (["sample", "3 5", "--samples", "10000000000"], "at most"), (["pretrain", "--name", "ok\n"], "invalid model name"),
    (["train", "--prompts-per-step", "100000000"], "at most"), (["pretrain", "--batch", "100000000"], "at most"),
    (["train", "--learning-rate", "inf"], "finite"), (["eval", "--seed", "-1"], "--seed"),
    (["rl", "--steps", "100000000000"], "more than"), (["rl", "--seeds", "-1"], "--seeds"),
])
def test_hostile_values_are_one_line_and_exit_2(argv, msg, monkeypatch, capsys):
    no_training(monkeypatch)
    assert msg in one_line_error(capsys, 2, main(argv))


def test_run_stopped_is_on_its_own_line(monkeypatch, capsys, ckpt, tmp_path):
    import reasonlab.train.rl as rl
    monkeypatch.setattr(rl, "rule_reward", lambda *a: float("nan"))
    rc = main(["train", "--checkpoint", ckpt, "--steps", "3", "--prompts-per-step", "2", "--num-generations", "2",
               "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    last = err.rstrip("\n").split("\n")[-1].split("\r")[-1]
    assert rc == 1 and last.startswith("reasonlab: run stopped:") and "step 1" in last


# -- the fuzz ------------------------------------------------------------------------------------------------------

class Reached(BaseException):
    """Raised by the stubbed-out work: the arguments got past every check."""


VALUES = ["0", "1", "2", "-1", "-4", "3", "8", "64", "1e-300", "1e300", "inf", "-inf", "nan", "0.5", "1e6",
          str(2**70), "x", "", " ", "٣", "²", "3 5 9", "1,2,3", "3 5 9 2 7 1 2 3 4", "A", "S", "T", "Q", "cpu", "cuda",
          "cuda:0", "tpu", "grpo", "reinforce", "ppo", "k3", "free", "base", "rl", "ok\n", "../x", "/proc/x",
          "{file}", "{dir}", "{fifo}", "{missing}"]
FLAGS = ["--seed", "--seeds", "--n-test", "--batch", "--steps", "--prompts-per-step", "--num-generations", "--temperature",
         "--growth", "--learning-rate", "--beta", "--epsilon", "--device", "--cache-dir", "--out", "--json", "--grid", "--set",
         "--checkpoint", "--force", "--name", "--algo", "--algos", "--n-max", "--formats", "--rounds",
         "--eval-every", "--n-val", "--problems", "--samples", "--methods", "--only", "--resume", "--report-only",
         "--quick", "--force-direct", "--kl-estimator", "--problem-seed", "--workers", "--start", "--fresh"]
COMMANDS = ["lab", "pretrain", "eval", "sample", "train", "sweep", "rl", "sampling", "adaptive", "star", "bogus"]


@pytest.fixture
def stubbed(monkeypatch, tmp_path):
    """Every expensive step replaced by `Reached`, so one example takes milliseconds."""
    import importlib

    def stop(*a, **kw):
        raise Reached()
    stubs = [("train.sft", "pretrain"), ("train.zoo", "pretrain"), ("train.rl", "train"), ("runner.lab", "run"),
             ("runner.lab", "rebuild_report"), ("runner.sweep", "run"), ("core.evaluate", "eval_table"),
             ("core.sampling", "generate"), ("cli.run", "load_or_train"), ("cli.jobs", "load_or_train"),
             ("train.zoo", "get_model")]
    modules = {mod: importlib.import_module(f"reasonlab.{mod}") for mod, _ in stubs}   # all imported first: a
    for mod, name in stubs:                    # module imported after a patch would keep the stub as its own name
        monkeypatch.setattr(modules[mod], name, stop)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    os.mkfifo(tmp_path / "afifo.json")
    return {"{file}": str(tmp_path / "afile"), "{dir}": str(tmp_path / "adir"), "{fifo}": str(tmp_path / "afifo.json"),
            "{missing}": str(tmp_path / "no" / "such")}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cmd=st.sampled_from(COMMANDS),
       rest=st.lists(st.one_of(st.sampled_from(FLAGS), st.sampled_from(VALUES)), max_size=8))
def test_fuzzed_command_lines_never_show_a_traceback(stubbed, capsys, cmd, rest):
    argv = [cmd] + [stubbed.get(a, a) for a in rest]
    signal.alarm(20)                           # a FIFO read would hang: fail instead
    try:
        rc = main(argv)
    except Reached:
        rc = 0                                 # valid arguments: the work would start here
    except SystemExit as e:                    # --help / --version
        rc = e.code
    finally:
        signal.alarm(0)
    err = capsys.readouterr().err
    assert rc in (0, 2), (argv, rc, err)
    assert "Traceback" not in err and err.count("\n") <= 1, (argv, err)
