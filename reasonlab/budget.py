"""The old import path of `reasonlab.methods.budget` (the same module)."""
import sys

from .methods import budget as _module

sys.modules[__name__] = _module
