"""The search experiment: its config, its claims from hand-made results, and its two sections (search, and the
verifiers' quality)."""
from dataclasses import asdict

import numpy as np
import pytest

from reasonlab import experiments as X
from reasonlab.cli import main
from reasonlab.core.pool import sample_pool
from reasonlab.core.seeds import hashed_seed
from reasonlab.experiments import search as search_exp
from reasonlab.experiments import search_report
from reasonlab.io.pack import pack_bits
from reasonlab.methods.tts import majority
from reasonlab.stats import findings


def res(good: str, bad: str, seed: int, other: float = 0.5) -> dict:
    """A hand-made grid result: `good` right on every problem, `bad` on none, the others on a share `other`."""
    P = 70
    k = [2 + i % 7 for i in range(P)]
    rng = np.random.default_rng(seed)
    strat = {}
    for name in ("greedy", "majority", "weighted/orm", "weighted/prm", "bon/prm", "bon/oracle", "bon/prm-mc",
                 "beam/prm", "dvts/prm", "beam/oracle"):
        for split in ("val", "test"):
            for N in ((1,) if name == "greedy" else (1, 4, 16, 64)):
                p = 1.0 if name == good else 0.0 if name == bad else other
                c = rng.random(P) < p
                strat.setdefault(name, {}).setdefault(split, {})[str(N)] = {
                    "correct": pack_bits(c), "gen": [5.0 * N] * P, "ver": [0.0] * P}
    return {"strategies": strat, "k": {"val": k, "test": k}, "n_params": 1000, "seed": seed,
            "ver_params": dict.fromkeys(("orm", "prm", "prm-mc", "oracle"), 1000),
            "config": {**asdict(search_exp.Config()), "thinker": "test"}}


def primary(fs: list[dict]) -> dict:
    return next(f for f in fs if findings.kind_of(f) == findings.PRIMARY)


def test_findings_are_computed_from_results():
    """Hand-made results where weighted/prm is right everywhere and greedy nowhere: the checks say so; swapping
    them flips the verdict (nothing is a fixed string)."""
    f = search_exp.search_claims([res("weighted/prm", "greedy", s) for s in range(3)])
    first = primary(f)
    assert first["verdict"] == "holds" and first["value"] > 0.3 and first["ci95"][0] > 0
    assert first["requires"] == ["verifier_prm"] and "majority" in first["control"]
    f2 = search_exp.search_claims([res("weighted/orm", "weighted/prm", s) for s in range(3)])
    assert primary(f2)["verdict"] == "does not hold" and primary(f2)["ci95"][1] < 0
    for x in f + f2:
        assert x["verdict"] in ("holds", "does not hold", "inconclusive", "untestable") and "claim" in x and "threshold" in x
    # nothing ever right: no accuracy target is reached, and the compute-optimal claim is reported as missing
    f3 = search_exp.search_claims([res("none", "none", s, other=0.0) for s in range(3)])
    assert f3[-1]["value"] is None and f3[-1]["verdict"] == "inconclusive"
    assert findings.table(f + f2 + f3).count("\n") == len(f + f2 + f3) + 1   # each a row of the findings table


def test_premises_gate_the_claims_that_read_a_falling_verifier_and_the_tie_at_the_ceiling():
    """Best-of-N with the learned PRM falls from right everywhere at N = 1 to wrong everywhere at N = 64: its
    premise fails and every claim that reads the PRM is untestable, naming it, while the oracle's and the vote's
    stand. At k = 2 best-of-N with the oracle is at 1: its tie claim cannot fail, so its premise says so."""
    rs = [res("bon/oracle", "none", s) for s in range(3)]
    for r in rs:
        for N in ("1", "64"):
            r["strategies"]["bon/prm"]["test"][N]["correct"] = pack_bits(np.full(70, N == "1"))
        flat = r["strategies"]["bon/prm-mc"]["test"]
        for N in ("4", "16", "64"):           # the Math-Shepherd PRM's curve flat: the same problems right at every N
            flat[N]["correct"] = flat["1"]["correct"]
    fs = findings.gate(search_exp.search_claims(rs))
    prem = {f["name"]: f for f in fs if findings.kind_of(f) == findings.PREMISE}
    assert set(prem) == {"verifier_prm", "verifier_prm-mc", "easy_room_prm", "easy_room_oracle"}
    assert prem["verifier_prm"]["verdict"] == "does not hold" and prem["verifier_prm-mc"]["verdict"] == "holds"
    assert prem["easy_room_oracle"]["verdict"] == "does not hold"
    gated = [f for f in fs if f.get("untestable")]
    assert primary(fs) in gated and all("the learned prm" in f["untestable"] or "easiest k" in f["untestable"]
                                        for f in gated)
    assert {f["claim"] for f in fs if "oracle verifier" in f["claim"] and f in gated} == {
        "beam search loses to or ties best-of-N at a large budget (N = 64) on the easiest k (2), oracle verifier"}
    assert next(f for f in fs if "majority beats greedy" in f["claim"])["verdict"] != "untestable"


def test_a_verifier_that_falls_between_the_ends_fails_its_premise():
    """The premise reads the whole N curve: best-of-N that rises to N = 4 and falls back by N = 64 fails it though
    its ends agree (the old premise compared N = 1 with N = 64 only); a fall within the tolerance on every seed, or a
    curve that only rises, holds; and a fall of noise whose interval reaches past the tolerance is not shown small."""
    tol = search_exp.TH["search.no_fall"].value
    peak = search_exp.no_fall("x", "v", {1: [0.6, 0.61, 0.62], 4: [0.8, 0.82, 0.81], 64: [0.6, 0.62, 0.61]}, "v")
    assert peak["verdict"] == findings.FAILS and peak["value"] == pytest.approx(0.2) and "best-of-4" in peak["statistic"]
    small = search_exp.no_fall("x", "v", {1: [0.6, 0.6, 0.6], 4: [0.8, 0.8, 0.8], 64: [0.795, 0.79, 0.7925]}, "v")
    assert small["verdict"] == findings.HOLDS and 0 < small["ci95"][1] <= tol
    rises = search_exp.no_fall("x", "v", {1: [0.5, 0.6], 2: [0.6, 0.7], 4: [0.7, 0.8]}, "v")
    assert rises["verdict"] == findings.HOLDS and rises["value"] < 0
    noisy = search_exp.no_fall("x", "v", {1: [0.6, 0.6, 0.6], 64: [0.62, 0.55, 0.6]}, "v")
    assert noisy["verdict"] == findings.FAILS and noisy["value"] < tol < noisy["ci95"][1]


def test_the_room_and_the_placebo_are_fixed_by_the_config():
    cfg = search_exp.Config()
    assert search_exp.room(cfg) == (-1.0, 1.0) and search_exp.placebo(cfg).weigh_with == "uniform"
    X.get("search").validate(search_exp.placebo(cfg))
    with pytest.raises(ValueError, match="weigh_with"):
        X.get("search").validate(search_exp.Config(weigh_with="uniform", methods=("bon",)))


def test_the_compute_optimal_claim_reads_the_log_of_the_token_ratio():
    rs = [res("weighted/prm", "greedy", s) for s in range(3)]
    f = search_exp.compute_claim(rs)
    assert f["statistic"].startswith("log(") and f["threshold"].startswith("> 0")
    co = search_exp.compute_optimal(rs[0])
    i = max(j for j, t in enumerate(co) if t["reachable"])
    assert f["per_seed"][0] == pytest.approx(np.log(co[i]["fixed_test_cost"] / co[i]["test_cost"]), abs=1e-4)


def test_the_placebo_grid_is_majority_voting_again_over_samples_of_its_own(quick_cache):
    """The placebo's grid on the quick thinker: weighted voting with the uniform verifier is majority voting over a
    second pool of samples, drawn from the replicate's seed for its split (an independent replicate of the control),
    on every problem at every N; the control's majority reads the pool hashed from (search, seed, split, "pool")."""
    cfg = search_exp.placebo(search_exp.Config(n_test=4, n_val=3, n_max=4, quick_verifiers=True, thinker="quick",
                                               methods=("bon", "weighted"), search_verifiers=("oracle",)))
    from reasonlab.train.zoo import thinker_model
    model = thinker_model("quick", 0, quick_cache, "cpu")
    r = search_exp.grid(cfg, 0, model, {}, {})
    probs = search_exp.test_problems(cfg.n_test, "search", 0, task=cfg.task)
    twin = sample_pool(model, probs, cfg.n_max, [cfg.force], cfg.temperature, seed=search_exp.replicate_seed(0, "test"))
    pool = sample_pool(model, probs, cfg.n_max, [cfg.force], cfg.temperature, seed=hashed_seed("search", 0, "test",
                                                                                                 "pool"))
    for N in cfg.Ns:
        assert search_exp.cell(r, "weighted/uniform", N)["correct"] == pack_bits(majority(twin, N))
        assert search_exp.cell(r, "majority", N)["correct"] == pack_bits(majority(pool, N))
        assert search_exp.cell(r, "bon/uniform", N)["correct"] == search_exp.cell(r, "bon/uniform", 1)["correct"]
    assert search_exp.cell(r, "weighted/uniform", 4)["gen"] != search_exp.cell(r, "majority", 4)["gen"]


def test_config_rejects_bad_values():
    """Through the registry's check (Literal choices, counts, then Config.validate), as the command line and the lab
    check a config."""
    exp = X.get("search")
    exp.validate(search_exp.Config())
    exp.validate(search_exp.Config(task="add"))
    for bad in (dict(force="A"), dict(n_max=48), dict(width=3), dict(verifiers=("xyz",)), dict(methods=("bfs",)),
                dict(search_verifiers=("orm",), verifiers=("prm",)), dict(temperature=0.0),
                dict(weigh_with="orm", verifiers=("prm",)), dict(weigh_with="xyz")):
        with pytest.raises(ValueError):
            exp.validate(search_exp.Config(**bad))


@pytest.mark.parametrize("argv, msg", [
    (["search", "--methods", "bfs"], "invalid choice"),
    (["search", "--width", "3"], "power of two"),
    (["search", "--n-max", "48"], "n_max"),
    (["search", "--search-verifiers", "orm", "--verifiers", "prm"], "search verifier"),
    (["search", "--force", "A"], "invalid choice"),
    (["search", "--agg", "mean"], "invalid choice"),
    (["search", "--verifiers", "xyz"], "invalid choice"),
])
def test_cli_bad_input_is_one_line_and_exit_2(argv, msg, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("reasonlab: error:") and msg in err


def _fake_result(seed, prm_auroc, mc_auroc):
    q = lambda a: {"step_auroc": a, "chain_step_auroc": a, "first_error_auroc": a, "first_error_ece": 0.02,
                   "step_ece": 0.02, "n_outputs": 70,
                   "outcome_auroc": {"last": a, "min": a, "prod": a}, "step_auroc_by_k": {str(k): a for k in range(2, 9)},
                   "step_bins": [{"lo": 0.9, "hi": 1.0, "score": 0.95, "positive": 0.9, "n": 10}],
                   "train": {"seconds": {"total": 1.0}}}
    return {"seed": seed, "thinker": "erring", "kinds": {"orm": q(0.8), "prm": q(prm_auroc), "prm-mc": q(mc_auroc)}}


def test_render_states_the_math_shepherd_margin_as_a_computed_check(tmp_path):
    close = [_fake_result(s, 0.93, 0.92 + 0.002 * s) for s in range(3)]

    def line(md, start):
        return next(x for x in md.splitlines() if x.startswith(start))
    md = search_report.verifiers_page(close, str(tmp_path), margin=0.05)
    assert line(md, "Math-Shepherd labels within 0.05").endswith("**holds**.")
    assert (tmp_path / "verifier_quality.png").exists()
    far = [_fake_result(s, 0.93, 0.70 + 0.01 * s) for s in range(3)]
    md = search_report.verifiers_page(far, str(tmp_path), margin=0.05, time_budget=0.5)
    assert line(md, "Math-Shepherd labels within 0.05").endswith("**does not hold**.")
    assert line(md, "The PRM separates steps better").endswith("**holds**.")        # 0.93 vs the ORM's 0.8
    assert line(md, "Each verifier trains in ≤ 0.5 s").endswith("**does not hold**.")  # 1.0 s each
    nan_left_out = search_report._seed_check([0.1, float("nan"), 0.2, 0.3], findings.greater, 0.0)
    m, lo, hi, verdict = nan_left_out
    assert m == pytest.approx(0.2) and lo < 0.2 < hi and hi - lo == pytest.approx(2 * 4.303 * 0.1 / 3 ** 0.5, rel=1e-4)
    assert verdict == "inconclusive" and search_report._seed_check([0.30, 0.31, 0.32], findings.greater, 0.0)[3] == "holds"
    assert search_report._seed_check([0.1], findings.greater, 0.0)[3] == "inconclusive (fewer than 2 seeds)"


def test_search_page_tabulates_every_strategy_and_the_unreached_targets(tmp_path):
    """The section from hand-made results: its plots, one table row per strategy, and every accuracy target of
    the compute-optimal table reported as not reached where nothing is ever right."""
    rs = [res("weighted/prm", "greedy", s) for s in range(2)]
    md = search_exp.search_page(rs, str(tmp_path), search_exp.search_claims(rs))
    assert md.startswith("## Verifiers and search\n")
    for png in ("acc_vs_n.png", "acc_vs_compute.png", "tokens.png"):
        assert (tmp_path / "search" / png).exists() and f"(search/{png})" in md
    rows = [x for x in md.splitlines() if x.startswith("| ")]
    for name in rs[0]["strategies"]:
        assert sum(x.startswith(f"| {name} | ") for x in rows) == 1
    assert next(x for x in rows if x.startswith("| weighted/prm | ")).startswith("| weighted/prm | 1.000 ± 0.000 |")
    none = [res("none", "none", s, other=0.0) for s in range(2)]
    frontier = search_report.frontier_table(none).splitlines()
    assert len(frontier) == 2 + 7 and all(" | not reached | " in x for x in frontier[2:])


def test_a_result_keeps_its_task_in_its_config_but_on_digits(tmp_path):
    """A digits result's config has the keys it always had; another task's names it, and the page's chance and
    compute read that task."""
    assert "task" not in search_exp.stored_config(search_exp.Config())
    fields = [k for k in asdict(search_exp.Config()) if k != "task"]
    assert list(search_exp.stored_config(search_exp.Config())) == fields
    assert search_exp.stored_config(search_exp.Config(task="compose:n_f=3"))["task"] == "compose"
    rs = [res("weighted/prm", "greedy", s) for s in range(2)]
    for r in rs:
        r["config"] = {**search_exp.stored_config(search_exp.Config(task="add")), "thinker": "test"}
    add = search_exp.task_of(rs[0])
    assert search_report.chance(rs[0], 2) == add.chance(2)
    assert search_exp.per_problem(rs[0], "greedy", 1)[3][0] == 2 * 1000 * (add.prompt_len + 5.0)
    md = search_exp.search_page(rs, str(tmp_path), search_exp.search_claims(rs))
    assert "Chance is 0.1" not in md and "Chance (the best blind guess) is" in md


def test_the_grid_runs_on_another_task():
    """The sampled strategies of the grid on add (answers of k + 1 words), an untrained model at the smallest size:
    every strategy has a correctness bit per test problem, and the result's config names its task."""
    from reasonlab.train.sft import build_model
    cfg = search_exp.Config(task="add", n_test=1, n_val=1, n_max=2, methods=("bon", "weighted"),
                            search_verifiers=("oracle",))
    r = search_exp.grid(cfg, 0, build_model(0, task="add").eval(), {}, {})
    assert r["config"]["task"] == "add" and r["k"]["test"] == list(range(2, 6))
    for name in ("greedy", "majority", "bon/oracle", "weighted/oracle"):
        assert len(search_exp.per_problem(r, name, 1)[0]) == 4
