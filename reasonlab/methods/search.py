"""Search with verifiers: best-of-N, weighted majority, step-level beam search and DVTS, with compute accounting.

Methods (every one with a learned verifier and with the rule's oracle, `verifier.OracleVerifier`):
- best-of-N (Cobbe et al. 2021, arXiv 2110.14168): N i.i.d. samples, the one the verifier scores highest;
- weighted majority (Li et al. 2023 DiVeRSe; search-and-learn's `find_answer_with_largest_sum`): the verifier's
  scores summed per answer, the answer with the largest sum;
- beam search over steps (Snell et al. 2024, arXiv 2408.03314; search-and-learn `search/beam_search.py`): N/M live
  beams, each expanded M times by one chain step (one running sum, or the final "A d </s>"), the N candidates
  scored by the PRM (the last step's score), the best N/M kept;
- DVTS (search-and-learn `search/diverse_verifier_tree_search.py`): N/M independent subtrees, each keeping its one
  best of M expansions per step (greedy per subtree, diverse across subtrees).
Baselines: greedy decoding and plain majority (tts.majority). Best-of-N, weighted and majority are read from one
pool of n_max samples per problem, subsampled to N = 1, 2, 4, ... (the first N; search-and-learn's score.py draws
its curves so); beam search and DVTS are re-run for every N (recipes/README.md).

Beam search and DVTS are one routine, `tree_search(subtrees, keep, width)`: beam search is one subtree keeping N/M
beams, DVTS N/M subtrees keeping one; so DVTS with a single subtree is beam search with N = M. It runs on the
generator's KV cache the way sampling.sample_tree does: a cache row per distinct prefix, so beams (and subtrees)
that wrote the same tokens share a row and one forward pass.

Compute, per problem (stated once, used everywhere):
- generated tokens: every token the generator samples, the forced format token included (as tts.tokens counts);
  best-of-N: the N samples' lengths; beam search and DVTS: every candidate's new step, pruned ones too.
- verifier tokens: `Verifier.tokens`: each scored sequence read from its start, prompt included (PROMPT_LEN +
  output length), no cache between calls, as search-and-learn calls its PRM once per expansion on the full text.
  Beam search and DVTS score every candidate at every expansion, so they read more verifier tokens than best-of-N
  at the same N. Majority and greedy read none. The oracle is charged what a learned verifier would read.
- FLOPs = 2 * P_gen * (PROMPT_LEN + generated tokens) + 2 * P_ver * verifier tokens (Kaplan et al. 2020's forward
  cost, 2 FLOPs per parameter per token; attention's share is negligible at length 24; the generator reads its
  prompt once per problem). The oracle's FLOPs use P_ver = a learned verifier's size (the thinker's).
Memoisation (a verifier's step scores cached per (problem, prefix); a causal verifier scores a prefix as it
scores that prefix inside a longer output) saves time, not counted tokens: the counts are what the method reads.
"""
from __future__ import annotations

import os
import time
from dataclasses import asdict

import numpy as np
import torch

from ..core.model import GPT, KVCache
from ..core.pool import Pool, sample_pool
from ..core.problems import problems_per_k
from ..core.sampling import EOS, last_logits, pick
from ..core.task import DIGIT0, ID, MAX_LEN, PROMPT_LEN, parse, prompt_ids
from ..io.checkpoint import write_json
from ..train.zoo import thinker_model
from . import tts
from .config import NS, SEARCH_METHODS as METHODS, SearchConfig  # noqa: F401  (this method's public names)
from .verifier import OracleVerifier, VerifierConfig, aggregate, steps as read_steps, train_verifier


# ---------------------------------------------------------------------------------------------------------------
# Scoring with a memo: each distinct (problem, output) is read by the verifier once per run.

class Scorer:
    """A verifier's step scores, memoised per (problem, output): beam search at N = 64 re-scores the prefixes it
    scored at N = 32, and best-of-N's pool holds most of them. Keys are (digits, output) tuples; callers that hold
    tuples already (tree_search) spare the copies, which were most of a search's Python time."""

    def __init__(self, verifier):
        self.v, self.memo = verifier, {}
        self.values_memo: dict[tuple, dict] = {}   # (agg, answered_only) -> {key: aggregated score}
        self.calls = 0                       # sequences the verifier actually read (the counted tokens are nominal)

    def keys(self, digits_list, outputs) -> list[tuple]:
        """The memo keys of these outputs, each distinct one the verifier has not read yet scored now."""
        keys = [(tuple(d), tuple(o)) for d, o in zip(digits_list, outputs)]
        todo = list(dict.fromkeys(k for k in keys if k not in self.memo))
        if todo:
            got = self.v.score_steps([list(d) for d, _ in todo], [list(o) for _, o in todo])
            self.memo.update(zip(todo, got))
            self.calls += len(todo)
        return keys

    def steps(self, digits_list, outputs) -> list[list[float]]:
        """Each output's step scores (verifier.score_steps), read once per distinct key."""
        return [self.memo[k] for k in self.keys(digits_list, outputs)]

    def add_prefixes(self, digits_list, outputs) -> None:
        """Memoise every step prefix of outputs already scored: a causal verifier's score at a step depends only on
        the tokens up to it, so a prefix's step scores are the first ones of any output that continues it (up to
        float rounding of another batch shape). Beam search then re-reads few of the pool's prefixes."""
        for d, o in zip(digits_list, outputs):
            full = self.memo.get((tuple(d), tuple(o)))
            if full is None:
                continue
            for j, (i, _, _) in enumerate(read_steps(o)):
                self.memo.setdefault((tuple(d), tuple(o[:i + 1])), full[:j + 1])

    def values(self, digits_list, outputs, agg: str, answered_only: bool) -> np.ndarray:
        """One score per output: its step scores aggregated with `agg` (verifier.aggregate), memoised per key. With
        answered_only, an output that gives no answer (a chain cut off, junk) scores 0."""
        memo = self.values_memo.setdefault((agg, answered_only), {})
        keys = [(tuple(d), tuple(o)) for d, o in zip(digits_list, outputs)]
        got = [memo.get(k) for k in keys]          # one pass when all are memoised (most calls of a search)
        if None in got:
            new = list(dict.fromkeys(k for k, v in zip(keys, got) if v is None))
            self.keys([d for d, _ in new], [o for _, o in new])   # the verifier reads those it has not read
            vals = aggregate([self.memo[k] for k in new], agg)
            if answered_only:
                vals = np.where([bool(st) and st[-1][2] for st in (read_steps(o) for _, o in new)], vals, 0.0)
            memo.update(zip(new, vals.tolist()))
            got = [memo[k] for k in keys]
        return np.array(got, dtype=np.float64)

    def score(self, digits_list, outputs, agg: str) -> np.ndarray:
        """One score per output; an output that gives no answer (a chain cut off, junk) scores 0: the right steps of
        a chain that never answers must not outrank a finished one (the oracle would give "S 2 </s>" a 1.0)."""
        return self.values(digits_list, outputs, agg, answered_only=True)


# ---------------------------------------------------------------------------------------------------------------
# Beam search and DVTS on the KV cache.

def _sample(logits: torch.Tensor, node: torch.Tensor, gen, temperature: float) -> torch.Tensor:
    """One token per row from its prefix's logits (U, V): the decoder's own draw (sampling.pick, as in tree_walk), so
    one chain matches sample_tree exactly."""
    return pick(logits[node], gen, temperature)


def _advance(model: GPT, cache: KVCache, node: torch.Tensor, tok: torch.Tensor):
    """Rows that append `tok` to prefix `node`: the distinct (prefix, token) pairs become the new prefixes (one cache
    row and one forward each). Returns (cache, logits (U, V), each row's new prefix)."""
    V = model.cfg.vocab_size
    uniq, new_node = torch.unique(node * V + tok, return_inverse=True)
    cache = cache.select(uniq // V)
    logits = model((uniq % V)[:, None], cache=cache)[0][:, -1].float()
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
        tok = _sample(logits, node, gen, temperature)
        tl = tok.tolist()
        for i in (~done).nonzero().squeeze(1).tolist():
            out[i].append(tl[i])
        done |= tok == EOS
    return out


@torch.inference_mode()
def tree_search(model: GPT, scorer: Scorer, problems: list[list[int]], subtrees: int, keep: int, width: int,
                force: str = "S", gen: torch.Generator | None = None, temperature: float = 1.0,
                step_agg: str = "last", agg: str = "min") -> dict:
    """Step-level search for each problem: `subtrees` independent subtrees, each keeping its `keep` best live beams
    and expanding each `width` times per step. Beam search: subtrees=1, keep=N/M, width=M; DVTS: subtrees=N/M,
    keep=1, width=M. A step is one chain digit, or "A", the answer and "</s>" (an output ends there). Live candidates
    are ranked by their step scores aggregated with `step_agg` ("last": search-and-learn); a problem's answer is its
    finished candidate with the highest `agg` score (ties: the first finished).

    Returns {"outputs": [[finished outputs] per problem], "scores": [[...]], "pick": [chosen output per problem],
    "gen_tokens": (P,), "ver_tokens": (P,)}."""
    model.eval()
    device = next(model.parameters()).device
    P = len(problems)
    forced = [ID[force]]
    seq = torch.tensor([prompt_ids(d) + forced for d in problems], dtype=torch.long, device=device)
    cache = KVCache(model.cfg, P, device=device, dtype=next(model.parameters()).dtype)
    logits = last_logits(model, seq, cache).float()                    # (U, V): one row per distinct prefix
    # live beams: problem, subtree, cache row, tokens after "="; each subtree starts with `keep` copies of the root
    b_prob = np.repeat(np.arange(P), subtrees * keep)
    b_tree = np.tile(np.repeat(np.arange(subtrees), keep), P)
    b_node = torch.as_tensor(b_prob, device=device)
    # candidates are tuples, as the scorer's keys are (no copy per candidate and step)
    b_toks: list[tuple] = [tuple(forced)] * len(b_prob)
    p_digits = [tuple(d) for d in problems]
    first_step = True
    finished: list[list[tuple]] = [[] for _ in range(P)]
    gen_tok, ver_tok = np.zeros(P), np.zeros(P)
    while len(b_prob):
        # expand every live beam `width` times by one step
        c_beam = np.repeat(np.arange(len(b_prob)), width)
        c_node = b_node.repeat_interleave(width)
        tok = _sample(logits, c_node, gen, temperature)
        tl = tok.tolist()
        room = MAX_LEN - seq.shape[1] - (len(b_toks[0]) - 1)              # tokens left after this one, plus one
        is_digit = [DIGIT0 <= t < DIGIT0 + 10 for t in tl]
        # the answer marker ends the chain: decode on to </s>; so does anything else that is not a digit (a broken
        # template is written out as a sampler would write it, and scored as it stands)
        ans_rows = [i for i, t in enumerate(tl) if not is_digit[i] and t != EOS and room > 1]
        tails = {}
        if ans_rows:
            idx = torch.tensor(ans_rows, device=device)
            sub_node, inv = torch.unique(c_node[idx], return_inverse=True)
            for i, t in zip(ans_rows, _finish(model, cache.select(sub_node), inv, tok[idx], gen, temperature, room)):
                tails[i] = tuple(t)
        c_toks = [b_toks[b] + (tails[i] if i in tails else (tl[i],)) for i, b in enumerate(c_beam.tolist())]
        c_prob = b_prob[c_beam]
        c_len = np.array([len(t) for t in c_toks])
        np.add.at(gen_tok, c_prob, c_len - len(b_toks[0]) + (len(forced) if first_step else 0))
        np.add.at(ver_tok, c_prob, PROMPT_LEN + c_len)
        live = np.array(is_digit) & (room > 1)
        s_live = scorer.values([p_digits[p] for p in c_prob.tolist()], c_toks, step_agg, answered_only=False)
        for i in np.flatnonzero(~live).tolist():
            finished[c_prob[i]].append(c_toks[i])
        # keep each subtree's `keep` best live candidates (stable: ties keep the earlier candidate)
        li = np.flatnonzero(live)
        if not len(li):
            break
        grp = c_prob * subtrees + b_tree[c_beam]                          # each candidate's subtree
        order = li[np.lexsort((li, -s_live[li], grp[li]))]               # by subtree, then score, then index
        g = grp[order]
        rank = np.arange(len(order)) - np.searchsorted(g, g, side="left")   # place within its subtree
        kept = np.sort(order[rank < keep])
        kt = torch.as_tensor(kept, device=device)
        cache, logits, b_node = _advance(model, cache, c_node[kt], tok[kt])
        b_prob, b_tree = c_prob[kept], b_tree[c_beam[kept]]
        b_toks = [c_toks[i] for i in kept.tolist()]
        first_step = False
    # every problem's finished candidates scored in one call, then split
    n_fin = [len(f) for f in finished]
    flat = scorer.score([p_digits[p] for p in range(P) for _ in finished[p]], [o for f in finished for o in f], agg)
    scores = [s.tolist() for s in np.split(flat, np.cumsum(n_fin)[:-1])] if P else []
    picks = [list(f[int(np.argmax(s))]) if len(s) else [] for f, s in zip(finished, scores)]
    finished = [[list(o) for o in f] for f in finished]
    return {"outputs": finished, "scores": scores, "pick": picks, "gen_tokens": gen_tok, "ver_tokens": ver_tok}


def beam_search(model, scorer, problems, N: int, M: int, **kw) -> dict:
    """N beams in all, width M (N/M live beams, each expanded M times per step)."""
    M = min(M, N)
    return tree_search(model, scorer, problems, 1, N // M, M, **kw)


def dvts(model, scorer, problems, N: int, M: int, **kw) -> dict:
    """N/M independent subtrees of width M, each keeping its best expansion."""
    M = min(M, N)
    return tree_search(model, scorer, problems, N // M, 1, M, **kw)


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
    """Weighted majority: the answer whose samples' scores sum highest among the first N (tts.vote's ties)."""
    return tts.vote(pool, N, weight=scores)


# ---------------------------------------------------------------------------------------------------------------
# The experiment.


def verifier_config(config: SearchConfig):
    """The verifiers' training settings: verifier.VerifierConfig's defaults, or tiny ones (quick runs, tests)."""
    return VerifierConfig(n_per_k=10, steps=10, rollouts=2, batch=32) if config.quick_verifiers else VerifierConfig()


def _bits(x) -> str:
    return "".join("1" if v else "0" for v in np.asarray(x).astype(bool))


def _ints(x) -> str:
    """Token counts (integers) as one comma-separated string: the JSON stays small with indent=1."""
    return ",".join(str(int(round(v))) for v in np.asarray(x, float))


def unints(s) -> np.ndarray:
    return np.asarray(s, float) if isinstance(s, list) else np.array(s.split(","), float) if s else np.zeros(0)


def unbits(s: str) -> np.ndarray:
    return np.frombuffer(s.encode(), dtype=np.uint8) - ord("0")


def run(config: SearchConfig, seed: int, out: str | None = None, cache: str | None = None, device: str = "cpu",
        log=print) -> dict:
    """Every method x verifier x N on the validation and test problems of one seed. Writes <out>/seed<seed>.json
    when out is given. Per strategy and split: per-problem correctness (a 0/1 string) and token counts, so findings
    can bootstrap over problems and seeds."""
    config.validate()
    t_all = time.perf_counter()
    timing = {}
    model = thinker_model(config.thinker, seed, cache, device, log)
    t = time.perf_counter()
    vcfg = verifier_config(config)
    verifiers = {"oracle": OracleVerifier()}
    for kind in config.verifiers:
        verifiers[kind] = train_verifier(kind, model, seed=seed, config=vcfg, cache=cache, log=log)
    timing["verifiers"] = round(time.perf_counter() - t, 1)
    n_params = sum(p.numel() for p in model.parameters())
    scorers = {k: Scorer(v) for k, v in verifiers.items()}
    problems = {part: problems_per_k(n, f"search-{seed}", split=part) for part, n in (("val", config.n_val), ("test", config.n_test))}
    res = {"config": asdict(config), "seed": seed, "n_params": n_params,
           "ver_params": {k: (v.flops_per_token / 2 or n_params + model.cfg.d_model + 1) for k, v in verifiers.items()},
           "k": {s: [len(d) for d in ps] for s, ps in problems.items()}, "strategies": {}, "timing": timing}

    def put(name, split, N, correct, gen, ver):
        res["strategies"].setdefault(name, {}).setdefault(split, {})[N] = {
            "correct": _bits(correct), "gen": _ints(gen), "ver": _ints(ver)}

    for split, probs in problems.items():
        t = time.perf_counter()
        gp = sample_pool(model, probs, 1, [config.force], temperature=0.0, seed=seed)
        put("greedy", split, 1, gp.correct[:, 0], gp.length[:, 0], np.zeros(len(probs)))
        pool = sample_pool(model, probs, config.n_max, [config.force], config.temperature,
                           seed=seed + 1000 * (split == "test"), keep_outputs=True)
        outs = pool.outputs
        timing[f"sample_{split}"] = round(time.perf_counter() - t, 1)
        t = time.perf_counter()
        flat_d = [d for d, row in zip(probs, outs) for _ in row]
        flat_o = [o for row in outs for o in row]
        scores = {k: sc.score(flat_d, flat_o, config.agg).reshape(len(probs), config.n_max)
                  for k, sc in scorers.items()}
        for sc in scorers.values():
            sc.add_prefixes(flat_d, flat_o)
        timing[f"score_{split}"] = round(time.perf_counter() - t, 1)
        vt = PROMPT_LEN + pool.length                                   # verifier tokens per sample
        for N in config.Ns:
            gen = pool.length[:, :N].sum(1)
            put("majority", split, N, tts.majority(pool, N), gen, np.zeros(len(probs)))
            for k in scorers:
                if "bon" in config.methods:
                    put(f"bon/{k}", split, N, best_of_n(pool, scores[k], N), gen, vt[:, :N].sum(1))
                if "weighted" in config.methods:
                    put(f"weighted/{k}", split, N, weighted(pool, scores[k], N), gen, vt[:, :N].sum(1))
        t = time.perf_counter()
        truth = np.array([sum(d) % 10 for d in probs])
        for m in ("beam", "dvts"):
            if m not in config.methods:
                continue
            for k in config.search_verifiers:
                for N in config.Ns:
                    gen_ = torch.Generator(device=next(model.parameters()).device).manual_seed(
                        seed * 1000 + N + 100 * (m == "dvts") + 50 * (split == "test"))
                    f = beam_search if m == "beam" else dvts
                    r = _chunked(f, model, scorers[k], probs, N, config, gen_)
                    ans = np.array([-1 if (a := parse(o)["answer"]) is None else a for o in r["pick"]])
                    put(f"{m}/{k}", split, N, ans == truth, r["gen_tokens"], r["ver_tokens"])
        timing[f"search_{split}"] = round(time.perf_counter() - t, 1)
    timing["verifier_sequences_read"] = {k: s.calls for k, s in scorers.items()}
    timing["total"] = round(time.perf_counter() - t_all, 1)
    if log:
        log(f"  search grid, seed {seed}: {timing['total']:.0f}s ({timing})")
    if out:
        write_json(os.path.join(out, f"seed{seed}.json"), res)
    return res


def _chunked(f, model, scorer, probs, N, config: SearchConfig, gen, rows: int = 4096) -> dict:
    """Run a search over problems in chunks of about `rows` candidates (the KV cache holds a row per prefix)."""
    step = max(1, rows // N)
    parts = [f(model, scorer, probs[s:s + step], N, config.width, force=config.force, gen=gen,
               temperature=config.temperature, step_agg=config.step_agg, agg=config.agg)
             for s in range(0, len(probs), step)]
    return {"pick": [p for r in parts for p in r["pick"]],
            "gen_tokens": np.concatenate([r["gen_tokens"] for r in parts]),
            "ver_tokens": np.concatenate([r["ver_tokens"] for r in parts])}


# ---------------------------------------------------------------------------------------------------------------
# Reading results: accuracy and compute per strategy, bootstrap over problems and seeds, findings.

def cell(res: dict, name: str, N, split: str = "test") -> dict | None:
    d = res["strategies"].get(name, {}).get(split, {})
    return d.get(int(N), d.get(str(N)))      # int keys once read back by report.load_json, str when fresh


def per_problem(res: dict, name: str, N, split: str = "test", k: int | None = None):
    """(correct (P,), generated tokens (P,), verifier tokens (P,), FLOPs (P,)) of one strategy, k = one k or all."""
    c = cell(res, name, N, split)
    ks = np.array(res["k"][split])
    m = np.ones(len(ks), bool) if k is None else ks == k
    gen, ver = unints(c["gen"])[m], unints(c["ver"])[m]
    vk = name.split("/")[1] if "/" in name else None
    flops = 2 * res["n_params"] * (PROMPT_LEN + gen) + (2 * res["ver_params"][vk] * ver if vk else 0.0)
    return unbits(c["correct"])[m].astype(float), gen, ver, flops


def strategies(res: dict) -> list[tuple[str, int]]:
    return [(name, int(N)) for name, d in res["strategies"].items() for N in d["test"]]


def compute_optimal(res: dict, targets=(0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99), oracle: bool = False) -> list[dict]:
    """Snell et al.'s compute-optimal strategy per k, chosen on the validation problems and read on the test ones.
    Candidates: every method x learned verifier x N, greedy and majority included (the oracle's strategies only with
    oracle=True: no deployed system has the rule); cost = generated + verifier tokens. Per-k choices that maximise
    accuracy - lambda * tokens at each k trace the per-k frontier (a Lagrangian sweep over lambda); for each target
    overall accuracy the cheapest frontier point that reaches it on validation is compared with the cheapest single
    strategy that reaches it. Overall accuracy is the mean over k (equal problems per k)."""
    ks = sorted(set(res["k"]["test"]))
    pts = []
    for name, N in strategies(res):
        if cell(res, name, N, "val") is None or (name.endswith("/oracle") and not oracle):
            continue
        row = {"name": name, "N": N}
        for split in ("val", "test"):
            row[split] = {k: per_problem(res, name, N, split, k) for k in ks}
        row["acc"] = {k: float(row["val"][k][0].mean()) for k in ks}
        row["cost"] = {k: float((row["val"][k][1] + row["val"][k][2]).mean()) for k in ks}
        pts.append(row)
    frontier = []
    for lam in [0.0, *np.logspace(-6, 0, 61)]:
        ch = {k: max(pts, key=lambda p: (p["acc"][k] - lam * p["cost"][k], -p["cost"][k])) for k in ks}
        frontier.append((float(np.mean([ch[k]["acc"][k] for k in ks])), float(np.mean([ch[k]["cost"][k] for k in ks])),
                         ch))
    out = []
    for t in targets:
        ad = [f for f in frontier if f[0] >= t]
        fixed = [p for p in pts if np.mean([p["acc"][k] for k in ks]) >= t]
        if not ad or not fixed:
            out.append({"target": t, "reachable": False})
            continue
        chosen = min(ad, key=lambda f: f[1])[2]
        best = min(fixed, key=lambda p: np.mean([p["cost"][k] for k in ks]))
        out.append({"target": t, "reachable": True, "chosen": {k: f"{c['name']}@{c['N']}" for k, c in chosen.items()},
                    "fixed": f"{best['name']}@{best['N']}",
                    "adaptive_test": (np.concatenate([chosen[k]["test"][k][0] for k in ks]),
                                      np.concatenate([chosen[k]["test"][k][1] + chosen[k]["test"][k][2] for k in ks])),
                    "fixed_test": (np.concatenate([best["test"][k][0] for k in ks]),
                                   np.concatenate([best["test"][k][1] + best["test"][k][2] for k in ks]))})
    return out


# ---------------------------------------------------------------------------------------------------------------
# The report: plots, tables, findings.
