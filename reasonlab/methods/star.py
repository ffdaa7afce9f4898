"""STaR-style self-improvement: sample, verify, fine-tune on what passed, round after round.

Each round (the loop in `train` below): draw a fresh problem set; sample `samples` outputs per problem from the
current model; keep those that pass the filter (the answer, or the answer and every chain step; or, as a control,
none); fine-tune a new model from the base (STaR, ReST-EM) or from the current one, on the kept outputs mixed with
fresh problems through the spec's `fixed` / `fixed_frac`. Zelikman et al. 2022 (arXiv 2203.14465); RFT (Yuan et al.
2023, arXiv 2308.01825); ReST-EM (Singh et al. 2023, arXiv 2312.06585).
Rationalization (STaR's hint trick) and a "few written chains" starting point, where STaR has to bootstrap
reasoning it was barely shown, are below (`few_chains_cfg`).
"""
from __future__ import annotations

import random
import time
from typing import Callable

import torch

from .. import tasks
from ..core.model import GPT
from ..core.problems import as_task
from ..core.sampling import sample_tree
from ..core.seeds import hashed_seed
from ..tasks import FMT_NAMES, FMT_OF, Problem, Task
from ..train.sft import for_task, pretrain
from .config import StarConfig


def sample(model: GPT, problems: list[Problem], cfg: StarConfig, gen: torch.Generator,
           hint: bool = False) -> list[list[list[int]]]:
    """cfg.samples outputs (token ids after the prompt) per problem, at cfg.temperature, cfg.force's format forced;
    hint: the answer given in the prompt (rationalization)."""
    task = tasks.of(problems)
    prompts = [(task.hint_prompt_ids if hint else task.prompt_ids)(d) for d in problems]
    toks, _ = sample_tree(model, prompts, cfg.samples, gen, cfg.temperature, force=[cfg.force] if cfg.force else None)
    rows = toks.tolist()
    return [rows[j * cfg.samples:(j + 1) * cfg.samples] for j in range(len(problems))]


def _keep(problems: list[Problem], samples: list[list[list[int]]], cfg: StarConfig, kept: list[list[tuple]],
          stats: dict, hint: bool = False) -> None:
    """Add to kept[i] the outputs of problem i that pass cfg.filter (at most cfg.cap distinct per problem), and count
    right answers and right answers with a wrong step in stats."""
    task = tasks.of(problems)
    for d, rows, seen_list in zip(problems, samples, kept):
        seen = set(seen_list)
        for row in rows:
            p = task.parse(row)
            right = task.correct(d, p)
            # only complete templates (format, chain, "A", answer, </s>) are training data, under every filter
            if not p["ok"] or (cfg.filter != "none" and not right):
                continue
            ok_chain = task.check_chain(d, p)       # on a complete template: False means a wrong step
            if p["fmt"] in ("short", "full") and right:
                stats["right"] += 1
                stats["right_wrong_chain"] += ok_chain is False   # STaR's false positive: right answer, wrong step
            if cfg.filter == "chain" and ok_chain is False:
                continue
            out = tuple(row[:p["length"]])
            if max(out) >= len(task.vocab):    # a hint token written into the output: not plain training data
                continue
            if out in seen or len(seen) >= cfg.cap:
                continue
            seen.add(out)
            seen_list.append(out)
            stats["rationalized"] += hint


def _summary(problems: list[Problem], kept: list[list[tuple]], stats: dict) -> dict:
    """The kept data as a recipe's `fixed` rows, (instance, output words), and the round's statistics."""
    task = tasks.of(problems)
    data = [(list(d.x), [task.vocab[t] for t in out]) for d, outs in zip(problems, kept) for out in outs]
    fmt_counts = {f: sum(FMT_OF.get(w[0]) == f for _, w in data) for f in FMT_NAMES}
    n = max(1, len(data))
    return {"kept": data, "used": sum(bool(k) for k in kept) / len(problems),
            "fmt_mix": {f: c / n for f, c in fmt_counts.items()},
            "false_positive_rate": stats["right_wrong_chain"] / max(1, stats["right"]), "n_kept": len(data),
            "rationalized": stats["rationalized"] / n}


def select(problems: list[Problem], samples: list[list[list[int]]], cfg: StarConfig) -> dict:
    """The kept data of one set of samples (`sample`) under cfg.filter and cfg.cap, with the round's data
    statistics (as `collect`, without rationalization): filters compared on the same samples."""
    kept: list[list[tuple]] = [[] for _ in problems]
    stats = {"right": 0, "right_wrong_chain": 0, "rationalized": 0}
    _keep(problems, samples, cfg, kept, stats)
    return _summary(problems, kept, stats)


def collect(model: GPT, problems: list[Problem], cfg: StarConfig, gen: torch.Generator) -> dict:
    """Sample, verify and keep; with cfg.rationalize, problems that yielded nothing are sampled again with the
    answer as a hint, and what passes is kept under the plain prompt (the hint removed). Returns the kept
    (instance, output words) and the round's data statistics."""
    kept: list[list[tuple]] = [[] for _ in problems]
    stats = {"right": 0, "right_wrong_chain": 0, "rationalized": 0}
    _keep(problems, sample(model, problems, cfg, gen), cfg, kept, stats)
    if cfg.rationalize:
        idx = [i for i in range(len(problems)) if not kept[i]]
        again = [problems[i] for i in idx]
        sub = [kept[i] for i in idx]
        _keep(again, sample(model, again, cfg, gen, hint=True), cfg, sub, stats, hint=True)
    return _summary(problems, kept, stats)


def without_chains(data: list[tuple[list[int], list[str]]]) -> list[tuple[list[int], list[str]]]:
    """Kept data with every chain removed: each output written as a direct answer with the answer it gave ("A",
    the answer's words, "</s>"). Fine-tuning on it is STaR's direct fine-tuning baseline (Zelikman et al. 2022,
    Table 2: the answers without rationales), matched to STaR's own kept set: the same problems and answers, only
    the chains gone."""
    out = []
    for x, w in data:                       # a kept output is a complete template: ..., A, answer words, </s>
        a = len(w) - 1 - w[::-1].index("A")
        out.append((x, ["A", *w[a + 1:-1], "</s>"]))
    return out


def problems_of_round(rng: random.Random, n: int, task: str | Task = "digits") -> list[Problem]:
    """A round's n fresh problems, k uniform over the task's range, from the train part."""
    task = as_task(task)
    return [task.train_problem(rng, rng.randint(task.k_min, task.k_max)) for _ in range(n)]


def round_recipe(cfg: StarConfig, r: int, bank: list, task: str | Task = "digits") -> dict:
    """Round r's fine-tuning recipe (a train.sft recipe) on the kept data `bank`: cfg.steps grown by cfg.growth per
    round, warmup 30, the kept data mixed with fresh problems of cfg.mix through cfg.fixed_frac."""
    steps = int(round(cfg.steps * cfg.growth ** (r - 1)))
    recipe = {"seed": cfg.seed * 1000 + r, "lr": cfg.learning_rate, "phases": [[list(cfg.mix), steps, 30, [2, 8]]],
              "fixed": bank, "fixed_frac": cfg.fixed_frac}
    if cfg.rationalize:
        recipe["hint_frac"] = cfg.hint_frac
    return for_task(recipe, task)


def few_chains_cfg(seed: int = 0, n_chains: int = 1000, hint_frac: float = 0.1, steps: int = 1500,
                   task: str | Task = "digits") -> dict:
    """A base recipe that shows only `n_chains` worked chains (S or T, k uniform over the task's range), each row of
    a batch one of them with probability 0.1; every other row is a direct answer. hint_frac > 0 also teaches the
    hint token (so rationalization can be switched on) where the task has hint tokens (few answers). The model learns
    the chain format but not reliable chains."""
    task = as_task(task)
    rng = random.Random(hashed_seed("few_chains", seed))
    chains = []
    for _ in range(n_chains):
        p = task.train_problem(rng, rng.randint(task.k_min, task.k_max))
        chains.append((list(p.x), task.solution(p, rng.choice(["short", "full"]))))
    cfg = {"seed": seed, "lr": 3e-3, "phases": [[[1.0, 0.0, 0.0], steps, 30, [2, 8]]], "fixed": chains,
           "fixed_frac": 0.1}
    if hint_frac and task.n_hints:
        cfg["hint_frac"] = hint_frac
    return for_task(cfg, task)


def train(base: GPT, cfg: StarConfig, fine_tune: Callable[[int, dict, GPT], GPT] | None = None,
          callback: Callable[[dict, GPT], None] | None = None, task: str | Task = "digits") -> list[dict]:
    """cfg.rounds rounds of STaR from `base`; one record per round r = 1..rounds: the kept data's statistics, the
    fine-tuning steps and the round's seconds. fine_tune(r, recipe, init) -> model trains round r's model (a
    train.sft recipe, from init; default: train.sft.pretrain, uncached); callback(record, model) runs after every
    round with the round's model."""
    cfg.validate()
    task = as_task(task)
    if cfg.rationalize and (not task.n_hints or base.cfg.vocab_size < len(task.hint_vocab)):
        raise ValueError("rationalization needs a base model pre-trained with hints (e.g. the few-chains start), on "
                         "a task with few answers")
    rng = random.Random(cfg.seed)
    device = next(base.parameters()).device
    gen = torch.Generator(device=device).manual_seed(cfg.seed)
    fine_tune = fine_tune or (lambda r, recipe, init: pretrain(recipe, init=init, device=str(device)))
    model, bank, hist = base, [], []
    for r in range(1, cfg.rounds + 1):
        t0 = time.perf_counter()
        data = collect(model, problems_of_round(rng, cfg.problems, task), cfg, gen)
        t_sample = time.perf_counter() - t0
        bank = bank + data["kept"] if cfg.pool else data["kept"]
        recipe = round_recipe(cfg, r, bank, task)
        steps = recipe["phases"][0][1]
        if bank:                              # nothing kept: the model stays as it is
            model = fine_tune(r, recipe, base if cfg.restart else model)
        rec = {"round": r, "used": data["used"], "n_kept": data["n_kept"], "fmt_mix": data["fmt_mix"],
               "false_positive_rate": data["false_positive_rate"], "rationalized": data["rationalized"],
               "steps": steps, "sample_s": round(t_sample, 2), "round_s": round(time.perf_counter() - t0, 2)}
        hist.append(rec)
        if callback is not None:
            callback(rec, model)
    return hist
