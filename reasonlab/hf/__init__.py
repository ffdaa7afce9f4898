"""The Hugging Face bridge, for every task: the lab's models as transformers directories and back, a task as a
dataset, the lab's rewards in the signatures of TRL, verl and OpenRLHF, and RLConfig as TRL's GRPOConfig.

    export    export_hf / import_hf: GPT2LMHeadModel + a word-level tokenizer of the task's words (safetensors and
              JSON only; config.json names the task)
    data      dataset(): a task's train / validation / test parts as a DatasetDict (TRL) or verl's parquet rows, each
              row with its problem as JSON
    rewards   rule, correct, template, chain, L1 Exact / Max for TRL; compute_score (verl); reward_func (OpenRLHF);
              each scores a row by its problem's task
    trl       grpo_kwargs / grpo_config: the GRPOConfig that trains as an RLConfig does, or one line saying why not

Names are loaded on first use (PEP 562): transformers, datasets and trl (the optional extra `reasonlab[hf]`) are
imported only by the functions that need them.
"""
import importlib

_HOME = {
    **dict.fromkeys(["export_hf", "import_hf", "HFImportError", "vocab_words", "vocab_sizes"], "export"),
    **dict.fromkeys(["dataset", "rows"], "data"),
    **dict.fromkeys(["grpo_kwargs", "grpo_config"], "trl"),
    "rewards": None,
}
__all__ = list(_HOME)


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module 'reasonlab.hf' has no attribute {name!r}")
    module = importlib.import_module(f".{_HOME[name] or name}", __name__)
    value = module if _HOME[name] is None else getattr(module, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_HOME))
