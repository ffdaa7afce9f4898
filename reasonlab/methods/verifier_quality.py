"""A verifier's quality against the oracle on held-out problems: step-level AUROC and calibration (the search
experiment's verifiers section reads it)."""
from __future__ import annotations

import numpy as np
import torch

from ..core.model import GPT
from ..core.problems import as_task
from ..core.seeds import hashed_seed
from ..tasks import Task
from .config import VerifierConfig
from .verifier import aggregate, first_error, held_out_problems, oracle_labels, outcome_label, sample_outputs, steps


def auroc(scores, labels) -> float:
    """Area under the ROC curve: P(score of a random positive > score of a random negative), ties counting 1/2
    (the Mann-Whitney U statistic over n_pos * n_neg). NaN when one class is missing."""
    s, y = np.asarray(scores, dtype=float), np.asarray(labels, dtype=bool)
    n1, n0 = int(y.sum()), int((~y).sum())
    if n1 == 0 or n0 == 0:
        return float("nan")
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s))
    ss = s[order]
    # average ranks over ties (1-based)
    starts = np.r_[0, np.nonzero(np.diff(ss))[0] + 1]
    ends = np.r_[starts[1:], len(ss)]
    for a, b in zip(starts, ends):
        ranks[order[a:b]] = (a + b + 1) / 2
    return float((ranks[y].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def calibration(scores, labels, n_bins: int = 10) -> dict:
    """Reliability bins (equal width on [0, 1]): per bin the mean score, the share of positives and the count; and
    the expected calibration error ECE = sum_b n_b / n * |share_b - mean score_b| (Guo et al. 2017)."""
    s, y = np.asarray(scores, dtype=float), np.asarray(labels, dtype=float)
    b = np.clip((s * n_bins).astype(int), 0, n_bins - 1)
    bins, ece = [], 0.0
    for i in range(n_bins):
        m = b == i
        if m.any():
            bins.append({"lo": i / n_bins, "hi": (i + 1) / n_bins, "score": float(s[m].mean()),
                         "positive": float(y[m].mean()), "n": int(m.sum())})
            ece += m.sum() / len(s) * abs(y[m].mean() - s[m].mean())
    return {"ece": float(ece), "bins": bins}


def verifier_quality(verifier, thinker: GPT, seed: int = 0, n_per_k: int = 100, config: VerifierConfig | None = None,
                     task: str | Task = "digits") -> dict:
    """Score the thinker's samples of held-out problems (the held-out quarter, disjoint from every training set)
    and compare with the oracle. Returns step-level AUROC, ECE and reliability bins (all steps, and chain steps
    alone), the step AUROC on the steps up to each output's first wrong step (what PRM800K labels, and all a
    weakest-step score reads: a step after an error is wrong by inheritance), outcome AUROC per aggregation (score
    vs answer right), and the counts."""
    cfg = config or VerifierConfig()
    task = as_task(task)
    gen = torch.Generator().manual_seed(hashed_seed("verifier_quality", seed))
    digs, outs = sample_outputs(thinker, held_out_problems(n_per_k, seed, task), cfg, gen)
    sc = verifier.score_steps(digs, outs)
    lab = [oracle_labels(d, o) for d, o in zip(digs, outs)]
    flat_s = np.array([x for r in sc for x in r])
    flat_y = np.array([x for r in lab for x in r])
    is_chain = np.array([not a for o in outs for _, _, a in steps(o, task)])
    upto = np.array([j < len(first_error(r)) for r in lab for j in range(len(r))], dtype=bool)
    outcome = np.array([outcome_label(d, o) for d, o in zip(digs, outs)])
    ks = np.array([d.k for d in digs])
    res = {"kind": verifier.kind, "n_outputs": len(outs), "n_steps": int(len(flat_y)),
           "step_positive_share": float(flat_y.mean()), "step_auroc": auroc(flat_s, flat_y),
           "chain_step_auroc": auroc(flat_s[is_chain], flat_y[is_chain]),
           "first_error_auroc": auroc(flat_s[upto], flat_y[upto]),
           "first_error_ece": calibration(flat_s[upto], flat_y[upto])["ece"],
           "chain_first_error_auroc": auroc(flat_s[upto & is_chain], flat_y[upto & is_chain]),
           **{"step_" + k: v for k, v in calibration(flat_s, flat_y).items()},
           "outcome_share": float(outcome.mean()),
           "outcome_auroc": {a: auroc(aggregate(sc, a), outcome) for a in ("last", "min", "prod")},
           "step_auroc_by_k": {int(k): auroc(np.array([x for r, kk in zip(sc, ks) if kk == k for x in r]),
                                             np.array([x for r, kk in zip(lab, ks) if kk == k for x in r]))
                               for k in sorted(set(ks.tolist()))}}
    return res
