"""Every primary claim could have failed: run through its experiment's own run and claims at quick size with the
treatment arm replaced by the control arm (its placebo), it never holds (slow: `make test-slow`; the committed
full-size placebo lab is re-judged in tests/runner/test_results.py); and the design's room, computed from the config
alone, leaves it space both to pass and to fail. An experiment with no primary is a demonstration."""
import json
import os

import pytest

from reasonlab import experiments as X
from reasonlab.runner import lab
from reasonlab.runner.executor import ExecConfig
from reasonlab.stats import findings

PRIMARY = [n for n in X.BUILTIN if X.get(n).placebo is not None]
COMMITTED = {f["experiment"]: f for f in json.load(open(os.path.join(os.path.dirname(__file__), "..", "..", "results",
                                                                     "lab", "placebo", "findings.json")))
             if f["primary"] and f.get("task", "digits") == "digits"}
"""the digits primaries of the committed placebo lab (`make results`): their thresholds, as the claims state them"""


@pytest.fixture(scope="module")
def placebo_lab(quick_cache, tmp_path_factory):
    cfg = lab.LabConfig(quick=True, placebo=True, all=True, seeds=(0, 1), cache_dir=quick_cache,
                        out=str(tmp_path_factory.mktemp("placebo")), execution=ExecConfig(workers=2, threads=1))
    lab.run(cfg, log=lambda *a: None)
    return {f["experiment"]: f for f in lab.lab_findings(lab.load_results(cfg.out, cfg.seeds), cfg.config_of)
            if f["primary"]}


def test_an_experiment_has_a_room_and_a_placebo_for_its_primary_or_is_a_demonstration():
    for name in X.BUILTIN:
        e = X.get(name)
        assert (e.room is None) == (e.placebo is None), name
        if e.placebo is not None:
            for quick in (False, True):
                cfg = e.config(quick)
                assert type(e.placebo(cfg)) is type(cfg) and e.placebo(cfg) != cfg, name   # a different arm
                e.validate(e.placebo(cfg))


@pytest.mark.slow      # the quick placebo lab (~70 s); the committed full-size one is re-judged in test_results.py
@pytest.mark.parametrize("name", PRIMARY)
def test_the_placebo_never_holds(placebo_lab, name):
    f = placebo_lab[name]
    assert f.get("ungated", f["verdict"]) != findings.HOLDS, f
    assert f["verdict"] != findings.HOLDS, f


@pytest.mark.parametrize("name", PRIMARY)
def test_the_design_room_leaves_the_primary_space_to_pass_and_to_fail(name):
    f, e = COMMITTED[name], X.get(name)
    sign, thr = f["threshold"].split()[0], float(f["threshold"].split()[1])
    for quick in (False, True):
        assert findings.out_of_room(e.room(e.config(quick)), thr, sign) is None, (name, e.room(e.config(quick)))
    assert f.get("control"), f"{name}'s primary names its control"
