"""Search with verifiers: best-of-N, weighted majority, step-level beam search and DVTS, with their token counts.

Methods (each with any verifier: a learned one, or the rule's oracle, `verifier.OracleVerifier`), as Hugging Face
search-and-learn (`src/sal/`) defines them:
- best-of-N (Cobbe et al. 2021, arXiv 2110.14168): N i.i.d. samples, the one the verifier scores highest (the
  first of a tie);
- weighted majority (Li et al. 2023 DiVeRSe; search-and-learn's `find_answer_with_largest_sum`): the verifier's
  scores summed per answer, the answer with the largest sum; a tie is broken as the lab's majority vote breaks it
  (tts.vote: at random among the tied answers, seeded) where search-and-learn takes the first answer seen, so that a
  verifier that scores every answered output alike makes weighted voting majority voting exactly;
- beam search over steps (Snell et al. 2024, arXiv 2408.03314; `search/beam_search.py`): see `beam_search`;
  `beam_dedup` is the same with its `filter_duplicates` on;
- DVTS (`search/diverse_verifier_tree_search.py`): see `dvts`.
A step is one chain state, or the answer marker "A" with the answer's words and "</s>". Every method scores an output by
its step scores aggregated with one `agg` (search-and-learn's agg_strategy). Best-of-N and weighted majority read
the first N samples of a pool (search-and-learn's score.py draws its curves so); beam search and DVTS run afresh
for each N (`chunked`). tests/methods/test_search.py replays both searches against a re-implementation of the
reference.

Tokens a search counts, per problem:
- generated tokens: every token the generator samples, every candidate's new step (pruned ones too) and the forced
  format token (as tts.tokens counts it).
- verifier tokens: each scored sequence read from its start, prompt included (the prompt's length + the output's), as
  search-and-learn calls its PRM on the full text. Beam search and DVTS score every candidate at every round, so
  they read more verifier tokens than best-of-N at the same N. The oracle is charged what a learned verifier would
  read. `ver_inc`: what a causal verifier that keeps its cache reads (the prompt once per problem, then each
  candidate's new tokens).
Memoisation (a verifier's step scores cached per (problem, prefix), `Scorer`) saves time, not counted tokens.
"""
from __future__ import annotations

import functools

import numpy as np
import torch

from .. import tasks
from ..core import fast
from ..core.fast import KVCache
from ..core.model import GPT
from ..core.pool import Pool
from ..core.sampling import EOS, SPECIAL_ID, last_logits, pick
from ..tasks import Problem, Task
from .readers import Readers
from .tts import vote
from .verifier import aggregate
from .verifier import steps as read_steps

# ---------------------------------------------------------------------------------------------------------------
# Scoring with a memo: each distinct (problem, output) is read by the verifier once per run.

class Scorer:
    """A verifier's step scores, memoised per (problem, output): beam search at N = 64 re-scores the prefixes it
    scored at N = 32, and best-of-N's pool holds most of them. Keys are (problem, output) tuples; callers that hold
    tuples already (the searches) spare the copies, which were most of a search's Python time."""

    def __init__(self, verifier):
        self.v, self.memo = verifier, {}
        self.values_memo: dict[str, dict] = {}     # agg -> {key: aggregated score}
        self.calls = 0                       # sequences the verifier actually read (the counted tokens are nominal)

    def keys(self, problems, outputs) -> list[tuple]:
        """The memo keys of these outputs, each distinct one the verifier has not read yet scored now."""
        keys = [(d, tuple(o)) for d, o in zip(problems, outputs)]
        todo = list(dict.fromkeys(k for k in keys if k not in self.memo))
        if todo:
            got = self.v.score_steps([d for d, _ in todo], [list(o) for _, o in todo])
            self.memo.update(zip(todo, got))
            self.calls += len(todo)
        return keys

    def steps(self, problems, outputs) -> list[list[float]]:
        """Each output's step scores (verifier.score_steps), read once per distinct key."""
        return [self.memo[k] for k in self.keys(problems, outputs)]

    def add_prefixes(self, problems, outputs) -> None:
        """Memoise every step prefix of outputs already scored: a causal verifier's score at a step depends only on
        the tokens up to it, so a prefix's step scores are the first ones of any output that continues it (up to
        float rounding of another batch shape). Beam search then re-reads few of the pool's prefixes."""
        for d, o in zip(problems, outputs):
            full = self.memo.get((d, tuple(o)))
            if full is None:
                continue
            for j, (i, _, _) in enumerate(read_steps(o, tasks.task_of(d))):
                self.memo.setdefault((d, tuple(o[:i + 1])), full[:j + 1])

    def values(self, problems, outputs, agg: str) -> np.ndarray:
        """One score per output: its step scores aggregated with `agg` (verifier.aggregate), memoised per key. An
        output that is over without an answer (it wrote </s> or filled the context: a cut-off chain, junk) scores
        0: the right steps of a chain that never answers must not outrank a finished one."""
        memo = self.values_memo.setdefault(agg, {})
        keys = [(d, tuple(o)) for d, o in zip(problems, outputs)]
        got = [memo.get(k) for k in keys]          # one pass when all are memoised (most calls of a search)
        if None in got:
            new = list(dict.fromkeys(k for k, v in zip(keys, got) if v is None))
            self.keys([d for d, _ in new], [o for _, o in new])   # the verifier reads those it has not read
            vals = aggregate([self.memo[k] for k in new], agg)
            task = tasks.task_of(new[0][0])
            silent = [over(o, task) and not ((st := read_steps(o, task)) and st[-1][2]) for _, o in new]
            memo.update(zip(new, np.where(silent, 0.0, vals).tolist()))
            got = [memo[k] for k in keys]
        return np.array(got, dtype=np.float64)


def over(output, task: Task) -> bool:
    """An output is over: it wrote </s>, or it fills the context (max_len tokens with the prompt)."""
    return bool(output) and (output[-1] == EOS or task.prompt_len + len(output) >= task.max_len)


# ---------------------------------------------------------------------------------------------------------------
# Beam search and DVTS on the KV cache.

def _advance(model: GPT, cache: KVCache, node: torch.Tensor, tok: torch.Tensor):
    """Rows that append `tok` to prefix `node`: the distinct (prefix, token) pairs become the new prefixes (one cache
    row and one forward each). Returns (cache, logits (U, V), each row's new prefix)."""
    V = model.cfg.vocab_size
    uniq, new_node = torch.unique(node * V + tok, return_inverse=True)
    cache = cache.select(uniq // V)
    logits = fast.forward(model, (uniq % V)[:, None], cache=cache)[:, -1].float()
    return cache, logits, new_node


def _finish(model: GPT, cache: KVCache, node: torch.Tensor, first: torch.Tensor, gen, temperature: float,
            room: int) -> list[list[int]]:
    """Rows that wrote the answer marker `first` ("A", or a token that breaks the chain): decode each on to </s>
    (at most `room` tokens in all) from its prefix's cache row, sharing rows while they agree. Returns each row's new
    tokens, `first` included."""
    out = [[int(t)] for t in first.tolist()]
    done = first == EOS
    tok = first
    for _ in range(room - 1):
        if bool(done.all()):
            break
        cache, logits, node = _advance(model, cache, node, tok)
        tok = pick(logits[node], gen, temperature)
        tl = tok.tolist()
        for i in (~done).nonzero().squeeze(1).tolist():
            out[i].append(tl[i])
        done |= tok == EOS
    return out


class _Tree:
    """The partial outputs of a search, every problem at once, on the generator's KV cache: a cache row per distinct
    prefix (as sampling.sample_tree), so beams that wrote the same tokens share a row and one forward pass. Live
    beams all have the same length (one step is one chain state), so they advance in lockstep."""

    def __init__(self, model: GPT, problems, force: str, gen, temperature: float):
        model.eval()
        self.model, self.gen, self.temperature = model, gen, temperature
        self.task = tasks.of(problems)
        device = next(model.parameters()).device
        self.root = (SPECIAL_ID[force],)
        seq = torch.tensor([self.task.prompt_ids(d) + list(self.root) for d in problems], dtype=torch.long,
                           device=device)
        self.cache = KVCache(model.cfg, len(problems), device=device, dtype=next(model.parameters()).dtype)
        self.logits = last_logits(model, seq, self.cache).float()          # (U, V): a row per distinct prefix
        self.nodes = torch.arange(len(problems), device=device)            # each problem's root

    def step(self, node: torch.Tensor, texts: list[tuple]) -> tuple[list[tuple], torch.Tensor]:
        """One step for each beam (its prefix's row `node`, its text): a chain state, or from any other token on to
        </s> (the answer marker ends the chain; a broken template is written out as a sampler writes it). Returns
        the beams' new texts and the token each wrote first (the decoder's own draw, sampling.pick)."""
        tok = pick(self.logits[node], self.gen, self.temperature)
        tl = tok.tolist()
        task = self.task
        room = task.max_len - task.prompt_len - len(texts[0])               # tokens left, this one included
        ends = [i for i, t in enumerate(tl) if not task.is_state(t) and t != EOS and room > 1]
        tails = {}
        if ends:
            idx = torch.tensor(ends, device=node.device)
            sub, inv = torch.unique(node[idx], return_inverse=True)
            tails = dict(zip(ends, _finish(self.model, self.cache.select(sub), inv, tok[idx], self.gen,
                                           self.temperature, room)))
        return [t + tuple(tails.get(i, (tl[i],))) for i, t in enumerate(texts)], tok

    def advance(self, node: torch.Tensor, tok: torch.Tensor) -> torch.Tensor:
        """Keep these beams (a parent's row and the state it wrote): the cache now holds only their prefixes."""
        self.cache, self.logits, new = _advance(self.model, self.cache, node, tok)
        return new


def _tree(model, problems, force: str, gen, temperature: float):
    """The search's tree: on the KV cache for a model, a row per beam read afresh for Readers (methods.readers)."""
    return model.tree(problems, force, gen, temperature) if isinstance(model, Readers) else \
        _Tree(model, problems, force, gen, temperature)


def _charge(tokens: dict, probs, texts, parents, first: bool, prompt_len: int) -> None:
    """Count a round of candidates: generated tokens (the forced format token with the first step), verifier tokens
    read from the start (search-and-learn calls its PRM on the full text) and read incrementally (a causal verifier
    that keeps its cache reads only a step's new tokens, the prompt and format token once per problem)."""
    new = np.array([len(t) - len(q) for t, q in zip(texts, parents)], dtype=float) + (1 if first else 0)
    np.add.at(tokens["gen"], probs, new)
    np.add.at(tokens["ver"], probs, np.array([prompt_len + len(t) for t in texts], dtype=float))
    np.add.at(tokens["ver_inc"], probs, new - (1 if first else 0))
    if first:
        tokens["ver_inc"] += prompt_len + 1


def _tokens(P: int) -> dict:
    return {"gen": np.zeros(P), "ver": np.zeros(P), "ver_inc": np.zeros(P)}


@torch.inference_mode()
def beam_search(model: GPT | Readers, scorer: Scorer, problems: list[Problem], N: int, M: int, force: str = "S",
                gen: torch.Generator | None = None, temperature: float = 1.0, agg: str = "last",
                filter_duplicates: bool = False, sort_completed: bool = False, draws: list | None = None) -> dict:
    """search-and-learn's beam search (`src/sal/search/beam_search.py`, lookahead 0), per problem: N beams; each
    round the live beams are copied round-robin back up to N, each writes one step, all are scored (`agg` of the
    step scores: its `agg_strategy`); the over ones join the completed list, and of the live ones (first of each
    text with filter_duplicates) the N/M best by numpy's argsort are kept. The answer pool is the first N
    completed (the N best with sort_completed), copied round-robin up to N; the answer is the pool's best
    (np.argmax: the first of a tie). draws: a list that gets each round's (beam, step) pairs per problem, in order
    (a replay test's feed). model: a GPT, or Readers (methods.readers: a fresh misreading per candidate step).

    Returns {"outputs": [pool per problem], "scores", "pick": [answer output per problem], "completed": [every
    completed output per problem], "gen_tokens", "ver_tokens", "ver_tokens_inc": (P,) each}."""
    M = min(M, N)
    P, tree = len(problems), _tree(model, problems, force, gen, temperature)
    probs, task = list(problems), tasks.of(problems)
    active = [[(int(tree.nodes[p]), tree.root)] for p in range(P)]    # (cache row, text) per live beam
    completed: list[list[tuple]] = [[] for _ in range(P)]
    tokens = _tokens(P)
    first = True
    while any(active):
        active = [(a * (N // len(a) + 1))[:N] if a else a for a in active]
        prob = np.array([p for p in range(P) for _ in active[p]])
        node = torch.tensor([n for a in active for n, _ in a], device=tree.nodes.device)
        parents = [t for a in active for _, t in a]
        texts, tok = tree.step(node, parents)
        _charge(tokens, prob, texts, parents, first, task.prompt_len)
        scores = scorer.values([probs[p] for p in prob.tolist()], texts, agg)
        if draws is not None:
            draws.append([[(q, t[len(q):]) for t, q, pp in zip(texts, parents, prob) if pp == p] for p in range(P)])
        kept = []
        ended = [over(t, task) for t in texts]
        bounds = np.searchsorted(prob, np.arange(P + 1)).tolist()     # prob ascends: a problem's rows are a run
        for p in range(P):
            rows = range(bounds[p], bounds[p + 1])
            completed[p] += [texts[i] for i in rows if ended[i]]
            live = [i for i in rows if not ended[i]]
            if filter_duplicates:                                     # the first beam of each text
                first_of: dict[tuple, int] = {}
                for i in live:
                    first_of.setdefault(texts[i], i)
                live = list(first_of.values())
            if live:
                top = set(np.argsort(scores[live])[-(N // M):].tolist())
                kept += [live[j] for j in range(len(live)) if j in top]
        if not kept:
            break
        idx = torch.tensor(kept, device=node.device)
        new = tree.advance(node[idx], tok[idx]).tolist()
        active = [[] for _ in range(P)]
        for j, i in enumerate(kept):
            active[prob[i]].append((new[j], texts[i]))
        first = False
    outputs, pools, picks = [], [], []
    for p in range(P):
        done = completed[p]
        s = scorer.values([probs[p]] * len(done), done, agg) if done else np.zeros(0)
        order = sorted(range(len(done)), key=lambda i: -s[i]) if sort_completed else range(len(done))
        pool = [done[i] for i in order][:N]
        pool_s = [float(s[i]) for i in order][:N]
        if pool and len(pool) != N:
            pool, pool_s = (pool * (N // len(pool) + 1))[:N], (pool_s * (N // len(pool_s) + 1))[:N]
        pools.append(pool_s)
        outputs.append([list(o) for o in pool])
        picks.append(list(pool[int(np.argmax(pool_s))]) if pool else [])
    return {"outputs": outputs, "scores": pools, "pick": picks, "completed": [[list(o) for o in c] for c in completed],
            "gen_tokens": tokens["gen"], "ver_tokens": tokens["ver"], "ver_tokens_inc": tokens["ver_inc"]}


@torch.inference_mode()
def dvts(model: GPT | Readers, scorer: Scorer, problems: list[Problem], N: int, M: int, force: str = "S",
         gen: torch.Generator | None = None, temperature: float = 1.0, agg: str = "last", draws: list | None = None
         ) -> dict:
    """search-and-learn's DVTS (`src/sal/search/diverse_verifier_tree_search.py`, lookahead 0), per problem: N/M
    independent subtrees; each round every live subtree writes M candidate steps, all are scored, and it continues
    from the best (np.argmax: the first of a tie); a subtree whose best is over stops. The answer pool is every
    subtree's last M candidates (some of them may be partial chains, scored as they stand), the answer its best.

    Returns what beam_search returns (without "completed")."""
    M = min(M, N)
    P, tree = len(problems), _tree(model, problems, force, gen, temperature)
    probs, task = list(problems), tasks.of(problems)
    B = N // M
    live = [(p, b, int(tree.nodes[p]), tree.root) for p in range(P) for b in range(B)]  # (problem, subtree, row, text)
    last: dict[tuple[int, int], tuple[list[tuple], np.ndarray]] = {}
    tokens = _tokens(P)
    first = True
    while live:
        node = torch.tensor([n for _, _, n, _ in live], device=tree.nodes.device).repeat_interleave(M)
        parents = [t for *_, t in live for _ in range(M)]
        prob = np.repeat([p for p, *_ in live], M)
        texts, tok = tree.step(node, parents)
        _charge(tokens, prob, texts, parents, first, task.prompt_len)
        scores = scorer.values([probs[p] for p in prob.tolist()], texts, agg)
        if draws is not None:
            draws.append([[(q, t[len(q):]) for t, q, pp in zip(texts, parents, prob) if pp == p] for p in range(P)])
        kept, nxt = [], []
        for j, (p, b, _, _) in enumerate(live):
            s = scores[j * M:(j + 1) * M]
            last[p, b] = (texts[j * M:(j + 1) * M], s)
            best = j * M + int(np.argmax(s))
            if not over(texts[best], task):
                kept.append(best)
                nxt.append((p, b, texts[best]))
        if not kept:
            break
        idx = torch.tensor(kept, device=node.device)
        new = tree.advance(node[idx], tok[idx]).tolist()
        live = [(p, b, n, t) for (p, b, t), n in zip(nxt, new)]
        first = False
    outputs, pools, picks = [], [], []
    for p in range(P):
        pool = [o for b in range(B) for o in last[p, b][0]]
        s = [float(v) for b in range(B) for v in last[p, b][1]]
        outputs.append([list(o) for o in pool])
        pools.append(s)
        picks.append(list(pool[int(np.argmax(s))]))
    return {"outputs": outputs, "scores": pools, "pick": picks, "gen_tokens": tokens["gen"],
            "ver_tokens": tokens["ver"], "ver_tokens_inc": tokens["ver_inc"]}


# ---------------------------------------------------------------------------------------------------------------
# Best-of-N and weighted majority on one pool.

def pick_best(scores: np.ndarray, N: int) -> np.ndarray:
    """(P,) column of the highest-scored of the first N samples (ties: the first)."""
    return scores[:, :N].argmax(1)


def best_of_n(pool: Pool, scores: np.ndarray, N: int) -> np.ndarray:
    """1.0 where the highest-scored of the first N samples is right."""
    pick = pick_best(scores, N)
    return pool.correct[np.arange(len(pick)), pick].astype(float)


def weighted(pool: Pool, scores: np.ndarray, N: int) -> np.ndarray:
    """Weighted majority among the first N samples (search-and-learn's `find_answer_with_largest_sum`): each
    answer's scores summed, the answer with the largest sum; 1.0 where it is right. It is the lab's majority vote
    weighted by the scores (tts.vote), and it always answers when some output gave an answer, as the reference
    does, even where no score is positive. It departs from the reference in two ways: an output without an answer
    casts no vote (the reference counts "no answer" as an answer of its own), and a tie (sums equal to float
    tolerance) goes to one of the tied answers at random, not to the first seen. So scores that are the same for
    every answered output give majority voting exactly, and at N = 1 it is best-of-N's answer. Each problem's
    scores are divided by their largest where that is positive: the vote's tolerance is absolute near 0, and a
    verifier's scores can all be tiny."""
    s = scores[:, :N]
    top = s.max(1, keepdims=True)
    return vote(pool, N, weight=np.where(top > 0, s / np.where(top > 0, top, 1.0), s))


def chunked(method: str, model: GPT | Readers, scorer: Scorer, problems: list[Problem], N: int, M: int,
            gen: torch.Generator | None, force: str = "S", temperature: float = 1.0, agg: str = "last",
            rows: int = 4096) -> dict:
    """Beam search ("beam"; "beam_dedup" with filter_duplicates) or DVTS ("dvts") over the problems in chunks of
    about `rows` candidates (the KV cache holds a row per prefix). Returns {"pick": [answer output per problem],
    "gen_tokens", "ver_tokens", "ver_tokens_inc": (P,) each}."""
    step = max(1, rows // N)
    kw = dict(force=force, gen=gen, temperature=temperature, agg=agg)
    f = dvts if method == "dvts" else functools.partial(beam_search, filter_duplicates=method == "beam_dedup")
    parts = [f(model, scorer, problems[s:s + step], N, M, **kw) for s in range(0, len(problems), step)]
    return {"pick": [p for r in parts for p in r["pick"]],
            **{k: np.concatenate([r[k] for r in parts]) for k in ("gen_tokens", "ver_tokens", "ver_tokens_inc")}}
