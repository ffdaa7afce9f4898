"""reasonlab: a laptop-scale lab for reasoning models.

`import reasonlab as R` gives the course module's API (the spec, reason_lab.py) under the same names.
"""
__version__ = "0.1.0"

from .task import (FORMATS, ID, IGNORE, K_MAX, K_MIN, MAX_LEN, VOCAB, DIGIT0, check_chain, encode, make_digits,
                   parse, prompt_ids, solution)
from .model import GPT, GPTConfig
from .train import BASE_CFG, SPEC_CFG, base_cfg, base_model, base_name, batch_fn, build_model, train_on_batches
from .checkpoint import get_model
from .sampling import generate, seq_logprobs
from .evaluate import evaluate
from .rewards import rule_reward

__all__ = ["VOCAB", "ID", "DIGIT0", "IGNORE", "FORMATS", "K_MIN", "K_MAX", "MAX_LEN", "make_digits", "solution",
           "prompt_ids", "encode", "parse", "check_chain", "batch_fn", "build_model", "BASE_CFG", "SPEC_CFG",
           "get_model", "generate", "evaluate", "seq_logprobs", "rule_reward", "GPT", "GPTConfig",
           "train_on_batches", "rl_train", "base_cfg", "base_model", "base_name"]
from .rl import rl_train
