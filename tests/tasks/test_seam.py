"""A task's rule is typed in its own file only: a scan of the package for the digit-sum rule and its constants."""
import os
import re

import reasonlab

ROOT = os.path.dirname(reasonlab.__file__)
HOME = {os.path.join("tasks", "digits.py"), os.path.join("core", "task.py")}
"""the digits task's own file, and the course module's API that re-exports it (the scan skips every task's file:
each holds its own rule)"""
RULE = [
    (r"%\s*10\b", "a residue mod 10"),
    (r"\bDIGIT0\b", "digit-token arithmetic"),
    (r"cumsum\([^)]*\)\s*%", "running sums mod something"),
    (r"\bsum\((d|digits)(\[[^]]*\])?\)", "a sum of a problem's digits"),
    (r"\blen\((d|digits)\)", "a problem's length as its size"),
    (r"from \.+core\.task import|from \.task import|core\.task import", "the course module's digits API"),
    (r"\b(K_MIN|K_MAX|MAX_LEN|PROMPT_LEN|MAX_OUT|VOCAB|BUDGET_VOCAB|L1_VOCAB|HINT_VOCAB)\b", "a digits constant"),
]


def package_files():
    for d, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(d, f)
                yield os.path.relpath(path, ROOT), path


def test_the_digit_sum_rule_is_typed_only_in_its_own_file():
    hits = []
    for rel, path in package_files():
        if rel in HOME or rel == "__init__.py" or rel.startswith("tasks" + os.sep):
            continue
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                code = line.split("#")[0]
                for pattern, what in RULE:
                    if re.search(pattern, code):
                        hits.append(f"{rel}:{n}: {what}: {line.strip()}")
    assert not hits, "the digits task's rule outside tasks/digits.py:\n" + "\n".join(hits)


def test_the_scan_finds_the_rule_where_it_is():
    """The patterns are live: they find the rule in the digits task's file and in the course module's API."""
    found = set()
    for rel in HOME:
        with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
            text = f.read()
        found |= {what for pattern, what in RULE if re.search(pattern, text)}
    assert {"a residue mod 10", "digit-token arithmetic", "a digits constant"} <= found
