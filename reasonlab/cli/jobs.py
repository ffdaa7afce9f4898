"""The commands that run jobs and draw their reports: the lab, each experiment (the lab on one experiment, with its
Config from the flags), sweeps and one RL run (`reasonlab.cli` imports this module only for them, so that the
others start without matplotlib)."""
from __future__ import annotations

import copy
import json
import os
import sys
import time
from dataclasses import asdict

from .. import experiments as X
from ..core.config import make
from ..core.evaluate import evaluate
from ..core.problems import PROBE_SEED, problems_per_k
from ..io import report, tblog
from ..io.checkpoint import save_model, write_json
from ..io.report import plot_format_share, plot_rl_runs
from ..io.runs import precheck
from ..io.tblog import JsonlFollower
from ..runner import lab, readme, sweep
from ..runner.config import LabConfig, SweepConfig, load_toml, parse_assignments
from ..runner.executor import ExecConfig, UnitsFailed
from ..stats.findings import verdict_line
from ..train.config import RLConfig
from ..train.rl import every_n_steps, train
from .guard import UsageError, check_device
from .run import load_or_train


def lab_config(user: dict, device: str, **fixed) -> LabConfig:
    """The lab's config from the user's flags: on the command line every CPU works (a pool of one-thread workers)
    and --quick writes to runs/lab-quick."""
    quick = user.get("quick", False)
    execution = {"workers": os.cpu_count() or 1, **user.get("execution", {})}
    cfg = make(LabConfig, {"seeds": (0,) if quick else LabConfig.seeds, "out": "runs/lab-quick" if quick else "runs/lab",
                           **user, "execution": execution, **fixed}, device=check_device(device))
    cfg.validate()
    return cfg


def cmd_lab(args):
    cfg = lab_config(args.given.get("lab", {}), args.device)
    if args.screenshot and cfg.pack:
        raise UsageError("--screenshot needs report.html, which --pack does not write")
    paths = run_lab(cfg, args.report_only)
    if args.screenshot:
        png = os.path.join(cfg.out, "report.png")
        try:
            report.screenshot(paths["html"], png)
        except (OSError, RuntimeError) as e:
            raise UsageError(f"--screenshot: {e}") from None
        check = report.check_screenshot(png)
        print(f"screenshot {png}: {json.dumps(check)}")
        if not check["ok"]:
            raise UsageError(f"the report's screenshot looks wrong: {json.dumps(check)}")


def cmd_experiment(args):
    """`reasonlab <experiment>`: the lab on that experiment alone, its Config from the flags; the results are the
    lab's (<out>/<experiment>/seed<s>.json) and the report is the lab's, rebuilt."""
    cfg = lab_config(args.given.get("lab", {}), args.device, only=(args.exp,), configs={args.exp: args.config})
    run_lab(cfg, args.report_only)
    fs = [f for f in readme.load(cfg.out) if f["experiment"] == args.exp]    # the findings the report just wrote
    print("\n".join(verdict_line(f) for f in fs))


def run_lab(cfg: LabConfig, report_only: bool) -> dict:
    if report_only:
        return lab.rebuild_report(cfg)
    print("config:", json.dumps(asdict(cfg), default=str))
    run_or_exit_1(lambda: lab.run(cfg))
    return {"html": os.path.join(cfg.out, "report.html"), "md": os.path.join(cfg.out, "report.md")}


def run_or_exit_1(fn):
    """Run the lab or a sweep; units that failed after their retries end the command with one line and exit 1."""
    try:
        return fn()
    except UnitsFailed as e:
        print(f"reasonlab: {e}", file=sys.stderr)
        raise SystemExit(1) from None


def sweep_config(args) -> SweepConfig:
    X.load_plugins(args.experiment)          # a sweep of an idea in a file: its Config types the grid
    spec = load_toml(args.config, args.name) if args.config else {"grid": {}, "fixed": {}}
    spec["grid"].update(parse_assignments(args.name, args.grid, many=True))
    spec["fixed"].update(parse_assignments(args.name, args.set, many=False))
    user = args.given.get("sweep", {})
    cfg = make(SweepConfig, {**{k: v for k, v in spec.items() if k in ("seeds", "quick")}, **user, "exp": args.name,
                             "grid": spec["grid"], "fixed": spec["fixed"],
                             "execution": make(ExecConfig, user.get("execution", {}))},
               device=check_device(args.device))
    cfg.validate()       # every cell's config, before any work
    return cfg


def cmd_sweep(args):
    cfg = sweep_config(args)
    summary = run_or_exit_1(lambda: sweep.run(cfg, report_only=args.report_only))
    print(sweep.table(summary))
    if summary["failed"]:
        print(f"reasonlab: {len(summary['failed'])} unit(s) failed after retries: see {cfg.run_dir}/report.md",
              file=sys.stderr)
        raise SystemExit(1)


def cmd_train(args):
    """`reasonlab train`: one RL run in a run directory that resumes, its curves and format shares drawn."""
    cfg = RLConfig.preset(args.algo, **{k: v for k, v in args.given.get("rl", {}).items() if k not in ("algo", "task")},
                          seed=args.seed, task=args.task)      # --task, or the checkpoint's (preflight)
    run_dir = args.out or os.path.join("runs", f"train-{args.algo}-seed{args.seed}")
    precheck(run_dir, args.resume)   # before any work: usable, locked (a second process is refused), no clobbering
    tblog.check(args.report_to)
    print("config:", json.dumps(vars(cfg)))
    policy = load_or_train(args)
    ref = copy.deepcopy(policy) if (cfg.beta > 0 or args.log_kl) else None
    evals: list[dict] = []
    follow = JsonlFollower(run_dir, os.path.join(run_dir, "tensorboard")) if args.report_to == "tensorboard" else None
    on_step = step_hook(args, evals, follow)
    t0 = time.perf_counter()
    hist = train(policy, ref, cfg, run_dir=run_dir, resume=args.resume, callback=on_step, progress=True)
    if follow:
        follow.close()
    print(f"done in {time.perf_counter() - t0:.1f}s")
    save_model(os.path.join(run_dir, "model"), policy, {"task": cfg.task, "algo": args.algo, "seed": args.seed,
                                                        "steps": len(hist)})
    final = greedy_eval_on_val(args, policy, {"step": len(hist)})
    write_json(os.path.join(run_dir, "eval.json"), evals + [dict(final, final=True)])
    plot_rl_runs({args.algo: [hist]}, os.path.join(run_dir, "curves.png"), f"{args.algo}, seed {args.seed}")
    plot_format_share(hist, os.path.join(run_dir, "formats.png"), f"{args.algo}, seed {args.seed}")
    print(f"wrote {run_dir}/ (model.safetensors + model.json: the trained policy, for --checkpoint {run_dir}/model; "
          f"config.json, metrics.jsonl, eval.json, ckpt-*/state.* to resume, curves.png, formats.png)")


def greedy_eval_on_val(args, model, rec: dict, label: str = "final") -> dict:
    """Greedy accuracy, format shares and length on --n-val problems per k of the validation part (the task's probe
    draw, as the rl experiment probes), printed."""
    r = evaluate(model, problems_per_k(args.n_val, seed=PROBE_SEED, split="val", task=args.task))
    out = {"step": rec["step"], "acc": r["acc"], "share": r["share"], "length": r["length"],
           "acc_by_k": {k: v["acc"] for k, v in r["per_k"].items()}}
    print(f"  {label} step {rec['step']}: greedy acc {r['acc']:.3f} on validation problems | A/S/T "
          f"{r['share']['direct']:.2f}/{r['share']['short']:.2f}/{r['share']['full']:.2f} | length {r['length']:.2f}")
    return out


def step_hook(args, evals: list[dict], follow):
    """After each step: a greedy evaluation every --eval-every steps (greedy_eval_on_val), and the TensorBoard files
    kept up."""
    greedy_eval = every_n_steps(args.eval_every, lambda rec, model: evals.append(
        greedy_eval_on_val(args, model, rec, "eval")))

    def on_step(rec, model):
        greedy_eval(rec, model)
        if follow:
            if evals and evals[-1]["step"] == rec["step"]:
                follow.w.add_eval(rec["step"], {"accuracy": evals[-1]["acc"], "mean_length": evals[-1]["length"]})
            follow()
    return on_step
