"""The old import path of `reasonlab.methods.search` (the same module)."""
import sys

from .methods import search as _module

sys.modules[__name__] = _module
