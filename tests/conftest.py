import os
import random

import pytest
import torch

from reasonlab.core.task import make_digits, prompt_ids
from reasonlab.train.sft import build_model

if os.environ.get("PYTEST_XDIST_WORKER"):    # pytest -n 2: a worker per core, one thread each (their subprocesses too)
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)


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
    """A model cache of this test process's own holding the lab's quick base models of seeds 0 and 1, copied from
    the ones the package ships (a stale shipped model would be retrained here)."""
    from reasonlab.train.zoo import base_model
    path = tmp_path_factory.mktemp("quick-cache")
    for seed in (0, 1):
        base_model(seed, quick=True, cache=str(path), log=None)
    return str(path)


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
