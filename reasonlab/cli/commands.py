"""Every command's arguments as a dataclass: its flags, their help and their choices are generated from these (and
from the configs they nest), and each validate() checks the values before any work. Torch-free: `--help` and a
usage error never load torch.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..core.config import flag
from ..methods.config import ADAPTIVE_METHODS, KINDS, NS, SEARCH_METHODS, VARIANTS, StarConfig, Variant
from ..runner.config import LabConfig
from ..runner.executor import ExecConfig
from ..train.config import RLConfig

Kind = Literal[KINDS]
SearchMethod = Literal[SEARCH_METHODS]
AdaptiveMethod = Literal[ADAPTIVE_METHODS]
ReportTo = Literal["none", "tensorboard"]


def positive(obj, *names: str) -> None:
    for n in names:
        v = getattr(obj, n)
        if v is not None and not v > 0:
            raise ValueError(f"{flag(n)} must be positive, got {v}")


def at_least_zero(obj, *names: str) -> None:
    for n in names:
        v = getattr(obj, n)
        if v is not None and not v >= 0:
            raise ValueError(f"{flag(n)} must be >= 0, got {v}")


@dataclass
class Machine:
    cache_dir: str | None = None
    """model cache (default $REASONLAB_CACHE or ~/.cache/reasonlab)"""
    device: str = "cpu"
    """cpu, cuda or cuda:N"""


@dataclass
class Model:
    checkpoint: str | None = None
    """a saved model (stem, .json or .safetensors); default: the cached base model"""
    seed: int = 0
    """seed of the base model to use (and of sampling)"""


@dataclass
class Lab:
    lab: LabConfig = field(default_factory=LabConfig)
    """the lab (its `configs` are each experiment's own; --quick picks their quick sizes)"""
    report_only: bool = False
    """only rebuild the report from finished experiments"""
    screenshot: bool = False
    """render report.html in headless Chromium to report.png and check it"""


@dataclass
class Sweep:
    config: str | None = None
    """a TOML grid (tables [grid] and [set]; seeds, base, eval_n)"""
    grid: tuple[str, ...] = ()
    """grid axes KEY=V1,V2: RLConfig fields, algo, method (adaptive methods)"""
    set: tuple[str, ...] = ()
    """fields KEY=V fixed in every cell, e.g. steps=60"""
    seeds: tuple[int, ...] | None = None
    """every cell runs once per seed (default 0 1 2, or the TOML's)"""
    base: Literal["standard", "quick", "tiny"] | None = None
    """base model recipe (default standard; tiny: for smoke tests)"""
    eval_n: int | None = None
    """greedy evaluation problems per k (default 200)"""
    out: str = "runs/sweep"
    """run directory: cells/, logs/, table.md, plots, report.html"""
    fresh: bool = False
    """rerun units that finished earlier with the same settings"""
    machine: Machine = field(default_factory=Machine)
    """where models are cached and run"""
    execution: ExecConfig = field(default_factory=ExecConfig)
    """where the units run"""
    report_to: ReportTo = "none"
    """tensorboard: event files per RL run under <out>/tensorboard/"""
    wait: bool = False
    """if another process is running a sweep on --out, wait for it instead of stopping"""
    max_units: int = 10_000
    """refuse a grid of more (cell, seed) units than this"""

    def validate(self) -> None:
        positive(self, "eval_n", "max_units")


@dataclass
class Pretrain:
    seed: int = 0
    """the base model's seed"""
    recipe: Literal["base", "spec"] = "base"
    """our recipe or the spec's"""
    steps: tuple[int, ...] | None = None
    """steps per phase (a gated phase: the most)"""
    lr: float | None = None
    """peak learning rate (default: the recipe's)"""
    batch: int | None = None
    """sequences per step (default: the recipe's)"""
    name: str | None = None
    """cache name (default base-seed<seed>)"""
    quick: bool = False
    """30 steps per phase, no cache (a smoke test)"""
    n: int = 500
    """evaluation problems per k"""
    machine: Machine = field(default_factory=Machine)
    """where the model is cached and trained"""

    def validate(self) -> None:
        positive(self, "lr", "batch", "n")
        if self.steps and min(self.steps) < 1:
            raise ValueError(f"--steps must be positive, got {min(self.steps)}")


@dataclass
class Eval:
    n: int = 500
    """problems per k"""
    problem_seed: int = 12345
    """seed of the problems drawn"""
    json: str | None = None
    """also write the summary to this JSON file"""
    model: Model = field(default_factory=Model)
    """which model"""
    machine: Machine = field(default_factory=Machine)
    """where the model is cached and run"""

    def validate(self) -> None:
        positive(self, "n")


@dataclass
class Sample:
    problem: str
    """the digits, e.g. "3 5 9 2 7\""""
    force: str | None = None
    """force a format: A, S or T"""
    temperature: float = 0.0
    """0 = greedy"""
    n: int = 1
    """number of samples"""
    budget: int | None = None
    """chain steps allowed, 0..8 (needs a budget model from `reasonlab budget`)"""
    model: Model = field(default_factory=Model)
    """which model"""
    machine: Machine = field(default_factory=Machine)
    """where the model is cached and run"""

    def validate(self) -> None:
        positive(self, "n")
        at_least_zero(self, "temperature")
        if self.budget is not None and not 0 <= self.budget <= 8:
            raise ValueError(f"--budget must be in 0..8, got {self.budget}")


@dataclass
class Budget:
    seeds: tuple[int, ...] = (0, 1, 2)
    """base-model seeds"""
    variants: tuple[Variant, ...] = VARIANTS
    """exact, max, exact+sft, max+sft (+sft: a supervised warm start first)"""
    steps: int | None = None
    """GRPO steps per variant (default 100)"""
    sft_steps: int | None = None
    """warm-start steps of +sft variants (default 300)"""
    alpha: float | None = None
    """L1's length weight per step (default 0.25)"""
    delta: float | None = None
    """L1-Max's offset (default 0.5)"""
    eval_n: int | None = None
    """test problems per k (default 100)"""
    quick: bool = False
    """tiny sizes and the lab's quick base model (checks the pipeline)"""
    replot: bool = False
    """only redraw the report from --out/seed*.json"""
    out: str = "runs/budget"
    """where the per-seed results, report.md and findings.json go"""
    machine: Machine = field(default_factory=Machine)
    """where models are cached and trained"""

    def validate(self) -> None:
        positive(self, "steps", "alpha", "eval_n")
        at_least_zero(self, "sft_steps", "delta")


@dataclass
class RL:
    rl: RLConfig = field(default_factory=RLConfig)
    """the RL config: --algo picks the preset, every other flag overrides one of its fields"""
    run_dir: str | None = None
    """default runs/rl-<algo>-seed<seed>"""
    resume: bool = False
    """continue the run in --run-dir from its checkpoint"""
    eval_every: int = 0
    """greedy evaluation every N steps (0: never)"""
    eval_n: int = 200
    """problems per k for --eval-every"""
    log_kl: bool = False
    """log KL to the base even when beta = 0"""
    report_to: ReportTo = "none"
    """tensorboard: event files of the run under <run-dir>/tensorboard/"""
    model: Model = field(default_factory=Model)
    """the starting model"""
    machine: Machine = field(default_factory=Machine)
    """where models are cached and trained"""

    def validate(self) -> None:
        positive(self, "eval_n")
        at_least_zero(self, "eval_every")


@dataclass
class TTS:
    n_per_k: int = 2000
    """problems per k"""
    n_max: int = 64
    """samples per problem in the pool (1, 2, 4, ..., 64)"""
    formats: tuple[Literal["A", "S", "T", "free"], ...] = ("A", "S", "T")
    """the pools: a forced format, or free"""
    no_budgets: bool = False
    """skip the budget-forcing sweep"""
    replot: bool = False
    """only redraw the report from --out/results.json"""
    out: str = "runs/tts"
    """where results.json and the report go"""
    model: Model = field(default_factory=Model)
    """which model"""
    machine: Machine = field(default_factory=Machine)
    """where the model is cached and run"""

    def validate(self) -> None:
        positive(self, "n_per_k")
        if self.n_max not in NS:
            raise ValueError(f"--n-max must be one of {', '.join(map(str, NS))}")


@dataclass
class Adaptive:
    seeds: tuple[int, ...] = (0, 1, 2)
    """base-model seeds"""
    methods: tuple[AdaptiveMethod, ...] = ADAPTIVE_METHODS
    """adaptive-thinking rewards compared"""
    steps: int = 200
    """RL steps per run"""
    lr: float = 1e-4
    """learning rate"""
    beta: float = 0.04
    """KL weight to the base model (0: none)"""
    n_eval: int = 300
    """greedy evaluation problems per k"""
    out: str = "runs/adaptive"
    """where the per-seed results and the report go"""
    replot: bool = False
    """only redraw the report from --out/seed<s>.json"""
    machine: Machine = field(default_factory=Machine)
    """where models are cached and trained"""

    def validate(self) -> None:
        positive(self, "steps", "lr", "n_eval")
        at_least_zero(self, "beta")


@dataclass
class Star:
    seeds: tuple[int, ...] = (0, 1, 2)
    """base-model seeds"""
    star: StarConfig = field(default_factory=StarConfig)
    """the STaR config (its seed is each base model's)"""
    start: Literal["base", "few-chains"] = "base"
    """the standard base model, or one shown only --n-chains worked chains (and hints)"""
    n_chains: int = 1000
    """worked chains the few-chains base sees"""
    ablations: bool = False
    """also run the variants: base start: greedy single sample, chain filter, continue, pool; few-chains start:
    forced T sampling with the answer or chain filter, with and without rationalization"""
    out: str = "runs/star"
    """where runs.json and the report go"""
    machine: Machine = field(default_factory=Machine)
    """where models are cached and trained"""

    def validate(self) -> None:
        positive(self, "n_chains")


@dataclass
class VerifierTrain:
    kind: tuple[Kind, ...] = KINDS
    """the verifiers: outcome (orm), process with the rule's labels (prm), process with Math-Shepherd's (prm-mc)"""
    thinker: Literal["erring", "base"] = "erring"
    """whose samples the verifiers learn from and are tested on"""
    seeds: tuple[int, ...] = (0, 1, 2)
    """thinker seeds"""
    n_test: int = 100
    """held-out problems per k for the quality check"""
    out: str = "runs/verifier"
    """where the per-seed results, plots and table go"""
    machine: Machine = field(default_factory=Machine)
    """where models are cached and trained"""

    def validate(self) -> None:
        positive(self, "n_test")


@dataclass
class Search:
    method: tuple[SearchMethod, ...] = SEARCH_METHODS
    """search methods; greedy and majority always run"""
    thinker: Literal["erring", "base", "quick"] = "erring"
    """the generator searched over"""
    seeds: tuple[int, ...] = (0, 1, 2)
    """thinker seeds"""
    force: Literal["S", "T"] = "S"
    """the chain format searched over"""
    n_max: int = 64
    """largest N (1, 2, 4, ..., 64)"""
    width: int = 4
    """M: expansions per beam per step"""
    n_test: int = 100
    """test problems per k"""
    n_val: int = 50
    """validation problems per k (strategy selection)"""
    agg: Literal["last", "min", "prod"] = "min"
    """step scores -> one per output"""
    temperature: float = 1.0
    """sampling temperature"""
    verifiers: tuple[Kind, ...] = KINDS
    """learned verifiers"""
    search_verifiers: tuple[str, ...] = ("prm", "oracle")
    """verifiers guiding beam search and DVTS"""
    out: str = "runs/search"
    """where the per-seed results, findings, tables and plots go"""
    replot: bool = False
    """only redraw plots and findings from --out/seed*.json"""
    machine: Machine = field(default_factory=Machine)
    """where models are cached and trained"""

    def validate(self) -> None:
        positive(self, "n_max", "width", "n_test", "n_val", "temperature")


@dataclass
class FindingsDiff:
    a: str
    """a run directory or its findings.json"""
    b: str
    """another one"""


@dataclass
class FindingsReadme:
    findings: str = "results/lab/findings.json"
    """the findings the block is written from"""
    readme: str = "README.md"
    """the README holding the block"""
    check: bool = False
    """exit 1 if the block is out of date, write nothing"""


COMMANDS = {
    "lab": (Lab, "the main job: every experiment of the lecture, one run directory, report.html"),
    "sweep": (Sweep, "a grid over RL settings, adaptive methods and seeds, on an executor"),
    "pretrain": (Pretrain, "train (or load) the base model and print its evaluation table"),
    "eval": (Eval, "accuracy per k x {free, A, S, T}, format shares, length, chain correctness"),
    "sample": (Sample, "show the model's output on one problem"),
    "budget": (Budget, "thinking on a budget: L1-Exact / L1-Max by GRPO against s1 forcing"),
    "rl": (RL, "RL from the base model: GRPO and its relatives (one run directory per run)"),
    "tts": (TTS, "test-time compute: budgets, voting, verifiers, pass@N, the compute frontier"),
    "adaptive": (Adaptive, "RL with length/cost-aware rewards: when does the model choose to think?"),
    "star": (Star, "STaR self-improvement: sample, verify, fine-tune, round after round"),
    "verifier train": (VerifierTrain, "train verifiers on the thinker's samples; AUROC and calibration on held-out ones"),
    "search": (Search, "best-of-N, weighted majority, beam search, DVTS with verifiers; findings"),
    "findings diff": (FindingsDiff, "the claims whose verdict differs between two runs"),
    "findings readme": (FindingsReadme, "write (or --check) the README's findings block from a findings.json"),
}
"""Every command: its arguments and its one-line help (a two-word name is a command with actions)."""

SKIP = {"lab": {"lab.configs"}, "rl": {"rl.seed"}, "star": {"star.seed"}}
"""Fields that are not flags: set by the command itself."""
