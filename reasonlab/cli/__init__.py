"""The `reasonlab` command line. Bad input gets one line on stderr and exit code 2."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

from .. import __version__
from ..core.config import add_flags, overrides
from .guard import UsageError, check_device, parse_digits


class Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse prints usage + message; we want one line
        raise UsageError(message)


def positive(kind=int):
    def f(s):
        try:
            v = kind(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a positive number, got {s!r}") from None
        if not v > 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {s}")
        return v
    return f


def nonneg_float(s):
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {s!r}") from None
    if not v >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {s}")
    return v


def add_common(p: argparse.ArgumentParser):
    p.add_argument("--cache-dir", default=None, help="model cache (default $REASONLAB_CACHE or ~/.cache/reasonlab)")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")


def add_model_choice(p: argparse.ArgumentParser):
    p.add_argument("--checkpoint", default=None, help="a saved model (stem, .json or .safetensors); default: the cached base model")
    p.add_argument("--seed", type=int, default=0, help="seed of the base model to use (and of sampling)")


def pretrain_cfg(args) -> dict:
    """`reasonlab pretrain`'s recipe: the base (or spec) recipe with the flags' overrides."""
    from ..train.sft import base_cfg
    cfg = base_cfg(args.seed, recipe=args.recipe)
    if args.lr is not None:
        cfg["lr"] = args.lr
    if args.batch is not None:
        cfg["batch"] = args.batch
    if args.steps:
        if len(args.steps) != len(cfg["phases"]):
            raise UsageError(f"--steps takes one number per phase ({len(cfg['phases'])} phases), got {len(args.steps)}")
        for ph, n in zip(cfg["phases"], args.steps):
            ph[1], ph[2] = n, min(ph[2], n)
    return cfg


def load_or_train(args, log=print):
    from ..io.checkpoint import CheckpointError, load_model, resolve
    from ..train.zoo import base_model
    device = check_device(args.device)
    if args.checkpoint:
        try:
            model, _ = load_model(resolve(args.checkpoint))
        except CheckpointError as e:
            raise UsageError(str(e)) from None
        return model.to(device)
    return base_model(args.seed, cache=args.cache_dir, device=device, log=log, progress=True)


def cmd_pretrain(args):
    from ..io.checkpoint import fingerprint
    from ..train.zoo import get_model
    from ..core.evaluate import eval_table, format_table
    from ..train.sft import base_name
    cfg = pretrain_cfg(args)
    print("config:", json.dumps(cfg))
    name = args.name or (base_name(args.seed) if args.recipe == "base" and not (args.steps or args.lr or args.batch)
                         else f"{args.recipe}-seed{args.seed}-{fingerprint(cfg)[:8]}")
    t0 = time.perf_counter()
    model = get_model(name, cfg, quick=args.quick, cache=args.cache_dir, device=check_device(args.device), progress=True)
    print(f"model ready in {time.perf_counter() - t0:.1f}s ({sum(p.numel() for p in model.parameters()):,} parameters)")
    table = eval_table(model, args.n)
    print(format_table(table))


def cmd_eval(args):
    from ..core.evaluate import eval_table, format_table
    model = load_or_train(args)
    table = eval_table(model, args.n, seed=args.problem_seed)
    print(format_table(table))
    if args.json:
        from ..io.checkpoint import write_json
        from ..io.checkpoint import strict_json   # NaN (no S/T answer to check) becomes null: strict JSON
        write_json(args.json, strict_json({c: {k: v for k, v in t.items() if k not in ("results", "outputs")}
                                           for c, t in table.items()}))


def cmd_sample(args):
    from ..core.sampling import generate
    from ..core.task import FORMATS, VOCAB, check_chain, format_name, parse, prompt_ids, solution
    digits = parse_digits(args.problem)
    force = None if args.force is None else [FORMATS[format_name(args.force)]]
    if args.budget is not None and not args.checkpoint:   # the base models have no budget tokens: say so at once
        raise UsageError("--budget needs a budget model: pass --checkpoint runs/budget/model-max-sft-seed0 (from `reasonlab budget`)")
    model = load_or_train(args, log=lambda s: print(s, file=sys.stderr))
    budget_model_check(model, args.budget)
    gen = torch.Generator(device=next(model.parameters()).device).manual_seed(args.seed)
    outs = generate(model, [prompt_ids(digits)] * args.n, gen, args.temperature, force, budget=args.budget)
    truth = sum(digits) % 10
    print(f"problem {' '.join(map(str, digits))}  (answer {truth})")
    for o in outs:
        p = parse(o)
        text = " ".join(VOCAB[i] for i in o)
        chain = check_chain(digits, p)
        steps = ""
        if p["fmt"] in ("short", "full"):
            want = [int(w) for w in solution(digits, p["fmt"])[1:-3]]
            steps = " chain " + " ".join(f"{c}{'✓' if i < len(want) and c == want[i] else '✗'}" for i, c in enumerate(p["chain"]))
        verdict = "right" if p["answer"] == truth else "wrong"
        print(f"= {text:<30} format {p['fmt'] or '?':<6} answer {p['answer']} {verdict}{steps}"
              + ("" if chain is None else f" | chain checks: {chain}"))


# ---- thinking on a budget (budget.py) ----
def budget_model_check(model, budget) -> None:
    from ..core.task import BUDGET_VOCAB
    if budget is not None and model.cfg.vocab_size < len(BUDGET_VOCAB):
        raise UsageError("--budget needs a budget model; this one has no budget tokens (train one with `reasonlab budget`)")


def cmd_budget(args):
    from ..experiments import l1
    from ..io.checkpoint import load_json, write_json, write_text
    from ..methods import budget
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
        from ..train.zoo import base_model
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
    import copy

    from ..core.evaluate import PROBE_SEED, evaluate, problems_per_k
    from ..io.report import plot_format_share, plot_rl_runs
    from ..train.rl import RLConfig, every_n_steps, train
    cfg = RLConfig.preset(args.algo, seed=args.seed, **overrides(args, args.config_fields))
    run_dir = args.run_dir or os.path.join("runs", f"rl-{args.algo}-seed{args.seed}")
    from ..io.runs import precheck
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
        from ..io.checkpoint import write_json
        write_json(os.path.join(run_dir, "eval.json"), evals)
    plot_rl_runs({args.algo: [hist]}, os.path.join(run_dir, "curves.png"), f"{args.algo}, seed {args.seed}")
    plot_format_share(hist, os.path.join(run_dir, "formats.png"), f"{args.algo}, seed {args.seed}")
    print(f"wrote {run_dir}/ (config.json, metrics.jsonl, ckpt-*/state.*, curves.png, formats.png)")


def cmd_tts(args):
    from ..methods import tts
    from ..io.checkpoint import write_json
    from ..io.checkpoint import load_json
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
    from ..methods import adaptive
    from ..io.checkpoint import write_json
    from ..train.zoo import base_model
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
    from ..io.checkpoint import load_json
    try:
        return [load_json(os.path.join(out, f"seed{s}.json"))["result"] for s in seeds]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UsageError(f"--replot: cannot read the per-seed results in {out} ({e})") from None


def write_page(out: str, title: str, exps: list[str], rs: list[dict]) -> None:
    """A command's report: its experiments' sections, rendered by the lab's protocol (lab.render), as
    <out>/report.md and a self-contained report.html; the headlines go to the console."""
    from ..io import report
    from ..runner import lab
    secs = [sec for exp in exps for sec in lab.render(exp, rs, out)]
    report.write_report(out, f"# {title}\n\n" + "\n".join(md for md, _ in secs), title)
    for md, head in secs:
        print(f"{md.splitlines()[0][3:]}: {head}")


def cmd_star(args):
    from ..methods import star
    from ..io.checkpoint import write_json
    from ..train.zoo import get_model
    from ..train.sft import base_cfg, base_name
    device = check_device(args.device)
    few = args.start == "few-chains"
    user = overrides(args, args.config_fields)
    star.StarConfig(**user).validate()                 # bad values fail before any model is trained
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
    from ..experiments import verifiers
    from ..io.checkpoint import write_text
    from ..methods import verifier
    cfg = verifier.VerifierExpConfig(kinds=tuple(dict.fromkeys(args.kind)), thinker=args.thinker, out=args.out,
                                     cache=args.cache_dir, n_test_per_k=args.n_test)
    check_device(args.device)
    results = [verifier.run(cfg, seed) for seed in args.seeds]
    md = verifiers.page(results, args.out)
    write_text(os.path.join(args.out, "section.md"), md)
    print(md)


def cmd_search(args):
    """`reasonlab search`: best-of-N, weighted majority, beam search, DVTS with learned verifiers and the oracle."""
    from ..experiments import search as search_exp
    from ..methods import search
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


def cmd_findings(args):
    from ..runner import readme
    try:
        if args.action == "diff":
            moved = readme.diff(args.a, args.b)
            print("\n".join(moved) if moved else "no verdict moved")
        elif readme.sync(args.readme, args.findings, check=args.check):
            print(f"{args.readme}: the findings block is up to date")
        elif args.check:
            print(f"reasonlab: {args.readme}'s findings block differs from {args.findings}: run `make results`",
                  file=sys.stderr)
            raise SystemExit(1)
        else:
            print(f"{args.readme}: findings block written from {args.findings}")
    except (OSError, ValueError) as e:
        raise UsageError(" ".join(str(e).split())) from None


def cmd_lab(args):
    from dataclasses import asdict

    from ..io import report
    from ..runner import lab
    user = overrides(args, args.config_fields)
    quick = user.get("quick", False)
    cfg = lab.LabConfig(**{"seeds": (0,) if quick else (0, 1, 2), "out": "runs/lab-quick" if quick else "runs/lab",
                           **user}, cache=args.cache_dir, device=check_device(args.device),
                        execution=exec_config(args), report_to=args.report_to)
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


# ---------------------------------------------------------------------------------------------------------------
# Scale-out: executors (--executor, --workers, --ray-address, --retries), --report-to, and `reasonlab sweep`.

def add_scale_out(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("scale-out")
    g.add_argument("--executor", choices=["local", "ray"], default="local",
                   help="local: this process or a process pool (--workers); ray: Ray tasks (needs reasonlab[ray])")
    g.add_argument("--workers", type=positive(), default=1,
                   help="local: processes (1 = this process, one torch thread each otherwise); ray: CPUs of a local "
                        "Ray instance (default: all)")
    g.add_argument("--ray-address", default=None, help="join a running Ray cluster (auto, or ray://host:10001)")
    g.add_argument("--retries", type=int, default=1, help="extra attempts for a unit that raised or whose worker died")
    add_report_to(p)


def add_report_to(p: argparse.ArgumentParser) -> None:
    p.add_argument("--report-to", choices=["none", "tensorboard"], default="none",
                   help="tensorboard: event files per RL run (view with tensorboard --logdir <dir>)")


def exec_config(args):
    from ..runner.executor import ExecConfig
    ex = ExecConfig(executor=args.executor, workers=args.workers, ray_address=args.ray_address, retries=args.retries)
    ex.validate()
    return ex


def check_report_to(args) -> None:
    from ..io import tblog
    tblog.check(args.report_to)


def tensorboard_follower(args, run_dir: str):
    if args.report_to != "tensorboard":
        return None
    from ..io.tblog import JsonlFollower
    return JsonlFollower(run_dir, os.path.join(run_dir, "tensorboard"))


def run_or_exit_1(fn):
    """Run the lab or a sweep; units that failed after their retries end the command with one line and exit 1."""
    from ..runner.executor import UnitsFailed
    try:
        return fn()
    except UnitsFailed as e:
        print(f"reasonlab: {e}", file=sys.stderr)
        raise SystemExit(1) from None


def cmd_sweep(args):
    from ..runner import sweep
    spec = sweep.load_toml(args.config) if args.config else {"grid": {}, "fixed": {}}
    spec["grid"].update(sweep.parse_assignments(args.grid, many=True))
    spec["fixed"].update(sweep.parse_assignments(args.set, many=False))
    if not spec["grid"] and not spec["fixed"]:
        raise UsageError("an empty sweep: give --config grid.toml or --grid key=v1,v2 (e.g. --grid beta=0,0.04)")
    cfg = sweep.SweepConfig(grid=spec["grid"], fixed=spec["fixed"],
                            seeds=tuple(args.seeds if args.seeds is not None else spec.get("seeds", (0, 1, 2))),
                            base=args.base or spec.get("base", "standard"), eval_n=args.eval_n or spec.get("eval_n", 200),
                            out=args.out, cache=args.cache_dir, device=check_device(args.device), fresh=args.fresh,
                            report_to=args.report_to, execution=exec_config(args))
    cfg.validate()     # every cell's config, before any training
    summary = sweep.run(cfg)
    print(sweep.table(summary))
    if summary["failed"]:
        print(f"reasonlab: {len(summary['failed'])} unit(s) failed after retries: see {cfg.out}/table.md", file=sys.stderr)
        raise SystemExit(1)


def add_sweep_parser(sub) -> None:
    p = sub.add_parser("sweep", help="a grid over RL settings, adaptive methods and seeds, on an executor")
    add_common(p)
    p.add_argument("--config", default=None, help="a TOML grid (sections [grid] and [set]; seeds, base, eval_n)")
    p.add_argument("--grid", nargs="+", action="extend", default=[], metavar="KEY=V1,V2",
                   help="grid axes: RLConfig fields, algo, method (adaptive methods)")
    p.add_argument("--set", nargs="+", action="extend", default=[], metavar="KEY=V", help="fields fixed in every cell, e.g. steps=60")
    p.add_argument("--seeds", type=int, nargs="+", default=None, help="default 0 1 2")
    p.add_argument("--base", choices=["standard", "quick", "tiny"], default=None,
                   help="base model recipe (default standard; tiny: for smoke tests)")
    p.add_argument("--eval-n", type=positive(), default=None, help="greedy evaluation problems per k (default 200)")
    p.add_argument("--out", default="runs/sweep")
    p.add_argument("--fresh", action="store_true", help="rerun units that finished earlier with the same settings")
    add_scale_out(p)
    p.set_defaults(fn=cmd_sweep)


def build_parser() -> Parser:
    from ..methods import star
    from ..runner import lab
    ap = Parser(prog="reasonlab", description="A laptop-scale lab for reasoning models.")
    ap.add_argument("--version", action="version", version=f"reasonlab {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=Parser)

    p = sub.add_parser("lab", help="the main job: every experiment of the lecture, one run directory, report.html")
    add_common(p)
    # the LabConfig fields are flags (quick: seeds 0 and out runs/lab-quick unless given)
    p.set_defaults(config_fields=add_flags(p, lab.LabConfig, skip={"cache", "device", "configs", "execution", "report_to"}))
    p.add_argument("--report-only", action="store_true", help="only rebuild the report from finished experiments")
    p.add_argument("--screenshot", action="store_true", help="render report.html in headless Chromium to report.png and check it")
    add_scale_out(p)
    p.set_defaults(fn=cmd_lab)
    add_sweep_parser(sub)

    p = sub.add_parser("pretrain", help="train (or load) the base model and print its evaluation table")
    add_common(p)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--recipe", choices=["base", "spec"], default="base", help="our recipe (default) or the spec's")
    p.add_argument("--steps", type=positive(), nargs="+", default=None, help="steps per phase (a gated phase: the most)")
    p.add_argument("--lr", type=positive(float), default=None)
    p.add_argument("--batch", type=positive(), default=None)
    p.add_argument("--name", default=None, help="cache name (default base-seed<seed>)")
    p.add_argument("--quick", action="store_true", help="30 steps per phase, no cache (a smoke test)")
    p.add_argument("-n", type=positive(), default=500, help="evaluation problems per k")
    p.set_defaults(fn=cmd_pretrain)

    p = sub.add_parser("eval", help="accuracy per k x {free, A, S, T}, format shares, length, chain correctness")
    add_common(p)
    add_model_choice(p)
    p.add_argument("-n", type=positive(), default=500, help="problems per k")
    p.add_argument("--problem-seed", type=int, default=12345)
    p.add_argument("--json", default=None, help="also write the summary to this JSON file")
    p.set_defaults(fn=cmd_eval)

    p = sub.add_parser("sample", help="show the model's output on one problem")
    add_common(p)
    add_model_choice(p)
    p.add_argument("problem", help='the digits, e.g. "3 5 9 2 7"')
    p.add_argument("--force", default=None, help="force a format: A, S or T")
    p.add_argument("--temperature", type=nonneg_float, default=0.0, help="0 = greedy")
    p.add_argument("-n", type=positive(), default=1, help="number of samples")
    p.add_argument("--budget", type=int, choices=range(0, 9), default=None, metavar="B",
                   help="chain steps allowed, 0..8 (needs a budget model from `reasonlab budget`)")
    p.set_defaults(fn=cmd_sample)

    p = sub.add_parser("budget", help="thinking on a budget: L1-Exact / L1-Max by GRPO against s1 forcing")
    add_common(p)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--variants", nargs="+", default=["exact", "max", "exact+sft", "max+sft"],
                   help="exact, max, exact+sft, max+sft (+sft: a supervised warm start first)")
    p.add_argument("--steps", type=positive(), default=None, help="GRPO steps per variant (default 100)")
    p.add_argument("--sft-steps", type=int, default=None, help="warm-start steps of +sft variants (default 300)")
    p.add_argument("--alpha", type=positive(float), default=None, help="L1's length weight per step (default 0.25)")
    p.add_argument("--delta", type=nonneg_float, default=None, help="L1-Max's offset (default 0.5)")
    p.add_argument("--eval-n", type=positive(), default=None, help="test problems per k (default 100)")
    p.add_argument("--quick", action="store_true", help="tiny sizes and the lab's quick base model (checks the pipeline)")
    p.add_argument("--replot", action="store_true", help="only redraw the report from --out/seed*.json")
    p.add_argument("--out", default="runs/budget")
    p.set_defaults(fn=cmd_budget)

    from ..train.rl import ALGOS, RLConfig
    p = sub.add_parser("rl", help="RL from the base model: GRPO and its relatives (one run directory per run)")
    add_common(p)
    add_model_choice(p)
    p.add_argument("--algo", choices=ALGOS, default="grpo", help="the preset; the flags below override its fields")
    # every RLConfig field is a flag, its help the field's docstring (one source of truth: reasonlab/rl.py)
    p.set_defaults(config_fields=add_flags(p, RLConfig, skip={"algo", "seed"}, aliases={"learning_rate": ["--lr"]}))
    p.add_argument("--run-dir", default=None, help="default runs/rl-<algo>-seed<seed>")
    p.add_argument("--resume", action="store_true", help="continue the run in --run-dir from its checkpoint")
    p.add_argument("--eval-every", type=int, default=0, help="greedy evaluation every N steps (0: never)")
    p.add_argument("--eval-n", type=positive(), default=200, help="problems per k for --eval-every")
    p.add_argument("--log-kl", action="store_true", help="log KL to the base even when beta = 0")
    add_report_to(p)
    p.set_defaults(fn=cmd_rl)

    p = sub.add_parser("tts", help="test-time compute: budgets, voting, verifiers, pass@N, the compute frontier")
    add_common(p)
    add_model_choice(p)
    p.add_argument("--n-per-k", type=positive(), default=2000, help="problems per k")
    p.add_argument("--n-max", type=positive(), default=64, help="samples per problem in the pool (1, 2, 4, ..., 64)")
    p.add_argument("--formats", nargs="+", default=["A", "S", "T"], help="A S T free")
    p.add_argument("--no-budgets", action="store_true", help="skip the budget-forcing sweep")
    p.add_argument("--replot", action="store_true", help="only redraw the report from --out/results.json")
    p.add_argument("--out", default="runs/tts")
    p.set_defaults(fn=cmd_tts)

    p = sub.add_parser("adaptive", help="RL with length/cost-aware rewards: when does the model choose to think?")
    add_common(p)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--methods", nargs="+", default=None, help="default: every method in adaptive.METHODS")
    p.add_argument("--steps", type=positive(), default=200)
    p.add_argument("--lr", type=positive(float), default=1e-4)
    p.add_argument("--beta", type=nonneg_float, default=0.04, help="KL weight to the base model (0: none)")
    p.add_argument("--n-eval", type=positive(), default=300, help="greedy evaluation problems per k")
    p.add_argument("--out", default="runs/adaptive")
    p.add_argument("--replot", action="store_true", help="only redraw the report from --out/seed<s>.json")
    p.set_defaults(fn=cmd_adaptive)

    p = sub.add_parser("star", help="STaR self-improvement: sample, verify, fine-tune, round after round")
    add_common(p)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    # every StarConfig field is a flag, its help the field's docstring (one source of truth: reasonlab/star.py)
    p.set_defaults(config_fields=add_flags(p, star.StarConfig, skip={"seed"}))
    p.add_argument("--continue", dest="restart", action="store_false", default=None, help="the same as --no-restart")
    p.add_argument("--start", choices=["base", "few-chains"], default="base",
                   help="the standard base model, or one shown only --n-chains worked chains (and hints)")
    p.add_argument("--n-chains", type=positive(), default=1000, help="worked chains the few-chains base sees")
    p.add_argument("--ablations", action="store_true", help="also run the variants: base start: greedy single sample, "
                   "chain filter, continue, pool; few-chains start: forced T sampling with the answer or chain filter, with and "
                   "without rationalization")
    p.add_argument("--out", default="runs/star")
    p.set_defaults(fn=cmd_star)
    p = sub.add_parser("verifier", help="learned verifiers (ORM, PRM, Math-Shepherd PRM): train, measure, plot")
    vsub = p.add_subparsers(dest="action", required=True, parser_class=Parser)
    p = vsub.add_parser("train", help="train verifiers on the thinker's samples; AUROC and calibration on held-out ones")
    add_common(p)
    p.add_argument("--kind", nargs="+", choices=["orm", "prm", "prm-mc"], default=["orm", "prm", "prm-mc"])
    p.add_argument("--thinker", choices=["erring", "base"], default="erring")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--n-test", type=positive(), default=100, help="held-out problems per k for the quality check")
    p.add_argument("--out", default="runs/verifier")
    p.set_defaults(fn=cmd_verifier)

    p = sub.add_parser("search", help="best-of-N, weighted majority, beam search, DVTS with verifiers; findings")
    add_common(p)
    p.add_argument("--method", nargs="+", choices=["bon", "weighted", "beam", "dvts"],
                   default=["bon", "weighted", "beam", "dvts"], help="greedy and majority always run")
    p.add_argument("--thinker", choices=["erring", "base", "quick"], default="erring")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--force", choices=["S", "T"], default="S", help="the chain format searched over")
    p.add_argument("--n-max", type=positive(), default=64, help="largest N (1, 2, 4, ..., 64)")
    p.add_argument("--width", type=positive(), default=4, help="M: expansions per beam per step")
    p.add_argument("--n-test", type=positive(), default=100, help="test problems per k")
    p.add_argument("--n-val", type=positive(), default=50, help="validation problems per k (strategy selection)")
    p.add_argument("--agg", choices=["last", "min", "prod"], default="min", help="step scores -> one per output")
    p.add_argument("--temperature", type=positive(float), default=1.0)
    p.add_argument("--verifiers", nargs="+", choices=["orm", "prm", "prm-mc"], default=["orm", "prm", "prm-mc"])
    p.add_argument("--search-verifiers", nargs="+", default=["prm", "oracle"], help="verifiers guiding beam/DVTS")
    p.add_argument("--out", default="runs/search")
    p.add_argument("--replot", action="store_true", help="only redraw plots and findings from --out/seed*.json")
    p.set_defaults(fn=cmd_search)

    p = sub.add_parser("findings", help="findings.json files: what moved between two runs; the README's block")
    fsub = p.add_subparsers(dest="action", required=True, parser_class=Parser)
    p = fsub.add_parser("diff", help="the claims whose verdict differs between two runs (run directories or files)")
    p.add_argument("a")
    p.add_argument("b")
    p.set_defaults(fn=cmd_findings)
    p = fsub.add_parser("readme", help="write (or --check) the README's findings block from a findings.json")
    p.add_argument("--findings", default="results/lab/findings.json")
    p.add_argument("--readme", default="README.md")
    p.add_argument("--check", action="store_true", help="exit 1 if the block is out of date, write nothing")
    p.set_defaults(fn=cmd_findings)
    return ap


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
    from ..io.checkpoint import CheckpointError
    ap = build_parser()
    args = None

    def fail(msg: str, code: int) -> int:
        close_bars()
        print(f"reasonlab: {msg}", file=sys.stderr)
        return code
    try:
        args = ap.parse_args(argv)
        from ..runner.executor import keep_freed_memory
        keep_freed_memory()   # an application's allocator setting: the command is one
        from .guard import preflight
        preflight(args)   # bounds, finite numbers, memory estimates, usable paths: before any work
        args.fn(args)
    except (UsageError, ValueError, CheckpointError) as e:  # ValueError: invalid names, configs, paths, run dirs
        return fail(f"error: {one_line(e)}", 2)
    except FloatingPointError as e:  # a NaN stopped a run: not bad input, but no traceback either
        return fail(f"run stopped: {one_line(e)}", 1)
    except OSError as e:  # a failed read or write (full disk, read-only, vanished directory): nothing partial left
        where = f" {e.filename}" if e.filename else ""
        return fail(f"error: cannot read or write{where}: {e.strerror or one_line(e)}", 2)
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    except (KeyError, TypeError, IndexError, AttributeError) as e:
        if args is not None and getattr(args, "replot", False):   # a results file of another shape
            return fail(f"error: --replot: {args.out} does not hold results this version can read "
                        f"({type(e).__name__}: {one_line(e)})", 2)
        if os.environ.get("REASONLAB_DEBUG"):
            raise
        return fail(f"internal error: {type(e).__name__}: {one_line(e)} (REASONLAB_DEBUG=1 shows the traceback)", 1)
    except Exception as e:
        if os.environ.get("REASONLAB_DEBUG"):
            raise
        return fail(f"internal error: {type(e).__name__}: {one_line(e)} (REASONLAB_DEBUG=1 shows the traceback)", 1)
    finally:
        from ..io.runs import unlock_all
        unlock_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
