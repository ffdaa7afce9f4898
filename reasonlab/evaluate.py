"""The old import path of `reasonlab.core.evaluate` (the same module)."""
import sys

from .core import evaluate as _module

sys.modules[__name__] = _module
