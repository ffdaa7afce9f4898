"""Helpers of the Hugging Face bridge's tests."""
import pytest

EXTRA = "the optional extra is not installed: pip install 'reasonlab[hf]'"


def need(module: str):
    """The module, or the test skipped with the reason."""
    return pytest.importorskip(module, reason=EXTRA)
