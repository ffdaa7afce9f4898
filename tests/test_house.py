"""The house's size rules, checked on the package's source: no file over 450 lines, no function over 100."""
import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "reasonlab"
FILES = sorted(PACKAGE.rglob("*.py"))


def test_the_package_is_scanned():
    assert len(FILES) > 80 and any(f.name == "rl.py" for f in FILES)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_file_over_450_lines_and_no_function_over_100(path):
    text = path.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 450, f"{path.name}: {len(text.splitlines())} lines"
    long = [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(ast.parse(text))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > 100]
    assert not long, f"{path.name}: functions over 100 lines: {long}"
