"""What each command does, once its arguments have been parsed and checked (`reasonlab.cli`): here the commands
that print (no matplotlib), in `jobs` those that run experiments. Every command gets the parsed namespace (defaults
filled in from its dataclass; `args.given` holds what the user set)."""
from __future__ import annotations

import json
import sys
import time

import torch

from ..core.evaluate import eval_table, format_table
from ..core.sampling import generate
from ..io.checkpoint import CheckpointError, fingerprint, load_model, strict_json, write_json
from ..io.files import resolve
from ..runner import readme
from ..tasks import FORMATS, format_name, get
from ..train.sft import Recipe, base_cfg, base_name, model_name
from ..train.zoo import base_model, get_model
from .guard import UsageError, check_device, read_problem
from .hf import cmd_export, cmd_import  # noqa: F401  (the Hugging Face bridge's commands)


def pretrain_cfg(args) -> dict:
    """`reasonlab pretrain`'s recipe: the base (or spec) recipe of the task with the flags' overrides."""
    r = Recipe.from_dict(base_cfg(args.seed, recipe=args.recipe, task=args.task))
    if args.learning_rate is not None:
        r.lr = args.learning_rate
    if args.batch is not None:
        r.rest["batch"] = args.batch
    return (r.with_steps(args.steps) if args.steps else r).to_dict()


def load_or_train(args, log=print):
    """--checkpoint's model, or the cached base model of --seed and the task (args.task: preflight set it to the
    checkpoint's where one is named)."""
    device = check_device(args.device)
    if args.checkpoint:
        try:
            model, _ = load_model(resolve(args.checkpoint))
        except CheckpointError as e:
            raise UsageError(str(e)) from None
        return model.to(device)
    return base_model(args.seed, cache=args.cache_dir, device=device, log=log, progress=True, task=args.task)


def cmd_pretrain(args):
    cfg = pretrain_cfg(args)
    print("config:", json.dumps(cfg))
    plain = args.recipe == "base" and not (args.steps or args.learning_rate or args.batch)
    name = args.name or (base_name(args.seed, task=args.task) if plain
                         else f"{model_name(args.recipe, args.seed, args.task)}-{fingerprint(cfg)[:8]}")
    t0 = time.perf_counter()
    model = get_model(name, cfg, quick=args.quick, cache=args.cache_dir, device=check_device(args.device), progress=True,
                      retrain=True)     # pretrain trains: it never copies a shipped model
    print(f"model ready in {time.perf_counter() - t0:.1f}s ({sum(p.numel() for p in model.parameters()):,} parameters)")
    table = eval_table(model, args.n_test, task=args.task)
    print(format_table(table))


def cmd_eval(args):
    model = load_or_train(args)
    table = eval_table(model, args.n_test, seed=args.problem_seed, task=args.task)
    print(format_table(table))
    if args.json:
        write_json(args.json, strict_json({c: {k: v for k, v in t.items() if k not in ("results", "outputs")}
                                           for c, t in table.items()}))


def cmd_sample(args):
    task = get(args.task)
    problem = read_problem(task, args.problem)
    force = None if args.force is None else [FORMATS[format_name(args.force)]]
    if args.budget is not None and not args.checkpoint:   # the base models have no budget tokens: say so at once
        raise UsageError("--budget needs a budget model: pass --checkpoint <model cache>/l1-exact-seed0 (saved by `reasonlab l1`)")
    model = load_or_train(args, log=lambda s: print(s, file=sys.stderr))
    budget_model_check(model, args.budget, task)
    gen = torch.Generator(device=next(model.parameters()).device).manual_seed(args.seed)
    outs = generate(model, [task.prompt_ids(problem)] * args.samples, gen, args.temperature, force, budget=args.budget,
                    task=task)
    truth = task.answer(problem)
    written = lambda a: "None" if a is None else " ".join(task.write_answer(problem, a))   # noqa: E731
    print(f"problem {task.show(problem)}  (answer {written(truth)})")
    vocab = task.l1_vocab
    for o in outs:
        p = task.parse(o)
        text = " ".join(vocab[i] if 0 <= i < len(vocab) else "?" for i in o)
        chain = task.check_chain(problem, p)
        steps = ""
        if p["fmt"] in ("short", "full"):
            want = task.gold_chain(problem, p["fmt"])
            steps = " chain " + " ".join(f"{task.state_words[c]}{'✓' if i < len(want) and c == want[i] else '✗'}"
                                         for i, c in enumerate(p["chain"]))
        verdict = "right" if task.correct(problem, p) else "wrong"
        print(f"= {text:<30} format {p['fmt'] or '?':<6} answer {written(p['answer'])} {verdict}{steps}"
              + ("" if chain is None else f" | chain checks: {chain}"))


def budget_model_check(model, budget, task) -> None:
    if budget is not None and model.cfg.vocab_size < len(task.budget_vocab):
        raise UsageError("--budget needs a budget model; this one has no budget tokens (train one with `reasonlab l1`)")


def cmd_findings(args):
    try:
        if args.action == "diff":
            moved = readme.diff(args.a, args.b)
            print("\n".join(moved) if moved else "no verdict moved")
        elif readme.sync(args.readme, args.findings, check=args.check, tasks=args.tasks or None):
            print(f"{args.readme}: the findings block is up to date")
        elif args.check:
            print(f"reasonlab: {args.readme}'s findings block differs from {args.findings}: run `make results`",
                  file=sys.stderr)
            raise SystemExit(1)
        else:
            print(f"{args.readme}: findings block written from {args.findings}")
    except (OSError, ValueError) as e:
        raise UsageError(" ".join(str(e).split())) from None
