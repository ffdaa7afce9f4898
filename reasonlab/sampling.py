"""Batched generation with a KV cache, the naive full-recompute decoder it must match, and log-probs."""
from __future__ import annotations

import collections
import itertools

import torch
import torch.nn.functional as F

from .model import GPT, KVCache, PrefixCache
from .task import ID, MAX_LEN

PAD, EOS = ID["<pad>"], ID["</s>"]
COMPACT_AT = 0.75  # generate_n drops finished rows from its KV cache once live rows <= this share of the cache


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


def _finish(seqs: torch.Tensor, start: int) -> list[list[int]]:
    """(B, T) token rows -> outputs after `start`, cut after the first </s>."""
    outs = []
    for row in seqs[:, start:].tolist():
        outs.append(row[:row.index(EOS) + 1] if EOS in row else row)
    return outs


@torch.no_grad()
def generate(model: GPT, prompts: list[list[int]], gen: torch.Generator | None = None, temperature: float = 1.0,
             force: list[str] | None = None, max_new: int = 16, logit_hook=None) -> list[list[int]]:
    """Generate after each prompt (a list of ids ending with "="); returns the outputs, forced prefix included.

    Greedy when gen is None or temperature == 0, otherwise sampled from `gen`. `force` (e.g. ["T"]) is written
    before generation starts. An output ends at its first </s>, after max_new generated tokens, or at MAX_LEN.
    Every row is sampled at every step, so the random stream does not depend on when other rows finish.
    `logit_hook(logits (B, V), tokens so far (B, t)) -> logits` can edit the next-token scores (budget forcing).
    """
    return generate_n(model, prompts, 1, gen, temperature, force, max_new, logit_hook)


@torch.inference_mode()   # lighter than no_grad (no version counters); the outputs are plain lists
def generate_n(model: GPT, prompts: list[list[int]], n: int, gen: torch.Generator | None = None,
               temperature: float = 1.0, force: list[str] | None = None, max_new: int = 16,
               logit_hook=None) -> list[list[int]]:
    """n outputs per prompt (problem-major: prompt 0's n outputs first), the prompt's KV cache computed once and
    shared by its n samples. Same outputs as `generate` on each prompt repeated n times."""
    model.eval()
    device = next(model.parameters()).device
    outs: list[list[int] | None] = [None] * (len(prompts) * n)
    forced = [ID[w] for w in force] if force else []
    for plen, rows in _groups(prompts).items():
        seq = torch.tensor([prompts[i] + forced for i in rows], dtype=torch.long, device=device)  # (P, t)
        n_new = max(0, min(max_new, MAX_LEN - seq.shape[1]))
        cache = KVCache(model.cfg, len(rows), device=device, dtype=next(model.parameters()).dtype)
        logits, _ = model(seq, cache=cache)                                 # prefill once per prompt
        if n > 1:
            cache, seq = cache.repeat(n), seq.repeat_interleave(n, 0)         # (P * n, t)
        logits = logits[:, -1].repeat_interleave(n, 0)
        done = torch.zeros(seq.shape[0], dtype=torch.bool, device=device)
        live = torch.arange(seq.shape[0], device=device)   # the rows the cache holds, in order
        steps = [seq]
        for t in range(n_new):
            if logit_hook is not None:
                logits = logit_hook(logits, torch.cat(steps, 1))
            nxt = pick(logits, gen, temperature)
            nxt = torch.where(done, torch.full_like(nxt, PAD), nxt)   # finished rows write padding
            steps.append(nxt[:, None])
            done |= nxt == EOS
            n_alive = int((~done).sum())
            if n_alive == 0 or t == n_new - 1:
                break
            # Drop finished rows from the cache once enough of it is dead. Every row is still sampled (on
            # stale logits, then overwritten by padding): torch.multinomial draws one exponential per entry of
            # the (B, V) matrix, so the random stream stays the same, and so does every live row's sample on CPU
            # (on CUDA a smaller batch may pick another GEMM kernel and move the logits in the last bit).
            if n_alive <= COMPACT_AT * len(live):
                keep = (~done[live]).nonzero().squeeze(1)
                cache, live = cache.select(keep), live[keep]
            out, _ = model(nxt[live, None], cache=cache)
            logits = logits.clone()
            logits[live] = out[:, -1]
        out_rows = [i * n + j for i in rows for j in range(n)]
        for i, o in zip(out_rows, _finish(torch.cat(steps, 1), plen)):
            outs[i] = o
    return outs  # type: ignore[return-value]


@torch.no_grad()
def generate_naive(model: GPT, prompts: list[list[int]], gen: torch.Generator | None = None, temperature: float = 1.0,
                   force: list[str] | None = None, max_new: int = 16) -> list[list[int]]:
    """Reference decoder: recompute the whole sequence for every new token, one prompt-length group at a time.

    Same sampling order as `generate` (every row, every step), so the two agree token for token.
    """
    model.eval()
    device = next(model.parameters()).device
    outs: list[list[int] | None] = [None] * len(prompts)
    forced = [ID[w] for w in force] if force else []
    for plen, rows in _groups(prompts).items():
        seq = torch.tensor([prompts[i] + forced for i in rows], dtype=torch.long, device=device)
        n_new = max(0, min(max_new, MAX_LEN - seq.shape[1]))
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


def pad_batch(prompts: list[list[int]], outputs: list[list[int]]):
    """Right-padded prompt+output ids (B, T) plus prompt and output lengths as tensors."""
    full = [p + o for p, o in zip(prompts, outputs)]
    T = max(len(s) for s in full)
    ids = torch.tensor([s + [PAD] * (T - len(s)) for s in full], dtype=torch.long)
    plen = torch.tensor([len(p) for p in prompts])
    olen = torch.tensor([len(o) for o in outputs])
    return ids, plen, olen


def output_logits(model: GPT, prompts: list[list[int]], outputs: list[list[int]], group: int = 1):
    """Logits that predict each output token: (B, L, V), the output ids (B, L) and mask (B, L); L = longest output.

    group > 1 says that rows come in runs of `group` identical prompts (n samples per problem): each prompt then
    runs through the model once and its keys and values are shared by its samples, gradients included.
    """
    device = next(model.parameters()).device
    if group > 1 and len(prompts) % group == 0 and all(p == prompts[i - i % group] for i, p in enumerate(prompts)) \
            and len({len(p) for p in prompts}) == 1:
        return _output_logits_shared(model, prompts, outputs, group, device)
    ids, plen, olen = pad_batch(prompts, outputs)
    ids, plen, olen = ids.to(device), plen.to(device), olen.to(device)
    logits, _ = model(ids[:, :-1])                                   # position t predicts token t + 1
    L = int(olen.max()) if len(outputs) else 0
    j = torch.arange(L, device=device)[None, :]
    mask = j < olen[:, None]
    src = (plen[:, None] - 1 + j).clamp(max=ids.shape[1] - 2)         # logits row predicting output token j
    tok = ids.gather(1, (src + 1).clamp(max=ids.shape[1] - 1))
    lg = logits.gather(1, src[:, :, None].expand(-1, -1, logits.shape[-1]))
    return lg, tok, mask


def length_buckets(lengths: list[int], max_buckets: int = 3, overhead: int = 128) -> list[int]:
    """Upper length bounds that split rows into at most max_buckets runs of similar length, minimising padded
    tokens plus `overhead` per forward pass (what one more small pass costs here, in tokens)."""
    count = collections.Counter(lengths)
    ls = sorted(count)

    def cost(bounds: list[int]) -> int:
        lo, c = -1, 0
        for hi in bounds:
            c += overhead + hi * sum(m for n, m in count.items() if lo < n <= hi)
            lo = hi
        return c
    plans = [list(c) + [ls[-1]] for b in range(max_buckets) for c in itertools.combinations(ls[:-1], b)]
    return min(plans, key=cost)


def _output_logits_shared(model: GPT, prompts, outputs, group: int, device):
    lens = [len(o) for o in outputs]
    L = max(lens)
    tok = torch.tensor([o + [PAD] * (L - len(o)) for o in outputs], dtype=torch.long, device=device)  # (B, L)
    mask = torch.arange(L, device=device)[None, :] < torch.tensor(lens, device=device)[:, None]
    cache = PrefixCache()
    head = torch.tensor(prompts[::group], dtype=torch.long, device=device)            # (P, Tp): once per problem
    first, _ = model(head, cache=cache)
    first = first[:, -1:].repeat_interleave(group, 0)                                 # predicts output token 0
    if L == 1:
        return first, tok, mask
    # A problem's identical completions run once (`uniq`, then `back` copies the logits to every row): a confident
    # policy writes the same chain for most of its samples, and even the base model repeats half of them.
    seen: dict[tuple, int] = {}
    uniq: list[int] = []   # the first row of each distinct (problem, completion)
    for i, o in enumerate(outputs):
        if seen.setdefault((i // group, tuple(o)), len(uniq)) == len(uniq):
            uniq.append(i)
    back = torch.tensor([seen[(i // group, tuple(o))] for i, o in enumerate(outputs)], device=device)
    ulens = [lens[i] for i in uniq]
    # The continuations run in a few buckets of similar length instead of all padded to the longest: an RL batch
    # mixes 3-token direct answers with 12-token chains, and padding would be half the work.
    pieces, order, lo = [], [], -1
    for hi in length_buckets(ulens):
        rows = [u for u, n in enumerate(ulens) if lo < n <= hi]
        lo = hi
        if not rows or hi <= 1:   # outputs of 0 or 1 token: the prompt's last logits are all they need
            order += rows
            pieces.append(first.new_zeros(len(rows), L - 1, first.shape[-1]))
            continue
        idx = torch.tensor([uniq[u] for u in rows], device=device)
        out, _ = model(tok[idx, :hi - 1], cache=cache.select(idx // group))           # (rows, hi - 1, V)
        pieces.append(F.pad(out, (0, 0, 0, L - hi)))
        order += rows
    inv = torch.empty(len(order), dtype=torch.long, device=device)
    inv[torch.tensor(order, device=device)] = torch.arange(len(order), device=device)
    return torch.cat([first, torch.cat(pieces)[inv[back]]], 1), tok, mask


def seq_logprobs(model: GPT, prompts: list[list[int]], outputs: list[list[int]]):
    """log pi(y_t | x, y_<t) for every output token: (logp (B, L), mask (B, L)), L = longest output, mask 1 = real token.

    Gradients flow when called outside no_grad (the RL loss uses it).
    """
    lg, tok, mask = output_logits(model, prompts, outputs)
    lp = F.log_softmax(lg.float(), -1).gather(-1, tok[:, :, None]).squeeze(-1)
    return lp * mask, mask.float()


@torch.no_grad()
def sample_tree(model: GPT, prompts: list[list[int]], n: int, gen: torch.Generator | None = None,
                temperature: float = 1.0, force: list[str] | None = None, max_new: int = 16, logit_hook=None):
    """n samples per prompt, computed on the tree of distinct prefixes: rows that have written the same tokens so
    far share one forward pass and one KV-cache row. Each row still draws its own next token, so this is exactly
    n independent samples per prompt; the cost grows with the number of distinct prefixes, not with n (a confident
    model writes few). Prompts must have equal length.

    Returns (tokens (P * n, t) with padding after </s>, logp (P * n,) the sequence log-probability of the generated
    tokens, forced ones excluded). Row i * n + j is prompt i's j-th sample.
    `logit_hook(logits (U, V), prefixes (U, t)) -> logits` edits the next-token scores of each distinct prefix.
    """
    model.eval()
    device = next(model.parameters()).device
    forced = [ID[w] for w in force] if force else []
    seq = torch.tensor([p + forced for p in prompts], dtype=torch.long, device=device)   # (P, t0)
    P, V = seq.shape[0], model.cfg.vocab_size
    n_new = max(0, min(max_new, MAX_LEN - seq.shape[1]))
    cache = KVCache(model.cfg, P, device=device, dtype=next(model.parameters()).dtype)
    logits = model(seq, cache=cache)[0][:, -1].float()                    # (U, V), U = distinct prefixes
    paths = seq                                                          # (U, t): each prefix's tokens
    node = torch.arange(P, device=device).repeat_interleave(n)           # (B,): each row's prefix
    B = P * n
    done = torch.zeros(B, dtype=torch.bool, device=device)
    logp = torch.zeros(B, device=device)
    toks = [seq.repeat_interleave(n, 0)]
    for t in range(n_new):
        if logit_hook is not None:
            logits = logit_hook(logits, paths)
        lp_nodes = F.log_softmax(logits / (temperature or 1.0), -1)      # (U, V)
        if gen is None or temperature == 0:
            nxt = logits.argmax(-1)[node]
        else:
            nxt = torch.multinomial(lp_nodes.exp()[node], 1, generator=gen).squeeze(1)
        nxt = torch.where(done, torch.full_like(nxt, PAD), nxt)
        logp += torch.where(done, torch.zeros_like(logp), lp_nodes[node, nxt])
        toks.append(nxt[:, None])
        done |= nxt == EOS
        if bool(done.all()) or t == n_new - 1:
            break
        key = node * V + nxt                                              # (prefix, token) -> new prefix
        key = torch.where(done, torch.full_like(key, -1), key)            # finished rows share one dummy prefix
        uniq, node = torch.unique(key, return_inverse=True)
        parent, tok = (uniq // V).clamp(min=0), (uniq % V).clamp(min=0)
        cache = cache.select(parent)
        paths = torch.cat([paths[parent], tok[:, None]], 1)
        logits = model(tok[:, None], cache=cache)[0][:, -1].float()
    return torch.cat(toks, 1)[:, seq.shape[1] - len(forced):], logp
