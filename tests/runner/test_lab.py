"""The lab: `reasonlab lab --quick` runs every experiment, writes a self-contained report, and resumes."""
import json
import os
import re
import shutil
from dataclasses import asdict, replace

import matplotlib.pyplot as plt
import numpy as np
import pytest

from reasonlab import experiments as X
from reasonlab.cli import main
from reasonlab.experiments import base, thresholds
from reasonlab.io import report
from reasonlab.runner import lab, pilot, units
from reasonlab.runner.executor import ExecConfig
from reasonlab.runner.units import longest_first
from reasonlab.stats import power
from reasonlab.stats.findings import ALPHA


@pytest.fixture(scope="module")
def quick_lab(tmp_path_factory, quick_cache):
    """One quick lab for the module, on the session's quick base model."""
    root = tmp_path_factory.mktemp("lab")
    out = str(root / "run")
    logs = []
    cfg = lab.LabConfig(quick=True, seeds=(0,), out=out, cache_dir=quick_cache)
    results = lab.run(cfg, log=logs.append)
    return cfg, results, logs


def core() -> list[str]:
    """The experiments `reasonlab lab` runs without --all."""
    return [n for n in X.names() if X.get(n).tier == "core"]


def test_quick_lab_runs_every_experiment_and_writes_the_report(quick_lab):
    cfg, results, _ = quick_lab
    assert set(results) == set(cfg.selected()) == {n for n in X.names() if X.get(n).tier == "core"}
    for exp in cfg.selected():
        with open(os.path.join(cfg.out, exp, "seed0.json")) as f:
            assert json.load(f)["key"] == lab.unit_key(exp, 0, cfg)
    md = open(os.path.join(cfg.out, "report.md"), encoding="utf-8").read()
    sections = re.findall(r"^## (\d+)\. ", md, flags=re.M)
    assert sections == [str(i) for i in range(1, 11)]            # numbered from the registry's order
    for img in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md):          # every picture the markdown names exists
        assert os.path.getsize(os.path.join(cfg.out, img)) > 1000
    n = 10
    assert md.count("*Paper") == n and md.count("*Explore:*") == n and md.count("**Question.**") == n
    assert "## 9. Verifiers and search" in md and "| claim | statistic |" in md and "## Lessons at a glance" in md
    # numbers are the experiments' own (each scores its own test draw): the RL table's base accuracy is its result's
    assert f"Base model (free, greedy): accuracy {results['rl']['results'][0]['grpo']['base_acc']:.3f}" in md


def test_report_html_is_self_contained(quick_lab):
    cfg, _, _ = quick_lab
    html = open(os.path.join(cfg.out, "report.html"), encoding="utf-8").read()
    srcs = re.findall(r'<img[^>]*src="([^"]+)"', html)
    md = open(os.path.join(cfg.out, "report.md"), encoding="utf-8").read()
    assert len(srcs) == len(re.findall(r"!\[", md)) + md.count("<img ")        # the plots and the thumbnails
    assert srcs and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert "<table>" in html and "http://" not in html and "https://" not in html


def test_finished_experiments_are_reused_and_changed_ones_rerun(quick_lab, tmp_path, monkeypatch):
    """Which units run again (the report they feed is the rendering tests' subject: not drawn again here)."""
    cfg, _, _ = quick_lab
    out = str(tmp_path / "copy")
    shutil.copytree(cfg.out, out)
    os.remove(os.path.join(out, "rl", "seed0.json"))               # as if the lab was interrupted during RL
    logs, reported = [], []
    monkeypatch.setattr(lab, "write_report",
                        lambda out, results, *a, **kw: reported.append(sorted(results)) or {"html": "", "md": ""})
    lab.run(lab.LabConfig(quick=True, seeds=(0,), out=out, cache_dir=cfg.cache_dir), log=logs.append)
    assert reported == [sorted(core())]                                 # every experiment's results, once
    reused = [line for line in logs if "reused" in line]
    assert len(reused) == len(core()) - 1 and not any("rl," in line for line in reused)
    assert any(line.startswith(f"[5/{len(core())}] rl, seed 0 ...") for line in logs)
    # other sizes: a different key, so that experiment reruns
    other = lab.LabConfig(quick=True, configs={"base": base.Config(n_test=30), "rl": replace(X.get("rl").quick, n_test=30)})
    assert lab.unit_key("base", 0, other) != lab.unit_key("base", 0, cfg)
    assert lab.unit_key("rl", 0, other) != lab.unit_key("rl", 0, cfg)            # RL's final evaluation uses n_test
    assert lab.unit_key("star", 0, other) == lab.unit_key("star", 0, cfg)        # STaR does not: reused


def test_check_screenshot_rejects_a_blank_page(tmp_path):
    blank = str(tmp_path / "blank.png")
    plt.imsave(blank, np.ones((600, 400, 3)))
    assert not report.check_screenshot(blank)["ok"]


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_report_renders_in_headless_chromium(quick_lab, tmp_path):
    cfg, _, _ = quick_lab
    png = report.screenshot(os.path.join(cfg.out, "report.html"), str(tmp_path / "report.png"))
    check = report.check_screenshot(png)
    assert check["ok"], check


def test_a_first_screen_without_plots_is_rejected(tmp_path):
    """The lessons at a glance carry thumbnails: a page whose top is text only fails the check."""
    img = np.ones((3000, 800, 3))
    img[::7, 50:750] = 0.2                                       # text, all the way down
    img[1500:1600, 100:300] = [0.9, 0.1, 0.1]                   # a plot, but below the first screen
    plt.imsave(str(tmp_path / "p.png"), img)
    check = report.check_screenshot(str(tmp_path / "p.png"))
    assert not check["ok"] and check["first_screen_colour"] == 0
    img[200:300, 100:300] = [0.1, 0.4, 0.9]
    plt.imsave(str(tmp_path / "p.png"), img)
    assert report.check_screenshot(str(tmp_path / "p.png"))["ok"]


def test_lab_cli_bad_input(capsys):
    assert main(["lab", "--only", "nothing"]) == 2
    assert "unknown experiment 'nothing'" in capsys.readouterr().err
    assert main(["lab", "--report-only", "--out", "/nonexistent/lab"]) == 2


def test_rendering_saved_results_is_byte_identical_and_runs_no_torch_op(quick_lab, tmp_path):
    """The report is a function of the saved results: rendered again here from the files, every file is the one the
    lab wrote (its sections rendered by forked processes, one per CPU, on a machine of two CPUs or more). And
    render_all forks processes from one whose torch may have started OpenMP threads, which a forked child must not
    use (libgomp's pool does not survive fork): rendered here, the whole report runs no torch op."""
    import filecmp

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    cfg, _, _ = quick_lab
    ops = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            ops.append(str(func))
            return func(*args, **(kwargs or {}))
    out = tmp_path / "again"
    shutil.copytree(cfg.out, out)
    for f in out.rglob("*"):
        if f.suffix in (".png", ".md", ".html") or f.name == "findings.json":
            f.unlink()
    results = lab.load_results(str(out), (0,))
    assert set(results) == set(core()) <= set(longest_first("render_cost"))
    meta = json.loads((out / "timing.json").read_text())              # what the lab rendered its report with
    with Record():
        assert torch.ones(1).sum().item() == 1 and ops                 # the recorder sees ops
        ops.clear()
        lab.write_report(str(out), results, meta, workers=1, config_of=cfg.config_of)
    assert ops == []
    rendered = sorted(p.relative_to(out) for p in out.rglob("*") if p.suffix in (".png", ".md", ".html", ".json"))
    assert any(str(p) == "report.html" for p in rendered) and any(p.suffix == ".png" for p in rendered)
    for p in rendered:
        assert filecmp.cmp(out / p, os.path.join(cfg.out, p), shallow=False), p


def test_report_is_written_here_when_a_rendering_process_dies(quick_lab, tmp_path, monkeypatch):
    """A forked rendering process that dies (here: exits at once) costs the parallelism, not the report (two
    experiments' sections: the path is the same for eight, which render in 20 s on a slow CPU)."""
    cfg, _, _ = quick_lab
    out = tmp_path / "r"
    shutil.copytree(cfg.out, out)
    os.remove(out / "report.md")
    parent, real = os.getpid(), lab.render

    def render_or_die(*args):     # a forked child inherits the patch and exits; the parent renders
        if os.getpid() != parent:
            os._exit(3)
        return real(*args)
    monkeypatch.setattr(lab, "render", render_or_die)
    results = {e: r for e, r in lab.load_results(str(out), (0,)).items() if e in ("base", "budgets")}
    lab.write_report(str(out), results, {"seeds": [0], "quick": True, "wall_s": 1.0}, workers=2)
    md = (out / "report.md").read_text(encoding="utf-8")
    assert re.findall(r"^## (\d)\. ", md, flags=re.M) == ["1", "2"]


class Stop(Exception):
    """Raised by the fake executor of `queued` once it has seen the lab's queue."""


@pytest.fixture
def queued(monkeypatch) -> list[str]:
    """The ids of the units a lab queues, in order: the executor replaced by one that records them and raises Stop."""
    seen: list[str] = []

    def fake_run_units(queue, *a, **k):
        seen.extend(u.uid for u in queue)
        raise Stop
    monkeypatch.setattr(units, "run_units", fake_run_units)
    return seen


def test_units_queue_behind_the_base_models_they_need(monkeypatch, tmp_path, queued):
    """Base models are queued first; with 3 seeds on 2 workers the third seed's model trains while the first two
    seeds' experiments run: its experiments queue last. Within a group, the longest experiments go first."""
    seen = queued
    monkeypatch.setattr(units, "model_in_cache", lambda name, cfg, cache: name == "base-seed1")   # seed 1 cached
    ex = ExecConfig(executor="local", workers=1)
    cfg = lab.LabConfig(seeds=(0, 1, 2), out=str(tmp_path), cache_dir=str(tmp_path / "c"), execution=ex)
    with pytest.raises(Stop):
        lab.run(cfg, log=lambda s: None)
    assert seen[:2] == ["base-model/seed0", "base-model/seed2"]
    exps = seen[2:]
    assert len(exps) == 3 * len(core())
    # one worker: seed 2's model trains after seed 0's, so seed 2's experiments come last
    assert {u.split("/")[1] for u in exps[-len(core()):]} == {"seed2"}
    first = [u.split("/")[0] for u in exps[:2 * len(core())]]
    assert first == sorted(first, key=longest_first("run_cost").index) and first[0] == "search"
    seen.clear()
    with pytest.raises(Stop):      # two workers: both models train at once, every unit in one longest-first queue
        lab.run(lab.LabConfig(seeds=(0, 1, 2), out=str(tmp_path), cache_dir=str(tmp_path / "c"),
                              execution=ExecConfig(executor="local", workers=2)), log=lambda s: None)
    exps = [u.split("/")[0] for u in seen[2:]]
    assert exps == sorted(exps, key=longest_first("run_cost").index)


def test_an_experiment_runs_the_seeds_its_power_asks_for(monkeypatch, tmp_path, queued):
    """seeds_per continues the run's seeds for one experiment (its base model for the new seed too); power_seeds
    plans it from the placebo lab beside the run: power.seeds_for of its placebo's spread at Holm's first level over
    the run's primaries, kept only within most_seeds; the plan is written to config.json, so a rebuilt report reads
    the same seeds."""
    seen = queued
    monkeypatch.setattr(units, "model_in_cache", lambda name, cfg, cache: True)
    cfg = lab.LabConfig(seeds=(3, 5), out=str(tmp_path), cache_dir=str(tmp_path / "c"), seeds_per={"star": 4})
    assert cfg.seeds_of("star") == (3, 5, 6, 7) and cfg.seeds_of("modprod/star") == (3, 5, 6, 7)
    assert cfg.seeds_of("rl") == (3, 5)
    with pytest.raises(Stop):
        lab.run(cfg, log=lambda s: None)
    assert sorted(u for u in seen if u.endswith(("seed6", "seed7"))) == ["star/seed6", "star/seed7"]
    with pytest.raises(ValueError, match="seeds_per: star's seed count"):
        lab.LabConfig(seeds_per={"star": 0}).validate()

    os.makedirs(tmp_path / "placebo")
    spread = [0.03, -0.02, 0.01, -0.04, 0.02]
    placebo = [{"experiment": "star", "task": "digits", "primary": True, "per_seed": spread + [0.5, -0.5]},
               {"experiment": "rl", "task": "digits", "primary": True, "per_seed": [0.0] * 5}]       # no spread
    (tmp_path / "placebo" / "findings.json").write_text(json.dumps(placebo))
    plan = lab.LabConfig(out=str(tmp_path), power_seeds=True, most_seeds=40)
    m = sum(X.get(n).placebo is not None for n in core())
    want = power.seeds_for(thresholds.EFFECTS["star"].value, float(np.std(spread, ddof=1)), ALPHA / m, most=40,
                           pilot="n")                         # the first five seeds: the placebo's later ones ignored
    assert 5 < want <= 40 and pilot.power_seeds(plan) == {"star": want}
    assert pilot.power_seeds(replace(plan, most_seeds=want - 1)) == {}             # beyond the budget: underpowered
    logs = []
    assert lab.planned(plan, logs.append).seeds_per == {"star": want} and f"star {want}" in logs[0]
    own = lab.LabConfig(out=str(tmp_path / "placebo"), placebo=True, power_seeds=True, most_seeds=40)
    assert pilot.power_seeds(own) == {"star": want}          # the placebo lab plans the same from its own findings


def test_a_rebuilt_report_reads_the_seeds_the_run_gave_each_experiment(monkeypatch, tmp_path):
    """--report-only without --power-seeds: each experiment at the seeds the run's config.json says it ran, not at
    --seeds alone; a config.json of the wrong shape is named."""
    seen = {}

    def fake_load(out, seeds):
        seen.update(star=seeds("star"), rl=seeds("modprod/rl"))
        raise Stop
    monkeypatch.setattr(lab, "load_results", fake_load)
    (tmp_path / "config.json").write_text(json.dumps({"seeds": [0, 1, 2, 3, 4], "seeds_per": {"star": 7}}))
    with pytest.raises(Stop):
        lab.rebuild_report(lab.LabConfig(out=str(tmp_path)))
    assert seen == {"star": (0, 1, 2, 3, 4, 5, 6), "rl": (0, 1, 2, 3, 4)}
    assert lab.ran_seeds(str(tmp_path / "none")) == {}
    (tmp_path / "config.json").write_text(json.dumps({"seeds_per": [7]}))
    with pytest.raises(ValueError, match="config.json is not the lab's config record"):
        lab.rebuild_report(lab.LabConfig(out=str(tmp_path)))


@pytest.mark.slow
def test_quick_lab_runs_every_lesson(tmp_path, quick_cache):
    """`reasonlab lab --quick --all` reaches each lesson's quick config: it runs, renders and judges its claims on
    two seeds (a t interval needs two)."""
    lessons = [n for n in X.names() if X.get(n).tier == "lesson"]
    cfg = lab.LabConfig(quick=True, seeds=(0, 1), out=str(tmp_path / "run"), cache_dir=quick_cache, only=tuple(lessons))
    results = lab.run(cfg, log=lambda *a: None)
    assert set(results) == set(lessons)
    md = open(os.path.join(cfg.out, "report.md"), encoding="utf-8").read()
    for img in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md):
        assert os.path.getsize(os.path.join(cfg.out, img)) > 1000
    assert md.count("**Question.**") >= len(lessons)


def test_a_new_version_of_an_experiments_streams_reruns_its_units_and_0_keeps_the_old_key(monkeypatch):
    """labels hashes its streams (version 1): its key differs from the same unit at version 0, which is the key a
    store written before carries (no "streams" part), as every experiment at 0 still has."""
    cfg = X.get("labels").Config()
    now = units.unit_key("labels", 0, cfg)
    get = X.get
    monkeypatch.setattr(units.X, "get", lambda name: replace(get(name), streams=0))
    before = units.unit_key("labels", 0, cfg)
    assert get("labels").streams == 1 and now != before
    base = units.cache_key(units.base_cfg(0, False))
    assert before == units.store_key(exp="labels", seed=0, config=asdict(cfg), base=base, **get("labels").depends(cfg))
