"""docs/hf.md as a newcomer runs it: the export command, then the page's transformers snippet, which gives the
output its comment shows."""
import ast
import os
import re

import pytest

from reasonlab import cli

PAGE = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "hf.md")


def test_the_pages_transformers_snippet_gives_what_it_shows(tmp_path, monkeypatch, capsys):
    pytest.importorskip("transformers")
    monkeypatch.chdir(tmp_path)
    text = open(PAGE, encoding="utf-8").read()
    export = re.search(r"^(reasonlab export hf out/base0 --seed 0)\b", text, re.M).group(1)
    assert cli.main(export.split()[1:]) == 0
    code = next(b for b in re.findall(r"^```python\n(.*?)^```", text, re.M | re.S) if "generate" in b)
    *body, last = code.strip().splitlines()
    expr, shown = last.split("#", 1)
    env: dict = {}
    exec("\n".join(body), env)
    assert eval(expr, env) == ast.literal_eval(shown.strip())
