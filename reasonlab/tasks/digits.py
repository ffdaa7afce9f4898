"""digits: the sum of k digits mod 10 (k = 2..8), the course module's task and the lab's first.

    prompt                       output after "="        format
    <s> 3 5 9 2 7 _ _ _ =        A 6 </s>                direct: answer at once
    <s> 3 5 9 2 7 _ _ _ =        S 8 9 6 A 6 </s>        short: the running sum after digits 2, 4, 5
    <s> 3 5 9 2 7 _ _ _ =        T 3 8 7 9 6 A 6 </s>    full: the running sum after every digit

The state is the running sum mod 10 and the answer is the last state. The prompt has 8 digit slots, so the t-th digit
is always the same distance back from the t-th chain step (the course module's note: without it the small model often
failed to learn). The answer is uniform over 0..9 at every k, and a direct answer is at chance from k = 3 (the
function is as sensitive to each digit as a function can be): a chain is the only road there.

This file keeps the course module's numbers exactly: its parts are ranked by the hash of the digits' bytes, its draws
run one stream over the k of a set, and its training batches are drawn vectorised as the lab always drew them.
"""
from __future__ import annotations

import hashlib
import random

from .base import Task
from .draws import product
from .records import EQ, FILL, FMT_NAMES, FORMATS, PAD, Problem, chain_steps
from .registry import register

DIGIT_WORDS = tuple(str(d) for d in range(10))


class Digits(Task):
    name = "digits"
    summary = "the sum of k digits mod 10"
    state_name = "running sum"
    state_short = "sum"
    past_k_min = "Where direct answers are at chance"
    words = DIGIT_WORDS
    state_words = DIGIT_WORDS
    k_min, k_max, slots = 2, 8, 8
    max_len = 24
    direct_bar = 0.95                       # a sum of two digits mod 10 is learned directly (the recipe's gate)

    def sample(self, rng: random.Random, k: int) -> tuple[int, ...]:
        return tuple(rng.randrange(10) for _ in range(k))

    def first_state(self, p: Problem) -> int:
        return 0

    def next_state(self, p: Problem, t: int, s: int) -> int:
        return (s + p.x[t - 1]) % 10

    def answer(self, p: Problem) -> int:
        return sum(p.x) % 10

    def support(self, k: int):
        return product(range(10), k)

    def unit(self, x) -> float:
        return int.from_bytes(hashlib.sha256(bytes([len(x)] + list(x))).digest()[:8], "big") / 2 ** 64

    def streams(self, seed, part, ks):
        rng = random.Random(seed)           # one stream over the set's k, as the course module's lab drew them
        for k in ks:
            yield k, rng

    def _blind_guess(self, k: int) -> float:
        return 0.1                          # a sum of k >= 1 uniform digits is uniform mod 10

    def in_train(self, digits, k):
        """(B,) whether each row's first k digits (digits (B, slots), k (B,)) are a train-part problem."""
        import numpy as np
        out = np.zeros(len(k), dtype=bool)
        for kk in np.unique(k):
            rows = np.nonzero(k == kk)[0]
            out[rows] = [self.part_of(tuple(d)) == "train" for d in digits[rows, :kk].tolist()]
        return out

    def sequences(self, rng, batch: int, mix=(0.5, 0.3, 0.2), k_range=None):
        import numpy as np
        lo, hi = k_range or (self.k_min, self.k_max)
        K, d0 = self.slots, self.id["0"]
        p = np.asarray(mix, dtype=np.float64)
        k = rng.integers(lo, hi + 1, size=batch)
        fmt = rng.choice(3, size=batch, p=p / p.sum())
        digits = rng.integers(0, 10, size=(batch, K))
        digits[np.arange(K)[None, :] >= k[:, None]] = 0
        redraw = ~self.in_train(digits, k)              # training never sees a selection or test problem
        while redraw.any():
            fresh = rng.integers(0, 10, size=(int(redraw.sum()), K))
            fresh[np.arange(K)[None, :] >= k[redraw][:, None]] = 0
            digits[redraw] = fresh
            redraw[redraw] = ~self.in_train(fresh, k[redraw])
        csum = np.cumsum(digits, axis=1) % 10           # running sums, (B, slots)
        seq = np.full((batch, self.max_len), PAD, dtype=np.int64)
        seq[:, 0] = self.id["<s>"]
        seq[:, 1:K + 1] = np.where(np.arange(K)[None, :] < k[:, None], d0 + digits, FILL)
        seq[:, K + 1] = EQ
        answer = d0 + csum[np.arange(batch), k - 1]
        for f, name in enumerate(FMT_NAMES):
            for kk in range(lo, hi + 1):
                rows = np.nonzero((fmt == f) & (k == kk))[0]
                if len(rows) == 0:
                    continue
                steps = [s - 1 for s in chain_steps(kk, name)]
                head = [] if name == "direct" else [np.full(len(rows), self.id[FORMATS[name]])]
                cols = head + [d0 + csum[rows, s] for s in steps] + [np.full(len(rows), self.id["A"]), answer[rows],
                                                                     np.full(len(rows), self.id["</s>"])]
                seq[rows, self.prompt_len:self.prompt_len + len(cols)] = np.stack(cols, axis=1)
        return seq

    def prompt_answers(self, seq) -> list[int]:
        import numpy as np
        d = seq[:, 1:self.slots + 1] - self.id["0"]
        return (np.where((d >= 0) & (d < 10), d, 0).sum(1) % 10).tolist()


register(Digits)
