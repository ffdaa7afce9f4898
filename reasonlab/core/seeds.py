"""Seeds for each purpose, hashed from their parts (an experiment or method, the run's seed, what the stream draws),
never by integer arithmetic: `seed + 1` of one purpose is seed 1's draw of another, `seed * 1000 + r` collides once
r reaches 1000; a hash gives every (purpose, seed) a stream no other shares."""
from __future__ import annotations

import hashlib


def hashed_seed(*parts) -> int:
    """A 31-bit seed from sha256 of the parts joined by "/" (e.g. hashed_seed("labels", 3, "pool"))."""
    return int.from_bytes(hashlib.sha256("/".join(map(str, parts)).encode()).digest()[:4], "big") >> 1
