"""The optimiser every trainer uses (pretraining, RL, the verifiers) and its learning-rate schedules."""
from __future__ import annotations

import math

import torch


class AdamW:
    """AdamW (Loshchilov & Hutter 2019; weight_decay 0 is Adam) as one fused kernel: torch.optim.AdamW(fused=True)'s
    update, state and state_dict layout, without torch.optim, whose first param group imports torch._dynamo: 1.5-2 s
    per process, more than a quick lab unit or a short RL run trains. One param group; `lr` may change between steps
    through param_groups[0]["lr"] (the schedules do)."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0):
        self.params = list(params)
        self.param_groups = [{"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay}]
        self.state: dict[int, dict[str, torch.Tensor]] = {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        live = [i for i, p in enumerate(self.params) if p.grad is not None]
        for i in live:
            if i not in self.state:   # the fused kernel's step counter: a float32 scalar on the parameter's device
                p = self.params[i]
                self.state[i] = {"step": torch.zeros((), dtype=torch.float32, device=p.device),
                                 "exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)}
        if not live:
            return
        st = [self.state[i] for i in live]
        steps = [s["step"] for s in st]
        torch._foreach_add_(steps, 1)
        g = self.param_groups[0]
        torch._fused_adamw_([self.params[i] for i in live], [self.params[i].grad for i in live],
                            [s["exp_avg"] for s in st], [s["exp_avg_sq"] for s in st], [], steps, lr=g["lr"],
                            beta1=g["betas"][0], beta2=g["betas"][1], weight_decay=g["weight_decay"], eps=g["eps"],
                            amsgrad=False, maximize=False)

    def state_dict(self) -> dict:
        return {"state": {i: dict(s) for i, s in self.state.items()},
                "param_groups": [{**self.param_groups[0], "params": list(range(len(self.params)))}]}

    def load_state_dict(self, sd: dict) -> None:
        """torch.optim.Adam(W)'s state_dict as well (RL checkpoints written before this class): the same layout."""
        (g,) = sd["param_groups"]
        self.param_groups[0].update({k: (tuple(g[k]) if k == "betas" else g[k]) for k in self.param_groups[0] if k in g})
        self.state = {int(i): {k: (v.to(torch.float32) if k == "step" else v).to(self.params[int(i)].device).clone()
                               for k, v in s.items()} for i, s in sd["state"].items()}


def lr_at(step: int, steps: int, lr: float, warmup: int, min_frac: float = 0.1, schedule: str = "cosine") -> float:
    """The learning rate at `step` of `steps`: "cosine", linear warmup then cosine decay to min_frac * lr (nanoGPT's
    schedule); "constant", warmup then lr; "decay", cosine from lr down to min_frac * lr, no warmup (the anneal after
    a constant phase: warmup-stable-decay, Hu et al. 2024, MiniCPM)."""
    if schedule == "decay":
        return lr * (min_frac + (1 - min_frac) * 0.5 * (1 + math.cos(math.pi * step / max(1, steps))))
    if step < warmup:
        return lr * (step + 1) / warmup
    if schedule == "constant":
        return lr
    t = (step - warmup) / max(1, steps - warmup)
    return lr * (min_frac + (1 - min_frac) * 0.5 * (1 + math.cos(math.pi * t)))
