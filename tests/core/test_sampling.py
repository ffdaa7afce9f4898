"""Generation: KV-cache decoding equals naive recomputation; greedy, seeds, forcing, max_new; log-probs."""
import pytest
import torch
import torch.nn.functional as F

import reasonlab as R
from reasonlab import tasks
from reasonlab.core.evaluate import evaluate
from reasonlab.core.pool import sample_pool
from reasonlab.core.sampling import generate, generate_naive, seq_logprobs
from reasonlab.core.task import ID, MAX_LEN
from reasonlab.train.sft import build_model


@pytest.fixture(params=[256, 1], ids=["decode-sdpa-below-256-rows", "decode-elementwise"])
def decode_rows(request, monkeypatch):
    """Both decode attentions: SDPA below fast.DECODE_ROWS rows (200 prompts), the elementwise one from it."""
    from reasonlab.core import fast
    monkeypatch.setattr(fast, "DECODE_ROWS", request.param)
    return request.param


def test_cached_equals_naive_greedy(noisy_model, prompts, decode_rows):
    for force in (None, ["T"], ["S", "3"]):
        assert generate(noisy_model, prompts, None, 0.0, force) == generate_naive(noisy_model, prompts, None, 0.0, force)


def test_generation_runs_to_another_tasks_length_and_forces_its_words():
    """add (prompts of 18 tokens, sequences of 40): outputs run to the model's own max_len, a forced word of the task
    is written, the cached decoder equals the naive one, and evaluate and sample_pool force such words too."""
    add = tasks.get("add")
    probs = add.draw(3, seed=0, ks=[2, 5], part="test")
    prompts = [add.prompt_ids(p) for p in probs]
    m = build_model(0, task=add).eval()
    force = ["T", "8c0"]
    for gen in (None, torch.Generator().manual_seed(0)):
        a = generate(m, prompts, gen, 1.0, force, task=add)
        gen = gen and torch.Generator().manual_seed(0)
        assert a == generate_naive(m, prompts, gen, 1.0, force, task=add)
        assert all(o[:2] == [add.id["T"], add.id["8c0"]] for o in a)
    assert [o[:2] for o in evaluate(m, probs, force=force)["outputs"]] == [[add.id["T"], add.id["8c0"]]] * len(probs)
    assert (sample_pool(m, probs, 2, force=force).fmt == 2).all()
    with torch.no_grad():
        m.head.weight.zero_()                     # every logit 0: greedy writes <pad> and never ends
    assert [len(p) + len(o) for p, o in zip(prompts, generate(m, prompts, task=add))] == [add.max_len] * len(probs)


def test_cached_equals_naive_sampled(noisy_model, prompts, decode_rows):
    for force in (None, ["A"]):
        a = generate(noisy_model, prompts, torch.Generator().manual_seed(7), 1.0, force)
        b = generate_naive(noisy_model, prompts, torch.Generator().manual_seed(7), 1.0, force)
        assert a == b
    assert len({tuple(o) for o in a}) > 20  # it really sampled


def test_same_seed_same_samples_and_other_seed_differs(noisy_model, prompts):
    a = generate(noisy_model, prompts, torch.Generator().manual_seed(1), 1.0)
    b = generate(noisy_model, prompts, torch.Generator().manual_seed(1), 1.0)
    c = generate(noisy_model, prompts, torch.Generator().manual_seed(2), 1.0)
    assert a == b and a != c


def test_temperature_zero_ignores_the_generator(noisy_model, prompts):
    greedy = generate(noisy_model, prompts)
    g = torch.Generator().manual_seed(123)
    state = g.get_state()
    assert generate(noisy_model, prompts, g, temperature=0.0) == greedy
    assert torch.equal(g.get_state(), state)  # not consumed
    assert generate(noisy_model, prompts, None, temperature=1.0) == greedy


def test_outputs_end_at_eos_or_length(noisy_model, prompts):
    outs = generate(noisy_model, prompts, torch.Generator().manual_seed(0), 1.0, force=["T"])
    for p, o in zip(prompts, outs):
        assert o[0] == ID["T"]
        assert ID["</s>"] not in o[:-1]
        assert o[-1] == ID["</s>"] or len(p) + len(o) == MAX_LEN
    short = generate(noisy_model, prompts, torch.Generator().manual_seed(0), 1.0, force=["T"], max_new=3)
    assert all(len(o) <= 4 for o in short) and any(len(o) == 4 for o in short)


def test_greedy_is_argmax_of_the_full_forward(noisy_model, prompts):
    out = generate(noisy_model, prompts[:20], max_new=1)
    logits, _ = noisy_model(torch.tensor(prompts[:20]))
    assert [o[0] for o in out] == logits[:, -1].argmax(-1).tolist()


def test_seq_logprobs_matches_a_per_sequence_loop(noisy_model, prompts):
    outs = generate(noisy_model, prompts[:30], torch.Generator().manual_seed(3), 1.0)
    lp, mask = seq_logprobs(noisy_model, prompts[:30], outs)
    assert lp.shape == mask.shape == (30, max(len(o) for o in outs))
    for b, (p, o) in enumerate(zip(prompts[:30], outs)):
        logits, _ = noisy_model(torch.tensor([p + o]))
        want = F.log_softmax(logits[0, len(p) - 1:-1], -1).gather(-1, torch.tensor(o)[:, None]).squeeze(-1)
        assert torch.allclose(lp[b, :len(o)], want, atol=1e-5)
        assert mask[b].sum() == len(o) and (lp[b, len(o):] == 0).all()


def test_seq_logprobs_carries_gradients(noisy_model, prompts):
    outs = generate(noisy_model, prompts[:4])
    lp, mask = R.seq_logprobs(noisy_model, prompts[:4], outs)
    (lp * mask).sum().backward()
    assert noisy_model.tok.weight.grad is not None and noisy_model.tok.weight.grad.abs().sum() > 0


def test_generate_n_shares_the_prompt_and_matches_repeated_prompts(noisy_model, prompts):
    from reasonlab.core.sampling import generate_n
    a = generate_n(noisy_model, prompts[:20], 4, torch.Generator().manual_seed(9), 1.0, force=["S"])
    rep = [p for p in prompts[:20] for _ in range(4)]
    b = generate_naive(noisy_model, rep, torch.Generator().manual_seed(9), 1.0, force=["S"])
    assert a == b and len(a) == 80


@pytest.mark.parametrize("bmm_t", [64, 0], ids=["packed-bmm", "packed-sdpa"])
def test_shared_prompt_logits_equal_the_plain_ones_with_gradients(noisy_model, prompts, bmm_t, monkeypatch):
    """The packed path (each problem's prompt and distinct completions in one row) gives the plain path's logits
    and gradients row for row, repeated, empty and one-token completions included, through either attention."""
    from reasonlab.core import fast
    from reasonlab.core.sampling import generate_n, output_logits
    monkeypatch.setattr(fast, "PACKED_BMM_T", bmm_t)
    ps = [p for p in prompts[:6] for _ in range(4)]
    outs = generate_n(noisy_model, prompts[:6], 4, torch.Generator().manual_seed(2), 1.0)
    outs[1], outs[2], outs[9] = outs[0], list(outs[0]), outs[8]   # repeats within a group run once
    outs[5], outs[13] = [], [ID["</s>"]]                          # nothing written; only </s>
    a, ta, ma = output_logits(noisy_model, ps, outs)
    sdpa, calls = fast.F.scaled_dot_product_attention, []
    monkeypatch.setattr(fast.F, "scaled_dot_product_attention", lambda *x, **k: calls.append(1) or sdpa(*x, **k))
    b, tb, mb = output_logits(noisy_model, ps, outs, group=4)
    assert (len(calls) > 0) == (bmm_t == 0)       # the path named ran
    assert torch.equal(ta[ma], tb[mb]) and torch.equal(ma, mb)
    assert torch.allclose(a[ma], b[mb], atol=1e-5)
    ga = torch.autograd.grad((a[ma] ** 2).sum(), noisy_model.tok.weight)[0]
    gb = torch.autograd.grad((b[mb] ** 2).sum(), noisy_model.tok.weight)[0]
    assert ((ga - gb).abs().max() / ga.abs().max()).item() < 1e-5


def test_shared_prompt_logits_run_each_distinct_completion_once(noisy_model, prompts):
    """One pass, a row per problem: its prompt, then each distinct completion minus its last token, once; the same
    completion under another problem is not a repeat. Outputs of one token need only the prompt. Only real tokens
    enter the layers (the padding that evens the rows out does not), and the last block goes on past attention only
    where a logit is read: a prompt's last position and the completions' tokens."""
    from reasonlab.core.sampling import PAD, layout, output_logits
    ps = [p for p in prompts[:3] for _ in range(4)]
    outs = [[4, 9, 2], [4, 9, 2], [5, 9, 3, 2], [4, 9, 2], [4, 9, 2], [4, 9, 2], [4, 9, 2], [5, 9, 3, 2],
            [2], [2], [4, 9, 2], [2]]
    shapes, heads = [], []
    hooks = [noisy_model.tok.register_forward_hook(lambda m, inp, out: shapes.append(tuple(inp[0].shape))),
             noisy_model.blocks[-1].mlp.register_forward_hook(lambda m, inp, out: heads.append(inp[0].shape[0]))]
    try:
        lg, _, mask = output_logits(noisy_model, ps, outs, group=4)
    finally:
        for h in hooks:
            h.remove()
    Tp = len(prompts[0])
    lay = layout(ps, outs, group=4)
    assert lay.ids.shape == (3, Tp + 2 + 3)   # problems 0 and 1 hold 2 + 3 completion tokens, problem 2 two
    assert (lay.ids != PAD).sum(1).tolist() == [Tp + 5, Tp + 5, Tp + 2]
    assert shapes == [(3 * Tp + 12,)]         # one pass over the real tokens alone
    assert heads == [3 + 12]                  # the last block's MLP: three prompts' last positions, 12 tokens
    assert torch.equal(lg[0], lg[1]) and torch.equal(lg[4], lg[6]) and not torch.equal(lg[0], lg[4])
    plain, _, _ = output_logits(noisy_model, ps, outs)
    assert torch.allclose(lg[mask], plain[mask], atol=1e-5)


def test_generate_n_shares_prefixes_without_changing_the_samples(noisy_model, prompts):
    """Rows that wrote the same tokens share a cache row and finished rows leave it; the random stream and every
    sample stay those of the naive decoder."""
    from reasonlab.core.sampling import generate_n
    a = generate_n(noisy_model, prompts[:16], 8, torch.Generator().manual_seed(3), 1.0)
    assert len({len(o) for o in a}) > 2          # rows finish at different steps, so the cache shrinks
    rep = [p for p in prompts[:16] for _ in range(8)]
    assert a == generate_naive(noisy_model, rep, torch.Generator().manual_seed(3), 1.0)


def test_generate_n_runs_each_distinct_prefix_once(noisy_model, prompts):
    """Greedy decoding writes the same output n times: every forward after the prompts' sees one row per prompt
    still writing, whatever n is, plus rows that have ended while more than half of the cache is live (they
    decode padding rather than have the cache copied)."""
    from reasonlab.core.sampling import generate_n
    rows = []
    hook = noisy_model.tok.register_forward_hook(lambda m, inp, out: rows.append(inp[0].shape[0]))
    try:
        outs = generate_n(noisy_model, prompts[:5], 8, None, 0.0)
    finally:
        hook.remove()
    firsts = outs[::8]
    assert all(o == firsts[i // 8] for i, o in enumerate(outs))
    still = [sum(len(o) > t for o in firsts) for t in range(1, max(map(len, firsts)))]
    assert rows[0] == 5 and len(rows) == len(still) + 1
    assert all(live == seen or seen >= live > seen / 2 for live, seen in zip(still, rows[1:]))


def test_tree_walk_outputs_do_not_depend_on_when_the_cache_is_compacted(noisy_model, prompts):
    from reasonlab.core.sampling import tree_walk
    seq = torch.tensor(prompts[:40])
    runs = [tree_walk(noisy_model, seq, n, torch.Generator().manual_seed(5), 1.0, want_logp=True, keep_frac=f)
            for n in (1, 3) for f in (0.0, 0.5, 1.0)]
    for n in range(2):
        a = runs[3 * n]
        for b in runs[3 * n + 1:3 * n + 3]:
            assert torch.equal(a[0], b[0]) and torch.allclose(a[1], b[1], atol=1e-5)


@pytest.mark.parametrize("chunk", [512, 64])
def test_prefill_runs_shared_prompt_heads_once(noisy_model, prompts, chunk, monkeypatch):
    """194 prompts share their first tokens: the prefill runs the distinct heads once, then the rest of each
    prompt (in forwards of at most PREFILL_ROWS rows: 64 -> four, the last one short), and gives the plain
    prefill's cache and logits."""
    from reasonlab.core import fast, sampling
    from reasonlab.core.fast import KVCache
    from reasonlab.core.sampling import _prefill
    monkeypatch.setattr(sampling, "PREFILL_ROWS", chunk)
    prompts = [list(p) for p in dict.fromkeys(map(tuple, prompts))]   # 194 distinct (the next test has equal ones)
    seq = torch.tensor(prompts)
    rows = []
    hook = noisy_model.tok.register_forward_hook(lambda m, inp, out: rows.append(tuple(inp[0].shape)))
    try:
        with torch.inference_mode():
            cache, logits, first, inv = _prefill(noisy_model, seq, room=lambda u: 300)
    finally:
        hook.remove()
    parts = [(min(chunk, len(prompts) - a), seq.shape[1] - rows[0][1]) for a in range(0, len(prompts), chunk)]
    assert rows[0][0] < len(prompts) / 3 and rows[1:] == parts and len(parts) == (1 if chunk == 512 else 4)
    assert torch.equal(first, torch.arange(len(prompts))) and torch.equal(inv, first) and cache.capacity == 300
    with torch.inference_mode():
        plain = KVCache(noisy_model.cfg, len(prompts))
        want = fast.forward(noisy_model, seq, cache=plain)[:, -1]
    assert cache.pos == plain.pos and torch.allclose(logits, want, atol=1e-5)
    assert torch.allclose(cache.kv[:, :, :cache.pos], plain.kv[:, :, :plain.pos], atol=1e-5)
    g = [torch.Generator().manual_seed(1) for _ in range(2)]
    assert generate(noisy_model, prompts, g[0], 1.0, ["T"]) == generate_naive(noisy_model, prompts, g[1], 1.0, ["T"])


def test_equal_prompts_run_once(noisy_model, prompts):
    """Prompts that are equal (k = 2 has 100 problems: an evaluation repeats them) share one prefill row and one
    decoding row until their samples differ; the outputs stay the naive decoder's, greedy and sampled."""
    from reasonlab.core.sampling import _prefill
    distinct = [list(p) for p in dict.fromkeys(map(tuple, prompts))][:40]
    which = [i % 40 for i in range(120)] + [7, 3]
    rep = [distinct[i] for i in which]                                      # 40 distinct prompts among 122
    with torch.inference_mode():
        cache, logits, first, inv = _prefill(noisy_model, torch.tensor(rep))
        plain = noisy_model(torch.tensor(rep))[0][:, -1]
    assert cache.batch == len(first) == 40 and len(inv) == len(rep)
    assert all(rep[int(first[inv[i]])] == rep[i] for i in range(len(rep)))
    assert torch.allclose(logits[inv], plain, atol=1e-5)
    rows = []
    hook = noisy_model.tok.register_forward_hook(lambda m, inp, out: rows.append(inp[0].shape[0]))
    try:
        greedy = generate(noisy_model, rep, None, 0.0, ["T"])
    finally:
        hook.remove()
    assert max(rows) <= 40 and greedy == generate_naive(noisy_model, rep, None, 0.0, ["T"])
    for force in (None, ["S"]):
        g = [torch.Generator().manual_seed(4) for _ in range(2)]
        assert generate(noisy_model, rep, g[0], 1.0, force) == generate_naive(noisy_model, rep, g[1], 1.0, force)
    # a logit hook sees each merged prefix's own tokens: one that bans the token after the last one written
    # gives every prompt the output it gets alone
    from reasonlab.core.sampling import sample_tree

    def ban_next(logits, paths):
        return logits.scatter(1, (paths[:, -1:] + 1) % logits.shape[1], float("-inf"))
    merged = sample_tree(noisy_model, rep, 1, None, 0.0, logit_hook=ban_next)[0]
    alone = sample_tree(noisy_model, distinct, 1, None, 0.0, logit_hook=ban_next)[0]
    assert torch.equal(merged, alone[which])
    assert not torch.equal(alone, sample_tree(noisy_model, distinct, 1, None, 0.0)[0])   # the hook bit
