"""Batched generation with a KV cache, the naive full-recompute decoder it must match, and log-probs."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from ..tasks import Task, get
from ..tasks.records import EOS, PAD, SPECIALS
from . import fast
from .fast import KVCache, additive
from .model import GPT

SPECIAL_ID = {w: i for i, w in enumerate(SPECIALS)}   # the format tokens a `force` writes are shared by every task


def _forced(force: list[str] | None, task: str | Task = "digits") -> list[int]:
    """The ids of the words `force` writes: the shared specials (A, S, T, ...), or any of the task's words."""
    if not force:
        return []
    if all(w in SPECIAL_ID for w in force):
        return [SPECIAL_ID[w] for w in force]
    ids = (task if isinstance(task, Task) else get(task)).id
    return [ids[w] for w in force]


def _new_tokens(model: GPT, t0: int, max_new: int | None) -> int:
    """Tokens to generate after t0: max_new (None: any), never past the model's context."""
    room = model.cfg.max_len - t0
    return max(0, room if max_new is None else min(max_new, room))


def pick(logits: torch.Tensor, gen: torch.Generator | None, temperature: float) -> torch.Tensor:
    """Next token per row from (B, V) logits: argmax without a generator or at temperature 0, else a sample."""
    if gen is None or temperature == 0:
        return logits.argmax(-1)
    probs = F.softmax(logits.float() / temperature, -1)
    return torch.multinomial(probs, 1, generator=gen).squeeze(1)


def _groups(prompts: list[list[int]]) -> dict[int, list[int]]:
    """Row indices grouped by prompt length (one group in practice: prompts have a fixed width)."""
    groups: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        groups.setdefault(len(p), []).append(i)
    return groups


def strip_row(row: list[int]) -> list[int]:
    """A sampled row (sample_tree's output ids) cut after its first </s>, padding dropped."""
    return row[:row.index(EOS) + 1] if EOS in row else [t for t in row if t != PAD]


def _finish(seqs: torch.Tensor, start: int) -> list[list[int]]:
    """(B, T) token rows -> outputs after `start`, cut after the first </s>."""
    outs = []
    for row in seqs[:, start:].tolist():
        outs.append(row[:row.index(EOS) + 1] if EOS in row else row)
    return outs


@torch.no_grad()
def generate(model: GPT, prompts: list[list[int]], gen: torch.Generator | None = None, temperature: float = 1.0,
             force: list[str] | None = None, max_new: int | None = None, budget: int | None = None,
             task: str | Task = "digits") -> list[list[int]]:
    """Generate after each prompt (a list of ids ending with "="); returns the outputs, forced prefix included.

    Greedy when gen is None or temperature == 0, otherwise sampled from `gen`. `force` (e.g. ["T"]; a word other
    than the shared specials is one of `task`'s) is written before generation starts. An output ends at its first
    </s>, after max_new generated tokens (None: no limit), or at the model's max_len. Every row is sampled at every
    step, so the random stream does not depend on when other rows finish. `budget` (0..k_max chain steps) puts
    `task`'s budget token in place of each prompt's "=" (Task.budget_prompt_ids); a model without budget tokens
    (budget.py trains those) raises ValueError.
    """
    if budget is not None:
        task = task if isinstance(task, Task) else get(task)
        if model.cfg.vocab_size < len(task.budget_vocab):
            raise ValueError(f"budget={budget}: this model has no budget tokens (vocabulary {model.cfg.vocab_size} < "
                             f"{len(task.budget_vocab)}); train one with `reasonlab l1` (it keeps its models in the cache)")
        prompts = [task.with_budget(p, budget) for p in prompts]
    return generate_n(model, prompts, 1, gen, temperature, force, max_new, task=task)


@torch.inference_mode()   # lighter than no_grad (no version counters); the outputs are plain lists
def generate_n(model: GPT, prompts: list[list[int]], n: int, gen: torch.Generator | None = None,
               temperature: float = 1.0, force: list[str] | None = None, max_new: int | None = None,
               task: str | Task = "digits") -> list[list[int]]:
    """n outputs per prompt (problem-major: prompt 0's n outputs first), decoded on the tree of distinct prefixes
    (`tree_walk`). The outputs are `generate`'s on each prompt repeated n times, token for token on CPU (tested
    against the naive decoder); on CUDA a batch of another size may take another GEMM kernel, move a logit in its
    last bit and, rarely, a sample."""
    if model.training:   # .eval() walks every module: 0.15 ms, once per RL step for nothing
        model.eval()
    device = next(model.parameters()).device
    outs: list[list[int] | None] = [None] * (len(prompts) * n)
    forced = _forced(force, task)
    for plen, rows in _groups(prompts).items():
        seq = torch.tensor([prompts[i] + forced for i in rows], dtype=torch.long, device=device)  # (P, t)
        toks, _ = tree_walk(model, seq, n, gen, temperature, max_new)
        out_rows = [i * n + j for i in rows for j in range(n)]
        for i, o in zip(out_rows, _finish(toks, plen)):
            outs[i] = o
    return outs  # type: ignore[return-value]


def tree_walk(model: GPT, seq: torch.Tensor, n: int, gen: torch.Generator | None, temperature: float,
              max_new: int | None = None, logit_hook=None, want_logp: bool = False, keep_frac: float = 0.5):
    """The one decoder: n continuations of each row of seq (P, t0), on the tree of distinct prefixes. Rows that
    have written the same tokens so far (at first, the n rows of a prompt and of the prompts equal to it) share one
    forward pass and one KV-cache row, and finished rows drop out. A group's samples often agree (a chain that is
    right, a format the policy prefers): the base model's RL rollouts have about half as many distinct prefixes as
    live rows, a trained policy far fewer. Each row still draws its own next token, so these are n independent
    samples per prompt.

    Returns (tokens (P * n, t) with padding after </s>, row i * n + j prompt i's j-th; the sequence log-probability
    (P * n,) of the generated tokens under the (hooked, tempered) distribution, or None unless want_logp).
    `logit_hook(logits (U, V), prefixes (U, t)) -> logits` edits the next-token scores of each distinct prefix.
    keep_frac: the cache is compacted only once keep_frac or fewer of its rows are live (the others decode padding
    meanwhile; a prefix that branches takes a new row in the cache's spare capacity); the outputs do not depend
    on it.
    """
    P, V = seq.shape[0], model.cfg.vocab_size
    device = seq.device
    n_new = _new_tokens(model, seq.shape[1], max_new)
    # (U, V): one row per distinct prompt. The cache has room for twice as many rows, so that branches take rows in
    # place (KVCache.grow), and no more than there are output rows (a live prefix or an ended row holds a cache row,
    # and each has output rows of its own); past the room, the cache is copied into twice what it then holds
    cache, logits, first, inv = _prefill(model, seq, lambda u: min(P * n, 2 * u))
    paths = seq[first] if logit_hook is not None else None               # (U, t): each prefix's tokens
    node = inv.repeat_interleave(n)                                      # (B,): each row's prefix
    done = torch.zeros(len(node), dtype=torch.bool, device=device)
    logp = torch.zeros(len(node), device=device) if want_logp else None
    steps = [seq.repeat_interleave(n, 0)]
    arange = torch.arange(max(P, len(node)), device=device)
    cache_row = arange[:len(first)]                                      # (U,): each prefix's row in the cache
    for t in range(n_new):
        if logit_hook is not None:
            logits = logit_hook(logits, paths)
        # every row draws, finished ones too (then overwritten by padding): torch.multinomial takes one
        # exponential per entry of the (B, V) matrix, so the random stream is that of `generate`
        nxt = pick(logits[node], gen, temperature)
        nxt = torch.where(done, torch.full_like(nxt, PAD), nxt)
        if logp is not None:
            lp_nodes = F.log_softmax(logits.float() / (temperature or 1.0), -1)
            logp += torch.where(done, torch.zeros_like(logp), lp_nodes[node, nxt])
        steps.append(nxt[:, None])
        done |= nxt == EOS
        if bool(done.all()) or t == n_new - 1:
            break
        # the live rows' (prefix, token) pairs are the next prefixes; finished rows get key -1 and point at
        # prefix 0, whose logits they draw from and discard
        key = torch.where(done, -1, node * V + nxt)
        uniq, node = torch.unique(key, return_inverse=True)
        if uniq[0] < 0:
            uniq, node = uniq[1:], (node - 1).clamp_(min=0)
        parent, tok = uniq // V, uniq % V
        rows = cache_row[parent]                                          # the new prefixes' cache rows
        R = cache.batch
        # a parent's second, third, .. child (parents come sorted): it needs a cache row of its own
        branch = torch.zeros(len(parent), dtype=torch.bool, device=device)
        branch[1:] = parent[1:] == parent[:-1]
        n_branch = int(branch.sum())
        if n_branch == 0 and len(rows) == R and bool((rows == arange[:R]).all()):   # nothing branched or ended
            full, at = tok, None
        elif len(rows) > keep_frac * (R + n_branch) and R + n_branch <= cache.capacity:
            # most rows live on: leave the cache where it is. A branch gets a new row after the last (a copy of
            # its parent's, `grow`), and rows that have ended run on padding (their results unused). Compacting
            # copies the cache into a fresh allocation, which costs as much as a decode step over it, to save a
            # fraction of one per step.
            if n_branch:
                cache.grow(rows[branch])
                rows = rows.masked_scatter(branch, arange[R:R + n_branch])
            full, at = torch.full((cache.batch,), PAD, dtype=tok.dtype, device=device).index_copy_(0, rows, tok), rows
        else:          # few rows are live, or no room is left: copy the cache rows the next step needs
            live = len(node) - int(done.sum())
            cache, rows, full, at = cache.select(rows, min(live, 2 * len(rows))), arange[:len(rows)], tok, None
        cache_row = rows
        if paths is not None:
            paths = torch.cat([paths[parent], tok[:, None]], 1)
        logits = fast.forward(model, full[:, None], cache=cache)[:, -1]
        if at is not None:            # the cache's rows in another order than the prefixes'
            logits = logits[at]
    return torch.cat(steps, 1), logp


def _prefill(model: GPT, seq: torch.Tensor, room=None):
    """The KV cache of the distinct rows of seq (P, t0) and their last logits (U, V); first (U,) names a row of seq
    for each, inv (P,) each row's distinct row. Equal prompts run once: 4096 random problems hold ~3460 distinct
    ones (k = 2 has only 100), and an evaluation's 500 per k at k = 2 are at most 100. Prompts also share their
    first tokens (<s> and the first digits: ~1100 distinct first four among 4096), so those run once per distinct
    head and the cache rows are copied out before the rest of the prompts run. room(U) -> the cache's capacity in
    rows (KVCache.grow; default U)."""
    P, t0 = seq.shape
    V = model.cfg.vocab_size
    dtype = next(model.parameters()).dtype
    device = seq.device
    # the first j tokens as one base-V number: keys sort as unique(dim=0) sorts the rows, without its row-by-row
    # comparisons (100 ms of 1.1 s on 4096 forced-T prompts); prompts too long for one int64 are not merged
    keys, key = [], seq[:, 0]
    for j in range(2, t0 + 1):
        if V ** j >= 2 ** 63:
            break
        key = key * V + seq[:, j - 1]
        keys.append((j, key))
    first = inv = torch.arange(P, device=device)
    if keys and keys[-1][0] == t0:
        u, i = torch.unique(keys[-1][1], return_inverse=True)
        if len(u) < P:              # equal prompts: keep one of each (scatter keeps any one of them)
            first, inv = torch.empty(len(u), dtype=torch.long, device=device).scatter_(0, i, first), i
    rows = seq[first]
    U = len(rows)
    capacity = room(U) if room is not None else U
    m, hinv = 0, None
    for j, key in keys:             # the longest head with at most a third as many distinct rows as prompts
        if j == t0:
            break
        u, i = torch.unique(key[first], return_inverse=True)
        if 3 * len(u) > U:
            break
        m, hinv = j, i
    if not m:
        cache = KVCache(model.cfg, U, device=device, dtype=dtype, capacity=capacity)
        return cache, last_logits(model, rows, cache), first, inv
    # one row per distinct head, in sorted order: any of its prompts
    hfirst = torch.empty(int(hinv.max()) + 1, dtype=torch.long, device=device)
    hfirst.scatter_(0, hinv, torch.arange(U, device=device))
    cache = KVCache(model.cfg, len(hfirst), device=device, dtype=dtype)
    fast.fill(model, rows[hfirst, :m], cache)
    cache = cache.select(hinv, capacity)
    return cache, last_logits(model, rows[:, m:], cache), first, inv


PREFILL_ROWS = 512
"""Rows per forward of a prefill on CPU. The prompt block of 4096 rows makes 35-46 MB activations, above the 32 MB
up to which glibc's malloc reuses freed memory: each was a fresh mmap whose pages fault in as they are first written
(the MLP's bias copy alone took milliseconds a layer). At 512 rows they stay under it and in cache, and prefill is
about a fifth faster with the same outputs."""


def last_logits(model: GPT, ids: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """fast.forward(model, ids, cache=cache)[:, -1] (the last block past its keys and values at the last position alone), on
    CPU PREFILL_ROWS rows at a time (rows are independent)."""
    if len(ids) <= PREFILL_ROWS or ids.device.type != "cpu":
        return fast.forward(model, ids, cache=cache, last=True)[:, -1]
    out = []
    for a in range(0, len(ids), PREFILL_ROWS):
        part = cache.rows(a, a + PREFILL_ROWS)
        out.append(fast.forward(model, ids[a:a + PREFILL_ROWS], cache=part, last=True)[:, -1])
    cache.start, cache.pos = part.start, part.pos
    return torch.cat(out)


@torch.no_grad()
def generate_naive(model: GPT, prompts: list[list[int]], gen: torch.Generator | None = None, temperature: float = 1.0,
                   force: list[str] | None = None, max_new: int | None = None, task: str | Task = "digits"
                   ) -> list[list[int]]:
    """Reference decoder: recompute the whole sequence for every new token, one prompt-length group at a time.

    Same sampling order as `generate` (every row, every step), so the two agree token for token.
    """
    model.eval()
    device = next(model.parameters()).device
    outs: list[list[int] | None] = [None] * len(prompts)
    forced = _forced(force, task)
    for plen, rows in _groups(prompts).items():
        seq = torch.tensor([prompts[i] + forced for i in rows], dtype=torch.long, device=device)
        n_new = _new_tokens(model, seq.shape[1], max_new)
        done = torch.zeros(len(rows), dtype=torch.bool, device=device)
        for t in range(n_new):
            logits, _ = model(seq)
            nxt = pick(logits[:, -1], gen, temperature)
            nxt = torch.where(done, torch.full_like(nxt, PAD), nxt)
            seq = torch.cat([seq, nxt[:, None]], 1)
            done |= nxt == EOS
            if bool(done.all()):
                break
        for i, o in zip(rows, _finish(seq, plen)):
            outs[i] = o
    return outs  # type: ignore[return-value]


class Layout(NamedTuple):
    """Model inputs for scoring completions, and where each completion token's logits land.

    ids, pos (R, T), mask (R, 1, T, T) (additive; None: positions 0..T-1, causal), keep (N,) (the real
    positions; None: all) and want (M,) (those of them whose logits are read; None: all) feed fast.forward; col (B, L)
    indexes the model's logits, flattened, at the position that predicts each output token; tok (B, L) and
    out_mask (B, L) are the output ids and which of them are real.
    """
    ids: torch.Tensor
    pos: torch.Tensor | None
    mask: torch.Tensor | None
    keep: torch.Tensor | None
    want: torch.Tensor | None
    col: torch.Tensor
    tok: torch.Tensor
    out_mask: torch.Tensor


def _long(rows: list, device=None) -> torch.Tensor:
    """Equal-length lists of ints as a long tensor, through numpy: torch.tensor spends ~150 ns per element of a
    nested list, numpy a fifth of that (the layout converts a few thousand each RL step)."""
    return torch.from_numpy(np.array(rows, dtype=np.int64)).to(device)


def layout(prompts: list[list[int]], outputs: list[list[int]], group: int = 1, device=None) -> Layout:
    """How to score outputs after prompts in one forward pass (see output_logits)."""
    B, L = len(outputs), max((len(o) for o in outputs), default=0)
    tok = _long([o + [PAD] * (L - len(o)) for o in outputs], device).view(B, L)
    out_mask = torch.arange(L, device=device)[None, :] < _long([len(o) for o in outputs], device)[:, None]
    keep = want = None
    if group > 1 and B % group == 0 and all(p == prompts[i - i % group] for i, p in enumerate(prompts)):
        ids, pos, mask, real, col = _packed(prompts, outputs, group)
        pos, mask, keep = pos.to(device), mask.to(device), real.nonzero().squeeze(1).to(device)
        at = (real.cumsum(0) - 1).tolist()          # flat padded position -> its index among the kept ones
        # the positions whose logits are read (a prompt's last, its completions' tokens): the last block goes on
        # past attention only there, and col counts among them
        wanted = sorted({at[j] for c in col for j in c})
        among = {j: i for i, j in enumerate(wanted)}
        col = [[among[at[j]] for j in c] for c in col]
        want = _long(wanted, device)
    else:   # a row per sample, right-padded; position t predicts token t + 1
        full = [p + o for p, o in zip(prompts, outputs)]
        T = max(len(s) for s in full) - 1
        ids, pos, mask = [s[:-1] + [PAD] * (T + 1 - len(s)) for s in full], None, None
        col = [[b * T + len(p) - 1 + j for j in range(len(o))] for b, (p, o) in enumerate(zip(prompts, outputs))]
    col = _long([c + [0] * (L - len(c)) for c in col], device).view(B, L)
    return Layout(_long(ids, device), pos, mask, keep, want, col, tok, out_mask)


def _packed(prompts, outputs, group: int):
    """A row per problem: its prompt, then each of its distinct completions minus the last token (which predicts
    nothing). A completion's tokens keep the positions they have in their own sequence and see only the prompt
    and their own earlier tokens, so every logit is the one a separate pass would give. One pass instead of a
    prompt pass plus passes over the continuations (at this size a pass's fixed cost outweighs its arithmetic),
    and a problem's identical completions run once: a confident policy writes the same chain for most of its
    samples, and even the base model repeats half of them."""
    P = len(prompts) // group
    rows = [list(prompts[p * group]) for p in range(P)]
    pos = [list(range(len(r))) for r in rows]
    seg = [[0] * len(r) for r in rows]                  # 0: the prompt; s > 0: the s-th distinct completion
    where: dict[tuple, int] = {}                        # (problem, completion) -> column of its first token
    for i, o in enumerate(outputs):
        p, key = i // group, (i // group, tuple(o))
        if key not in where:
            where[key], n = len(rows[p]), len(prompts[i])
            rows[p] += o[:-1]
            pos[p] += range(n, n + len(o) - 1)
            seg[p] += [len(where)] * (len(o) - 1)
    T = max(map(len, rows))
    rows, pos, seg = ([r + [v] * (T - len(r)) for r in rs] for rs, v in ((rows, PAD), (pos, 0), (seg, -1)))
    sg = _long(seg)
    # query i sees key j <= i of the prompt or of its own completion; padding sees only itself
    mask = ((sg[:, None, :] == 0) | (sg[:, None, :] == sg[:, :, None])) & torch.ones(T, T, dtype=torch.bool).tril()
    mask |= torch.eye(T, dtype=torch.bool)
    # output token 0 is predicted at the prompt's last position, token t >= 1 at its completion's token t - 1
    col = []
    for b, o in enumerate(outputs):
        row, first = b // group * T, where[(b // group, tuple(o))]
        col.append(([row + len(prompts[b]) - 1] + list(range(row + first, row + first + len(o) - 1)))[:len(o)])
    return rows, _long(pos), additive(mask[:, None]), sg.view(-1) >= 0, col


def logits_at(model: GPT, lay: Layout):
    """(B, L, V) logits that predict each output token, the output ids (B, L) and mask (B, L)."""
    logits = fast.forward(model, lay.ids, pos=lay.pos, mask=lay.mask, keep=lay.keep, want=lay.want)
    return logits.reshape(-1, logits.shape[-1])[lay.col], lay.tok, lay.out_mask


def output_logits(model: GPT, prompts: list[list[int]], outputs: list[list[int]], group: int = 1):
    """Logits that predict each output token: (B, L, V), the output ids (B, L) and mask (B, L); L = longest output.

    group > 1 says that rows come in runs of `group` identical prompts (n samples per problem): each problem's
    prompt and distinct completions then run once, packed (gradients flow to every sample).
    """
    return logits_at(model, layout(prompts, outputs, group, next(model.parameters()).device))


def seq_logprobs(model: GPT, prompts: list[list[int]], outputs: list[list[int]]):
    """log pi(y_t | x, y_<t) for every output token: (logp (B, L), mask (B, L)), L = longest output, mask 1 = real token.

    Gradients flow when called outside no_grad (the RL loss uses it).
    """
    lg, tok, mask = output_logits(model, prompts, outputs)
    lp = F.log_softmax(lg.float(), -1).gather(-1, tok[:, :, None]).squeeze(-1)
    return lp * mask, mask.float()


@torch.inference_mode()
def sample_tree(model: GPT, prompts: list[list[int]], n: int, gen: torch.Generator | None = None,
                temperature: float = 1.0, force: list[str] | None = None, max_new: int | None = None, logit_hook=None,
                task: str | Task = "digits"):
    """n samples per prompt on the tree of distinct prefixes (`tree_walk`, the decoder of `generate_n`: the same
    samples), with their sequence log-probabilities; the cost grows with the number of distinct prefixes, not with
    n (a confident model writes few). Prompts must have equal length.

    Returns (tokens (P * n, t) after the prompt, forced tokens included, padding after </s>; logp (P * n,) the
    sequence log-probability of the generated tokens, forced ones excluded). Row i * n + j is prompt i's j-th
    sample. `logit_hook(logits (U, V), prefixes (U, t)) -> logits` edits the next-token scores of each distinct
    prefix (budget forcing: tts.budget_hook).
    """
    if len({len(p) for p in prompts}) > 1:
        raise ValueError("sample_tree needs prompts of equal length")
    model.eval()
    forced = _forced(force, task)
    seq = torch.tensor([p + forced for p in prompts], dtype=torch.long, device=next(model.parameters()).device)
    toks, logp = tree_walk(model, seq, n, gen, temperature, max_new, logit_hook, want_logp=True)
    return toks[:, len(prompts[0]):], logp
