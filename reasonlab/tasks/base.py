"""A task: a family of step-checkable problems, and everything the lab derives from its rule.

A task is a small state machine run for k unit steps. Its file says only what is particular to it: how an instance
is drawn, the state before the first step, the state after each step, how the answer follows from the states, and
how prompts and answers are written. Everything else is derived here, the same way for every task:

    the three formats       after "=" the model writes a format token, then
                                A (direct): "A <answer> </s>"
                                S (short):  "S <state>.. A <answer> </s>"   the state after every second step and the last
                                T (full):   "T <state>.. A <answer> </s>"   the state after every step
                            (`chain_steps` says which; budgets count these states, "chain steps")
    the vocabulary          the shared specials, the task's words, STaR's hint tokens (one per answer, where there
                            are few answers), the budget tokens B0.., L1-Max's M0..
    parse and check         any output read as {fmt, chain, answer, ok, ...}; `check` gives template-ok, answer-ok,
                            one label per written step and the first error, from the problem alone
    corruption              one chain state replaced, and the answer the rest of the chain would then imply
    the parts               every instance belongs to train, val or test by a hash of the instance, so sets drawn
                            from different parts are disjoint whatever the seeds and knobs
    draws                   evaluation sets without repeats, keyed on (task, knobs, part, k, seed); a small k
                            (at most ENUMERATE_MAX instances) is enumerated, and a part no larger than the set asked
                            for is taken whole

A problem is a plain record (`Problem`): the task's name, k, the instance (small ints) and the knobs it was drawn
under. Knobs change the distribution of instances, never the rule, so one model serves a task whatever its knobs.
(The parts and draws are in `draws.py`, the shared records in `records.py`, the registry in `registry.py`.)
"""
from __future__ import annotations

import random
from typing import Any, Iterable

from .draws import Draws
from .records import (
    BOS,
    EQ,
    FMT_OF,
    FORMATS,
    OUT_SLACK,
    SPECIALS,
    Problem,
    Verdict,
    chain_steps,
)


class Task(Draws):
    """The base of every task (see the module docstring). A subclass sets the class attributes and the rule's
    methods marked "the task's"; `register` adds it to the registry."""

    name: str = ""
    """the registry name (a word: letters, digits, _)"""
    summary: str = ""
    """one line: what the task asks"""
    words: tuple[str, ...] = ()
    """the task's words, after the shared specials (the prompt's, the states', the answers')"""
    state_words: tuple[str, ...] = ()
    """the word that writes state s (states are the ints 0..len - 1)"""
    answer_words: tuple[str, ...] = tuple(str(d) for d in range(10))
    """the words an answer is written in (a multi-word answer reads them in order)"""
    k_min: int = 2
    k_max: int = 8
    slots: int = 8
    """prompt words between <s> and "=", whatever k: step t is always the same distance from its operands"""
    answer_len_max: int = 1
    """the longest answer in words"""
    n_answers: int | None = 10
    """answers are the ints 0..n_answers - 1 (None: unbounded, e.g. a sum)"""
    knob_defaults: dict[str, Any] = {}
    """the knobs and their defaults; each changes the distribution of instances, never the rule"""
    max_len: int | None = None
    """the longest sequence (None: prompt + the longest right output + OUT_SLACK)"""
    direct_bar: float = 0.0
    """the base recipe's gate on forced A at the smallest k (0: none; a task sets it only where a direct answer is
    known to be learnable there)"""
    recipe_steps: float = 1.0
    """the base recipe's gated phase may run this many times its steps (a task whose chains take longer to learn)"""
    state_name: str = "state"
    """what the lessons call a chain's state (digits: "running sum")"""
    state_short: str = "state"
    """its short name in a claim (digits: "sum")"""
    past_k_min: str = "Beyond the smallest k"
    """how the lessons name the sizes past the smallest (digits: where a direct answer is at chance)"""

    def __init__(self, **knobs):
        unknown = sorted(set(knobs) - set(self.knob_defaults))
        if unknown:
            raise ValueError(f"task {self.name} has no knob {unknown[0]!r}"
                             + (f": choose from {', '.join(self.knob_defaults)}" if self.knob_defaults else ""))
        self.knobs = {k: type(self.knob_defaults[k])(v) for k, v in {**self.knob_defaults, **knobs}.items()}
        self.check_knobs()
        self.vocab = list(SPECIALS) + list(self.words)
        self.id = {w: i for i, w in enumerate(self.vocab)}
        if len(self.id) != len(self.vocab):
            raise ValueError(f"task {self.name}: a word is repeated in its vocabulary")
        self.n_hints = self.n_answers if self.n_answers is not None and self.n_answers <= 10 else 0
        self.hint_vocab = self.vocab + [f"H{a}" for a in range(self.n_hints)]
        self.budgets = tuple(range(self.k_max + 1))
        self.budget_vocab = self.hint_vocab + [f"B{b}" for b in self.budgets]
        self.l1_vocab = self.budget_vocab + [f"M{b}" for b in self.budgets]
        self.hint0, self.budget0, self.max_budget0 = len(self.vocab), len(self.hint_vocab), len(self.budget_vocab)
        self.prompt_len = self.slots + 2
        self.max_out = self.max_len - self.prompt_len if self.max_len else 3 + self.k_max + self.answer_len_max + OUT_SLACK
        self.max_len = self.prompt_len + self.max_out
        self._state = {w: s for s, w in enumerate(self.state_words)}
        self._answer_word = set(self.answer_words)
        self._state_of_id = {self.id[w]: s for w, s in self._state.items()}   # read per token by parsers and searches
        self._answer_ids = frozenset(self.id[w] for w in self._answer_word)
        self._task_ids = list(range(len(SPECIALS), len(self.vocab)))
        self._chance: dict[int, float] = {}

    # ----------------------------------------------------------------------------------------------------------
    # The task's: its rule, as a state machine, and how it is written.

    def check_knobs(self) -> None:
        """Raise ValueError naming a knob whose value is out of range (the task's; default: nothing to check)."""

    def sample(self, rng: random.Random, k: int) -> tuple[int, ...]:
        """The task's: one instance of size k drawn from `rng` under self.knobs."""
        raise NotImplementedError

    def first_state(self, p: Problem) -> int:
        """The task's: the state before the first step."""
        raise NotImplementedError

    def next_state(self, p: Problem, t: int, s: int) -> int:
        """The task's: the state after unit step t (1-based), the state before it being s."""
        raise NotImplementedError

    def answer_of(self, p: Problem, states: list[int]) -> int:
        """The answer the states after every step imply (default: the last state)."""
        return states[-1]

    def prompt_words(self, p: Problem) -> list[str]:
        """The `slots` words between <s> and "=" (default: each value v of the instance as the word words[v], then
        "_" up to the slots)."""
        return [self.words[v] for v in p.x] + ["_"] * (self.slots - p.k)

    def read_prompt(self, words: list[str]) -> Problem:
        """The problem back from its `slots` prompt words (default: prompt_words' inverse); ValueError when they are
        none of the task's."""
        vals = [w for w in words if w != "_"]
        if (len(words) != self.slots or not all(w in self.words for w in vals) or "_" in words[:len(vals)]
                or not self.k_min <= len(vals) <= self.k_max):
            raise ValueError(f"not a prompt of the {self.name} task: {' '.join(words)!r:.60}")
        return self.problem([self.words.index(w) for w in vals])

    def k_of(self, x: tuple[int, ...]) -> int:
        """The size of an instance (default: its length)."""
        return len(x)

    def write_answer(self, p: Problem, answer: int) -> list[str]:
        """The words that write `answer` (default: one answer word)."""
        return [self.answer_words[answer]]

    def read_answer(self, words: list[str]) -> int | None:
        """The answer written by these answer words (default: one word, its index; None if not one)."""
        return self.answer_words.index(words[0]) if len(words) == 1 else None

    def answer_len(self, k: int) -> int:
        """Words in an answer of a size-k problem (default: 1)."""
        return 1

    def show(self, p: Problem) -> str:
        """The problem as a person reads it (default: its prompt words without the filler)."""
        return " ".join(w for w in self.prompt_words(p) if w != "_")

    def support(self, k: int) -> Iterable[tuple[int, ...]] | None:
        """Every instance of size k that any knobs can draw, when there are at most ENUMERATE_MAX (the parts are then
        ranked); None when there are more (the default)."""
        return None

    def possible(self, x: tuple[int, ...]) -> bool:
        """Whether self.knobs can draw this instance (default: every instance of the support)."""
        return True

    uniform: bool = True
    """whether self.knobs draw the possible instances uniformly (then an enumerated k samples its part uniformly)"""

    # ----------------------------------------------------------------------------------------------------------
    # Derived for every task.

    @property
    def spec(self) -> str:
        """The task as one string: its name, then the knobs that differ from their defaults ("compose:n_f=3")."""
        changed = [f"{k}={v}" for k, v in self.knobs.items() if v != self.knob_defaults[k]]
        return ":".join([self.name] + changed)

    def problem(self, x, k: int | None = None) -> Problem:
        """The problem of an instance (a sequence of ints), drawn under this task's knobs."""
        x = tuple(int(v) for v in x)
        return Problem(self.name, self.k_of(x) if k is None else k, x, tuple(sorted(self.knobs.items())))

    def read_text(self, text: str) -> Problem:
        """The problem a person typed (`reasonlab sample`): as `show` writes it, its connecting words ("+", "then")
        optional ("473 215" or "473 + 215" for add), or as its prompt words without the filler ("4 f1 f0 f1"); one
        run of single-character words stands for the words `show` writes ("35927" for "3 5 9 2 7"). Read back
        through `read_prompt` and accepted only where the problem writes the text again; ValueError (one line)
        otherwise."""
        chunks = text.replace(",", " ").split()
        mine = [w for w in self.words if w not in SPECIALS]

        def as_words(chunk: str) -> list[str] | None:   # a chunk as the task's words: itself, or its characters
            return [chunk] if chunk in mine else list(chunk) if all(c in mine for c in chunk) else None

        def parts(words: list[str]) -> tuple[list[str], set[str]]:   # (chunks of the task's words, the others)
            return [w for w in words if as_words(w) is not None], {w for w in words if as_words(w) is None}
        kept, other = parts(chunks)
        flat = [w for c in kept for w in as_words(c)]
        found = []
        if len(flat) <= self.slots:               # the words as the prompt's
            try:
                found.append(self.read_prompt(flat + ["_"] * (self.slots - len(flat))))
            except ValueError:
                pass
        if flat and all(w.isascii() and w.isdigit() for w in flat):   # the numbers as the instance
            found.append(self.problem(int(w) for w in flat))

        def valid(p: Problem) -> bool:
            try:
                return self.read_prompt(self.prompt_words(p)) == p
            except (ValueError, IndexError, KeyError):
                return False
        found = [p for p in found if valid(p)]
        tests = (lambda p: parts(self.show(p).split())[0] == kept and other <= parts(self.show(p).split())[1],
                 lambda p: [w for w in self.prompt_words(p) if w != "_"] == chunks,
                 lambda p: len(chunks) == 1 and "".join(parts(self.show(p).split())[0]) == chunks[0])
        for test in tests:
            for p in found:
                if test(p):
                    return p
        k = min(self.k_max, self.k_min + 3)
        example = self.show(self.problem(self.sample(random.Random(0), k), k))
        raise ValueError(f"problem {text!r:.40} is not one of the {self.name} task's ({self.summary}; k must be in "
                         f"{self.k_min}..{self.k_max}): write it as {example!r}")

    def ks(self, k_range: tuple[int, int] | None = None) -> range:
        lo, hi = k_range or (self.k_min, self.k_max)
        return range(lo, hi + 1)

    def states(self, p: Problem) -> list[int]:
        """The gold state after every unit step (k of them)."""
        s, out = self.first_state(p), []
        for t in range(1, p.k + 1):
            s = self.next_state(p, t, s)
            out.append(s)
        return out

    def answer(self, p: Problem) -> int:
        return self.answer_of(p, self.states(p))

    def solution(self, p: Problem, fmt: str) -> list[str]:
        """The right output after "=", as words: the format token, the chain's states, "A", the answer, </s>."""
        ans = self.write_answer(p, self.answer(p))
        if fmt == "direct":
            return ["A", *ans, "</s>"]
        st = self.states(p)
        return [FORMATS[fmt], *(self.state_words[st[i - 1]] for i in chain_steps(p.k, fmt)), "A", *ans, "</s>"]

    def corrupt(self, p: Problem, fmt: str, j: int, state: int) -> tuple[list[str], int]:
        """The right output in `fmt` with its j-th chain state (0-based) replaced by `state`, cut after that state,
        and the answer that the rest of the chain would then imply: (output words up to the corrupted state, implied
        answer). The faithfulness and label-noise lessons read it."""
        steps = chain_steps(p.k, fmt)
        if not 0 <= j < len(steps):
            raise ValueError(f"chain step {j} of a {fmt} chain of {len(steps)} steps")
        st = self.states(p)
        t = steps[j]
        follow = st[:t - 1] + [state]
        for u in range(t + 1, p.k + 1):
            follow.append(self.next_state(p, u, follow[-1]))
        words = [FORMATS[fmt]] + [self.state_words[st[i - 1]] for i in steps[:j]] + [self.state_words[state]]
        return words, self.answer_of(p, follow)

    def prompt_ids(self, p: Problem) -> list[int]:
        """<s>, the prompt words, "="."""
        return [BOS] + [self.id[w] for w in self.prompt_words(p)] + [EQ]

    def encode(self, p: Problem, fmt: str) -> tuple[list[int], int]:
        """Full sequence ids, and the index from which targets count (the "=", so the format token is learned)."""
        prompt = self.prompt_ids(p)
        return prompt + [self.id[w] for w in self.solution(p, fmt)], len(prompt) - 1

    def hint_prompt_ids(self, p: Problem) -> list[int]:
        """The prompt with <s> replaced by the answer's hint token (models with hint_vocab; STaR's rationalization)."""
        if not self.n_hints:
            raise ValueError(f"task {self.name} has no hint tokens (its answers are too many)")
        return [self.hint0 + self.answer(p)] + self.prompt_ids(p)[1:]

    def with_budget(self, prompt: list[int], budget: int) -> list[int]:
        """A prompt (ids ending with "=") with its "=" replaced by B<budget>; a budget outside 0..k_max raises."""
        if budget not in self.budgets:
            raise ValueError(f"budget {budget!r} must be an integer in {self.budgets[0]}..{self.budgets[-1]} (chain steps)")
        return prompt[:-1] + [self.budget0 + budget]

    def budget_prompt_ids(self, p: Problem, budget: int) -> list[int]:
        """The prompt with "=" replaced by the budget token B<budget> ("think for b chain steps")."""
        return self.with_budget(self.prompt_ids(p), budget)

    def max_budget_prompt_ids(self, p: Problem, budget: int) -> list[int]:
        """The prompt with "=" replaced by L1-Max's M<budget> ("at most b chain steps")."""
        return self.budget_prompt_ids(p, budget)[:-1] + [self.max_budget0 + budget]

    def is_state(self, token: int) -> bool:
        """Whether a token id (a Python or numpy int, as `.tolist()` gives them) writes a chain state."""
        return token in self._state_of_id

    def state_of(self, token: int) -> int:
        return self._state_of_id[token]

    def is_answer_word(self, token: int) -> bool:
        """Whether a token id is one of the words an answer is written in."""
        return token in self._answer_ids

    def state_ids(self) -> list[int]:
        """The ids of the state words, in state order."""
        return [self.id[w] for w in self.state_words]

    def task_ids(self) -> list[int]:
        """The ids of the task's own words (misread's noise blurs their embeddings)."""
        return self._task_ids

    def parse(self, out_ids: list[int]) -> dict:
        """Read what a model wrote after "=".

        Returns {"fmt": "direct"|"short"|"full"|None, "chain": [state], "answer": int|None, "ok": bool,
        "length": tokens up to and including the first </s>, "answer_end": tokens up to the end of the answer (its
        </s> included when it follows; `length` when no answer was read), "answer_len": the answer's words}. `ok`
        means the template holds: a format token, states, "A", an answer, "</s>", and a chain exactly when the
        format is not direct (`check` adds what needs the problem: the number of steps, the answer's length). An
        answer is read even when the template is broken after it. Never raises: ids outside the vocabulary read as
        an unknown word.
        """
        vocab = self.vocab
        words = [vocab[i] if 0 <= i < len(vocab) else "?" for i in out_ids]
        if "</s>" in words:
            words = words[:words.index("</s>") + 1]
        res = {"fmt": None, "chain": [], "answer": None, "ok": False, "length": len(words), "answer_end": len(words),
               "answer_len": 0}
        if not words or words[0] not in FMT_OF:
            return res
        res["fmt"] = FMT_OF[words[0]]
        i = 1
        if res["fmt"] != "direct":  # "A" is both the direct format token and the answer marker
            while i < len(words) and words[i] in self._state:
                res["chain"].append(self._state[words[i]])
                i += 1
            if i >= len(words) or words[i] != "A":
                return res
            i += 1
        j = i
        while j < len(words) and j - i < self.answer_len_max and words[j] in self._answer_word:
            j += 1
        if j > i:
            res["answer"] = self.read_answer(words[i:j])
            closed = j < len(words) and words[j] == "</s>"
            res["answer_end"], res["answer_len"] = j + closed, j - i
            res["ok"] = res["answer"] is not None and closed and (res["fmt"] == "direct") == (not res["chain"])
        return res

    def gold_chain(self, p: Problem, fmt: str | None) -> list[int]:
        """The states a right chain of this format writes ([] for direct or no format)."""
        if fmt in (None, "direct"):
            return []
        st = self.states(p)
        return [st[i - 1] for i in chain_steps(p.k, fmt)]

    def check(self, p: Problem, parsed: dict) -> Verdict:
        """Check a parsed output step by step against the problem alone (no answer key)."""
        want = self.gold_chain(p, parsed["fmt"])
        chain = parsed["chain"]
        steps = tuple(j < len(want) and c == want[j] for j, c in enumerate(chain))
        answer_ok = parsed["answer"] is not None and parsed["answer"] == self.answer(p)
        template_ok = bool(parsed["ok"] and len(chain) == len(want) and parsed["answer_len"] == self.answer_len(p.k))
        wrong = [j for j, s in enumerate(steps) if not s]
        if not wrong and not (answer_ok and len(chain) == len(want)):
            wrong = [len(steps)]
        return Verdict(template_ok, answer_ok, steps, wrong[0] if wrong else None)

    def check_chain(self, p: Problem, parsed: dict) -> bool | None:
        """Process verifier: every state right and the answer right. None for a direct answer (nothing to check),
        False for a broken template."""
        if parsed["fmt"] is None or not parsed["ok"]:
            return False
        if parsed["fmt"] == "direct":
            return None
        return parsed["chain"] == self.gold_chain(p, parsed["fmt"]) and parsed["answer"] == self.answer(p)

    def correct(self, p: Problem, parsed: dict) -> bool:
        """The answer is right."""
        return parsed["answer"] is not None and parsed["answer"] == self.answer(p)
