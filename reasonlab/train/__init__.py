"""Training: supervised recipes (sft), the RL loop (rl), and the model zoo (zoo: base models, the erring thinker,
cached and locked)."""
