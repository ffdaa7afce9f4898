"""Learned verifiers' quality, then search with them (best-of-N, weighted vote, beam search, DVTS), on the erring
thinker (the quick lab: on the quick base model)."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Literal

from .. import search as search_method
from .. import verifier
from ..report import pm
from ..train import ERR_CFG, thinker_model
from . import Experiment, register


@dataclass
class Config:
    n_test: int = 100
    """test problems per k"""
    n_val: int = 50
    """validation problems per k (compute-optimal selection)"""
    n_max: int = 64
    """largest N"""
    quick_verifiers: bool = False
    """tiny verifiers (quick mode)"""
    thinker: Literal["erring", "base", "quick"] = "erring"
    """the model searched over: the erring thinker, the base model, or the quick lab's base model"""


def run(cfg: Config, seed: int, env) -> dict:
    sc = search_method.SearchConfig(thinker=cfg.thinker, n_test=cfg.n_test, n_val=cfg.n_val, n_max=cfg.n_max,
                                    quick_verifiers=cfg.quick_verifiers)
    thinker = thinker_model(sc.thinker, seed, env.cache, env.device)
    vcfg = search_method.verifier_config(sc)
    quality = {"seed": seed, "thinker": sc.thinker, "kinds": {}}
    for kind in sc.verifiers:          # verifier.run's measurement, on this thinker (quick mode has its own)
        v = verifier.train_verifier(kind, thinker, seed, vcfg, cache=env.cache, log=None)
        q = verifier.verifier_quality(v, thinker, seed, cfg.n_test, vcfg)
        quality["kinds"][kind] = {**q, "train": {k: v.meta[k] for k in ("seconds", "n_outputs", "n_steps",
                                                                        "positive_share", "loss_first", "loss_last")}}
    return {"verifiers": quality, "search": search_method.run(sc, seed, cache=env.cache, device=env.device, log=None)}


def depends(cfg: Config) -> dict:
    """The erring thinker's and the verifiers' settings: a change to either reruns the search."""
    return {"erring": ERR_CFG, "verifier": asdict(verifier.VerifierConfig())}


def claims(rs: list[dict]) -> list[dict]:
    return search_method.findings([r["search"] for r in rs])


def render_verifiers(rs: list[dict], out: str) -> tuple[str, str]:
    q = [r["verifiers"] for r in rs]
    md = verifier.render(q, out)        # writes out/verifier_quality.png, linked from report.md beside it
    head = ", ".join(f"{k} step AUROC {pm([x['kinds'][k]['step_auroc'] for x in q])}" for k in q[0]["kinds"])
    return md, head


def render_search(rs: list[dict], out: str) -> tuple[str, str]:
    res = [r["search"] for r in rs]
    fs = search_method.findings(res)    # a two-level bootstrap per claim: computed once for the page and the line
    return (search_method.render(res, os.path.join(out, "search"), prefix="search/", fs=fs),
            search_method.headline(res, fs))


def render(rs: list[dict], out: str) -> list[tuple[str, str]]:
    return [render_verifiers(rs, out), render_search(rs, out)]


register(Experiment("search", Config, run, claims, render, depends=depends, run_cost=52, render_cost=6.1,
                    quick=Config(n_test=4, n_val=3, n_max=4, quick_verifiers=True, thinker="quick")))
