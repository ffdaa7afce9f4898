"""The committed results and the README agree with each other and stay small: the findings are recomputed from the
committed per-seed results, and the README's block is what `make results` writes from them."""
import json
import os
import re
from dataclasses import replace

import pytest

from reasonlab import tasks as T
from reasonlab.cli import main
from reasonlab.runner import lab, pilot, readme
from reasonlab.runner.config import LabConfig, group_of
from reasonlab.stats import findings

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
RUN = os.path.join(ROOT, "results", "lab")
TASKS = RUN                                                  # its base experiment on every task


def test_the_committed_findings_follow_from_the_committed_results():
    cfg = json.load(open(os.path.join(RUN, "config.json")))
    run = LabConfig(quick=cfg["quick"], placebo=cfg["placebo"], seeds=tuple(cfg["seeds"]), seeds_per=cfg["seeds_per"])
    results = lab.load_results(RUN, run.seeds_of)
    assert set(results) == {group_of(e, t) for t in T.BUILTIN for e in lab.X.BUILTIN}    # every experiment, every task
    committed = json.load(open(os.path.join(RUN, "findings.json")))
    assert cfg["configs"] == {}                                  # each experiment's default config: its room
    recomputed = json.loads(json.dumps(lab.lab_findings(results, run.config_of, pilot.placebo_verdicts(RUN))))  # as written
    assert recomputed == committed


def test_the_readme_blocks_are_written_from_the_committed_results(capsys):
    assert readme.sync(os.path.join(ROOT, "README.md"), os.path.join(RUN, "findings.json"), check=True, tasks=TASKS)
    assert main(["findings", "readme", "--check", "--readme", os.path.join(ROOT, "README.md"),
                 "--findings", os.path.join(RUN, "findings.json"), "--tasks", TASKS]) == 0


def test_the_tasks_table_reads_each_tasks_base_results():
    """One row per task, forced A per k where the task has that k, chance, the chains' lowest accuracy."""
    rows = [r for r in readme.tasks_block(TASKS).splitlines() if r.startswith("| `")]
    assert [r.split("`")[1] for r in rows] == ["digits", "modprod", "compose", "add"]
    add = rows[3].split(" | ")
    assert add[-4:-1] == ["", "", ""] and all(c.replace(".", "").isdigit() for c in add[2:6])


def test_a_readme_that_disagrees_is_caught(tmp_path, capsys):
    fs = json.load(open(os.path.join(RUN, "findings.json")))
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    moved = [dict(f, verdict="holds" if f["verdict"] != "holds" else "does not hold") if f["primary"] else f
             for f in fs]
    (tmp_path / "f.json").write_text(json.dumps(moved))
    (tmp_path / "README.md").write_text(text)
    with pytest.raises(SystemExit) as e:
        main(["findings", "readme", "--check", "--readme", str(tmp_path / "README.md"),
              "--findings", str(tmp_path / "f.json"), "--tasks", TASKS])
    assert e.value.code == 1 and "differs" in capsys.readouterr().err
    assert main(["findings", "readme", "--readme", str(tmp_path / "README.md"), "--findings",
                 str(tmp_path / "f.json"), "--tasks", TASKS]) == 0
    assert readme.sync(str(tmp_path / "README.md"), str(tmp_path / "f.json"), check=True, tasks=TASKS)


def test_findings_diff_names_the_claims_that_moved(tmp_path, capsys):
    fs = json.load(open(os.path.join(RUN, "findings.json")))
    new = "does not hold" if fs[0]["verdict"] != "does not hold" else "holds"
    (tmp_path / "b.json").write_text(json.dumps([dict(fs[0], verdict=new)] + fs[1:-1]))
    assert main(["findings", "diff", RUN, str(tmp_path / "b.json")]) == 0
    out = capsys.readouterr().out.splitlines()
    v = f"{fs[0]['value']:.3f}"
    assert len(out) == 2 and f"{fs[0]['verdict']} ({v}) -> {new} ({v})" in out[0] and out[1].startswith("only in")
    assert main(["findings", "diff", RUN, str(tmp_path / "missing.json")]) == 2


def test_the_front_door_and_results_stay_small():
    assert len(open(os.path.join(ROOT, "README.md"), encoding="utf-8").read().splitlines()) <= 200
    sizes = {"gz": 0, "other": 0}
    for d, dirs, files in os.walk(os.path.join(ROOT, "results")):
        dirs[:] = [x for x in dirs if x != "logs"]       # a run's unit logs: git-ignored, never committed
        for f in files:
            sizes["gz" if f.endswith(".gz") else "other"] += os.path.getsize(os.path.join(d, f))
            assert not f.endswith(".html"), f            # no base64 pages in the repository
    per_task = len(T.BUILTIN)                            # the lab's plots and per-seed results, one set per task
    runs = 2                                             # per-seed results of the lab and of its placebo lab
    assert sizes["other"] < per_task * 3 << 20 and sizes["gz"] < per_task * runs * 3 << 19    # 1.5 MB a set


def test_every_experiment_refuses_a_stored_result_of_another_shape():
    """The committed results pass their experiment's check; a JSON object without the experiment's keys does not, so
    the lab reruns it instead of dying in the report."""
    from reasonlab.runner.store import Store
    for name in lab.X.names():
        e = lab.X.get(name)
        e.check_result(Store(RUN).read(name, 0)["result"])
        with pytest.raises(ValueError, match=f"an? {name} result"):
            e.check_result({"garbage": 1})


def test_the_reports_verdicts_are_the_findings_verdicts():
    """Judged once: every "**Verdict** on this run: claim" sentence and every row of a section's findings table in
    the committed report says what findings.json says of that claim."""
    fs = json.load(open(os.path.join(RUN, "findings.json")))
    md = open(os.path.join(RUN, "report.md"), encoding="utf-8").read()
    said = re.findall(r"\*\*([A-Z][a-z ]+)\*\* on this run: (.+?)(?: \(| \.|\.\n|; )", md)
    assert len(said) >= len([f for f in fs if f["primary"]])
    verdict = {}
    for f in fs:
        verdict.setdefault(f["claim"][1:60], set()).add(f["verdict"])
    checked = 0
    for word, claim in said:
        v = verdict.get(claim[1:60])
        if v is not None:
            assert word.lower() in v, (word, claim)
            checked += 1
    assert checked >= len([f for f in fs if f["primary"]])


def test_the_committed_placebo_findings_follow_from_the_committed_placebo_results():
    """The placebo lab's claims, judged again from its per-seed results by the experiments' own claims()."""
    out = os.path.join(RUN, "placebo")
    cfg = json.load(open(os.path.join(out, "config.json")))
    run = LabConfig(quick=cfg["quick"], placebo=True, seeds=tuple(cfg["seeds"]), seeds_per=cfg["seeds_per"])
    results = lab.load_results(out, run.seeds_of)
    recomputed = json.loads(json.dumps(lab.lab_findings(results, run.config_of)))
    assert recomputed == json.load(open(os.path.join(out, "findings.json")))


def test_the_committed_placebos_never_hold_and_replicates_have_a_spread():
    """The placebo lab beside the committed run (`make results`): at the lab's full size and seeds, no primary's
    placebo holds, before or after its premises gate it; a placebo that replicates the control varies from seed to
    seed as a real comparison does, and one without spread says why in its experiment's design."""
    cfg = json.load(open(os.path.join(RUN, "placebo", "config.json")))
    assert cfg["placebo"] and not cfg["quick"]
    main = json.load(open(os.path.join(RUN, "config.json")))
    assert (cfg["seeds"], cfg["seeds_per"]) == (main["seeds"], main["seeds_per"])     # each at its primary's seeds
    placebo = pilot.placebo_verdicts(RUN)
    assert set(placebo) == {group_of(n, t) for n in lab.X.names() if lab.X.get(n).placebo for t in T.BUILTIN}
    spread: dict[str, list[bool]] = {}
    for group, p in placebo.items():
        assert findings.HOLDS not in (p["verdict"], p.get("ungated")), (group, p)
        spread.setdefault(p["experiment"], []).append(len(set(p["per_seed"])) > 1)
    for exp, on in spread.items():       # a replicate varies on some task; one flat by design on none
        assert any(on) != bool(lab.X.get(exp).placebo_flat), (exp, on)
    assert "Placebo holds: 0 of" in lab.placebo_rate(placebo)


def test_the_readme_states_the_placebo_rate_over_every_primary_and_task(monkeypatch):
    """The findings block says how many of the placebo lab's primaries hold (naming any) and how many have no spread
    by design, read off the committed placebo findings."""
    fs = json.load(open(os.path.join(RUN, "placebo", "findings.json")))
    line = readme.placebo_line(fs)
    assert line in open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    assert f"of {len(T.BUILTIN) * sum(1 for n in lab.X.BUILTIN if lab.X.get(n).placebo)} hold" in line
    prim = next(f for f in fs if f["primary"] and f["experiment"] == "rl")
    made_up = [dict(prim, verdict="holds", task="add"), dict(prim, experiment="faithful")]
    made_up = [dict(f, per_seed=[0.1, 0.2]) for f in made_up]
    assert readme.placebo_line(made_up).endswith("1 of 2 hold (rl (add)); 0 have no spread by design.")
    get = readme.X.get            # an experiment that declares its placebo flat is counted
    monkeypatch.setattr(readme.X, "get", lambda n: replace(get(n), placebo_flat="why") if n == "faithful" else get(n))
    assert readme.placebo_line(made_up).endswith("1 of 2 hold (rl (add)); 1 have no spread by design.")
    made_up[0]["per_seed"] = [0.0, 0.0]         # a replicate that saturated on the run is named
    assert readme.placebo_line(made_up).endswith("1 have no spread by design; 1 gave one value at every seed on this "
                                                 "run (rl (add)).")
    assert "1 gave the same value at every seed" in lab.placebo_rate({"add/rl": made_up[0]})     # the report agrees
    made_up[0]["per_seed"] = []                 # a placebo the run left without values gave no value at all
    assert readme.placebo_line(made_up).endswith("1 have no spread by design.")
    assert "0 gave the same value at every seed" in lab.placebo_rate({"add/rl": made_up[0]})
