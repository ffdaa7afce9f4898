"""The old import path of `reasonlab.methods.tts` (the same module)."""
import sys

from .methods import tts as _module

sys.modules[__name__] = _module
