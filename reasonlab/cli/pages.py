"""The commands that train, run and draw: each writes a report page of plots and tables (`reasonlab.cli` imports
this module only for them, so that the others start without matplotlib)."""
from __future__ import annotations

import copy
import json
import os
import sys
import time
from dataclasses import asdict

from ..core.config import make
from ..core.evaluate import evaluate
from ..core.problems import PROBE_SEED, problems_per_k
from ..experiments import l1, verifiers
from ..experiments import search as search_exp
from ..io import report, tblog
from ..io.checkpoint import load_json, write_json, write_text
from ..io.report import plot_format_share, plot_rl_runs
from ..io.runs import precheck
from ..io.tblog import JsonlFollower
from ..methods import adaptive, budget, search, star, tts, verifier
from ..runner import lab, sweep
from ..runner.config import LabConfig, SweepConfig, load_toml, parse_assignments
from ..runner.executor import ExecConfig, UnitsFailed
from ..train.config import RLConfig
from ..train.rl import every_n_steps, train
from ..train.sft import base_cfg, base_name
from ..train.zoo import base_model, get_model
from .guard import UsageError, check_device
from .run import load_or_train


def cmd_budget(args):
    given = {f: getattr(args, f) for f in ("steps", "alpha", "delta", "eval_n", "sft_steps") if getattr(args, f) is not None}
    cfg = budget.BudgetConfig(variants=tuple(args.variants), out=args.out, **{**(budget.QUICK if args.quick else {}), **given})
    cfg.validate()
    check_device(args.device)
    paths = [os.path.join(args.out, f"seed{s}.json") for s in args.seeds]
    if args.replot:
        try:
            results = [load_json(p) for p in paths]       # int keys (b, k) restored, as the lab reads them
        except (OSError, ValueError) as e:
            raise UsageError(f"--replot: cannot read the results in {args.out} ({e})") from None
    else:
        results = []
        for s in args.seeds:
            base = base_model(s, args.quick, cache=args.cache_dir, device=args.device, progress=True)
            results.append(budget.run(cfg, s, base=base, progress=True))
    md, head = l1.page(results, args.out)
    write_text(os.path.join(args.out, "report.md"), md)
    write_json(os.path.join(args.out, "findings.json"), l1.findings(results))
    print(head)
    print(f"report: {os.path.join(args.out, 'report.md')}")


def cmd_rl(args):
    cfg = RLConfig.preset(args.algo, **{k: v for k, v in args.given.get("rl", {}).items() if k != "algo"},
                          seed=args.seed)
    run_dir = args.run_dir or os.path.join("runs", f"rl-{args.algo}-seed{args.seed}")
    precheck(run_dir, args.resume)   # before any work: usable, locked (a second process is refused), no clobbering
    check_report_to(args)
    print("config:", json.dumps(vars(cfg)))
    policy = load_or_train(args)
    ref = copy.deepcopy(policy) if (cfg.beta > 0 or args.log_kl) else None
    evals = []
    probs = problems_per_k(args.eval_n, seed=PROBE_SEED)

    def greedy_eval(rec, model):
        step = rec["step"]
        r = evaluate(model, probs)
        evals.append({"step": step, "acc": r["acc"], "share": r["share"], "length": r["length"],
                      "acc_by_k": {k: v["acc"] for k, v in r["per_k"].items()}})
        print(f"  eval step {step}: greedy acc {r['acc']:.3f} | A/S/T {r['share']['direct']:.2f}/"
              f"{r['share']['short']:.2f}/{r['share']['full']:.2f} | length {r['length']:.2f}")

    follow = tensorboard_follower(args, run_dir)
    greedy_eval = every_n_steps(args.eval_every, greedy_eval)

    def on_step(rec, model):
        greedy_eval(rec, model)
        if follow:
            if evals and evals[-1]["step"] == rec["step"]:
                follow.w.add_eval(rec["step"], {"accuracy": evals[-1]["acc"], "mean_length": evals[-1]["length"]})
            follow()

    t0 = time.perf_counter()
    hist = train(policy, ref, cfg, run_dir=run_dir, resume=args.resume, callback=on_step, progress=True)
    if follow:
        follow.close()
    print(f"done in {time.perf_counter() - t0:.1f}s")
    if evals:
        write_json(os.path.join(run_dir, "eval.json"), evals)
    plot_rl_runs({args.algo: [hist]}, os.path.join(run_dir, "curves.png"), f"{args.algo}, seed {args.seed}")
    plot_format_share(hist, os.path.join(run_dir, "formats.png"), f"{args.algo}, seed {args.seed}")
    print(f"wrote {run_dir}/ (config.json, metrics.jsonl, ckpt-*/state.*, curves.png, formats.png)")


def cmd_tts(args):
    formats = args.formats
    for f in formats:
        if f not in tts.FORCE:
            raise UsageError(f"unknown format {f!r}: use A, S, T or free")
    if args.n_max not in tts.NS:
        raise UsageError(f"--n-max must be one of {', '.join(map(str, tts.NS))}")
    t0 = time.perf_counter()
    if args.replot:   # re-render the table and plots of an earlier run from its results.json
        try:
            res = load_json(os.path.join(args.out, "results.json"))
        except (OSError, ValueError) as e:
            raise UsageError(f"--replot: cannot read {args.out}/results.json ({e})") from None
    else:
        model = load_or_train(args)
        print(f"test-time compute: {args.n_per_k} problems per k, N up to {args.n_max}, formats {' '.join(formats)}")
        res = tts.run(model, n_per_k=args.n_per_k, n_max=args.n_max, formats=tuple(formats), seed=args.seed,
                      budgets=not args.no_budgets)
        os.makedirs(args.out, exist_ok=True)
        write_json(os.path.join(args.out, "results.json"), res)
    write_page(args.out, "reasonlab tts", ["budgets", "sampling"] if "budgets" in res else ["sampling"], [res])
    print(f"grid {res['timing']['grid']:.1f}s, total {time.perf_counter() - t0:.1f}s; wrote {args.out}/report.md")


def cmd_adaptive(args):
    args.methods = args.methods or list(adaptive.METHODS)
    for m in args.methods:
        if m not in adaptive.METHODS:
            raise UsageError(f"unknown method {m!r}: choose from {', '.join(adaptive.METHODS)}")
    if args.replot:   # redraw the report of an earlier run from its per-seed results
        write_page(args.out, "reasonlab adaptive", ["adaptive"], load_seeds(args.out, args.seeds))
        return
    device = check_device(args.device)
    rs = []
    t0 = time.perf_counter()
    for seed in args.seeds:    # per seed: the lab's adaptive result (methods, fixed formats, TTS points: one set)
        base = base_model(seed, cache=args.cache_dir, device=device, progress=True)
        ref_acc = adaptive.reference_accuracy(base)
        runs = []
        for m in args.methods:
            r = adaptive.run_method(base, m, seed, steps=args.steps, lr=args.lr, n_eval=args.n_eval, ref_acc=ref_acc,
                                    beta=args.beta)
            runs.append(r)
            a_share = " ".join(f"{v['direct']:.2f}" for v in r["share_by_k"].values())
            print(f"  seed {seed} {m:<11} acc {r['acc']:.3f} tokens {r['tokens']:.2f} A-share by k {a_share} "
                  f"({r['seconds']:.0f}s)", flush=True)
        rs.append({"runs": runs, "fixed": adaptive.fixed_points([base], args.n_eval),
                   "tts": adaptive.tts_points(base, args.n_eval)})
        write_json(os.path.join(args.out, f"seed{seed}.json"), {"config": {k: getattr(args, k) for k in (
            "steps", "lr", "beta", "n_eval", "methods")}, "result": rs[-1]})
    write_page(args.out, "reasonlab adaptive", ["adaptive"], rs)
    print(f"done in {time.perf_counter() - t0:.0f}s; wrote {args.out}/report.md")


def load_seeds(out: str, seeds) -> list[dict]:
    """The per-seed results a command wrote (<out>/seed<s>.json), for --replot."""
    try:
        return [load_json(os.path.join(out, f"seed{s}.json"))["result"] for s in seeds]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UsageError(f"--replot: cannot read the per-seed results in {out} ({e})") from None


def write_page(out: str, title: str, exps: list[str], rs: list[dict]) -> None:
    """A command's report: its experiments' sections, rendered by the lab's protocol (lab.render), as
    <out>/report.md and a self-contained report.html; the headlines go to the console."""
    secs = [sec for exp in exps for sec in lab.render(exp, rs, out)]
    report.write_report(out, f"# {title}\n\n" + "\n".join(md for md, _ in secs), title)
    for md, head in secs:
        print(f"{md.splitlines()[0][3:]}: {head}")


def cmd_star(args):
    device = check_device(args.device)
    few = args.start == "few-chains"
    user = args.given.get("star", {})
    variants = {"main": {}}
    if args.ablations and few:     # where chains can be wrong: the filter and the hint matter
        variants.update({"think": {"force": "T"}, "think+chain-filter": {"force": "T", "filter": "chain"},
                         "think+rationalize": {"force": "T", "rationalize": True},
                         "think+rationalize+chain-filter": {"force": "T", "rationalize": True, "filter": "chain"}})
    elif args.ablations:
        variants.update({"star-greedy-1": {"samples": 1, "temperature": 0.0}, "chain-filter": {"filter": "chain"},
                         "continue": {"restart": False}, "pool": {"pool": True}})
    runs: dict[str, list] = {}
    t0 = time.perf_counter()
    for vname, over in variants.items():
        for seed in args.seeds:
            name, bcfg = ((f"few-chains-seed{seed}-n{args.n_chains}", star.few_chains_cfg(seed, args.n_chains)) if few
                          else (base_name(seed), base_cfg(seed)))
            base = get_model(name, bcfg, cache=args.cache_dir, device=device, progress=True)
            kw = {"mix": (1.0, 0.0, 0.0)} if few else {}   # few chains: no worked chains in the fresh rows either
            cfg = star.StarConfig(**{**kw, **user, **over, "seed": seed})
            cfg.validate()
            print(f"{vname}, seed {seed}: {json.dumps(vars(cfg))}")
            runs.setdefault(vname, []).append(star.run(base, name, cfg, cache=args.cache_dir))
            os.makedirs(args.out, exist_ok=True)
            write_json(os.path.join(args.out, "runs.json"), runs)     # after every run: a crash loses one run
    # per seed: {variant: rounds}, the lab's STaR result
    write_page(args.out, "reasonlab star", ["star"], [{v: runs[v][i] for v in runs} for i in range(len(args.seeds))])
    print(f"done in {time.perf_counter() - t0:.0f}s; wrote {args.out}/report.md")


def cmd_verifier(args):
    """`reasonlab verifier train`: train and measure learned verifiers, plots and table in --out."""
    cfg = verifier.VerifierExpConfig(kinds=tuple(dict.fromkeys(args.kind)), thinker=args.thinker, out=args.out,
                                     cache=args.cache_dir, n_test_per_k=args.n_test)
    check_device(args.device)
    results = [verifier.run(cfg, seed) for seed in args.seeds]
    md = verifiers.page(results, args.out)
    write_text(os.path.join(args.out, "section.md"), md)
    print(md)


def cmd_search(args):
    """`reasonlab search`: best-of-N, weighted majority, beam search, DVTS with learned verifiers and the oracle."""
    cfg = search.SearchConfig(thinker=args.thinker, force=args.force, n_val=args.n_val, n_test=args.n_test,
                              n_max=args.n_max, width=args.width, agg=args.agg, methods=tuple(args.method),
                              verifiers=tuple(args.verifiers), search_verifiers=tuple(args.search_verifiers),
                              temperature=args.temperature)
    cfg.validate()                                   # bad input stops here, before any model is loaded
    device = check_device(args.device)
    if args.replot:
        try:
            results = []
            for seed in args.seeds:
                with open(os.path.join(args.out, f"seed{seed}.json")) as f:
                    results.append(json.load(f))
        except (OSError, ValueError) as e:
            raise UsageError(f"--replot: cannot read the results in {args.out} ({e})") from None
    else:
        results = [search.run(cfg, seed, out=args.out, cache=args.cache_dir, device=device) for seed in args.seeds]
    print(search_exp.page(results, args.out))
    print(f"wrote {args.out}/ (seed*.json, findings.json, section.md, acc_vs_n.png, acc_vs_compute.png, tokens.png)")


def cmd_lab(args):
    user = args.given.get("lab", {})
    quick = user.get("quick", False)
    execution = {"workers": os.cpu_count() or 1, **user.get("execution", {})}   # the command line uses every CPU
    cfg = make(LabConfig, {"seeds": (0,) if quick else LabConfig.seeds, "out": "runs/lab-quick" if quick else "runs/lab",
                           **user, "execution": execution}, device=check_device(args.device))
    cfg.validate()
    if args.screenshot and cfg.pack:
        raise UsageError("--screenshot needs report.html, which --pack does not write")
    if args.report_only:
        paths = lab.rebuild_report(cfg)
    else:
        print("config:", json.dumps(asdict(cfg)))
        run_or_exit_1(lambda: lab.run(cfg))
        paths = {"html": os.path.join(cfg.out, "report.html")}
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


def check_report_to(args) -> None:
    tblog.check(args.report_to)


def tensorboard_follower(args, run_dir: str):
    if args.report_to != "tensorboard":
        return None
    return JsonlFollower(run_dir, os.path.join(run_dir, "tensorboard"))


def run_or_exit_1(fn):
    """Run the lab or a sweep; units that failed after their retries end the command with one line and exit 1."""
    try:
        return fn()
    except UnitsFailed as e:
        print(f"reasonlab: {e}", file=sys.stderr)
        raise SystemExit(1) from None


def cmd_sweep(args):
    spec = load_toml(args.config) if args.config else {"grid": {}, "fixed": {}}
    spec["grid"].update(parse_assignments(args.grid, many=True))
    spec["fixed"].update(parse_assignments(args.set, many=False))
    if not spec["grid"] and not spec["fixed"]:
        raise UsageError("an empty sweep: give --config grid.toml or --grid key=v1,v2 (e.g. --grid beta=0,0.04)")
    cfg = SweepConfig(grid=spec["grid"], fixed=spec["fixed"],
                      seeds=tuple(args.seeds if args.seeds is not None else spec.get("seeds", (0, 1, 2))),
                      base=args.base or spec.get("base", "standard"), eval_n=args.eval_n or spec.get("eval_n", 200),
                      out=args.out, cache_dir=args.cache_dir, device=check_device(args.device), fresh=args.fresh,
                      report_to=args.report_to, execution=make(ExecConfig, args.given.get("execution", {})),
                      wait=args.wait, max_units=args.max_units)
    cfg.validate()     # every cell's config, before any training
    summary = sweep.run(cfg)
    print(sweep.table(summary))
    if summary["failed"]:
        print(f"reasonlab: {len(summary['failed'])} unit(s) failed after retries: see {cfg.out}/table.md", file=sys.stderr)
        raise SystemExit(1)
