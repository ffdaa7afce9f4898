import random

import pytest
import torch

from reasonlab.core.task import make_digits, prompt_ids
from reasonlab.train.sft import build_model


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    """Every test gets its own model cache, so no test reads a model another run left behind."""
    monkeypatch.setenv("REASONLAB_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def noisy_model():
    """An untrained model with perturbed weights: peaked, varied predictions, so parity tests are not trivial."""
    m = build_model(3)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.3)
    return m.eval()


@pytest.fixture
def prompts():
    rng = random.Random(0)
    return [prompt_ids(make_digits(rng, rng.randint(2, 8))) for _ in range(200)]


@pytest.fixture(scope="session")
def quick_cache(tmp_path_factory):
    """A model cache holding the lab's quick base model (seed 0), trained once per test session (~20 s)."""
    from reasonlab.train.zoo import base_model
    path = str(tmp_path_factory.mktemp("quick-cache"))
    base_model(0, quick=True, cache=path, log=None)
    return path


@pytest.fixture
def clean_registry():
    """Experiments a test loads from files leave the registry as it was."""
    from reasonlab import experiments as X
    before, loaded = dict(zip(X.names(), map(X.get, X.names()))), set(X._LOADED)
    yield
    X.REGISTRY.clear()
    X.REGISTRY.update(before)
    X._LOADED.clear()
    X._LOADED.update(loaded)
