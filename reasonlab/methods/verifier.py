"""Verifiers: score a chain step by step. Learned ones (ORM, PRM, Math-Shepherd PRM) and the rule's oracle.

Steps. An output (token ids after "=", as `generate` returns them) is read as a list of steps: each state of the
chain, then the answer. In digits "S 8 9 6 A 6 </s>" has 4 steps (8, 9, 6 and the answer 6); "A 6 </s>" has one (the
answer); a chain cut short ("T 3 8") has the states written so far (2 steps); junk ("</s>") has none. A step's
position is the token that writes it (a multi-word answer: its last word), so a verifier scores a partial chain as
well as a finished one.

Interface (what search.py programs against):

    v.score_steps(problems, outputs) -> list[list[float]]
        one score in [0, 1] per step written (len == len(steps(output))), for each (problem, output ids);
        a learned verifier reads each sequence once (batched) and returns the sigmoid of its logit for each step
        token (`position_logits`). `aggregate` makes them one score per output (search-and-learn's utils/score.py
        `aggregate_scores`; Lightman et al. 2023 use prod, Snell et al. 2024 and the HF blog use last).
    v.flops_per_token -> float
        2 * parameters for a learned verifier (Kaplan et al. 2020's forward cost), 0 for the oracle.
    v.kind -> "oracle" | "uniform" | "orm" | "prm" | "prm-mc"

OracleVerifier: the rule (Task.check's): a step scores 1.0 when it equals the true state at its place (the answer
step: the true answer), else 0.0. Aggregated with "min", an output scores 1.0 exactly when every step it wrote is
right.
UniformVerifier: every step scores 1.0 (a verifier that knows nothing; a placebo).

Labels (what the learned verifiers train on, per step):
- "orm" (Cobbe et al. 2021, arXiv 2110.14168): every step gets the outcome, the final answer right or not;
- "prm" (Lightman et al. 2023, arXiv 2305.20050, with the rule as the labeller): the oracle's step labels up to
  and including the first wrong step, the steps after it unlabelled (PRM800K's protocol: its labellers stop at the
  first error, `finish_reason` "found_error"). Labelling the steps after an error too asks each of them, the answer
  step among them, whether the whole chain before it was right: trained so, the answer step stops checking that
  the answer follows from the chain, and among 64 samples a right chain closed by a wrong answer wins best-of-N
  (the voting experiment's per-sample PRM fell as N grew; with PRM800K's labels it rises: CHANGELOG.md);
- "prm-mc" (Math-Shepherd, Wang et al. 2023, arXiv 2312.08935): no step oracle; a step's label is the share of
  M completions, sampled by the thinker from the prefix ending at that step, that reach the right answer (soft
  estimation, trained with soft-label BCE).
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .. import tasks
from ..core import fast
from ..core.model import GPT
from ..core.optim import AdamW, lr_at
from ..core.pool import sample_pool
from ..core.problems import as_task, problems_per_k
from ..core.sampling import SPECIAL_ID, generate_n
from ..io.checkpoint import CheckpointError, cache_key, load_tensors, save_tensors, weights_hash
from ..io.files import cache_dir, check_name
from ..tasks import Problem, Task
from ..tasks.records import EOS, PAD
from ..train.zoo import base_model
from .config import KINDS, Agg, VerifierConfig  # noqa: F401  (this method's public names)

_A, _S, _T = SPECIAL_ID["A"], SPECIAL_ID["S"], SPECIAL_ID["T"]
LABEL_RULES = 2
"""the version of `make_labels`' rules, part of a cached verifier's key (2: "prm" labels stop at the first error)"""


def steps(output: list[int], task: str | Task = "digits") -> list[tuple[int, int, bool]]:
    """The steps an output writes: [(index in output, value, is_answer)], chain states first, the answer last (its
    value the answer read, its index that of its last word).

    Reads the template as Task.parse does: a format token, then (S / T) the chain's states, "A", the answer's words.
    """
    task = as_task(task)
    out: list[tuple[int, int, bool]] = []
    if not output:
        return out
    i = 1
    if output[0] in (_S, _T):
        while i < len(output) and task.is_state(output[i]):
            out.append((i, task.state_of(output[i]), False))
            i += 1
        if i >= len(output) or output[i] != _A:
            return out
        i += 1
    elif output[0] != _A:
        return out
    j = i
    while j < len(output) and j - i < task.answer_len_max and task.is_answer_word(output[j]):
        j += 1
    if j > i:
        value = task.read_answer([task.vocab[t] for t in output[i:j]])
        if value is not None:
            out.append((j - 1, value, True))
    return out


def oracle_labels(problem: Problem, output: list[int]) -> list[float]:
    """1.0 / 0.0 per step: the chain's j-th state equals the true state at its place in the output's format (a state
    written past the chain's end is wrong); the answer step is right when it is the true answer, comes where the
    format puts it (after the whole chain: in digits "S 3 A 0" for 1 2 3 4 skips a sum) and the output closes after
    it (</s> next, or nothing yet). So on an output that answers, the smallest step score is 1 exactly when
    Task.check_chain accepts it."""
    task = tasks.task_of(problem)
    st = steps(output, task)
    fmt = {_S: "short", _T: "full"}.get(output[0]) if output else None
    want = task.gold_chain(problem, fmt)
    answer = task.answer(problem)
    lab = []
    for j, (i, d, is_answer) in enumerate(st):
        closes = i + 1 == len(output) or output[i + 1] == EOS
        lab.append(float(d == answer and j == len(want) and closes) if is_answer else float(j < len(want) and d == want[j]))
    return lab


def outcome_label(problem: Problem, output: list[int]) -> float:
    """1.0 when the output's answer is right (ORM's label), else 0.0 (no answer counts as wrong)."""
    task = tasks.task_of(problem)
    st = steps(output, task)
    return float(bool(st) and st[-1][2] and st[-1][1] == task.answer(problem))


def aggregate(step_scores: list[list[float]], agg: Agg = "last") -> np.ndarray:
    """Step scores -> one score per output: the last step's, the smallest, or the product. No steps: 0.0."""
    if agg not in ("last", "min", "prod"):
        raise ValueError(f"unknown aggregation {agg!r}: use last, min or prod")
    f = {"last": lambda s: s[-1], "min": min, "prod": lambda s: float(np.prod(s))}[agg]
    return np.array([float(f(s)) if len(s) else 0.0 for s in step_scores], dtype=np.float64)


class OracleVerifier:
    """The rule as a verifier: 1.0 for a right step, 0.0 for a wrong one (the upper bound of any learned one)."""

    kind = "oracle"
    flops_per_token = 0.0

    def score_steps(self, problems: list[Problem], outputs: list[list[int]]) -> list[list[float]]:
        return [oracle_labels(p, o) for p, o in zip(problems, outputs)]


class UniformVerifier:
    """A verifier that scores every step alike (1.0): it knows nothing, so best-of-N with it keeps the first sample
    and weighted voting with it is majority voting (the search experiment's placebo)."""

    kind = "uniform"
    flops_per_token = 0.0

    def score_steps(self, problems: list[Problem], outputs: list[list[int]]) -> list[list[float]]:
        task = tasks.of(problems)
        return [[1.0] * len(steps(o, task)) for o in outputs]


# ---------------------------------------------------------------------------------------------------------------
# Learned verifiers: the thinker's GPT with a verifier head (token or scalar).


def training_problems(n_per_k: int, seed: int = 0, task: str | Task = "digits") -> list[Problem]:
    """A verifier's training problems: n_per_k per k from the "train" part of the space (core.problems), with
    repetition where a k is small. Every check and search that scores a verifier draws from "val" or "test", so
    they are disjoint from these whatever the seeds."""
    return problems_per_k(n_per_k, f"verifier-{seed}", split="train", repeat=True, task=task)


def held_out_problems(n_per_k: int, seed: int = 0, task: str | Task = "digits") -> list[Problem]:
    """Up to n_per_k distinct problems per k no verifier trained on (the "test" part)."""
    return problems_per_k(n_per_k, f"verifier-{seed}", split="test", task=task)


def build_net(thinker: GPT | None = None, cfg: dict | None = None, head: str = "token") -> GPT:
    """The thinker's GPT (its weights when given) with a verifier head: "token", Linear(d, V) with a bias, its
    weight the thinker's LM head (random from scratch); "scalar", a new Linear(d, 1). position_logits (scoring) and
    logits_at (training) read it."""
    net = GPT(**(cfg or thinker.config()))
    if thinker is not None:
        net.load_state_dict(thinker.state_dict())
    lm = net.head.weight.data
    net.head = nn.Linear(net.cfg.d_model, net.cfg.vocab_size if head == "token" else 1)
    if head == "token" and thinker is not None:
        net.head.weight.data.copy_(lm)
        net.head.bias.data.zero_()
    return net


def position_logits(net: GPT, ids: torch.Tensor) -> torch.Tensor:
    """(B, T) verifier logits, one per position: a scalar head's output there, or (token head) the logit the state
    at t - 1 gives the token written at t (position 0 writes nothing: 0)."""
    z = net(ids)[0]
    if z.shape[-1] == 1:
        return z[..., 0]
    return torch.cat([z.new_zeros(len(ids), 1), z[:, :-1].gather(-1, ids[:, 1:, None])[..., 0]], 1)


def _batch(problems, outputs, device=None):
    """(B, max_len) ids of prompt + output, pad-filled (outputs are cut to fit)."""
    task = tasks.of(problems)
    seq = np.full((len(outputs), task.max_len), PAD, dtype=np.int64)
    for i, (d, o) in enumerate(zip(problems, outputs)):
        ids = (task.prompt_ids(d) + list(o))[:task.max_len]
        seq[i, :len(ids)] = ids
    return torch.from_numpy(seq).to(device)


class Verifier:
    """A learned verifier (see the module docstring for the interface)."""

    def __init__(self, net: GPT, kind: str, meta: dict | None = None):
        self.net, self.kind, self.meta = net.eval(), kind, meta or {}
        self.flops_per_token = 2.0 * sum(p.numel() for p in net.parameters())

    @torch.inference_mode()
    def step_logits(self, problems, outputs, chunk: int = 4096) -> list[np.ndarray]:
        dev = next(self.net.parameters()).device
        task = tasks.of(problems)
        P, L = task.prompt_len, task.max_len
        out = []
        for s in range(0, len(outputs), chunk):
            d, o = problems[s:s + chunk], outputs[s:s + chunk]
            logit = position_logits(self.net, _batch(d, o, dev)).float().cpu().numpy()   # (B, max_len)
            for b, oo in enumerate(o):
                idx = [P + i for i, _, _ in steps(oo, task) if P + i < L]
                out.append(logit[b, idx])
        return out

    def score_steps(self, problems, outputs) -> list[list[float]]:
        return [(1 / (1 + np.exp(-z))).tolist() for z in self.step_logits(problems, outputs)]


# ---------------------------------------------------------------------------------------------------------------
# Training data: the thinker's own samples, labelled.

def sample_outputs(thinker: GPT, problems: list[Problem], cfg: VerifierConfig, gen: torch.Generator
                   ) -> tuple[list[Problem], list[list[int]]]:
    """cfg.samples outputs per problem at cfg.temperature, each problem's format forced by cfg.format_weights.
    Returns (problem per row, output ids per row), problem-major.

    Memoised on everything the samples depend on (the thinker's weights, the problems, the sampling settings and
    gen's state): the kinds of one seed draw the same training outputs and the same held-out ones, so the lab's
    search unit sampled six times what it needed twice. A repeat hands back the lists and leaves gen where the
    sampling left it, so what draws from gen next (prm-mc's rollouts) draws the same stream."""
    key = (weights_hash(thinker), tuple(problems), cfg.formats, cfg.format_weights, cfg.samples,
           cfg.temperature, gen.device.type, bytes(gen.get_state().numpy()))
    if key in _SAMPLED:
        digs, outs, state = _SAMPLED[key]
        gen.set_state(state)
        return list(digs), list(outs)
    digs, outs = _sample_outputs(thinker, problems, cfg, gen)
    _SAMPLED[key] = (digs, outs, gen.get_state())
    while len(_SAMPLED) > 4:        # a seed's training and held-out samples, with room for a second thinker
        del _SAMPLED[next(iter(_SAMPLED))]
    return list(digs), list(outs)


_SAMPLED: dict = {}


def _sample_outputs(thinker: GPT, problems, cfg: VerifierConfig, gen: torch.Generator):
    rng = np.random.default_rng(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
    w = np.asarray(cfg.format_weights, dtype=float)
    fmt = rng.choice(len(cfg.formats), size=len(problems), p=w / w.sum())
    digs, outs = [], []
    for f, name in enumerate(cfg.formats):
        probs = [p for p, g in zip(problems, fmt) if g == f]
        if not probs:
            continue
        pool = sample_pool(thinker, probs, cfg.samples, [name], cfg.temperature, gen=gen, keep_outputs=True)
        for d, row in zip(probs, pool.outputs):
            digs += [d] * len(row)
            outs += row
    return digs, outs


def mc_labels(problems, outputs, complete) -> list[list[float]]:
    """Math-Shepherd's soft labels: for each step, the share of the completions `complete` samples from the prefix
    that ends at that step which reach the right answer. complete(prompts) -> [list of completions per prompt]
    (prompts: prompt ids + the prefix). The answer step needs no rollout: its prefix already holds the answer
    (label 1.0 or 0.0). Each distinct (problem, prefix) is rolled out once."""
    task = tasks.of(problems)
    todo: dict[tuple, None] = {}
    for d, o in zip(problems, outputs):
        for i, _, is_answer in steps(o, task):
            if not is_answer:
                todo[(d, tuple(o[:i + 1]))] = None
    keys = list(todo)
    share = {}
    if keys:
        comps = complete([task.prompt_ids(d) + list(p) for d, p in keys])
        for (d, p), cs in zip(keys, comps):
            share[(d, p)] = float(np.mean([outcome_label(d, list(p) + list(c)) for c in cs]))
    labels = []
    for d, o in zip(problems, outputs):
        labels.append([float(v == task.answer(d)) if is_answer else share[(d, tuple(o[:i + 1]))]
                       for i, v, is_answer in steps(o, task)])
    return labels


def thinker_completer(thinker: GPT, rollouts: int, gen: torch.Generator, temperature: float = 1.0):
    """complete(prompts) for mc_labels: `rollouts` samples from the thinker after each prompt (generate_n shares
    the prompt's KV-cache row among its rollouts)."""
    def complete(prompts):
        outs = generate_n(thinker, prompts, rollouts, gen, temperature)
        return [outs[j * rollouts:(j + 1) * rollouts] for j in range(len(prompts))]
    return complete


def first_error(labels: list[float]) -> list[float]:
    """Step labels up to and including the first wrong one (PRM800K's labellers stop there)."""
    wrong = next((j for j, v in enumerate(labels) if v < 1), None)
    return labels if wrong is None else labels[:wrong + 1]


def make_labels(kind: str, thinker: GPT, problems, outputs, cfg: VerifierConfig, gen: torch.Generator):
    """Per-step targets in [0, 1] for one kind, for the first steps of each output (rows without steps get none;
    "prm" labels stop at the first wrong step)."""
    task = tasks.of(problems)
    if kind == "orm":
        return [[outcome_label(d, o)] * len(steps(o, task)) for d, o in zip(problems, outputs)]
    if kind == "prm":
        return [first_error(oracle_labels(d, o)) for d, o in zip(problems, outputs)]
    return mc_labels(problems, outputs, thinker_completer(thinker, cfg.rollouts, gen, cfg.temperature))


def _targets(problems, outputs, labels) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """ids (N, max_len), soft targets (N, max_len) and a mask of the step positions."""
    task = tasks.of(problems)
    P, L = task.prompt_len, task.max_len
    ids = _batch(problems, outputs)
    y = torch.zeros(ids.shape)
    m = torch.zeros(ids.shape, dtype=torch.bool)
    for b, (o, lab) in enumerate(zip(outputs, labels)):
        for (i, _, _), v in zip(steps(o, task), lab):
            if P + i < L:
                y[b, P + i], m[b, P + i] = v, True
    return ids, y, m


def logits_at(net: GPT, ids: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """position_logits(net, ids)[m] ((N,), row-major), computed with fast.logits_at's saving: only the positions
    the marked steps need run (the training path)."""
    if net.head.out_features == 1:
        return fast.logits_at(net, ids, m)[:, 0]
    before = torch.zeros_like(m)
    before[:, :-1] = m[:, 1:]                     # the state before each marked token (position 0 is never a step)
    return fast.logits_at(net, ids, before).gather(1, ids[m][:, None])[:, 0]


def fit(net: GPT, ids, y, m, cfg: VerifierConfig, seed: int) -> list[float]:
    """BCE (soft targets allowed) on the step positions; AdamW, warmup + cosine (train.lr_at)."""
    g = torch.Generator().manual_seed(seed)
    opt = AdamW(net.parameters(), lr=cfg.learning_rate, betas=(0.9, 0.98))
    net.train()
    losses = []
    for step in range(cfg.steps):
        for grp in opt.param_groups:
            grp["lr"] = lr_at(step, cfg.steps, cfg.learning_rate, min(20, cfg.steps))
        idx = torch.randint(0, len(ids), (cfg.batch,), generator=g)
        mm = m[idx]
        loss = F.binary_cross_entropy_with_logits(logits_at(net, ids[idx], mm), y[idx][mm])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    net.eval()
    return losses


def train_verifier(kind: str, thinker: GPT, seed: int = 0, config: VerifierConfig | None = None,
                   cache: str | None = None, name: str | None = None, log=print,
                   samples: tuple[list, list] | None = None, task: str | Task = "digits") -> Verifier:
    """Train (or load from the cache) a verifier of `kind` on `thinker`'s own samples of `task`'s training problems,
    or on `samples` (problem per row, output ids per row) when given: the outputs of a generator that is not one
    model.

    Cached as <cache>/<name> (default verifier-<kind>-<thinker hash>-<config hash>-seed<seed>, and the samples'
    fingerprint), safetensors + JSON, keyed by the config, the seed, the thinker's weights and the samples;
    name=None with cache="" disables caching (tests)."""
    cfg = VerifierConfig(**{**asdict(config or VerifierConfig()), "kind": kind})
    cfg.validate()
    task = as_task(task)
    given = None if samples is None else [[list(d.x) for d in samples[0]], [list(map(int, o)) for o in samples[1]]]
    on_task = {} if task.spec == "digits" else {"task": task.spec}     # digits' keys as they were
    key = cache_key({"verifier": asdict(cfg), "labels": LABEL_RULES, "seed": seed, **on_task,
                     **({"fixed": given} if given else {})}, init=thinker)
    stem = None
    if cache != "":
        # the thinker's hash and the config's: a quick and a full verifier of one thinker keep separate files
        conf = hashlib.sha256(json.dumps([key["verifier"], LABEL_RULES], sort_keys=True).encode()).hexdigest()[:6]
        name = name or (f"verifier-{kind}-{key['init_hash'][:8]}-{conf}-seed{seed}"
                        + (f"-samples{key['fixed_hash'][:8]}" if given else ""))
        stem = os.path.join(cache_dir(cache), check_name(name))
        if os.path.exists(stem + ".json"):
            try:
                state, meta = load_tensors(stem)
                if meta.get("key") == key:
                    net = build_net(cfg=meta["model"], head=meta["config"].get("head", "scalar"))
                    net.load_state_dict(state, strict=True)
                    if log:
                        log(f"  (loaded cached verifier {stem}.safetensors)")
                    return Verifier(net, kind, meta)
            except (CheckpointError, KeyError, RuntimeError) as e:
                if log:
                    log(f"  ({e}: retraining)")
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    t0 = time.perf_counter()
    problems = training_problems(cfg.n_train, seed, task)
    digs, outs = (list(samples[0]), given[1]) if given else sample_outputs(thinker, problems, cfg, gen)
    if kind == "prm-mc" and cfg.mc_share < 1:     # rollouts are the cost: label a share of the outputs
        keep = np.random.default_rng(seed).random(len(outs)) < cfg.mc_share
        digs, outs = [d for d, k in zip(digs, keep) if k], [o for o, k in zip(outs, keep) if k]
    t_sample = time.perf_counter() - t0
    labels = make_labels(kind, thinker, digs, outs, cfg, gen)
    t_label = time.perf_counter() - t0 - t_sample
    ids, y, m = _targets(digs, outs, labels)
    src = thinker if cfg.init == "thinker" else None
    if cfg.init == "base":
        src = base_model(seed, cache=cache or None, log=log, task=task)
    net = build_net(src, cfg=thinker.config(), head=cfg.head)
    losses = fit(net, ids, y, m, cfg, seed)
    seconds = time.perf_counter() - t0
    meta = {"key": key, "kind": kind, "model": thinker.config(), "seed": seed, "config": asdict(cfg),
            "n_outputs": len(outs), "n_steps": int(m.sum()), "positive_share": float(y[m].mean()),
            "seconds": {"sample": round(t_sample, 2), "label": round(t_label, 2),
                        "fit": round(seconds - t_sample - t_label, 2), "total": round(seconds, 2)},
            "loss_first": float(np.mean(losses[:20])), "loss_last": float(np.mean(losses[-20:]))}
    if log:
        log(f"  trained {kind} verifier on {len(outs)} outputs ({meta['n_steps']} steps) in {seconds:.1f}s")
    if stem:
        save_tensors(stem, net.state_dict(), meta)
    return Verifier(net, kind, meta)
