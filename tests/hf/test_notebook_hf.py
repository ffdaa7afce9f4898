"""The lecture notebook's section "Train with TRL, study with reasonlab" runs in quick mode (the whole notebook runs
in tests/test_notebook.py; this runs the section alone, on the names it takes from the notebook's first cell)."""
import json
import os

import torch

import reasonlab as R
from reasonlab.core.evaluate import eval_table

from .hfkit import need

NOTEBOOK = os.path.join(os.path.dirname(__file__), "..", "..", "notebooks", "lecture.ipynb")
HEADING = "## 18. Train with TRL, study with reasonlab"


def section() -> list[str]:
    with open(NOTEBOOK) as f:
        cells = json.load(f)["cells"]
    start = next(i for i, c in enumerate(cells) if "".join(c["source"]).startswith(HEADING))
    assert start == len(cells) - 3, "the section is the notebook's last"
    return ["".join(c["source"]) for c in cells[start:] if c["cell_type"] == "code"]


def test_the_trl_section_runs_in_quick_mode(capsys):
    need("trl")
    ns = {"R": R, "SEED": 0, "QUICK": True, "N_EVAL": 20, "eval_table": eval_table}
    for i, code in enumerate(section()):
        exec(compile(code, f"lecture.ipynb TRL section cell {i}", "exec"), ns)
    out = capsys.readouterr().out
    assert "TRL: 5 GRPO steps of 16 x 8 completions" in out
    assert "before TRL: free accuracy" in out and "after TRL: free accuracy" in out
    assert "faithful, forced S: the answer follows a corrupted running sum in" in out
    # TRL moved the weights, and what came back is what TRL saved
    moved = [not torch.equal(a, b) for a, b in zip(ns["hf_start"].parameters(), ns["hf_trained"].parameters())]
    assert all(moved)
    assert os.path.exists(ns["hf_stem"] + ".safetensors")
