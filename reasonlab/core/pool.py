"""The sampling pool: N samples for each of P problems, parsed and checked once, as (P, N) arrays.

Every method that scores sampled outputs draws them here: the votes and pass@N of test-time compute, best-of-N and
weighted votes under a verifier, a verifier's training data. The first N samples of a pool are i.i.d., so one pool
of N_max serves every N <= N_max (search-and-learn draws its curves this way).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from .. import tasks
from ..tasks import FMT_INDEX, Problem
from .model import GPT
from .sampling import sample_tree, strip_row


@dataclass
class Pool:
    """N samples for each of P problems, as (P, N) arrays."""
    problems: list[Problem]
    k: np.ndarray          # (P,) each problem's size
    answer: np.ndarray     # (P, N) the answer read, -1 when none
    correct: np.ndarray    # (P, N) answer right
    verified: np.ndarray   # (P, N) the process check accepts: the chain checks (a direct answer has no chain: False)
    fmt: np.ndarray        # (P, N) 0/1/2 = A/S/T, -1 none
    length: np.ndarray     # (P, N) output tokens up to the end of the answer (task.parse's answer_end: its </s>
                           # included, text written after an answer that does not close is not), forced ones included
    chain: np.ndarray      # (P, N) thinking tokens: running sums written before the answer
    logp: np.ndarray       # (P, N) sequence log-probability of the sampled tokens (0 where not known)
    outputs: list[list[list[int]]] | None = field(default=None, repr=False)
    """the output ids per problem and sample (kept when asked: verifiers read them)"""

    @property
    def n(self) -> int:
        return self.answer.shape[1]

    @property
    def truth(self) -> np.ndarray:
        """(P,) each problem's answer."""
        task = tasks.of(self.problems)
        return np.array([task.answer(p) for p in self.problems], dtype=np.int64)

    def flat(self) -> tuple[list[Problem], list[list[int]]]:
        """The kept outputs problem-major, each beside its problem: (problem per output, outputs), what a verifier
        scores."""
        return ([d for d, row in zip(self.problems, self.outputs) for _ in row],
                [o for row in self.outputs for o in row])


_FIELDS = ("answer", "correct", "verified", "fmt", "length", "chain")


def _read(problems, n: int, distinct: list[list[int]], inv: np.ndarray) -> dict[str, np.ndarray]:
    """The pool's arrays (flat, problem-major) for rows given as distinct outputs and each row's index among them:
    each distinct output parsed once, each distinct (problem, output) checked once."""
    task = tasks.of(problems)
    parsed = [task.parse(o) for o in distinct]
    prob = np.repeat(np.arange(len(problems)), n)
    checked: dict[tuple[int, int], bool] = {}
    answer = np.array([-1 if p["answer"] is None else p["answer"] for p in parsed], dtype=np.int64)[inv]
    return {"answer": answer,
            "correct": answer == np.array([task.answer(p) for p in problems], dtype=np.int64)[prob],
            "verified": np.array([checked.setdefault((pi, u), task.check_chain(problems[pi], parsed[u]) is True)
                                  for pi, u in zip(prob.tolist(), inv.tolist())], dtype=bool),
            "fmt": np.array([FMT_INDEX.get(p["fmt"], -1) for p in parsed], dtype=int)[inv],
            "length": np.array([p["answer_end"] for p in parsed], dtype=int)[inv],
            "chain": np.array([len(p["chain"]) for p in parsed], dtype=int)[inv]}


def _pool(problems, n: int, parts: list[dict], logp, outputs) -> Pool:
    shape = (len(problems), n)
    cat = {f: np.concatenate([p[f] for p in parts]).reshape(shape) if parts else np.zeros(shape, int) for f in _FIELDS}
    return Pool(list(problems), np.array([p.k for p in problems]), **cat,
                logp=np.zeros(shape) if logp is None else np.asarray(logp, dtype=float).reshape(shape), outputs=outputs)


def pool_of(problems: list[Problem], outputs: list[list[list[int]]], logp: np.ndarray | None = None) -> Pool:
    """A Pool from output ids, n per problem (the outputs are kept)."""
    problems = tasks.problems_of(problems)
    n = len(outputs[0]) if outputs else 0
    index: dict[tuple, int] = {}
    inv = np.array([index.setdefault(tuple(o), len(index)) for row in outputs for o in row], dtype=int)
    return _pool(problems, n, [_read(problems, n, [list(r) for r in index], inv)], logp, outputs)


def sample_pool(model: GPT, problems: list[Problem], n: int, force: list[str] | None = None, temperature: float = 1.0,
                seed: int | None = 0, chunk: int = 2000, logit_hook=None, gen: torch.Generator | None = None,
                keep_outputs: bool = False) -> Pool:
    """n samples per problem (temperature 0: greedy, n copies), parsed and checked. The samples come from `gen`
    when given (it advances), else from a generator seeded with `seed`. keep_outputs: the output ids too."""
    problems = tasks.problems_of(problems)
    task = tasks.of(problems)
    if gen is None:
        gen = torch.Generator(device=next(model.parameters()).device).manual_seed(seed)
    parts, logps, outputs = [], [], []
    for s in range(0, len(problems), chunk):
        probs = problems[s:s + chunk]
        toks, logp = sample_tree(model, [task.prompt_ids(p) for p in probs], n, gen, temperature, force,
                                 logit_hook=logit_hook, task=task)
        uniq, inv = torch.unique(toks, dim=0, return_inverse=True)
        distinct = [strip_row(r) for r in uniq.tolist()]
        inv = inv.cpu().numpy()
        parts.append(_read(probs, n, distinct, inv))
        logps.append(logp.cpu().numpy())
        if keep_outputs:
            outputs += [[distinct[u] for u in inv[i * n:(i + 1) * n]] for i in range(len(probs))]
    return _pool(problems, n, parts, np.concatenate(logps) if logps else None, outputs if keep_outputs else None)
