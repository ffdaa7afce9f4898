"""7. Adaptive thinking: make thinking cost something in the reward; does the model learn when to think?"""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..io import report
from ..methods import adaptive as adaptive_method
from ..methods.adaptive import best_fixed_per_k
from ..stats import findings
from ..stats.findings import both, finding, seed_check
from . import Experiment, register
from .thresholds import THRESHOLDS as TH


@dataclass
class Config:
    steps: int = 200
    """RL steps per adaptive-thinking run"""
    methods: tuple[str, ...] = ("thinkless_fmt",)
    """adaptive-thinking rewards compared (see adaptive.METHODS)"""
    eval_n: int = 300
    """greedy test problems per k"""

    def validate(self) -> None:
        for m in self.methods:
            if m not in adaptive_method.METHODS:
                raise ValueError(f"unknown adaptive method {m!r}: choose from {', '.join(adaptive_method.METHODS)}")


def run(cfg: Config, seed: int, env) -> dict:
    model = env.base(seed)
    ref_acc = adaptive_method.reference_accuracy(model)
    runs = [adaptive_method.run_method(model, m, seed, steps=cfg.steps, n_eval=cfg.eval_n, ref_acc=ref_acc,
                                       progress=True)
            for m in cfg.methods]
    return {"runs": runs, "fixed": adaptive_method.fixed_points([model], cfg.eval_n),
            "tts": adaptive_method.tts_points(model, cfg.eval_n)}


def adaptive_vs_best_fixed(adaptive: list[dict]) -> list[dict]:
    """Each adaptive method against the control that would also pass "beats always-S": the best fixed format per k
    (answer A where A is as accurate, e.g. k = 2), on the same problems: no worse than the margin in accuracy, and
    fewer tokens."""
    out = []
    for i, run in enumerate(adaptive[0]["runs"]):
        m = run["method"]
        ctl = [best_fixed_per_k(r["fixed"]) for r in adaptive]
        acc = [r["runs"][i]["acc"] - c["acc"] for r, c in zip(adaptive, ctl)]
        tok = [c["tokens"] - r["runs"][i]["tokens"] for r, c in zip(adaptive, ctl)]
        a = seed_check("7 adaptive", "", "", acc, TH["adaptive.acc_margin"])
        t = seed_check("7 adaptive", "", "", tok, TH["adaptive.token_gain"])
        s_acc = [r["runs"][i]["acc"] - r["fixed"]["S"]["acc"] for r in adaptive]
        s_tok = [r["fixed"]["S"]["tokens"] - r["runs"][i]["tokens"] for r in adaptive]
        out.append(finding("7 adaptive", f"{m} is as accurate as the best fixed format per k (within 0.01) with "
                           "fewer tokens", f"acc({m}) - acc(best fixed per k)", a["value"], a["ci95"], a["per_seed"],
                           "> -0.01 (and tokens saved > 0)", both(a["verdict"], t["verdict"]),
                           p=max(a["p"], t["p"]), source=TH["adaptive.acc_margin"].source, control="best fixed per k",
                           control_per_k=ctl[0]["per_k"],
                           tokens_saved={"value": t["value"], "ci95": t["ci95"], "per_seed": t["per_seed"]},
                           vs_always_S={"acc": [round(x, 4) for x in s_acc], "tokens_saved": [round(x, 4) for x in s_tok]}))
    return out


def claims(rs: list[dict]) -> list[dict]:
    return adaptive_vs_best_fixed(rs)


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    runs = [x for r in rs for x in r["runs"]]
    fixed = adaptive_method.mean_points([r["fixed"] for r in rs])
    summary = {"methods": adaptive_method.summarize(runs, fixed), "fixed": fixed, "tts": rs[0]["tts"],
               "seeds": sorted({x["seed"] for x in runs})}
    report.plot_adaptive_heatmap(summary, os.path.join(out, "adaptive", "heatmap.png"))
    report.plot_adaptive_frontier(summary, os.path.join(out, "adaptive", "frontier.png"))
    best = max(summary["methods"], key=lambda m: (summary["methods"][m]["acc"][0], -summary["methods"][m]["tokens"][0]))
    b = summary["methods"][best]
    head = (f"{best}: accuracy {b['acc'][0]:.3f} ± {b['acc'][1]:.3f} at {b['tokens'][0]:.2f} tokens "
            f"(always S {fixed['S']['acc']:.3f} at {fixed['S']['tokens']:.2f})")
    md = f"""## Adaptive thinking: when does thinking pay?

> **Question.** Make thinking cost something in the reward. Does the model learn to answer directly where that is
> reliable and think where it must, and does that beat every fixed format?

![format by k](adaptive/heatmap.png)

![accuracy against tokens](adaptive/frontier.png)

{report.adaptive_table(summary)}

GRPO with Thinkless's per-format reward; half of each group is forced to answer directly so that A keeps being
tried, and those rollouts train only that choice (`thinkless_fmt`); mean ± std over seeds; every point of the
table and the plane is on the test set. {" ".join(findings.verdict_line(f) for f in adaptive_vs_best_fixed(rs))}

*Papers:* Thinkless (Fang et al. 2025, arXiv 2505.13379); AdaptThink (Zhang et al. 2025, arXiv 2505.13417);
length penalties (Arora & Zanette 2025, arXiv 2502.04463); Kimi k1.5 (arXiv 2501.12599).
*Explore:* `reasonlab adaptive --methods grpo cost0.3 cost0.6 kimi thinkless thinkless_fmt arm adaptthink`.
"""
    return [(md, head)]



register(Experiment("adaptive", Config, run, claims, render, keys=("runs", "fixed", "tts"), quick=Config(steps=4, eval_n=30), run_cost=13,
                    render_cost=0.4))
