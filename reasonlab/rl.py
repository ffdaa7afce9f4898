"""The old import path of `reasonlab.train.rl` (the same module)."""
import sys

from .train import rl as _module

sys.modules[__name__] = _module
