"""Search with verifiers: properties of beam search, DVTS, best-of-N and weighted voting; exact compute accounting."""
import copy
import itertools
import random

import numpy as np
import pytest
import torch

from reasonlab import tasks
from reasonlab.core.model import GPT
from reasonlab.core.pool import Pool, pool_of, sample_pool
from reasonlab.core.sampling import sample_tree, strip_row
from reasonlab.core.task import ID, MAX_LEN, PROMPT_LEN, make_digits, parse
from reasonlab.methods import search, tts
from reasonlab.methods.verifier import OracleVerifier, Verifier, aggregate, build_net
from reasonlab.methods.verifier import steps as read_steps

DIGITS = tasks.get("digits")


def draw(rng, k):
    """A digits problem of k digits drawn from `rng` (the course module's make_digits)."""
    return DIGITS.problem(make_digits(rng, k))


def over(output):
    return search.over(output, DIGITS)


def scripted_model(words: list[str], scale: float = 60.0) -> GPT:
    """A GPT that writes `words` after the forced format token whatever the prompt: the blocks add nothing, so the
    logits at position p depend on p alone, and the head maps position PROMPT_LEN + j to words[j]."""
    m = GPT()
    with torch.no_grad():
        for p in m.parameters():
            p.zero_()
        for b in m.blocks:
            b.ln1.weight.fill_(1.0)
            b.ln2.weight.fill_(1.0)
        m.ln_f.weight.fill_(1.0)
        m.pos.weight.copy_(torch.eye(MAX_LEN, 64))
        z = torch.nn.functional.layer_norm(torch.eye(MAX_LEN, 64), (64,))
        for j, w in enumerate(words):
            m.head.weight[ID[w]] += scale * z[PROMPT_LEN + j]
    return m.eval()


def test_beam_with_one_beam_of_width_one_is_one_sampled_chain(noisy_model):
    rng = random.Random(0)
    probs = [draw(rng, rng.randint(2, 8)) for _ in range(12)]
    sc = search.Scorer(OracleVerifier())
    for i, d in enumerate(probs):
        for force in ("S", "T"):
            r = search.beam_search(noisy_model, sc, [d], 1, 1, force=force, gen=torch.Generator().manual_seed(i))
            toks, _ = sample_tree(noisy_model, [DIGITS.prompt_ids(d)], 1, torch.Generator().manual_seed(i), 1.0, [force])
            assert r["outputs"][0] == [strip_row(toks[0].tolist())]
            assert r["pick"][0] == r["outputs"][0][0]


# ---------------------------------------------------------------------------------------------------------------
# Replays of search-and-learn (huggingface/search-and-learn, src/sal/search/), re-implemented here as its code reads
# (Beam objects, copies, np.argsort / np.argmax), fed the (beam, step) draws that reasonlab's run recorded. Both see one
# scoring function: a toy PRM with a tie-free score per step prefix, aggregated with `agg` (an output that is over
# without an answer scores 0, reasonlab's reading of a sequence that never answers).

class ToyPRM:
    """A causal toy PRM: each step's score is a fixed pseudo-random number of the prefix up to it (no ties)."""
    kind, flops_per_token = "toy", 0.0

    def score_steps(self, problems, outputs):
        return [[random.Random(str((d.x, tuple(o[:i + 1])))).random() for i, _, _ in read_steps(o)]
                for d, o in zip(problems, outputs)]


def _ref_score(d, text, agg):
    st = read_steps(list(text))
    if over(text) and not (st and st[-1][2]):
        return 0.0
    return float(aggregate(ToyPRM().score_steps([d], [list(text)]), agg)[0])


class _Beam:
    def __init__(self, root):
        self.current_text, self.pruned, self.completed = root, False, False
        self.all_scores = self.next_texts = self.previous_text = None


def sal_beam_search(d, N, M, rounds, root, agg, filter_duplicates=False, sort_completed=False):
    """search-and-learn's _beam_search + beam_search for one prompt (lookahead 0, config.n = N, beam_width = M)."""
    beams = [_Beam(root) for _ in range(N)]
    completed_beams, gen, ver = [], 0, 0
    active = beams
    for i, draws in enumerate(rounds):
        active = [b for b in active if not b.pruned]
        if len(active) != N:
            active = [copy.deepcopy(b) for b in (active * (N // len(active) + 1))[:N]]
        assert [b.current_text for b in active] == [q for q, _ in draws]      # the kept beams agree
        for b, (_, step) in zip(active, draws, strict=True):
            b.current_text = b.current_text + step
            gen += len(step) + (len(root) if i == 0 else 0)
            ver += PROMPT_LEN + len(b.current_text)
            if over(b.current_text):
                b.completed = True
                completed_beams.append(b)
        agg_scores = [_ref_score(d, b.current_text, agg) for b in active]
        for b, sc in zip(active, agg_scores):
            b.all_scores = sc
        agg_scores = [agg_scores[j] for j, b in enumerate(active) if not b.completed]
        active = [b for b in active if not b.completed]
        if not active:
            break
        if filter_duplicates:
            unique = {}
            for j, b in enumerate(active):
                if b.current_text not in unique:
                    unique[b.current_text] = j
            active = [active[j] for j in unique.values()]
            agg_scores = [agg_scores[j] for j in unique.values()]
        top = np.argsort(np.array(agg_scores).flatten())[-(N // M):]
        for j, b in enumerate(active):
            if j not in top:
                b.pruned = True
    done = [b.current_text for b in completed_beams]
    if sort_completed:
        completed_beams = sorted(completed_beams, key=lambda b: b.all_scores, reverse=True)[:N]
    else:
        completed_beams = completed_beams[:N]
    if len(completed_beams) != N:
        completed_beams = [copy.deepcopy(b) for b in (completed_beams * (N // len(completed_beams) + 1))[:N]]
    pool = [b.current_text for b in completed_beams]
    pred = pool[np.argmax([b.all_scores for b in completed_beams])]
    return {"pool": pool, "pred": pred, "completed": done, "gen": gen, "ver": ver}


def sal_dvts(d, N, M, rounds, root, agg):
    """search-and-learn's _dvts + dvts for one prompt (lookahead 0, n_beams = N / M, beam_width = M)."""
    beams = [_Beam(root) for _ in range(N // M)]
    gen = ver = 0
    for i, draws in enumerate(rounds):
        gen_beams = [b for b in beams if not b.pruned]
        if not gen_beams:
            break
        assert [q for q, _ in draws] == [b.current_text for b in gen_beams for _ in range(M)]
        for j, b in enumerate(gen_beams):
            b.next_texts = [step for _, step in draws[j * M:(j + 1) * M]]
            completions = [b.current_text + t for t in b.next_texts]
            gen += sum(len(t) for t in b.next_texts) + (M * len(root) if i == 0 else 0)
            ver += sum(PROMPT_LEN + len(c) for c in completions)
            scores = [_ref_score(d, c, agg) for c in completions]
            best = int(np.argmax(scores))
            b.all_scores, b.previous_text = scores, b.current_text
            b.current_text = b.current_text + b.next_texts[best]
            if over(b.current_text):                                     # stopped on EOS: prune
                b.pruned = True
    pool = [(b.previous_text + b.next_texts[j], b.all_scores[j]) for b in beams for j in range(M)]
    return {"pool": [t for t, _ in pool], "pred": pool[int(np.argmax([s for _, s in pool]))][0], "gen": gen, "ver": ver}


def stub_thinker():
    """A stub thinker that mostly writes an S chain, with wrong sums, early answers and early ends now and then."""
    return scripted_model(["3", "5", "7", "A", "2", "</s>"], scale=0.06)


@pytest.mark.parametrize("N,M", [(4, 2), (8, 2), (16, 4), (4, 4)])
@pytest.mark.parametrize("agg", ["last", "min"])
def test_beam_search_replays_search_and_learn(N, M, agg):
    model, rng = stub_thinker(), random.Random(N * M)
    probs = [draw(rng, rng.randint(2, 8)) for _ in range(12)]
    for dedup in (False, True):
        draws = []
        r = search.beam_search(model, search.Scorer(ToyPRM()), probs, N, M, gen=torch.Generator().manual_seed(N),
                               agg=agg, filter_duplicates=dedup, draws=draws)
        for p, d in enumerate(probs):
            rounds = [rd[p] for rd in draws if rd[p]]
            ref = sal_beam_search(d, N, M, rounds, (ID["S"],), agg, filter_duplicates=dedup)
            assert [tuple(o) for o in r["completed"][p]] == ref["completed"]
            assert [tuple(o) for o in r["outputs"][p]] == ref["pool"] and tuple(r["pick"][p]) == ref["pred"]
            assert r["gen_tokens"][p] == ref["gen"] and r["ver_tokens"][p] == ref["ver"]
    assert len({len(rd) for rd in draws}) > 1 or len(draws) > 2     # the run went several rounds


@pytest.mark.parametrize("N,M", [(4, 2), (8, 2), (16, 4), (4, 4)])
@pytest.mark.parametrize("agg", ["last", "min"])
def test_dvts_replays_search_and_learn(N, M, agg):
    model, rng = stub_thinker(), random.Random(N * M + 1)
    probs = [draw(rng, rng.randint(2, 8)) for _ in range(12)]
    draws = []
    r = search.dvts(model, search.Scorer(ToyPRM()), probs, N, M, gen=torch.Generator().manual_seed(N), agg=agg,
                    draws=draws)
    stopped_early = 0
    for p, d in enumerate(probs):
        rounds = [rd[p] for rd in draws if rd[p]]
        ref = sal_dvts(d, N, M, rounds, (ID["S"],), agg)
        assert [tuple(o) for o in r["outputs"][p]] == ref["pool"] and tuple(r["pick"][p]) == ref["pred"]
        assert r["gen_tokens"][p] == ref["gen"] and r["ver_tokens"][p] == ref["ver"]
        stopped_early += any(not over(o) for o in ref["pool"])
    assert stopped_early                     # some subtree stopped with partial chains among its last candidates


def test_dvts_stops_a_subtree_when_its_best_candidate_is_over():
    """The hand-built difference from a variant that continues from the best unfinished candidate: the scripted
    thinker answers at once, so every subtree's best candidate is over after one round: DVTS stops there, N
    candidates in all, and answers from them."""
    model = scripted_model(["A", "3", "</s>"])
    r = search.dvts(model, search.Scorer(OracleVerifier()), [DIGITS.problem([1, 2])], 8, 4,
                    gen=torch.Generator().manual_seed(0))
    assert r["gen_tokens"].tolist() == [8 * 4] and len(r["outputs"][0]) == 8
    assert r["pick"][0] == [ID[w] for w in "S A 3 </s>".split()]


def random_pool(seed: int, P: int = 40, n: int = 6):
    """Hand-made outputs: right chains, chains with one wrong step, a wrong answer after a right chain, junk."""
    rng = random.Random(seed)
    probs = [draw(rng, rng.randint(2, 8)) for _ in range(P)]
    outs = []
    for d in probs:
        row = []
        for _ in range(n):
            w = DIGITS.solution(d, rng.choice(["short", "full"]))
            r = rng.random()
            if r < 0.3:                                         # a wrong step somewhere (the answer may stay right)
                i = rng.randrange(1, len(w) - 1)
                w[i] = str((int(w[i]) + 1) % 10) if w[i].isdigit() else w[i]
            elif r < 0.4:
                w = w[:2] + ["</s>"]                            # cut off: no answer
            row.append([ID[x] for x in w])
        outs.append(row)
    return probs, outs


def test_oracle_best_of_n_is_verified_pass_at_n():
    """Oracle best-of-N (score: every step right) picks a verified right chain exactly when the N samples hold one:
    over every N-subset of the pool that rate averages to the unbiased verified pass@N estimator (problem by
    problem), and its accuracy is at least that (with no verified chain it still answers, sometimes right)."""
    probs, outs = random_pool(0)
    pool = pool_of(probs, outs)
    sc = search.Scorer(OracleVerifier())
    n = pool.n
    for N in (1, 2, 3, n):
        acc, found = np.zeros(len(probs)), np.zeros(len(probs))
        subsets = list(itertools.combinations(range(n), N))
        for s in subsets:
            cols = list(s) + [c for c in range(n) if c not in s]       # the subset first: best-of-N reads the first N
            rows = [[row[c] for c in cols] for row in outs]
            sub = pool_of(probs, rows)
            scores = sc.values([d for d in probs for _ in range(n)], [o for row in rows for o in row],
                               "min").reshape(len(probs), n)
            acc += search.best_of_n(sub, scores, N)
            found += (sub.correct & sub.verified)[np.arange(len(probs)), search.pick_best(scores, N)]
        want = tts.verified_pass_n(pool, N)
        assert np.allclose(found / len(subsets), want) and (N > 1 or 0 < want.mean() < 1)
        assert (acc / len(subsets) >= want - 1e-12).all()


def find_answer_with_largest_sum(answers, scores):
    """search-and-learn's (src/sal/utils/math.py), with answers as they are (no canonical form needed for digits)."""
    groups, first = {}, {}
    for a, s in zip(answers, scores):
        groups[a] = groups.get(a, 0.0) + s
        first.setdefault(a, a)
    return first[max(groups, key=groups.get)]


def hand_pool(seed: int, P: int = 50, n: int = 16):
    """A pool of problem [1, 2, 3] (answer 6) whose samples answer at random, -1 (no answer) included."""
    rng = np.random.default_rng(seed)
    ans = rng.integers(-1, 10, size=(P, n))
    return rng, ans, Pool([DIGITS.problem([1, 2, 3])] * P, np.full(P, 3), ans, ans == 6, np.zeros(ans.shape, bool),
                          np.ones(ans.shape, int), np.full(ans.shape, 5), np.full(ans.shape, 3), np.zeros(ans.shape))


def test_weighted_vote_replays_search_and_learn_where_no_answers_tie():
    """Scores as Scorer.values gives them (an output without an answer scores 0) and no two answers tied at the top:
    search-and-learn's pick, and best-of-N's at N = 1."""
    for seed in range(5):
        rng, ans, pool = hand_pool(seed)
        for scores in (rng.random(ans.shape), rng.random(ans.shape) ** 4):
            scores = np.where(ans >= 0, scores, 0.0)
            for N in (1, 2, 5, 16):
                want = [find_answer_with_largest_sum(list(a[:N]), list(s[:N])) == 6 for a, s in zip(ans, scores)]
                assert search.weighted(pool, scores, N).tolist() == [float(w) for w in want]
            assert np.array_equal(search.weighted(pool, scores, 1), search.best_of_n(pool, scores, 1))


def test_weighted_vote_answers_where_no_score_is_positive_as_search_and_learn_does():
    """A problem whose outputs all score 0 (an oracle rejecting every chain) is still answered, by the largest sum,
    as search-and-learn answers it; so weighted@1 is best-of-N@1 on every problem. Where the zero sums tie among
    several answers, the pick is one of the answers given (the reference: the first seen)."""
    won = 0.0
    for seed in range(5):
        rng, ans, pool = hand_pool(seed)
        zero = rng.random(len(ans)) < 0.5
        scores = np.where((ans >= 0) & ~zero[:, None], rng.random(ans.shape), 0.0)
        assert np.array_equal(search.weighted(pool, scores, 1), search.best_of_n(pool, scores, 1))
        assert search.weighted(pool, np.zeros(ans.shape), 1).sum() == (ans[:, 0] == 6).sum() > 0
        for N in (2, 5, 16):
            got = search.weighted(pool, scores, N)
            for i in np.flatnonzero(zero):
                given = set(ans[i, :N].tolist()) - {-1}
                if len(given) == 1:      # one answer given: the reference's pick among the answered outputs
                    assert got[i] == float(given == {6})
                else:                    # right only if 6 was given at all
                    assert got[i] <= float(6 in given)
            won += got[zero].sum()
            assert got[~zero].tolist() == [
                float(find_answer_with_largest_sum(list(a[:N]), list(s[:N])) == 6)
                for a, s in zip(ans[~zero], scores[~zero])]
        neg = -rng.random(ans.shape)     # sums below 0 still have a largest (scores are not always probabilities)
        for N in (1, 3, 16):
            want = [find_answer_with_largest_sum([a for a in r[:N] if a >= 0] or [-1],
                                                 [x for a, x in zip(r[:N], t[:N]) if a >= 0] or [0.0]) == 6
                    for r, t in zip(ans, neg)]
            assert search.weighted(pool, neg, N).tolist() == [float(w) for w in want]
    assert won > 10          # the all-zero problems are answered, and sometimes right


def test_weighted_vote_with_scores_alike_is_majority_voting_ties_and_all():
    """A verifier that scores every answered output alike (the search experiment's placebo) weighs every vote the
    same: weighted voting is then majority voting exactly, ties broken as tts.vote breaks them, though ties are
    common at small N (search-and-learn's first-seen rule would differ there)."""
    for seed in range(5):
        _, ans, pool = hand_pool(seed)
        for c in (1.0, 0.3):
            scores = np.where(ans >= 0, c, 0.0)
            for N in (1, 2, 3, 4, 16):
                assert np.array_equal(search.weighted(pool, scores, N), tts.majority(pool, N))
    _, ans, pool = hand_pool(0)
    assert not np.array_equal(search.weighted(pool, np.where(ans == 6, 1.0, 0.1), 4), tts.majority(pool, 4))


def test_token_accounting_is_exact_on_a_hand_made_example():
    """A scripted model always writes "S 3 A 3 </s>" for the problem 1 2 (k = 2: one chain step, then the answer).
    Beam search, N = 4, M = 2: step 1 samples 4 candidates of 2 tokens (the forced S counts, as in tts.tokens), the
    verifier reads each (10 prompt + 2); step 2 expands the 2 kept beams twice by "A 3 </s>" (3 tokens), the verifier
    reads 4 x (10 + 5). DVTS (2 subtrees of width 2) does the same work. Best-of-4: 4 x 5 generated, 4 x 15 read."""
    model = scripted_model(["3", "A", "3", "</s>"])
    sc = search.Scorer(OracleVerifier())
    for f in (search.beam_search, search.dvts):
        r = f(model, sc, [DIGITS.problem([1, 2])], 4, 2, gen=torch.Generator().manual_seed(0))
        assert r["outputs"][0] == [[ID[w] for w in "S 3 A 3 </s>".split()]] * 4
        assert r["gen_tokens"].tolist() == [4 * 2 + 4 * 3]
        assert r["ver_tokens"].tolist() == [4 * 12 + 4 * 15]
    pool = sample_pool(model, [[1, 2]], 4, ["S"], seed=0, keep_outputs=True)
    outs = pool.outputs
    assert pool.length.sum() == 20 and sum(PROMPT_LEN + len(o) for o in outs[0]) == 60
    assert pool.correct.all() and pool.verified.all()


def test_the_oracles_score_is_one_exactly_when_check_chain_accepts():
    """The oracle as search scores an output (min of its step labels; 0 for one that is over without an answer)."""
    sc = search.Scorer(OracleVerifier())
    rng = random.Random(0)
    agree = 0
    for _ in range(3000):
        d = draw(rng, rng.randint(2, 8))
        toks = DIGITS.solution(d, rng.choice(["short", "full"]))
        for _ in range(rng.randint(0, 2)):                     # drop, repeat or change a token
            i, op = rng.randrange(1, len(toks) - 1), rng.random()
            toks = toks[:i] + toks[i + 1:] if op < 0.4 else toks[:i] + [toks[i]] + toks[i:] if op < 0.6 else \
                toks[:i] + [str(rng.randrange(10))] + toks[i + 1:]
        out = [ID[t] for t in toks]
        ok = DIGITS.check_chain(d, parse(out)) is True
        assert (sc.values([d], [out], "min")[0] == 1.0) == ok, (d, toks)
        agree += ok
    assert 300 < agree < 2700                                   # both kinds were tried


def test_an_answerless_chain_never_outranks_an_answer():
    """The oracle scores the steps a cut-off chain wrote (all right): as a final candidate it must score 0."""
    sc = search.Scorer(OracleVerifier())
    d = DIGITS.problem([3, 9, 2])
    cut, right = [ID[w] for w in "S 2 </s>".split()], [ID[w] for w in DIGITS.solution(d, "short")]
    assert sc.values([d, d], [cut, right], "min").tolist() == [0.0, 1.0]


def test_scorer_memo_gives_the_unmemoised_scores_for_lists_and_tuples():
    """Scorer.values: the aggregated step scores (0 for an output that is over without an answer), the same for
    list and tuple inputs and on a second call, which reads nothing new; each distinct output is read once."""
    rng = random.Random(0)
    digs = [draw(rng, rng.randint(2, 8)) for _ in range(30)]
    outs = [[ID[w] for w in DIGITS.solution(d, rng.choice(["short", "full", "direct"]))] for d in digs]
    outs = [o[:rng.randint(1, len(o))] for o in outs] + outs[:5]        # cut chains, and repeats
    outs[5:8] = [o + [ID["</s>"]] for o in outs[5:8]]                  # cut chains that are over
    digs = digs + digs[:5]
    v = OracleVerifier()
    direct = aggregate(v.score_steps(digs, outs), "min")
    silent = np.array([over(o) and not (bool(st) and st[-1][2]) for st, o in zip(map(read_steps, outs), outs)])
    want = np.where(silent, 0.0, direct)
    sc = search.Scorer(v)
    half = len(outs) // 2                      # a first call, then one mixing memoised, new and repeated outputs
    assert np.array_equal(sc.values(digs[:half], outs[:half], "min"), want[:half])
    assert np.array_equal(sc.values(digs, outs, "min"), want) and silent.any() and (direct[silent] > 0).any()
    distinct = len({(d, tuple(o)) for d, o in zip(digs, outs)})
    assert sc.calls == distinct < len(outs)
    assert np.array_equal(sc.values(digs, [tuple(o) for o in outs], "min"), want)
    for agg in ("last", "prod"):               # memoised per aggregation, not across them
        want = np.where(silent, 0.0, aggregate(v.score_steps(digs, outs), agg))
        assert np.array_equal(sc.values(digs, outs, agg), want)
    assert sc.calls == distinct                # nothing was read twice


def test_prefix_memo_gives_what_the_verifier_gives_on_the_prefix(noisy_model):
    """add_prefixes memoises a prefix's step scores from a longer output: right only if a (causal) learned verifier
    scores the prefix alone the same way."""
    torch.manual_seed(0)
    v = Verifier(build_net(noisy_model), "prm")
    probs, outs = random_pool(1, P=10, n=3)
    digs, flat = [d for d, row in zip(probs, outs) for _ in row], [o for row in outs for o in row]
    memo = search.Scorer(v)
    memo.steps(digs, flat)
    memo.add_prefixes(digs, flat)
    prefixes = [(d, o[:i + 1]) for d, o in zip(digs, flat) for i in range(1, len(o))]
    fresh = v.score_steps([d for d, _ in prefixes], [p for _, p in prefixes])
    got = [memo.memo[(d, tuple(p))] for d, p in prefixes if (d, tuple(p)) in memo.memo]
    want = [f for (d, p), f in zip(prefixes, fresh) if (d, tuple(p)) in memo.memo]
    assert len(got) > 20 and all(np.allclose(a, b, atol=1e-5) for a, b in zip(got, want))
