"""Re-evaluate a `reasonlab budget` run from its saved models (no retraining): recompute every evaluation cell of
<out>/seed<s>.json (budget models, s1 forcing, fixed formats, the base model's free choice), keep the training logs
and times, and rebuild the report. Used after the stride classifier changed (known chains first).

    PYTHONPATH=. python experiments/budget_reeval.py results/budget 0 1 2
"""
import json
import os
import sys

from reasonlab.experiments import l1
from reasonlab.methods import budget
from reasonlab.io.checkpoint import load_model, write_json, write_text
from reasonlab.train.zoo import get_model
from reasonlab.core.evaluate import problems_per_k
from reasonlab.train.sft import BASE_CFG

out, seeds = sys.argv[1], [int(s) for s in sys.argv[2:]]
results = []
for s in seeds:
    path = os.path.join(out, f"seed{s}.json")
    with open(path) as f:
        r = json.load(f)
    cfg = r["config"]
    probs = problems_per_k(cfg["eval_n"], seed=cfg["eval_seed"])
    for v, x in r["variants"].items():
        model, _ = load_model(os.path.join(out, f"model-{v.replace('+', '-')}-seed{s}"))
        x["eval"] = budget.eval_budget_model(model, probs, cfg["n_examples"])
    r.update(budget.eval_baselines(get_model(f"base-seed{s}", dict(BASE_CFG, seed=s), log=None), probs))
    write_json(path, r)
    results.append(json.loads(json.dumps(r)))
    print(f"seed {s} re-evaluated")
md, head = l1.page(results, out)
write_text(os.path.join(out, "report.md"), md)
write_json(os.path.join(out, "findings.json"), l1.findings(results))
print(head)
