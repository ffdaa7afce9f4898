"""The Hugging Face bridge's tests: offline (no Hub), each library skipped with a reason where the extra is absent."""
import os
import tempfile

import pytest

# set before transformers, datasets or huggingface_hub are imported: no network, no writes to ~/.cache/huggingface
os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1",
                  TOKENIZERS_PARALLELISM="false", HF_DATASETS_DISABLE_PROGRESS_BARS="1",
                  HF_HOME=tempfile.mkdtemp(prefix="reasonlab-hf-home-"))


@pytest.fixture(scope="session")
def shipped():
    """name -> the shipped model (base models and erring thinkers), loaded once."""
    from reasonlab.io.checkpoint import load_model
    from reasonlab.train.zoo import SHIPPED
    names = sorted(f[:-5] for f in os.listdir(SHIPPED) if f.endswith(".json"))
    return {n: load_model(os.path.join(SHIPPED, n))[0] for n in names}


@pytest.fixture(scope="session")
def base_dir(shipped, tmp_path_factory):
    """The shipped base model of seed 0 (it answers directly) exported once."""
    from reasonlab.hf.export import export_hf
    return export_hf(shipped["base-seed0"], str(tmp_path_factory.mktemp("hf") / "base-seed0"))
