"""What the RL loop reports at the end of every step: the metrics record (one line of metrics.jsonl), the console
line, a few completions with their rewards, and the Logbook that writes them, checkpoints and calls back."""
from __future__ import annotations

from typing import Callable, NamedTuple

from tqdm import tqdm

from .. import tasks
from ..core.model import GPT
from ..io.runs import append_metric
from ..tasks import FORMATS, Problem, Task
from .config import RLConfig


def format_shares(parsed: list[dict], problems: list[Problem], G: int) -> tuple[dict, dict]:
    """Format shares overall and per k (k -> {fmt: share})."""
    share = {f: sum(p["fmt"] == f for p in parsed) / max(1, len(parsed)) for f in FORMATS}
    by_k: dict[int, list[dict]] = {}
    for i, p in enumerate(parsed):
        by_k.setdefault(problems[i // G].k, []).append(p)
    return share, {k: {f: sum(p["fmt"] == f for p in ps) / len(ps) for f in FORMATS} for k, ps in sorted(by_k.items())}


def completion_table(task: Task, problems, outs, r, adv, G: int, n_problems: int = 2) -> str:
    """A few problems with each of their completions, reward and advantage (for the console)."""
    lines = []
    for i in range(min(n_problems, len(problems))):
        p = problems[i]
        lines.append(f"  problem {task.show(p)}  (answer {' '.join(task.write_answer(p, task.answer(p)))})")
        for j in range(G):
            o = outs[i * G + j]
            words = " ".join(task.vocab[t] if t < len(task.vocab) else "?" for t in o)
            lines.append(f"    {words:<34} reward {r[i, j]:.2f}  adv {adv[i, j]:+.2f}")
    return "\n".join(lines)


def step_record(step: int, ro: NamedTuple, diag: dict, n_tokens: int, clip_lo: float, clip_hi: float, gnorm,
                loss_sum: float, dt: float) -> dict:
    """The metrics of one step (one line of metrics.jsonl) from its rollouts (`rl.Rollouts`)."""
    B, G = len(ro.outs), ro.rewards.shape[1]
    r = ro.rewards
    lengths = [p["length"] for p in ro.parsed]
    share, share_k = format_shares(ro.parsed, ro.problems, G)
    task = tasks.of(ro.problems)
    return {"step": step + 1, "reward": r.mean().item(), "reward_std": r.std().item() if r.numel() > 1 else 0.0,
            "acc": sum(task.correct(ro.problems[i // G], p) for i, p in enumerate(ro.parsed)) / B,
            "frac_reward_zero_std": ro.zero_std, "length": sum(lengths) / B, "length_min": min(lengths),
            "length_max": max(lengths), "share": share, "share_by_k": share_k,
            "kl": diag.get("kl", 0.0) / n_tokens, "kl_exact": diag.get("kl_exact", 0.0) / n_tokens,
            "entropy": diag["entropy"] / n_tokens, "clip_low": clip_lo, "clip_high": clip_hi,
            "grad_norm": float(gnorm), "surrogate": loss_sum, "groups": len(ro.problems), "step_time": dt,
            "tokens_per_s": n_tokens / dt}


class Logbook:
    """What happens at the end of every step, skipped or not: the history, metrics.jsonl, the console, the progress
    bar, the checkpoint and the callback."""

    def __init__(self, cfg: RLConfig, hist: list, run_dir: str | None, log: Callable | None,
                 callback: Callable | None, bar_start: int | None, save: Callable[[int], None]):
        self.cfg, self.hist, self.log, self.callback, self.save = cfg, hist, log, callback, save
        self.run_dir = run_dir
        self.bar = None
        if bar_start is not None:
            self.bar = tqdm(total=cfg.steps, initial=bar_start, unit="step", leave=False)

    def end_step(self, step: int, rec: dict, policy: GPT, table: Callable[[], str] | None = None) -> None:
        cfg, n = self.cfg, step + 1
        self.hist.append(rec)
        if self.run_dir:
            append_metric(self.run_dir, rec)
        if self.log and cfg.log_every and n % cfg.log_every == 0:
            self.log(log_line(rec))
        if self.log and table is not None and cfg.table_every and n % cfg.table_every == 0:
            self.log(table())
        if self.bar is not None:
            self.bar.update(1)
        if (cfg.checkpoint_every and n % cfg.checkpoint_every == 0) or n == cfg.steps:
            self.save(n)
        if self.callback is not None:
            self.callback(rec, policy)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def log_line(rec: dict) -> str:
    if rec.get("skipped"):
        return f"step {rec['step']:4d} | skipped: every group's rewards agree (no learning signal)"
    s = rec["share"]
    return (f"step {rec['step']:4d} | reward {rec['reward']:.3f}±{rec['reward_std']:.2f} | acc {rec['acc']:.3f} "
            f"| zero-std {rec['frac_reward_zero_std']:.2f} | len {rec['length']:.1f} ({rec['length_min']}-{rec['length_max']}) "
            f"| A/S/T {s['direct']:.2f}/{s['short']:.2f}/{s['full']:.2f} | kl {rec['kl']:.4f} (exact {rec['kl_exact']:.4f}) "
            f"| ent {rec['entropy']:.3f} | clip {rec['clip_low']:.3f}/{rec['clip_high']:.3f} | gnorm {rec['grad_norm']:.2f} "
            f"| {rec['step_time']:.3f}s {rec['tokens_per_s']:.0f} tok/s")
