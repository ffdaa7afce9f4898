"""Speed of one GRPO step: reasonlab's loop against TRL's GRPOTrainer, the same config on the same model.

Both run RLConfig.preset("grpo") (16 prompts x 8 completions, two updates per batch, beta 0.04, the rule reward)
from the seed-0 base model: ours through `train.rl.train`, TRL's on the model's transformers export
(`reasonlab.hf.export_hf`) under `reasonlab.hf.grpo_config`, which maps every knob (tests/hf/test_trl.py proves
one step of each equal). Each side runs `--steps` steps, best of `--repeats` runs, the two taking turns; TRL's
time is `trainer.train()` alone (building the trainer, its reference model and its dataset are left out). Needs
the hf extra; writes runs/bench/trl_step.txt.

    python benchmarks/trl_step.py [--steps 5] [--repeats 3]
"""
from __future__ import annotations

import argparse
import copy
import json
import tempfile
import time

from common import load_note, report

from reasonlab.hf import grpo_config
from reasonlab.hf.data import rows
from reasonlab.hf.export import export_hf
from reasonlab.hf.rewards import rule_reward
from reasonlab.train.rl import RLConfig, train
from reasonlab.train.zoo import base_model


def trl_run(path: str, cfg: RLConfig, out: str) -> float:
    """Seconds of one GRPOTrainer.train() of cfg.steps steps from the export at `path` (set-up excluded)."""
    import transformers
    import trl
    from datasets import Dataset
    tok = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    args = grpo_config(cfg, out, disable_tqdm=True, logging_strategy="no")
    trainer = trl.GRPOTrainer(model=model, reward_funcs=[rule_reward], processing_class=tok, args=args,
                              train_dataset=Dataset.from_list(rows("train", 200)))
    t = time.perf_counter()
    trainer.train()
    return time.perf_counter() - t


def our_run(base, cfg: RLConfig) -> float:
    policy = copy.deepcopy(base)
    t = time.perf_counter()
    train(policy, base, cfg, log=None)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="runs/bench/trl_step.txt", help="'' for none")
    args = ap.parse_args()
    base = base_model(0, log=None)
    cfg = RLConfig.preset("grpo", steps=args.steps, log_every=0)
    with tempfile.TemporaryDirectory() as tmp:
        path = export_hf(base, f"{tmp}/base")
        ours = theirs = float("inf")
        for i in range(args.repeats):            # taking turns, so a slow spell falls on both sides
            ours = min(ours, our_run(base, cfg))
            theirs = min(theirs, trl_run(path, cfg, f"{tmp}/run{i}"))
    ours, theirs = ours / args.steps, theirs / args.steps
    lines = [f"GRPO step (16 x 8, 2 updates, beta 0.04), {args.steps} steps from the base model: reasonlab "
             f"{ours * 1000:.1f} ms | TRL GRPOTrainer {theirs * 1000:.1f} ms | speedup {theirs / ours:.2f}x",
             load_note(), json.dumps({"reasonlab_s_per_step": round(ours, 4), "trl_s_per_step": round(theirs, 4),
                                      "speedup": round(theirs / ours, 2)})]
    report(lines, args.out)


if __name__ == "__main__":
    main()
