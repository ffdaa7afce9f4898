"""The spec's surface, used the way the lecture notebook uses it: `import reasonlab as R`."""
import random

import torch

import reasonlab as R


def test_notebook_walkthrough():
    assert R.VOCAB[:8] == ["<pad>", "<s>", "</s>", "=", "A", "S", "T", "_"] and len(R.VOCAB) == 18
    assert R.ID["0"] == 8 and R.FORMATS == {"direct": "A", "short": "S", "full": "T"}
    assert (R.K_MIN, R.K_MAX, R.MAX_LEN) == (2, 8, 24)
    assert set(R.BASE_CFG) >= {"seed", "lr", "phases"}
    for mix, steps, warmup, k_range, *lr_mult in R.BASE_CFG["phases"]:
        assert len(mix) == 3 and steps > 0 and 0 <= warmup <= steps and R.K_MIN <= k_range[0] <= k_range[1] <= R.K_MAX

    rng = random.Random(0)
    problems = [R.make_digits(rng, k) for k in range(2, 9) for _ in range(5)]
    seq, start = R.encode(problems[0], "full")
    assert seq[:start + 1] == R.prompt_ids(problems[0])

    inp, tgt = R.batch_fn(0, 16, mix=(0.0, 0.5, 0.5), k_range=(2, 4))
    assert inp.shape == (16, R.MAX_LEN - 1)

    model = R.get_model("nb", R.BASE_CFG, quick=True, log=None)
    assert isinstance(model, torch.nn.Module) and not model.training
    assert isinstance(R.build_model(0), R.GPT)

    res = R.evaluate(model, problems, force=["T"])
    assert set(res) >= {"acc", "length", "share", "chain_ok", "results", "outputs", "per_k"}
    assert set(res["share"]) == set(R.FORMATS) and set(res["per_k"]) == set(range(2, 9))
    assert len(res["results"]) == len(problems) and all(r["fmt"] == "full" for r in res["results"])

    gen = torch.Generator().manual_seed(0)
    prompts = [R.prompt_ids(d) for d in problems]
    outs = R.generate(model, prompts, gen, temperature=1.0)
    assert len(outs) == len(problems) and all(isinstance(t, int) for o in outs for t in o)
    parsed = [R.parse(o) for o in outs]
    rewards = [R.rule_reward(d, p) for d, p in zip(problems, parsed)]
    assert all(r in (0.0, 0.1, 1.0, 1.1) for r in rewards)
    logp, mask = R.seq_logprobs(model, prompts, outs)
    assert logp.shape == mask.shape == (len(outs), max(len(o) for o in outs)) and (logp <= 0).all()
    # check_chain: None for a complete direct answer, a verdict otherwise; on the forced-T evaluation it agrees
    # with evaluate's chain_ok and, where it accepts, the answer is right
    for d, p in zip(problems, parsed):
        c = R.check_chain(d, p)
        assert (c is None) == (p["fmt"] == "direct" and p["ok"]) and (c is None or isinstance(c, bool))
    checks = [R.check_chain(d, p) for d, p in zip(problems, res["results"])]
    assert sum(checks) / len(checks) == res["chain_ok"]
    assert all(p["answer"] == sum(d) % 10 for d, p, c in zip(problems, res["results"], checks) if c)


def test_the_spec_names_are_the_functions_of_their_modules():
    """`R.evaluate` is core.evaluate's function, not a module of the same name."""
    assert callable(R.evaluate) and R.evaluate.__module__ == "reasonlab.core.evaluate"
    assert R.rl_train.__module__ == "reasonlab.train.rl"


def test_the_package_root_loads_its_names_on_first_use():
    """`import reasonlab` imports neither torch nor matplotlib: the spec's names load when first used."""
    import subprocess
    import sys
    code = ("import sys, reasonlab as R; print(sorted({'torch', 'matplotlib'} & set(sys.modules))); R.GPT; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["[]", "True"]
