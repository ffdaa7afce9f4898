"""The `reasonlab` command line. Bad input gets one line on stderr and exit code 2."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

from . import __version__


class UsageError(Exception):
    """Bad input from the user: reported as one line, exit code 2."""


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


def parse_digits(text: str) -> list[int]:
    from .task import K_MAX, K_MIN
    parts = text.replace(",", " ").split()
    if len(parts) == 1 and len(parts[0]) > 1 and parts[0].isdigit():
        parts = list(parts[0])
    if not all(p.isdigit() and len(p) == 1 for p in parts):
        raise UsageError(f"problem {text!r}: digits must be single digits 0-9, e.g. \"3 5 9 2 7\"")
    if not K_MIN <= len(parts) <= K_MAX:
        raise UsageError(f"problem {text!r} has {len(parts)} digits; k must be in {K_MIN}..{K_MAX}")
    return [int(p) for p in parts]


def parse_force(tok: str | None) -> list[str] | None:
    from .task import FORMATS
    if tok is None:
        return None
    names = {"A": "A", "S": "S", "T": "T", **FORMATS}
    if tok not in names:
        raise UsageError(f"unknown format {tok!r}: use A, S or T (or direct, short, full)")
    return [names[tok]]


def add_common(p: argparse.ArgumentParser):
    p.add_argument("--cache-dir", default=None, help="model cache (default $REASONLAB_CACHE or ~/.cache/reasonlab)")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")


def add_model_choice(p: argparse.ArgumentParser):
    p.add_argument("--checkpoint", default=None, help="a saved model (stem, .json or .safetensors); default: the cached base model")
    p.add_argument("--seed", type=int, default=0, help="seed of the base model to use (and of sampling)")


def check_device(device: str) -> str:
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: no CUDA device is available")
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise UsageError(f"unknown device {device!r}: use cpu or cuda")
    return device


def base_cfg(seed: int, args=None) -> dict:
    from .train import BASE_CFG, SPEC_CFG
    cfg = json.loads(json.dumps(SPEC_CFG if args is not None and getattr(args, "recipe", "base") == "spec" else BASE_CFG))
    cfg["seed"] = seed
    if args is not None:
        if getattr(args, "lr", None) is not None:
            cfg["lr"] = args.lr
        if getattr(args, "batch", None) is not None:
            cfg["batch"] = args.batch
        if getattr(args, "steps", None):
            if len(args.steps) != len(cfg["phases"]):
                raise UsageError(f"--steps takes one number per phase ({len(cfg['phases'])} phases), got {len(args.steps)}")
            for ph, n in zip(cfg["phases"], args.steps):
                ph[1], ph[2] = n, min(ph[2], n)
    return cfg


def load_or_train(args, log=print):
    from .checkpoint import CheckpointError, get_model, load_model, resolve
    device = check_device(args.device)
    if args.checkpoint:
        try:
            model, _ = load_model(resolve(args.checkpoint))
        except CheckpointError as e:
            raise UsageError(str(e)) from None
        return model.to(device)
    return get_model(f"base-seed{args.seed}", base_cfg(args.seed), log=log, cache=args.cache_dir, device=device,
                     progress=True)


def cmd_pretrain(args):
    from .checkpoint import fingerprint, get_model
    from .evaluate import eval_table, format_table
    cfg = base_cfg(args.seed, args)
    print("config:", json.dumps(cfg))
    name = args.name or (f"base-seed{args.seed}" if args.recipe == "base" and not (args.steps or args.lr or args.batch)
                         else f"{args.recipe}-seed{args.seed}-{fingerprint(cfg)[:8]}")
    t0 = time.perf_counter()
    model = get_model(name, cfg, quick=args.quick, cache=args.cache_dir, device=check_device(args.device), progress=True)
    print(f"model ready in {time.perf_counter() - t0:.1f}s ({sum(p.numel() for p in model.parameters()):,} parameters)")
    table = eval_table(model, args.n)
    print(format_table(table))


def cmd_eval(args):
    from .evaluate import eval_table, format_table
    model = load_or_train(args)
    table = eval_table(model, args.n, seed=args.problem_seed)
    print(format_table(table))
    if args.json:
        from .checkpoint import write_json
        write_json(args.json, {c: {k: v for k, v in t.items() if k not in ("results", "outputs")} for c, t in table.items()})


def cmd_sample(args):
    from .sampling import generate
    from .task import VOCAB, check_chain, parse, prompt_ids, solution
    digits = parse_digits(args.problem)
    force = parse_force(args.force)
    model = load_or_train(args, log=lambda s: print(s, file=sys.stderr))
    gen = torch.Generator(device=next(model.parameters()).device).manual_seed(args.seed)
    outs = generate(model, [prompt_ids(digits)] * args.n, gen, args.temperature, force)
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


def cmd_rl(args):
    import copy

    from .evaluate import evaluate, problems_per_k
    from .report import plot_format_share, plot_rl_runs
    from .rl import RLConfig, train
    over = {k: getattr(args, k) for k in ("steps", "prompts_per_step", "num_generations", "learning_rate", "beta",
                                          "kl_estimator", "epsilon", "epsilon_high", "num_iterations", "loss_type",
                                          "scale_rewards", "table_every", "checkpoint_every", "temperature",
                                          "force_direct", "forced_trains")
            if getattr(args, k) is not None}
    if args.no_clip:
        over["clip"] = False
    cfg = RLConfig.preset(args.algo, seed=args.seed, **over)
    run_dir = args.run_dir or os.path.join("runs", f"rl-{args.algo}-seed{args.seed}")
    if os.path.exists(os.path.join(run_dir, "metrics.jsonl")) and not args.resume:
        raise UsageError(f"run directory {run_dir} already has a run: pass --resume to continue it or --run-dir elsewhere")
    if args.resume and not os.path.exists(os.path.join(run_dir, "state.json")):
        raise UsageError(f"--resume: no checkpoint in {run_dir}")
    print("config:", json.dumps(vars(cfg)))
    policy = load_or_train(args)
    ref = copy.deepcopy(policy) if (cfg.beta > 0 or args.log_kl) else None
    evals = []
    probs = problems_per_k(args.eval_n, seed=999)

    def greedy_eval(step, model):
        r = evaluate(model, probs)
        evals.append({"step": step, "acc": r["acc"], "share": r["share"], "length": r["length"],
                      "acc_by_k": {k: v["acc"] for k, v in r["per_k"].items()}})
        print(f"  eval step {step}: greedy acc {r['acc']:.3f} | A/S/T {r['share']['direct']:.2f}/"
              f"{r['share']['short']:.2f}/{r['share']['full']:.2f} | length {r['length']:.2f}")

    t0 = time.perf_counter()
    hist = train(policy, ref, cfg, run_dir=run_dir, resume=args.resume, callback=greedy_eval,
                 every=args.eval_every, progress=True)
    print(f"done in {time.perf_counter() - t0:.1f}s")
    if evals:
        from .checkpoint import write_json
        write_json(os.path.join(run_dir, "eval.json"), evals)
    plot_rl_runs({args.algo: [hist]}, os.path.join(run_dir, "curves.png"), f"{args.algo}, seed {args.seed}")
    plot_format_share(hist, os.path.join(run_dir, "formats.png"), f"{args.algo}, seed {args.seed}")
    print(f"wrote {run_dir}/ (config.json, metrics.jsonl, state.*, curves.png, formats.png)")


def cmd_tts(args):
    from . import tts
    from .checkpoint import write_json, write_text
    from .report import plot_budgets, plot_tts_frontier, plot_tts_per_k, plot_tts_vs_n, tts_table
    formats = args.formats
    for f in formats:
        if f not in tts.FORCE:
            raise UsageError(f"unknown format {f!r}: use A, S, T or free")
    if args.n_max not in tts.NS:
        raise UsageError(f"--n-max must be one of {', '.join(map(str, tts.NS))}")
    t0 = time.perf_counter()
    if args.replot:   # re-render the table and plots of an earlier run from its results.json
        try:
            with open(os.path.join(args.out, "results.json")) as f:
                res = json.load(f)
        except (OSError, ValueError) as e:
            raise UsageError(f"--replot: cannot read {args.out}/results.json ({e})") from None
    else:
        model = load_or_train(args)
        print(f"test-time compute: {args.n_per_k} problems per k, N up to {args.n_max}, formats {' '.join(formats)}")
        res = tts.run(model, n_per_k=args.n_per_k, n_max=args.n_max, formats=tuple(formats), seed=args.seed,
                      budgets=not args.no_budgets)
        os.makedirs(args.out, exist_ok=True)
        write_json(os.path.join(args.out, "results.json"), res)
    table = tts_table(res)
    write_text(os.path.join(args.out, "table.md"), table + "\n")
    plot_tts_vs_n(res, os.path.join(args.out, "acc_vs_n.png"))
    plot_tts_frontier(res, os.path.join(args.out, "frontier.png"))
    plot_tts_per_k(res, os.path.join(args.out, "per_k.png"))
    if "budgets" in res:
        plot_budgets(res, os.path.join(args.out, "budgets.png"))
    print(table)
    print(f"grid {res['timing']['grid']:.1f}s, total {time.perf_counter() - t0:.1f}s; wrote {args.out}/")


def cmd_adaptive(args):
    from . import adaptive
    from .checkpoint import get_model, write_json
    from .train import BASE_CFG
    args.methods = args.methods or list(adaptive.METHODS)
    for m in args.methods:
        if m not in adaptive.METHODS:
            raise UsageError(f"unknown method {m!r}: choose from {', '.join(adaptive.METHODS)}")
    if args.replot:   # redraw the table and plots of an earlier run from its summary.json
        try:
            with open(os.path.join(args.out, "summary.json")) as f:
                summary = json.load(f)
        except (OSError, ValueError) as e:
            raise UsageError(f"--replot: cannot read {args.out}/summary.json ({e})") from None
        write_adaptive(summary, args.out)
        return
    device = check_device(args.device)
    runs, bases = [], []
    t0 = time.perf_counter()
    for seed in args.seeds:
        base = get_model(f"base-seed{seed}", dict(BASE_CFG, seed=seed), cache=args.cache_dir, device=device, progress=True)
        bases.append(base)
        ref_acc = adaptive.reference_accuracy(base)
        for m in args.methods:
            r = adaptive.run_method(base, m, seed, steps=args.steps, lr=args.lr, n_eval=args.n_eval, ref_acc=ref_acc,
                                    beta=args.beta)
            runs.append(r)
            a_share = " ".join(f"{v['direct']:.2f}" for v in r["share_by_k"].values())
            print(f"  seed {seed} {m:<11} acc {r['acc']:.3f} tokens {r['tokens']:.2f} A-share by k {a_share} "
                  f"({r['seconds']:.0f}s)", flush=True)
    fixed = adaptive.fixed_points(bases, args.n_eval)
    ttsp = adaptive.tts_points(bases[0])
    summary = {"methods": adaptive.summarize(runs, fixed), "fixed": fixed, "tts": ttsp, "seeds": args.seeds,
               "steps": args.steps, "lr": args.lr, "beta": args.beta}
    os.makedirs(args.out, exist_ok=True)
    write_json(os.path.join(args.out, "summary.json"), {**summary, "runs": runs})
    write_adaptive(summary, args.out)
    print(f"done in {time.perf_counter() - t0:.0f}s; wrote {args.out}/")


def write_adaptive(summary: dict, out: str) -> None:
    from .checkpoint import write_text
    from .report import adaptive_table, plot_adaptive_frontier, plot_adaptive_heatmap
    plot_adaptive_heatmap(summary, os.path.join(out, "heatmap.png"))
    plot_adaptive_frontier(summary, os.path.join(out, "frontier.png"))
    md = adaptive_table(summary)
    write_text(os.path.join(out, "table.md"), md + "\n")
    print(md)


def cmd_star(args):
    from . import star
    from .checkpoint import get_model, write_json, write_text
    from .report import plot_star, star_table
    from .train import BASE_CFG
    device = check_device(args.device)
    few = args.start == "few-chains"
    variants = {"main": {"rationalize": args.rationalize}}
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
                          else (f"base-seed{seed}", dict(BASE_CFG, seed=seed)))
            base = get_model(name, bcfg, cache=args.cache_dir, device=device, progress=True)
            kw = dict(rounds=args.rounds, problems=args.problems, samples=args.samples, temperature=args.temperature,
                      filter=args.filter, cap=args.cap, restart=not args.continue_, pool=args.pool, steps=args.steps,
                      growth=args.growth, seed=seed, mix=(1.0, 0.0, 0.0) if few else (0.5, 0.3, 0.2),
                      force=parse_force(args.force)[0] if args.force else None)
            cfg = star.StarConfig(**{**kw, **over})
            print(f"{vname}, seed {seed}: {json.dumps(vars(cfg))}")
            runs.setdefault(vname, []).append(star.run(base, name, cfg, cache=args.cache_dir))
            os.makedirs(args.out, exist_ok=True)
            write_json(os.path.join(args.out, "runs.json"), runs)     # after every run: a crash loses one run
    plot_star(runs, os.path.join(args.out, "star.png"))
    md = star_table(runs)
    write_text(os.path.join(args.out, "table.md"), md + "\n")
    print(md)
    print(f"done in {time.perf_counter() - t0:.0f}s; wrote {args.out}/")


def cmd_verifier(args):
    """`reasonlab verifier train`: train and measure learned verifiers (issue 17), plots and table in --out."""
    from . import verifier
    from .checkpoint import write_text
    cfg = verifier.VerifierExpConfig(kinds=tuple(dict.fromkeys(args.kind)), thinker=args.thinker, out=args.out,
                                     cache=args.cache_dir, n_test_per_k=args.n_test)
    check_device(args.device)
    results = [verifier.run(cfg, seed) for seed in args.seeds]
    md = verifier.render(results, args.out)
    write_text(os.path.join(args.out, "section.md"), md)
    print(md)


def cmd_search(args):
    """`reasonlab search`: best-of-N, weighted majority, beam search, DVTS with learned verifiers and the oracle."""
    from . import search
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
    print(search.render(results, args.out))
    print(f"wrote {args.out}/ (seed*.json, findings.json, section.md, acc_vs_n.png, acc_vs_compute.png, tokens.png)")


def cmd_lab(args):
    from dataclasses import asdict

    from . import lab, report
    cfg = lab.LabConfig(seeds=tuple(args.seeds or ((0,) if args.quick else (0, 1, 2))), quick=args.quick,
                        out=args.out or ("runs/lab-quick" if args.quick else "runs/lab"), cache=args.cache_dir,
                        device=check_device(args.device), fresh=args.fresh, only=tuple(args.only or lab.EXPERIMENTS),
                        sizes=lab.QUICK if args.quick else lab.Sizes())
    cfg.validate()
    if args.report_only:
        results = lab.load_results(cfg.out, cfg.seeds)
        if not results:
            raise UsageError(f"--report-only: no finished experiments in {cfg.out} for seeds {list(cfg.seeds)}")
        try:
            with open(os.path.join(cfg.out, "timing.json")) as f:
                meta = json.load(f)
        except (OSError, ValueError):
            meta = {"wall_s": 0.0}
        paths = lab.write_report(cfg.out, results, {**meta, "seeds": list(cfg.seeds), "quick": cfg.quick})
    else:
        print("config:", json.dumps(asdict(cfg)))
        lab.run(cfg)
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


def build_parser() -> Parser:
    ap = Parser(prog="reasonlab", description="A laptop-scale lab for reasoning models.")
    ap.add_argument("--version", action="version", version=f"reasonlab {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=Parser)

    p = sub.add_parser("lab", help="the main job: every experiment of the lecture, one run directory, report.html")
    add_common(p)
    p.add_argument("--quick", action="store_true", help="tiny sizes and a small base model (<= 90 s): checks the pipeline")
    p.add_argument("--seeds", type=int, nargs="+", default=None, help="base-model seeds (default 0 1 2; quick: 0)")
    p.add_argument("--out", default=None, help="run directory (default runs/lab, quick: runs/lab-quick)")
    p.add_argument("--only", nargs="+", default=None, help="run only these experiments: base budgets sampling star rl adaptive")
    p.add_argument("--fresh", action="store_true", help="rerun experiments that finished earlier with the same settings")
    p.add_argument("--report-only", action="store_true", help="only rebuild the report from finished experiments")
    p.add_argument("--screenshot", action="store_true", help="render report.html in headless Chromium to report.png and check it")
    p.set_defaults(fn=cmd_lab)

    p = sub.add_parser("pretrain", help="train (or load) the base model and print its evaluation table")
    add_common(p)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--recipe", choices=["base", "spec"], default="base", help="our recipe (default) or the spec's")
    p.add_argument("--steps", type=positive(), nargs="+", default=None, help="steps per phase")
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
    p.set_defaults(fn=cmd_sample)

    from .rl import ALGOS
    p = sub.add_parser("rl", help="RL from the base model: GRPO and its relatives (one run directory per run)")
    add_common(p)
    add_model_choice(p)
    p.add_argument("--algo", choices=ALGOS, default="grpo")
    p.add_argument("--steps", type=positive(), default=None)
    p.add_argument("--prompts-per-step", type=positive(), default=None)
    p.add_argument("--num-generations", type=positive(), default=None, help="samples per problem (the group)")
    p.add_argument("--learning-rate", "--lr", type=positive(float), default=None)
    p.add_argument("--beta", type=nonneg_float, default=None, help="KL weight; 0 drops the reference model")
    p.add_argument("--kl-estimator", choices=["k1", "k2", "k3", "exact"], default=None)
    p.add_argument("--epsilon", type=positive(float), default=None)
    p.add_argument("--epsilon-high", type=positive(float), default=None)
    p.add_argument("--num-iterations", type=positive(), default=None, help="updates per batch of samples")
    p.add_argument("--loss-type", choices=["grpo", "dapo", "dr_grpo"], default=None)
    p.add_argument("--scale-rewards", choices=["group", "batch", "none"], default=None)
    p.add_argument("--temperature", type=positive(float), default=None)
    p.add_argument("--no-clip", action="store_true", help="plain policy gradient (no ratio, no clip)")
    p.add_argument("--force-direct", type=nonneg_float, default=None,
                   help="share of each group forced to answer directly (A), so that A keeps being tried")
    p.add_argument("--forced-trains", choices=["all", "format", "answer"], default=None,
                   help="what forced rollouts train: all tokens, only their A, or only their answer")
    p.add_argument("--run-dir", default=None, help="default runs/rl-<algo>-seed<seed>")
    p.add_argument("--resume", action="store_true", help="continue the run in --run-dir from its checkpoint")
    p.add_argument("--checkpoint-every", type=positive(), default=None)
    p.add_argument("--table-every", type=positive(), default=None, help="print sample completions every N steps")
    p.add_argument("--eval-every", type=int, default=0, help="greedy evaluation every N steps (0: never)")
    p.add_argument("--eval-n", type=positive(), default=200, help="problems per k for --eval-every")
    p.add_argument("--log-kl", action="store_true", help="log KL to the base even when beta = 0")
    p.set_defaults(fn=cmd_rl)

    p = sub.add_parser("tts", help="test-time compute: budgets, voting, verifiers, pass@N, the compute frontier")
    add_common(p)
    add_model_choice(p)
    p.add_argument("--n-per-k", type=positive(), default=2000, help="problems per k")
    p.add_argument("--n-max", type=positive(), default=64, help="samples per problem in the pool (1, 2, 4, ..., 64)")
    p.add_argument("--formats", nargs="+", default=["A", "S", "T"], help="A S T free")
    p.add_argument("--no-budgets", action="store_true", help="skip the budget-forcing sweep")
    p.add_argument("--replot", action="store_true", help="only redraw the table and plots from --out/results.json")
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
    p.add_argument("--replot", action="store_true", help="only redraw the table and plots from --out/summary.json")
    p.set_defaults(fn=cmd_adaptive)

    p = sub.add_parser("star", help="STaR self-improvement: sample, verify, fine-tune, round after round")
    add_common(p)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--rounds", type=positive(), default=3)
    p.add_argument("--problems", type=positive(), default=10_000, help="fresh problems per round")
    p.add_argument("--samples", type=positive(), default=4, help="outputs sampled per problem")
    p.add_argument("--temperature", type=nonneg_float, default=1.0)
    p.add_argument("--filter", choices=["answer", "chain"], default="answer")
    p.add_argument("--cap", type=positive(), default=1, help="kept outputs per problem")
    p.add_argument("--continue", dest="continue_", action="store_true", help="fine-tune from the last round's model")
    p.add_argument("--pool", action="store_true", help="train on all rounds' data")
    p.add_argument("--steps", type=positive(), default=300, help="fine-tuning steps in round 1")
    p.add_argument("--growth", type=positive(float), default=1.2, help="step growth per round")
    p.add_argument("--start", choices=["base", "few-chains"], default="base",
                   help="the standard base model, or one shown only --n-chains worked chains (and hints)")
    p.add_argument("--n-chains", type=positive(), default=1000, help="worked chains the few-chains base sees")
    p.add_argument("--force", default=None, help="sample with this format forced (T or S: ask for a rationale)")
    p.add_argument("--rationalize", action="store_true", help="STaR's hint for problems with no kept output "
                                                             "(needs --start few-chains: a base that read hints)")
    p.add_argument("--ablations", action="store_true", help="also run the variants: base start: greedy single sample, "
                   "chain filter, continue, pool; few-chains start: forced T sampling with the answer or chain filter, with and "
                   "without rationalization")
    p.add_argument("--out", default="runs/star")
    p.set_defaults(fn=cmd_star)
    # issue 17: learned verifiers and search
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
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    try:
        args = ap.parse_args(argv)
        args.fn(args)
    except UsageError as e:
        print(f"reasonlab: error: {e}", file=sys.stderr)
        return 2
    except ValueError as e:  # invalid names and configs raised from the library
        print(f"reasonlab: error: {e}", file=sys.stderr)
        return 2
    except FloatingPointError as e:  # a NaN stopped a run: not bad input, but no traceback either
        print(f"reasonlab: run stopped: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("reasonlab: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
