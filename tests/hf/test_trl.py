"""RLConfig as TRL's GRPOConfig: the mapping, the refusals, one TRL step replayed with our loss code, and a short
TRL run that learns to think and comes back into the lab."""
import copy

import pytest
import torch
import torch.nn.functional as F

from reasonlab.core.model import GPT
from reasonlab.core.rewards import rule_reward
from reasonlab.core.sampling import layout, logits_at
from reasonlab.core.task import MAX_OUT, parse, prompt_ids
from reasonlab.hf import rewards as R
from reasonlab.hf.data import rows, words
from reasonlab.hf.export import export_hf, from_hf_state, import_hf, to_hf_state
from reasonlab.hf.trl import grpo_kwargs
from reasonlab.train.config import RLConfig
from reasonlab.train.rl import advantages, aggregate, kl_terms, policy_loss_terms, tempered

from .hfkit import need

# ---------------------------------------------------------------------------------------------------------------
# The mapping (no TRL needed).

def test_the_mapping_sets_what_differs_from_trls_defaults():
    kw = grpo_kwargs(RLConfig.preset("dr_grpo", prompts_per_step=4, num_generations=8, steps=10), "out")
    assert kw["loss_type"] == "dr_grpo" and kw["scale_rewards"] == "none" and kw["beta"] == 0.04
    assert kw["max_completion_length"] == MAX_OUT == 14 and kw["num_iterations"] == 2 and kw["max_steps"] == 20
    assert kw["per_device_train_batch_size"] == 32 and kw["gradient_accumulation_steps"] == 1
    assert kw["bf16"] is False and kw["activation_checkpointing"] is False and kw["lr_scheduler_type"] == "constant"
    assert kw["use_bias_correction_kl"] is False and kw["weight_decay"] == 0.0 and kw["max_grad_norm"] == 1.0
    kw = grpo_kwargs(RLConfig.preset("dapo", dynamic_sampling=False, entropy_coef=1e-3), "out")
    assert (kw["loss_type"], kw["epsilon_high"], kw["beta"], kw["entropy_coef"]) == ("dapo", 0.28, 0.0, 1e-3)
    kw = grpo_kwargs(RLConfig.preset("gspo"), "out")
    assert kw["importance_sampling_level"] == "sequence" and kw["epsilon"] == 3e-4


@pytest.mark.parametrize("cfg,msg", [
    (RLConfig.preset("reinforce"), "clip=False"),
    (RLConfig.preset("reinforce_baseline"), "clip=False"),
    (RLConfig.preset("rloo"), "leave-one-out"),
    (RLConfig(advantage="none", scale_rewards="none"), "advantage='none'"),
    (RLConfig.preset("dapo"), "dynamic_sampling"),
    (RLConfig(kl_estimator="k1"), "k3"),
    (RLConfig(kl_estimator="exact"), "k3"),
    (RLConfig(force_direct=0.25), "force_direct"),
    (RLConfig(entropy_coef=1e-3), "entropy_coef"),
    (RLConfig(importance_sampling_level="sequence", loss_type="dapo"), "sequence"),
])
def test_what_trl_cannot_express_is_one_line(cfg, msg):
    with pytest.raises(ValueError, match=msg) as e:
        grpo_kwargs(cfg, "out")
    assert str(e.value).startswith("TRL cannot train this RL config: ") and "\n" not in str(e.value)


def test_grpo_config_is_a_trl_config_with_these_fields(tmp_path):
    need("trl")
    from reasonlab.hf import grpo_config
    cfg = RLConfig.preset("grpo", prompts_per_step=4, num_generations=4)
    args = grpo_config(cfg, str(tmp_path), logging_steps=5)
    kw = grpo_kwargs(cfg, str(tmp_path))
    assert type(args).__name__ == "GRPOConfig" and args.logging_steps == 5
    for k, v in kw.items():
        if k not in ("logging_steps", "output_dir", "report_to"):
            assert getattr(args, k) == v, k
    assert args.report_to == [] and args.gradient_checkpointing is False
    assert args.generation_batch_size == 16 and args.steps_per_generation == 1


# ---------------------------------------------------------------------------------------------------------------
# One TRL step equals one of ours.

P, G = 6, 4
CASES = [(loss, scale, beta) for loss in ("grpo", "dr_grpo", "dapo", "bnpo") for scale in ("group", "batch", "none")
         for beta in (0.0, 0.04)]


@pytest.fixture(scope="module")
def start(shipped, tmp_path_factory):
    """The erring thinker (right and wrong answers, so the advantages vary), exported, and the training rows."""
    return export_hf(shipped["err-seed0"], str(tmp_path_factory.mktemp("trl") / "err")), shipped["err-seed0"]


def trl_step(path: str, cfg: RLConfig, trl_loss: str, dtype, out: str):
    """One GRPOTrainer step from the export at `path` with plain SGD (lr 1, no clipping of the gradient norm), so
    the weights move by minus the gradient. With beta > 0 the policy is the reference plus a little noise (TRL's
    reference is the model at `path`): at the reference itself k3's gradient is zero and would test nothing.
    Returns (weights before, weights after minus before, what the reward function saw)."""
    transformers, trl = need("transformers"), need("trl")
    from datasets import Dataset

    from reasonlab.hf import grpo_config
    tok = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
    policy = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=dtype, local_files_only=True)
    if cfg.beta:
        g = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for p in policy.parameters():
                p.add_(0.02 * torch.randn(p.shape, generator=g).to(dtype))
    seen = {}

    def record(prompts, completions, completion_ids, digits, **columns):
        seen.update(prompts=list(prompts), outs=[list(c) for c in completion_ids], digits=list(digits))
        return R.rule_reward(completion_ids=completion_ids, digits=digits)
    args = grpo_config(cfg, out, optim="sgd", learning_rate=1.0, max_grad_norm=0.0, loss_type=trl_loss,
                       disable_tqdm=True, logging_strategy="no")
    data = Dataset.from_list(rows("train", 10, seed=5))
    trainer = trl.GRPOTrainer(model=policy, reward_funcs=[record], args=args, train_dataset=data,
                              processing_class=tok)
    before = {k: v.detach().clone() for k, v in policy.state_dict().items()}
    trainer.train()
    delta = {k: v.detach() - before[k] for k, v in policy.state_dict().items()}
    return before, delta, seen


def our_step(before: dict, ref: GPT, seen: dict, cfg: RLConfig, dtype) -> tuple[dict, torch.Tensor]:
    """Minus our gradient on TRL's completions, by the lab's RL code (rl.advantages, policy_loss_terms, kl_terms,
    aggregate, tempered on sampling.layout + logits_at), in transformers' names. The rewards and advantages are
    float32, as TRL keeps them whatever the model's dtype (GRPOTrainer._calculate_rewards)."""
    policy = GPT(**ref.config()).to(dtype)
    policy.load_state_dict(from_hf_state(before, ref.cfg.n_layers))
    prompts = [prompt_ids(d) for d in seen["digits"]]
    outs = seen["outs"]
    r = torch.tensor([rule_reward(d, parse(o)) for d, o in zip(seen["digits"], outs)]).view(-1, G)
    adv = advantages(r, cfg).flatten().to(dtype)
    lay = layout(prompts, outs, G)
    logits, tok, mask = logits_at(policy, lay)
    logits = tempered(logits, cfg)
    logp = F.log_softmax(logits, -1).gather(-1, tok[:, :, None]).squeeze(-1)
    per_tok, _, _ = policy_loss_terms(logp, logp.detach(), adv, mask, cfg)
    if cfg.beta:
        with torch.no_grad():
            ref_logits = tempered(logits_at(copy.deepcopy(ref).to(dtype), lay)[0], cfg)
        ref_logp = F.log_softmax(ref_logits, -1).gather(-1, tok[:, :, None]).squeeze(-1)
        per_tok = per_tok + cfg.beta * kl_terms(logp, ref_logp, None, None, cfg.kl_estimator)
    loss = aggregate(per_tok, mask, len(outs), sum(len(o) for o in outs), cfg)
    loss.backward()
    minus_grad = copy.deepcopy(policy)
    minus_grad.load_state_dict({k: -p.grad for k, p in policy.named_parameters()})
    return to_hf_state(minus_grad), r


def relative_gap(ours: dict, theirs: dict) -> float:
    num = sum(float(((ours[k].double() - theirs[k].double()) ** 2).sum()) for k in ours)
    den = sum(float((theirs[k].double() ** 2).sum()) for k in ours)
    return (num / den) ** 0.5


def check_step(start, tmp_path, loss, scale, beta, dtype) -> float:
    path, ref = start
    cfg = RLConfig(steps=1, prompts_per_step=P, num_generations=G, num_iterations=1, beta=beta, scale_rewards=scale,
                   loss_type="dapo" if loss == "bnpo" else loss, seed=0)
    before, delta, seen = trl_step(path, cfg, loss, dtype, str(tmp_path / "out"))
    assert len(seen["outs"]) == P * G and seen["prompts"] == [words(prompt_ids(d)) for d in seen["digits"]]
    ours, r = our_step(before, ref, seen, cfg, dtype)
    # the groups' rewards vary and scaling by the group's std is not scaling by the batch's: no case is trivial
    spread = r.std(1)
    assert (spread > 0).sum() >= 2 and not torch.allclose(spread, r.std().expand_as(spread))
    gap = relative_gap(ours, {k: delta[k] for k in ours})
    assert max(float(v.abs().max()) for v in ours.values()) > 1e-3
    return gap


@pytest.mark.parametrize("loss,scale,beta", CASES)
def test_one_trl_step_equals_ours_float64(start, tmp_path, loss, scale, beta):
    """Every loss type both support (TRL's bnpo is dapo on one process), every scale_rewards, beta 0 and 0.04: the
    weights TRL's step moves (= minus its gradient) equal minus our gradient on its completions. The models in
    float64, so that rounding hardly enters: what is left is TRL's float32 inside (its rewards and advantages, and
    its fused LM head, trl/kernels/chunked_logprob.py, which takes the log-softmax and its gradient in float32
    whatever the model's dtype), ~2e-7 of the update. A change of the math is far above the bound: the KL's ratio
    weighting (TRL's default) moves it by 0.3-0.5, the biased std by 0.15, an epsilon of 1e-8 for 1e-4 by 2e-4."""
    gap = check_step(start, tmp_path, loss, scale, beta, torch.float64)
    print(f"float64 {loss} {scale} beta={beta}: relative gap {gap:.1e}")
    assert gap < 1e-6


@pytest.mark.parametrize("loss,scale,beta", [c for c in CASES if c[1] == "group" and c[2] == 0.04] + [
    pytest.param(*c, marks=pytest.mark.slow) for c in CASES if not (c[1] == "group" and c[2] == 0.04)])
def test_one_trl_step_equals_ours_float32(start, tmp_path, loss, scale, beta):
    """The same in float32, as both train: TRL's sdpa attention and our batched matmuls round differently, which
    moves the update by ~1e-6 to 1e-5 of its size (the whole grid runs with -m slow)."""
    gap = check_step(start, tmp_path, loss, scale, beta, torch.float32)
    print(f"float32 {loss} {scale} beta={beta}: relative gap {gap:.1e}")
    assert gap < 5e-5


# ---------------------------------------------------------------------------------------------------------------
# A TRL run learns to think, and comes back.

def free_summary(model, n: int = 100) -> tuple[float, float]:
    """Greedy free accuracy and chain share (S or T) on the lab's test draw."""
    from reasonlab.core.evaluate import eval_table
    free = eval_table(model, n)["free"]
    return free["acc"], free["share"]["short"] + free["share"]["full"]


@pytest.mark.slow
def test_thirty_trl_steps_teach_the_base_model_to_think(shipped, base_dir, tmp_path, capsys):
    """TRL's GRPOTrainer, 30 steps (GRPO's preset: 16 problems x 8 completions, two updates each, lr 1e-4, beta
    0.04) from the base model, which answers every problem directly (right on ~25 %), with the lab's rule reward:
    the chains pay, so the model learns to write them. Seen on 2 cores: accuracy 0.25 -> 1.00, chain share 0 -> 1
    in ~10 s of training; the margins below hold far from that. The saved model comes back through `reasonlab import
    hf` into `reasonlab eval`."""
    transformers, trl = need("transformers"), need("trl")
    from datasets import Dataset

    from reasonlab.cli import main
    from reasonlab.hf import grpo_config
    acc0, chains0 = free_summary(shipped["base-seed0"])
    cfg = RLConfig.preset("grpo", steps=30, learning_rate=1e-4)
    tok = transformers.AutoTokenizer.from_pretrained(base_dir, local_files_only=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(base_dir, local_files_only=True)
    trainer = trl.GRPOTrainer(model=model, reward_funcs=[R.rule_reward], processing_class=tok,
                              args=grpo_config(cfg, str(tmp_path / "run"), disable_tqdm=True, logging_strategy="no"),
                              train_dataset=Dataset.from_list(rows("train", 200)))
    trainer.train()
    trainer.save_model(str(tmp_path / "trained"))
    stem = str(tmp_path / "imported")
    assert main(["import", "hf", str(tmp_path / "trained"), "--out", stem]) == 0
    back, _ = import_hf(str(tmp_path / "trained"))
    acc1, chains1 = free_summary(back)
    with capsys.disabled():
        print(f"\n30 TRL steps: free accuracy {acc0:.3f} -> {acc1:.3f}, chain share {chains0:.3f} -> {chains1:.3f}")
    assert chains0 < 0.1 and acc0 < 0.4
    assert chains1 > chains0 + 0.4 and acc1 > acc0 + 0.3
    capsys.readouterr()
    assert main(["eval", "--checkpoint", stem, "--n-test", "20"]) == 0
    assert "free share" in capsys.readouterr().out


def test_the_completion_length_is_the_tasks_longest_output():
    from reasonlab import tasks
    for name in tasks.names():
        kw = grpo_kwargs(RLConfig(task=name), "out")
        assert kw["max_completion_length"] == tasks.get(name).max_out
    assert grpo_kwargs(RLConfig(task="add"), "out")["max_completion_length"] == 16
