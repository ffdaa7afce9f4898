"""The experiment kit: an experiment's question, papers and what to explore are data on it, which its page and the
report's glance say; nothing scrapes them back out of markdown."""
import pytest

from reasonlab import experiments as X
from reasonlab.runner import lab


@pytest.mark.parametrize("name", list(X.BUILTIN))
def test_every_builtin_declares_its_question_and_what_to_explore(name):
    e = X.get(name)
    assert "?" in e.question and e.explore.strip()
    page = X.opening(name, states="running sum", k0=2, top=8) if "{" in e.question else X.opening(name)
    assert page.startswith("> **Question.** ") and all(ln.startswith(">") for ln in page.splitlines())
    assert all(len(ln) <= 116 for ln in page.splitlines())
    assert " ".join(page.replace("> **Question.** ", "").replace("\n> ", " ").split()) == \
        " ".join(e.question.format(states="running sum", k0=2, top=8).split())
    assert ("*Papers:* " in X.reading(name)) == bool(e.papers) and "*Explore:* " in X.reading(name)


def test_the_glance_reads_the_question_off_the_experiment_not_its_page():
    fs = [{"experiment": "budgets", "task": "digits", "claim": "c", "verdict": "holds", "primary": True}]
    sections = {"budgets": [("## 2. Budgets\n\n> **Question.** something else typed by hand?\n", "")]}
    row = lab.glance(sections, fs).splitlines()[2]
    assert X.BUILTIN["budgets"].replace("|", "\\|") in row and "something else" not in row
