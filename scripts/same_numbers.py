"""Compare two lab runs' numbers: every per-seed result and findings.json, wall-clock fields left out (keys ending
in _s, seconds or _time; the store's keys), and the findings' bookkeeping (experiment, primary, task). A refactor that
claims to change no number runs the quick lab before and after on one machine and one model cache:

    reasonlab lab --quick --out /tmp/before --cache-dir /tmp/cache --fresh     # on the old commit
    reasonlab lab --quick --out /tmp/after --cache-dir /tmp/cache --fresh      # on the new one
    python scripts/same_numbers.py /tmp/before /tmp/after

Exit status 0 when everything is identical.
"""
import gzip
import json
import os
import sys

WALL = ("_s", "seconds", "_time")
BOOKKEEPING = ("experiment", "primary", "task")


def numbers(o):
    if isinstance(o, dict):
        return {k: numbers(v) for k, v in o.items() if not (k in ("key", "timing") or k.endswith(WALL))}
    if isinstance(o, list):
        return [numbers(v) for v in o]
    return o


def load(path):
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def records(run):
    out = {}
    for exp in sorted(os.listdir(run)):
        d = os.path.join(run, exp)
        if os.path.isdir(d) and exp != "logs":
            for f in sorted(os.listdir(d)):
                if f.startswith("seed") and (f.endswith(".json") or f.endswith(".json.gz")):
                    out[f"{exp}/{f.split('.')[0]}"] = numbers(load(os.path.join(d, f))["result"])
    return out


def main(a, b):
    ra, rb = records(a), records(b)
    differ = sorted(k for k in ra.keys() | rb.keys() if ra.get(k) != rb.get(k))
    for k in sorted(ra.keys() | rb.keys()):
        print(f"{k}: {'DIFFERENT' if k in differ else 'identical'}")
    fa, fb = ([{k: v for k, v in f.items() if k not in BOOKKEEPING} for f in load(os.path.join(r, "findings.json"))]
              for r in (a, b))
    print(f"findings.json ({len(fa)} claims): {'identical' if fa == fb else 'DIFFERENT'}")
    return 0 if not differ and fa == fb else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
