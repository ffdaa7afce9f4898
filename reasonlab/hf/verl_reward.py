"""verl's custom reward file: `custom_reward_function.path` names a file that verl loads on its own (importlib from
the path, no parent package), where `rewards.py`'s relative imports fail; this one imports the package absolutely.
`custom_reward_function.name=compute_score` (docs/hf.md)."""
from reasonlab.hf.rewards import compute_score

__all__ = ["compute_score"]
