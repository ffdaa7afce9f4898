"""One result store: every (experiment, seed) of the lab and (cell, seed) of a sweep is one record,

    <root>/<group>/seed<s>.json = {"key": <fingerprint>, "seconds": <run time>, "result": <JSON object>}

(or seed<s>.json.gz, packed: what results/ commits), written atomically by the driver only. The key is a fingerprint of everything the result depends on (the
experiment and its config, the seed, the base model's recipe, the package and cache versions, and what else the
experiment names); a record is reused only when its key matches and it has the right shape. A record of another
shape (a list, no result, a result its experiment rejects) counts as missing: it is rerun, and the store says so
in one line. Reading a group back for a report (`collect`) refuses a bad record, naming the file.
"""
from __future__ import annotations

import gzip
import json
import numbers
import os
from typing import Callable

from .. import __version__
from ..io.checkpoint import CACHE_VERSION, atomic_write, fingerprint, int_keys, write_json


class BadRecord(ValueError):
    """A result file that cannot be used: unreadable, not JSON, or of the wrong shape."""


def unit_key(**parts) -> str:
    """The key of a unit: its parts and the package and cache versions."""
    return fingerprint({**parts, "version": __version__, "cache_version": CACHE_VERSION})


class Store:
    def __init__(self, root: str, packed: bool = False):
        self.root, self.packed = root, packed
        """packed: write records gzipped (seed<s>.json.gz, deterministic bytes) and remove their plain twins"""

    def path(self, group: str, seed: int) -> str:
        """The record's file: the plain one if there is one, else the packed one, else where a write would go."""
        plain = os.path.join(self.root, group, f"seed{seed}.json")
        packed = plain + ".gz"
        if os.path.lexists(plain) or (not os.path.lexists(packed) and not self.packed):
            return plain
        return packed

    def read(self, group: str, seed: int, check: Callable | None = None) -> dict | None:
        """The record ({key, seconds, result}, int keys restored), None if there is none; BadRecord naming the
        file if it is unreadable or of the wrong shape (check(result) raising ValueError counts as wrong)."""
        path = self.path(group, seed)
        if not os.path.lexists(path):
            return None
        if not os.path.isfile(path):
            raise BadRecord(f"{path} is not a regular file")
        try:
            with (gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path, encoding="utf-8")) as f:
                rec = int_keys(json.load(f))
        except (OSError, ValueError, EOFError) as e:
            raise BadRecord(f"{path}: cannot read it ({' '.join(str(e).split())})") from None
        if not isinstance(rec, dict) or not isinstance(rec.get("key"), str) or "result" not in rec \
                or not isinstance(rec.get("seconds"), numbers.Real) or isinstance(rec.get("seconds"), bool):
            raise BadRecord(f"{path} is not a result record (a JSON object with key, seconds and result)")
        if check is not None:
            try:
                check(rec["result"])
            except (ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
                raise BadRecord(f"{path}: {' '.join(str(e).split()) or type(e).__name__}") from None
        return rec

    def reusable(self, group: str, seed: int, key: str, check: Callable | None = None,
                 log: Callable | None = None) -> bool:
        """Whether a finished record with this key is there (a bad one is said, and rerun)."""
        try:
            rec = self.read(group, seed, check)
        except BadRecord as e:
            if log:
                log(f"    {e}: running it again")
            return False
        return rec is not None and rec["key"] == key

    def write(self, group: str, seed: int, key: str, seconds: float, result) -> str:
        plain = os.path.join(self.root, group, f"seed{seed}.json")
        rec = {"key": key, "seconds": round(seconds, 1), "result": result}
        if not self.packed:
            write_json(plain, rec)
            stale = plain + ".gz"
        else:
            def w(tmp):
                with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
                    f.write(json.dumps(rec, indent=1, sort_keys=True).encode())
            atomic_write(plain + ".gz", w)
            stale = plain
        if os.path.lexists(stale):
            os.remove(stale)
        return plain + (".gz" if self.packed else "")

    def pack(self, groups, seeds) -> None:
        """Rewrite the plain records of these groups and seeds packed (a packed store's reused records; seeds as in
        collect)."""
        for g in groups:
            for s in (seeds(g) if callable(seeds) else seeds):
                if not self.path(g, s).endswith(".gz"):
                    rec = self.read(g, s)
                    if rec is not None:
                        self.write(g, s, rec["key"], rec["seconds"], rec["result"])

    def finished(self, group: str, seeds, key: Callable[[int], str], check: Callable | None = None) -> list[dict]:
        """The records of `group` for `seeds` that are there, well formed and of key(seed), in seed order."""
        out = []
        for s in seeds:
            try:
                rec = self.read(group, s, check)
            except BadRecord:
                continue
            if rec is not None and rec["key"] == key(s):
                out.append(rec)
        return out

    def collect(self, groups, seeds, check: Callable[[str], Callable | None] = lambda g: None) -> dict:
        """{group: {"results": [per seed], "seconds": [...]}} for every group with a record for every seed (seeds: a
        tuple, or a function of the group giving its own). A bad record is a BadRecord naming its file."""
        out = {}
        for g in groups:
            recs = [self.read(g, s, check(g)) for s in (seeds(g) if callable(seeds) else seeds)]
            if all(r is not None for r in recs):
                out[g] = {"results": [r["result"] for r in recs], "seconds": [r["seconds"] for r in recs]}
        return out
