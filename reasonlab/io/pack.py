"""Per-problem arrays packed as short strings, so that a result JSON with thousands of problems stays small and
readable with indent=1: 0/1 flags as one "0110..." string, integer counts as one comma-separated string."""
from __future__ import annotations

import numpy as np


def pack_bits(x) -> str:
    """Truthy / falsy values as one string of "1" and "0"."""
    return "".join("1" if v else "0" for v in np.asarray(x).astype(bool))


def unpack_bits(s: str) -> np.ndarray:
    """pack_bits's string back to an array of 0 and 1 (uint8)."""
    return np.frombuffer(s.encode(), dtype=np.uint8) - ord("0")


def pack_ints(x) -> str:
    """Numbers rounded to integers, as one comma-separated string."""
    return ",".join(str(int(round(v))) for v in np.asarray(x, float))


def unpack_ints(s) -> np.ndarray:
    """pack_ints's string back to floats; a list (as hand-made results hold) is read as it is; "" is empty."""
    return np.asarray(s, float) if isinstance(s, list) else np.array(s.split(","), float) if s else np.zeros(0)
