"""reasonlab: a laptop-scale lab for reasoning models.

`import reasonlab as R` gives the course module's API (the spec, reason_lab.py) under the same names. The names are
loaded on first use (PEP 562), so that `reasonlab --help` starts without torch.
"""
import importlib

__version__ = "0.1.0"

_HOME = {  # the spec's public names -> the module that defines them
    **dict.fromkeys(["FORMATS", "ID", "IGNORE", "K_MAX", "K_MIN", "MAX_LEN", "VOCAB", "DIGIT0", "check_chain", "encode",
                     "make_digits", "parse", "prompt_ids", "solution"], "core.task"),
    **dict.fromkeys(["GPT", "GPTConfig"], "core.model"),
    **dict.fromkeys(["generate", "seq_logprobs"], "core.sampling"),
    "evaluate": "core.evaluate",
    "rule_reward": "core.rewards",
    **dict.fromkeys(["BASE_CFG", "SPEC_CFG", "base_cfg", "base_name", "batch_fn", "build_model", "train_on_batches"],
                    "train.sft"),
    **dict.fromkeys(["get_model", "base_model"], "train.zoo"),
    "rl_train": "train.rl",
}
__all__ = list(_HOME)


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module 'reasonlab' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_HOME))

