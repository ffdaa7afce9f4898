"""A thinker whose misreadings are drawn per generation call: the base model reading its task's words (digits' ten
digits) through a fresh Gaussian direction each time it writes (train.erring.misread's noise, drawn per call instead of
fixed in the weights). A best-of-N sample is one call; in beam search and DVTS each candidate step is one, and its reader re-reads
the whole prefix (prompt and chain so far) through its own direction, so a misreading at one step need not repeat at
the next. `ReadTree` gives the search loops of methods.search the interface of their KV-cache tree; it has no
cache (every row reads differently) and runs each step from the start of the sequence.
"""
from __future__ import annotations

import torch

from ..core import fast
from ..core.model import GPT
from ..core.problems import as_task
from ..core.sampling import EOS, SPECIAL_ID, pick
from ..tasks import Task


class Readers:
    """The base model and a noise scale: sigma x the task's word embeddings' std (misread's scale)."""

    def __init__(self, base: GPT, sigma: float, task: str | Task = "digits"):
        self.model, self.task = base.eval(), as_task(task)
        ids = self.task.task_ids()
        self.first, self.n_words = ids[0], len(ids)
        self.scale = sigma * base.tok.weight.data[self.first:self.first + self.n_words].std()

    def draw(self, n: int, gen: torch.Generator) -> torch.Tensor:
        """(n, W, C): n fresh directions over the task's W words, one per call, already scaled."""
        C = self.model.cfg.d_model
        return self.scale * torch.randn(n, self.n_words, C, generator=gen, device=gen.device)

    @torch.inference_mode()
    def logits(self, ids: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """(B, T) ids, row b read through direction z[b] -> the logits (B, V) of the next token."""
        word = (ids >= self.first) & (ids < self.first + self.n_words)
        shift = z[torch.arange(len(ids), device=ids.device)[:, None], (ids - self.first).clamp(0, self.n_words - 1)]
        return fast.forward(self.model, ids, shift=shift * word[..., None])[:, -1].float()

    def tree(self, problems, force: str, gen: torch.Generator | None, temperature: float) -> "ReadTree":
        if gen is None:
            raise ValueError("a search over readers needs a generator: every call draws its misreading")
        return ReadTree(self, problems, force, gen, temperature)


class ReadTree:
    """The partial outputs of a search, a row per live beam (methods.search._Tree's interface): `step` draws a reader
    per candidate, which writes one chain state, or from any other token on to </s>; `advance` keeps the chosen
    beams."""

    def __init__(self, readers: Readers, problems, force: str, gen: torch.Generator, temperature: float):
        self.r, self.gen, self.temperature = readers, gen, temperature
        self.root = (SPECIAL_ID[force],)
        self.seqs = [tuple(readers.task.prompt_ids(d)) + self.root for d in problems]   # prompt + output so far
        self.nodes = torch.arange(len(problems), device=gen.device)

    def step(self, node: torch.Tensor, texts: list[tuple]) -> tuple[list[tuple], torch.Tensor]:
        ids = torch.tensor([self.seqs[i] for i in node.tolist()], device=node.device)
        z = self.r.draw(len(ids), self.gen)
        tok = pick(self.r.logits(ids, z), self.gen, self.temperature)
        tl = tok.tolist()
        task = self.r.task
        room = task.max_len - task.prompt_len - len(texts[0])               # tokens left, this one included
        ends = [i for i, t in enumerate(tl) if not task.is_state(t) and t != EOS and room > 1]
        tails = {i: [tl[i]] for i in ends}
        live = list(ends)
        while live and len(tails[live[0]]) < room:                          # the same reader writes the answer
            idx = torch.tensor(live, device=node.device)
            more = torch.tensor([tails[i] for i in live], device=node.device)
            nxt = pick(self.r.logits(torch.cat([ids[idx], more], 1), z[idx]), self.gen, self.temperature).tolist()
            for i, t in zip(live, nxt):
                tails[i].append(t)
            live = [i for i in live if tails[i][-1] != EOS]
        return [t + tuple(tails.get(i, (tl[i],))) for i, t in enumerate(texts)], tok

    def advance(self, node: torch.Tensor, tok: torch.Tensor) -> torch.Tensor:
        self.seqs = [self.seqs[i] + (t,) for i, t in zip(node.tolist(), tok.tolist())]
        return torch.arange(len(self.seqs), device=node.device)
