"""Exact KL: the KL estimators of the RL loss and their gradients against the exact KL, and the reward-KL frontier.

Which KL is exact here: the per-position KL(pi || pi_ref) over the whole vocabulary (digits: 18 tokens), at a given
prefix (`methods.kl.exact_kl`; the RL loop's `kl_exact` is this, at its sampled prefixes). The sequence KL needs a sum
over outputs: on the frontier it is estimated by Rao-Blackwellisation (the exact per-position KL summed along outputs
sampled from the policy: unbiased, not exact) and bounded below exactly by kl(P_pi(correct) || P_ref(correct)),
where P(correct) sums the teacher-forced probability of each format's one correct output; in (c) it is summed over
the enumerated outputs (exact but for the left-out probability, which can only add to it).

(a) Along a GRPO run (beta = probe_beta, k3 in the loss, as DeepSeekMath and TRL), every probe_every steps, on
prefixes the policy samples on the seed's test prompts: each estimator's exact mean and variance per position (a sum
over the vocabulary), and the exact expected gradient of each estimator used as a loss, against the exact gradient
of KL(pi || pi_ref). k3 in the loss has the gradient of the forward KL(pi_ref || pi) (Tang & Munos 2025, arXiv
2506.09477): close to the reverse one near the reference, apart as the policy moves. The primary asks whether, at
the run's end, its length is off by more than a tenth (the direction, a cosine, is a claim apart); the control is
the exact per-token KL in the loss (its gradient is the KL's), and the placebo puts it in k3's place, in the probed
run and in the measured gradient, which it then reads against the KL's gradient on prefixes the policy samples again
on a stream of their own: the control's measurement replicated (on the same prefixes the two are equal by
definition), so the placebo has the spread that sampling prefixes gives a length (wider than the paired treatment's:
its floor errs on the strict side).
(b) GRPO, Dr. GRPO, DAPO (with a KL term added) and REINFORCE with a group baseline at each beta, all with k3, each
run ending with greedy accuracy and the KL to the reference measured the same way for every run.
(c) At the end of the probed run, the sequence KL and its exact gradient, by enumerating every output of
probability >= seq_eps on a few held-out prompts (methods.kl.output_tree): per-token losses drop the future terms
of the sequence gradient; k1 in the reward keeps them (Tang & Munos 2025).
Not here: other estimators on the frontier, more betas: a larger grid is a sweep over this Config.
"""
from __future__ import annotations

import copy
import math
import os
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import torch

from .. import tasks
from ..core.config import Count, Every, NonNegative, NTest, Probability, Steps
from ..core.evaluate import evaluate
from ..core.problems import test_problems
from ..core.sampling import generate_n, output_logits
from ..io.report import md_table, plt, save
from ..methods import kl as M
from ..stats import findings
from ..stats.summary import pm
from ..train.rl import ALGOS, Algo, RLConfig, every_n_steps, train
from . import Experiment, opening, reading, register, replicate_seed
from .thresholds import THRESHOLDS as TH


@dataclass
class Config:
    task: str = "digits"
    """the task (`reasonlab.tasks`: digits, modprod, compose, add; knobs after colons: "compose:n_f=4")"""
    steps: Steps = 40
    """RL steps per run"""
    algos: tuple[Algo, ...] = ("grpo", "dr_grpo", "dapo", "reinforce_baseline")
    """algorithms on the frontier (each with the k3 term at every beta)"""
    betas: tuple[NonNegative, ...] = (0.0, 0.04, 0.2, 1.0)
    """KL weights swept"""
    probe_beta: NonNegative = 0.04
    """the GRPO run whose estimators and gradients are probed along the way (one of betas)"""
    estimator: Literal["k1", "k2", "k3", "exact"] = "k3"
    """the KL term in the probed run's loss, whose expected gradient the primary sets against the KL's (k3:
    GRPO's; exact, the per-token KL over the vocabulary: the control, and the placebo)"""
    probe_every: Every = 5
    """steps between probes"""
    n_probe: Count = 30
    """test prompts per k (the seed's draw) on which the policy samples the probed prefixes"""
    n_test: NTest = 50
    """test problems per k (the seed's draw) for accuracy and the KL at the end"""
    kl_samples: Count = 4
    """outputs sampled per problem for the Rao-Blackwellised sequence KL"""
    n_seq: Count = 3
    """test prompts per k whose outputs are enumerated for the sequence KL's gradient (at the probed run's end)"""
    seq_eps: Probability = 1e-4
    """outputs less likely than this are left out of the enumeration (their total probability is reported)"""

    def validate(self) -> None:
        if "grpo" not in self.algos:
            raise ValueError(f"algos must include grpo (got {', '.join(self.algos)})")
        if self.probe_beta not in self.betas:
            raise ValueError(f"probe_beta must be one of betas {', '.join(f'{b:g}' for b in self.betas)} (got "
                             f"{self.probe_beta:g}): the probed run is one of the frontier's, set betas to include it")


def sampled(policy, ref, prompts: list[list[int]], gen: torch.Generator):
    """One output per prompt sampled from the policy: its positions' logits under the policy (with grad) and the
    reference, and their mask."""
    outs = generate_n(policy, prompts, 1, gen, 1.0)
    logits, _, mask = output_logits(policy, prompts, outs)
    with torch.no_grad():
        ref_logits = output_logits(ref, prompts, outs)[0]
    return logits.float(), ref_logits.float(), mask


def probe(policy, ref, prompts: list[list[int]], gen: torch.Generator, replicate: torch.Generator | None = None
          ) -> dict:
    """Estimators and estimator-gradients against the exact KL at prefixes the policy samples (mean over tokens);
    with `replicate`, the norm of the KL's gradient at prefixes sampled again from that stream too."""
    logits, ref_logits, mask = sampled(policy, ref, prompts, gen)
    m = mask.float()

    def avg(x):
        return ((x * m).sum() / m.sum()).item()

    with torch.no_grad():
        rev = M.exact_kl(logits, ref_logits)
        rec = {"kl": avg(rev), "kl_fwd": avg(M.exact_kl(logits, ref_logits, forward=True))}
        for e in M.ESTIMATORS:
            mean, var = M.moments(logits, ref_logits, e)
            rec[e] = {"bias": avg(mean - rev), "std": avg(var) ** 0.5}   # std: root of the mean per-position variance
    params = [p for p in policy.parameters() if p.requires_grad]
    rec["grad"] = M.gradient_gaps(logits, ref_logits, mask, params)
    if replicate is not None:
        rec["replicate"] = {"grad_norm": M.kl_gradient(*sampled(policy, ref, prompts, replicate), params).norm().item()}
    return rec


def finish(policy, ref, test: list, p_ref: torch.Tensor, samples: int, gen: torch.Generator) -> dict:
    """Greedy accuracy, exact P(correct), the RB sequence KL and its exact Bernoulli lower bound (held-out problems)."""
    test = tasks.problems_of(test)
    task = tasks.of(test)
    prompts = [task.prompt_ids(p) for p in test for _ in range(samples)]
    outs = generate_n(policy, [task.prompt_ids(p) for p in test], samples, gen, 1.0)
    p = M.p_correct(policy, test)
    return {"acc": evaluate(policy, test)["acc"], "p_correct": p.mean().item(),
            "seq_kl": M.rb_seq_kl(policy, ref, prompts, outs), "bound": M.kl_bernoulli(p, p_ref).mean().item()}


def sequence(policy, ref, prompts: list[list[int]], eps: float) -> dict:
    """The sequence KL and its gradient on every output of probability >= eps (methods.kl.output_tree), against
    the per-token losses' and k1-in-the-reward's expected gradients; with the share of the sequence KL at the first
    output position (the format token, which every output has)."""
    tree = M.output_tree(policy, ref, prompts, eps)
    rec = M.sequence_gradients(tree, [p for p in policy.parameters() if p.requires_grad], len(prompts))
    with torch.no_grad():
        first = M.exact_kl(tree["levels"][0]["logits"], tree["levels"][0]["ref"]).mean().item()
    return {**rec, "first_share": first / max(rec["seq_kl"], 1e-30), "eps": eps, "n_prompts": len(prompts)}


def probe_hook(every: int, ref, prompts: list[list[int]], seed: int, probes: list, replicate: bool = False):
    """A train() callback that appends a probe of the policy every `every` steps (replicate: each with the KL's
    gradient at prefixes sampled on a stream of their own, `replicate_seed`)."""
    gen = torch.Generator().manual_seed(seed)
    rep = torch.Generator().manual_seed(replicate_seed(seed, "kl/prefixes")) if replicate else None
    return every_n_steps(every, lambda rec, pol: probes.append({"step": rec["step"],
                                                                **probe(pol, ref, prompts, gen, rep)}))


def run(cfg: Config, seed: int, env) -> dict:
    task = tasks.get(cfg.task)
    base = env.base(seed, cfg.task)
    ref = copy.deepcopy(base).eval()
    test = test_problems(cfg.n_test, "kl", seed, task=task)
    probe_prompts = [task.prompt_ids(p) for p in test_problems(cfg.n_probe, "kl-probe", seed, task=task)]
    seq_prompts = [task.prompt_ids(p) for p in test_problems(cfg.n_seq, "kl-probe", seed, task=task)]
    p_ref = M.p_correct(ref, test)
    frontier, probes, seq = {}, [], None
    for algo in cfg.algos:
        for beta in cfg.betas:
            policy = copy.deepcopy(base)
            probed = algo == "grpo" and beta == cfg.probe_beta
            rl = RLConfig.preset(algo, steps=cfg.steps, seed=seed, log_every=0, beta=beta, task=cfg.task,
                                 kl_estimator=cfg.estimator if probed else "k3")
            hook = probe_hook(cfg.probe_every, ref, probe_prompts, seed, probes,
                              replicate=cfg.estimator == "exact") if probed else None
            train(policy, ref, rl, callback=hook, log=None)
            if probed:
                seq = sequence(policy, ref, seq_prompts, cfg.seq_eps)
            frontier[f"{algo}/{beta:g}"] = {"algo": algo, "beta": beta, **finish(
                policy, ref, test, p_ref, cfg.kl_samples, torch.Generator().manual_seed(seed + 1))}
    return {"probes": probes, "frontier": frontier, "base_p_correct": p_ref.mean().item(), "steps": cfg.steps,
            "probe_beta": cfg.probe_beta, "estimator": cfg.estimator, "sequence": seq,
            **({} if task.spec == "digits" else {"task": task.spec})}


def last(r: dict) -> dict:
    return r["probes"][-1]


def length_gap(probe: dict, est: str) -> float:
    """How far the estimator-as-loss's expected gradient is from the KL's in length alone: | norm ratio - 1 |. For
    the exact KL (the placebo), whose gradient is the KL's on the same prefixes, against the KL's gradient on the
    replicate's prefixes."""
    if est == "exact" and "replicate" in probe:
        return abs(probe["grad"]["grad_norm"] / probe["replicate"]["grad_norm"] - 1)
    return abs(probe["grad"][est]["norm"] / probe["grad"]["grad_norm"] - 1)


def beta_drop(r: dict) -> float:
    """Mean over algorithms of log seq KL(lowest beta) - log seq KL(highest beta): how many e-folds beta cuts it."""
    rows = r["frontier"].values()
    lo, hi = min(x["beta"] for x in rows), max(x["beta"] for x in rows)
    kl = {(x["algo"], x["beta"]): max(x["seq_kl"], 1e-6) for x in rows}
    return float(np.mean([np.log(kl[a, lo]) - np.log(kl[a, hi]) for a in {x["algo"] for x in rows}]))


def claims(rs: list[dict]) -> list[dict]:
    S = "kl"
    est = rs[0].get("estimator", "k3")
    fr = rs[0]["frontier"].values()
    one_beta = "needs two betas" if len({x["beta"] for x in fr}) < 2 else None
    moved = ["moved"]
    sq = [r["sequence"] for r in rs]
    apart = " at prefixes sampled apart" if est == "exact" and "replicate" in last(rs[0]) else ""
    seq_control = ("k1 in the reward (REINFORCE on log pi(y) - log pi_ref(y)), whose expected gradient is the sequence "
                   "KL's (up to the outputs left out of the enumeration)")
    return [
        findings.premise(findings.seed_check(
            S, "The probed run leaves the reference: its per-token KL at the last probe is past a hundredth of a nat",
            "exact KL(pi || pi_ref) per token at the last probe", [last(r)["kl"] for r in rs], TH["kl.moved"]),
            "moved"),
        findings.primary(findings.seed_check(
            S, f"{est} in the loss (GRPO's KL term) pulls with the wrong strength: at the end of the run the length "
            "of its expected gradient is off the exact gradient of KL(pi || pi_ref) by more than a tenth, as a "
            "different beta would be (the control: the exact per-token KL in the loss, whose gradient is the KL's; "
            "only the KL term differs; the direction is the next claim's)",
            f"| ||E grad {est}|| / ||grad KL{apart}|| - 1 | at the last probe", [length_gap(last(r), est) for r in rs],
            TH["kl.grad_gap"], requires=moved, control="the exact per-token KL in the loss (kl_estimator exact)")),
        findings.seed_check(S, f"{est} in the loss points where the KL's gradient points: the cosine of its expected "
                            "gradient to the exact one at the end of the run is above 0.99 (the direction apart from "
                            "the length)", f"cos(E grad {est}, grad KL) at the last probe",
                            [last(r)["grad"][est]["cos"] for r in rs], TH["kl.direction"], requires=moved),
        findings.seed_check(S, "k3 has a smaller per-token std than k1 on the policy's own prefixes (Schulman)",
                            "std(k1) - std(k3) at the last probe", [last(r)["k1"]["std"] - last(r)["k3"]["std"]
                                                                    for r in rs], TH["kl.k3_std"], requires=moved),
        findings.seed_check(S, "Raising beta lowers the KL to the reference (every algorithm, the same RB measure)",
                            "mean over algorithms of log KL(lowest beta) - log KL(highest beta)",
                            [beta_drop(r) for r in rs], TH["kl.beta_drop"], untestable=one_beta, requires=[]),
        findings.seed_check(S, "Even the exact per-token KL in the loss misses the sequence KL's gradient: a "
                            "per-token loss drops how each token moves the KL of the positions after it (Tang & "
                            "Munos 2025)", "||E grad (exact per-token KL) - grad KL_seq|| / ||grad KL_seq||, end of "
                            "the run", [x["per_token"]["rel_err"] for x in sq], TH["kl.seq_gap"], control=seq_control,
                            requires=moved)]


def room(cfg: Config) -> tuple[float, float]:
    """The primary's range by the design: a length's relative gap | ||g|| / ||e|| - 1 | is at least 0, with no upper
    bound."""
    return 0.0, math.inf


def placebo(cfg: Config) -> Config:
    """The control in the treatment's place: the exact per-token KL in the probed run's loss and measured, against
    the KL's gradient on prefixes sampled apart (`length_gap`)."""
    return replace(cfg, estimator="exact")


def ordered_runs(r: dict) -> list[str]:
    """The frontier's runs (algo/beta) in ALGOS order, then by beta."""
    fr = r["frontier"]
    return sorted(fr, key=lambda k: (ALGOS.index(fr[k]["algo"]), fr[k]["beta"]))


def plot_kl(rs: list[dict], path: str) -> str:
    """The k3-loss gradient's error against the KL at each probe; the estimators' bias and std along the run; the
    reward-KL frontier."""
    fig, axes = plt.subplots(1, 3, figsize=(16, 4), layout="constrained")
    probes = [p for r in rs for p in r["probes"]]
    axes[0].scatter([p["kl"] for p in probes], [p["grad"]["k3"]["rel_err"] for p in probes], s=12,
                    label="k3 as loss (GRPO): = grad of the forward KL")
    ratio = [p["grad"]["k3"]["norm"] / p["grad"]["grad_norm"] for p in probes]
    axes[0].scatter([p["kl"] for p in probes], np.array(ratio) - 1, s=12, marker="x",
                    label="its norm / the KL gradient's norm - 1")
    axes[0].axhline(1, color="C3", lw=1, label="k1 as loss: 1 (expected gradient 0)")
    axes[0].axhline(0, color="C2", lw=1, label="k2 as loss: 0 (= grad KL)")
    axes[0].set(xlabel="exact KL(pi||ref) per token at the probe", ylabel="||E grad k - grad KL|| / ||grad KL||",
                title="GRPO's KL term against the KL's gradient")
    axes[0].legend(fontsize=7)
    steps = [p["step"] for p in rs[0]["probes"]]
    curve = lambda f: np.array([[f(p) for p in r["probes"]] for r in rs]).mean(0)
    for i, e in enumerate(M.ESTIMATORS):
        axes[1].plot(steps, curve(lambda p, e=e: p[e]["std"]), marker="o", ms=3, color=f"C{i}", label=f"std {e}")
        axes[1].plot(steps, curve(lambda p, e=e: p[e]["bias"]), ls="--", color=f"C{i}", label=f"bias {e}")
    axes[1].plot(steps, curve(lambda p: p["kl"]), color="k", label="exact KL(pi||ref) per token")
    axes[1].set(xlabel="GRPO step", ylabel="nats per token", title="the estimators: bias and std, exact")
    axes[1].legend(fontsize=7)
    fr = {k: rs[0]["frontier"][k] for k in ordered_runs(rs[0])}
    mean = lambda k, key: float(np.mean([r["frontier"][k][key] for r in rs]))
    for algo in dict.fromkeys(x["algo"] for x in fr.values()):
        keys = [k for k, x in fr.items() if x["algo"] == algo]
        y = [mean(k, "p_correct") for k in keys]
        line, = axes[2].plot([mean(k, "seq_kl") for k in keys], y, marker="o", label=algo)
        axes[2].plot([mean(k, "bound") for k in keys], y, ls=":", marker="x", color=line.get_color())
        for k, x, v in zip(keys, [mean(k, "seq_kl") for k in keys], y):
            if algo == "grpo":
                axes[2].annotate(f"β={fr[k]['beta']:g}", (x, v), fontsize=7)
    axes[2].axhline(np.mean([r["base_p_correct"] for r in rs]), color="grey", lw=1, label="the reference")
    axes[2].set(xlabel="sequence KL to the reference (o: RB; x: exact bound)",
                ylabel="P(correct output), exact", title="reward-KL frontier")
    axes[2].legend(fontsize=8)
    return save(fig, path)


def tables(rs: list[dict]) -> tuple[str, str, str]:
    """The estimators at the last probe, the frontier's runs, and the sequence KL's gradient against each term's."""
    p = [last(r) for r in rs]
    est = md_table(["at the last probe", "bias", "std"],
                   [[e, pm([x[e]["bias"] for x in p], "{:.4f}"), pm([x[e]["std"] for x in p], "{:.4f}")]
                    for e in M.ESTIMATORS])
    runs = md_table(["run", "greedy acc", "P(correct), exact", "sequence KL (RB)", "lower bound (exact)"],
                    [[k, *(pm([r["frontier"][k][key] for r in rs]) for key in ("acc", "p_correct", "seq_kl", "bound"))]
                     for k in ordered_runs(rs[0])])
    sq = [r["sequence"] for r in rs]
    seq = md_table(["in the loss or the reward", "relative error", "cosine", "norm / the KL gradient's"],
                   [[label, pm([x[key]["rel_err"] for x in sq], "{:.3f}"), pm([x[key]["cos"] for x in sq], "{:.4f}"),
                     pm([x[key]["norm"] / x["grad_norm"] for x in sq], "{:.2f}")]
                    for key, label in (("per_token", "exact per-token KL (k2's mean gradient)"), ("k3", "k3 (GRPO)"),
                                       ("k1_reward", "k1 in the reward (REINFORCE)"))])
    return est, runs, seq


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    plot_kl(rs, os.path.join(out, "kl", "kl.png"))
    est, runs, seq_table = tables(rs)
    p = [last(r) for r in rs]
    sq = [r["sequence"] for r in rs]
    vocab = len(tasks.get(rs[0].get("task", "digits")).vocab)
    fs = findings.gate(claims(rs))
    gap = pm([x["grad"]["k3"]["rel_err"] for x in p], "{:.2f}")
    norm = pm([x["grad"]["k3"]["norm"] / x["grad"]["grad_norm"] for x in p], "{:.2f}")
    cos = float(np.mean([x["grad"]["k3"]["cos"] for x in p]))
    where = "mostly in length" if cos > 0.9 else "in direction as well as length"
    head = (f"k3-loss gradient {norm} times the KL gradient's length, cosine {cos:.4f}, at {pm([x['kl'] for x in p])} "
            "nats/token")
    md = f"""## Exact KL: the estimators, their gradients, and the reward-KL frontier

{opening("kl")}

![estimators and frontier](kl/kl.png)

{est}

{runs}

Left and middle: one GRPO run per seed (beta = {rs[0]['probe_beta']:g}, {rs[0].get('estimator', 'k3')} in the loss), probed every few steps on prefixes the
policy samples on held-out prompts; each number is a sum over the {vocab}-token vocabulary, not a sample. k1 and k3 are
unbiased (bias 0), k2 is not; as losses, k1's expected gradient is 0, k2's is that of KL(pi || pi_ref), k3's that of
the forward KL(pi_ref || pi): at the last probe it is {gap} of the reverse gradient off, at
{pm([x['kl'] for x in p])} nats per token (forward KL {pm([x['kl_fwd'] for x in p])}), {where} (cosine
{pm([x['grad']['k3']['cos'] for x in p])}; its norm {norm} times the KL gradient's). Right: {rs[0]['steps']} steps
per run, all with k3; every run's KL measured the same way, never with its own estimator: the sequence KL is
Rao-Blackwellised (the exact per-position KL summed along sampled outputs: unbiased, not exact), the bound is exact.
The RL logs' `kl_exact` is the per-token sum at the policy's own prefixes. Mean ± std over seeds.

The sequence KL's own gradient, at the end of the probed run: on {sq[0]['n_prompts']} held-out prompts every output
of probability at least {sq[0]['eps']:g} is enumerated ({pm([x['pruned'] for x in sq], '{:.4f}')} of the probability
left out), and the gradient of the sequence KL summed over those outputs' prefixes ({pm([x['seq_kl'] for x in sq])}
nats) set against each term's expected gradient on the same outputs (k1 in the reward sees the enumerated complete
outputs only, so the left-out ones show in its error):

{seq_table}

A per-token loss keeps pi(s) grad KL_s and drops grad pi(s) KL_s, how a token changes the probability of the prefixes
after it; k1 in the reward keeps both. Here {pm([x['first_share'] for x in sq])} of the sequence KL sits at the first
position, the format token, whose prefix (the prompt) has probability 1 and no gradient: the larger that share, the
less a per-token loss drops.
{" ".join(findings.verdict_line(f) for f in fs)}

{reading("kl")}
"""
    return [(md, head)]


def check(result) -> None:
    if not result.get("probes") or not isinstance(result.get("frontier"), dict) or not result.get("sequence"):
        raise ValueError("a kl result needs its probes, its frontier and the sequence KL's gradient")


QUESTION = """GRPO adds beta * k3 to its loss. k3 is an unbiased estimate of KL(pi || pi_ref), but is its gradient
the KL's gradient? And what does beta buy: how far does each algorithm move from the reference at each beta?"""
PAPERS = """Schulman 2020, "Approximating KL divergence" (k1, k2, k3); GRPO (Shao et al. 2024, arXiv 2402.03300);
Tang & Munos 2025 (arXiv 2506.09477: k3 in the loss is the forward KL's gradient; per-token losses drop the future
terms of the sequence gradient); Dr. GRPO (arXiv 2503.20783); DAPO (arXiv 2503.14476)."""
EXPLORE = """`reasonlab lab --only kl`; `methods.kl.gradient_gaps(logits, ref_logits, mask, params)` on any pair of
models; `reasonlab train --kl-estimator exact` puts the exact per-token KL in the loss."""

register(Experiment("kl", Config, run, claims, render, question=QUESTION, papers=PAPERS, explore=EXPLORE,
                    check=check, room=room, placebo=placebo,
                    quick=Config(steps=4, probe_every=2, algos=("grpo", "dapo"), betas=(0.0, 0.04, 0.2), n_probe=3,
                                 n_test=3, kl_samples=2, n_seq=1, seq_eps=1e-2),
                    run_cost=45, render_cost=1.0, tier="lesson"))
