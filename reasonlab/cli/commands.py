"""Every command's arguments as a dataclass: its flags, their help and their choices are generated from these (and
from the configs they nest), and each validate() checks the values before any work. Torch-free: `--help` and a
usage error never load torch.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from ..core.config import Bound, Count, Every, NTest, NTest0, Positive, Seed, Steps, Temperature
from ..runner.config import LabConfig, SweepConfig
from ..tasks import get, load_file
from ..train.config import RLConfig

ReportTo = Literal["none", "tensorboard"]


def known_task(obj) -> None:
    """--task-file's tasks registered, then --task names a registered task with valid knobs (ValueError naming the
    choices)."""
    for path in obj.task_file:
        load_file(path)
    if obj.task is not None:
        get(obj.task)


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
    seed: Seed = 0
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
class RunExperiment:
    lab: LabConfig = field(default_factory=LabConfig)
    """where and how it runs: the lab's options (the experiment's results are the lab's: <out>/<name>/)"""
    report_only: bool = False
    """only rebuild the report from finished results (a re-plot)"""


@dataclass
class Sweep:
    name: str
    """the experiment swept"""
    sweep: SweepConfig = field(default_factory=SweepConfig)
    """where and how the cells run"""
    grid: tuple[str, ...] = ()
    """grid axes FIELD=V1,V2 over fields of the experiment's config (dotted into nested ones; a tuple value as
    a+b+c)"""
    set: tuple[str, ...] = ()
    """fields FIELD=V fixed in every cell, e.g. steps=30"""
    config: str | None = None
    """a TOML grid (tables [grid] and [set]; seeds, quick)"""
    report_only: bool = False
    """only rebuild the table and the cells' pages from finished results"""


@dataclass
class Pretrain:
    task: str = "digits"
    """the task (`reasonlab.tasks`: digits, modprod, compose, add; knobs after colons: "compose:n_f=4")"""
    task_file: tuple[str, ...] = ()
    """a task of your own: a Python file that registers it (docs/your_task.md); then --task names it"""
    seed: Seed = 0
    """the base model's seed"""
    recipe: Literal["base", "spec"] = "base"
    """our recipe or the spec's"""
    steps: tuple[Steps, ...] | None = None
    """steps per phase (a gated phase: the most)"""
    learning_rate: Positive | None = None
    """peak learning rate (default: the recipe's)"""
    batch: Count | None = None
    """sequences per step (default: the recipe's)"""
    name: str | None = None
    """cache name (default base-seed<seed>)"""
    quick: bool = False
    """30 steps per phase, no cache (a smoke test)"""
    n_test: NTest = 500
    """test problems per k of the evaluation at the end"""
    machine: Machine = field(default_factory=Machine)
    """where the model is cached and trained"""

    def validate(self) -> None:
        known_task(self)


@dataclass
class Eval:
    task: str = "digits"
    """the task (`reasonlab.tasks`: digits, modprod, compose, add; knobs after colons: "compose:n_f=4"); with
    --checkpoint the checkpoint's: --task may only change its knobs"""
    task_file: tuple[str, ...] = ()
    """a task of your own: a Python file that registers it (docs/your_task.md); then --task names it"""
    n_test: NTest = 500
    """test problems per k"""
    problem_seed: Seed = 12345
    """seed of the problems drawn"""
    json: str | None = None
    """also write the summary to this JSON file"""
    model: Model = field(default_factory=Model)
    """which model"""
    machine: Machine = field(default_factory=Machine)
    """where the model is cached and run"""

    def validate(self) -> None:
        known_task(self)


@dataclass
class Sample:
    problem: str
    """the problem as the task shows it, its connecting words optional: digits "3 5 9 2 7" (or 35927), modprod
    "3 5 0 2", compose "4 then f1 f0 f1", add "473 215" (or "473 + 215"); or the prompt's words without the filler"""
    task: str = "digits"
    """the task (`reasonlab.tasks`: digits, modprod, compose, add; knobs after colons: "compose:n_f=4"); with
    --checkpoint the checkpoint's: --task may only change its knobs"""
    task_file: tuple[str, ...] = ()
    """a task of your own: a Python file that registers it (docs/your_task.md); then --task names it"""
    force: str | None = None
    """force a format: A, S or T"""
    temperature: Temperature = 0.0
    """0 = greedy"""
    samples: Count = 1
    """outputs sampled (at --temperature)"""
    budget: int | None = None
    """chain steps allowed, 0..the task's largest k (needs a budget model: `reasonlab l1` saves one per variant and
    seed in the model cache, e.g. --checkpoint ~/.cache/reasonlab/l1-exact-seed0)"""
    model: Model = field(default_factory=Model)
    """which model"""
    machine: Machine = field(default_factory=Machine)
    """where the model is cached and run"""

    def validate(self) -> None:
        known_task(self)
        budgets = get(self.task).budgets      # the checkpoint's task is checked again once it is known (guard)
        if self.budget is not None and self.budget not in budgets:
            raise ValueError(f"--budget must be in {budgets[0]}..{budgets[-1]}, got {self.budget}")


@dataclass
class Train:
    rl: RLConfig = field(default_factory=RLConfig)
    """the RL config: --algo picks the preset, every other flag overrides one of its fields"""
    task_file: tuple[str, ...] = ()
    """a task of your own: a Python file that registers it (docs/your_task.md); then --task names it"""
    out: str | None = None
    """the run directory: config.json, metrics.jsonl, checkpoints, plots (default runs/train-<algo>-seed<seed>)"""
    resume: bool = False
    """continue the run in --out from its checkpoint"""
    eval_every: Every = 0
    """greedy evaluation every N steps (0: never)"""
    n_val: Count = 200
    """problems per k of the greedy evaluation on validation problems (every --eval-every steps, and at the end)"""
    log_kl: bool = False
    """log KL to the base even when beta = 0"""
    report_to: ReportTo = "none"
    """tensorboard: event files of the run under <out>/tensorboard/"""
    model: Model = field(default_factory=Model)
    """the starting model"""
    machine: Machine = field(default_factory=Machine)
    """where models are cached and trained"""

    def validate(self) -> None:
        for path in self.task_file:        # before the RL config's check of its task
            load_file(path)


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
    tasks: str | None = "results/lab"
    """the lab run the tasks' table is written from (its base experiment per task; "" or none: leave the table)"""
    readme: str = "README.md"
    """the README holding the block"""
    check: bool = False
    """exit 1 if the block is out of date, write nothing"""


@dataclass
class ExportHF:
    dir: str
    """the directory to write (new, empty, or an earlier export, which is replaced)"""
    n_test: NTest0 = 200
    """test problems per k for the model card's accuracy table (0: no table)"""
    task: str = "digits"
    """the task (`reasonlab.tasks`: digits, modprod, compose, add; knobs after colons: "compose:n_f=4"); with
    --checkpoint the checkpoint's: --task may only change its knobs"""
    task_file: tuple[str, ...] = ()
    """a task of your own: a Python file that registers it (docs/your_task.md); then --task names it"""
    model: Model = field(default_factory=Model)
    """which model"""
    machine: Machine = field(default_factory=Machine)
    """where the model is cached and run"""

    def validate(self) -> None:
        known_task(self)


@dataclass
class ExportDataset:
    dir: str
    """the directory to write (new, empty, or an earlier dataset export, which is replaced)"""
    task: str = "digits"
    """the task (`reasonlab.tasks`: digits, modprod, compose, add; knobs after colons: "compose:n_f=4")"""
    task_file: tuple[str, ...] = ()
    """a task of your own: a Python file that registers it (docs/your_task.md); then --task names it"""
    style: Literal["trl", "verl"] = "trl"
    """trl: a DatasetDict saved with save_to_disk; verl: train/validation/test.parquet in verl's layout"""
    n_train: Annotated[int, Bound(1, 100_000)] = 1000
    """training problems per k (drawn with repeats from the training part; at most 100,000)"""
    n_test: NTest = 100
    """validation and test problems per k (distinct; at most N_TEST_MAX, 25,000: digits' k = 5 has no more)"""
    seed: Seed = 0
    """seed of the draws"""
    budget_kind: Literal["none", "exact", "max"] = "none"
    """budget prompts for budget models (a budget column, for L1's rewards): B<b> (exact) or M<b> (max)"""

    def validate(self) -> None:
        known_task(self)


@dataclass
class ImportHF:
    dir: str
    """a Hugging Face directory (an export of ours trained elsewhere, e.g. by TRL): config.json, tokenizer.json,
    model.safetensors"""
    out: str | None = None
    """checkpoint stem to write (default <cache>/imported/<the directory's name>)"""
    cache_dir: str | None = None
    """model cache (default $REASONLAB_CACHE or ~/.cache/reasonlab)"""
    task: str | None = None
    """the task (`reasonlab.tasks`: digits, modprod, compose, add; knobs after colons: "compose:n_f=4"; default: the
    one the directory's config.json names, else digits); another task than config.json's is refused"""
    task_file: tuple[str, ...] = ()
    """a task of your own: a Python file that registers it (docs/your_task.md); then --task names it"""

    def validate(self) -> None:
        known_task(self)


COMMANDS = {
    "lab": (Lab, "the main job: the core experiments (--all: every one), one run directory, report.html"),
    "sweep": (Sweep, "a grid over any experiment's config: each cell run per seed, its claims checked"),
    "pretrain": (Pretrain, "train (or load) the base model and print its evaluation table"),
    "eval": (Eval, "accuracy per k x {free, A, S, T}, format shares, length, chain correctness"),
    "sample": (Sample, "show the model's output on one problem"),
    "train": (Train, "one RL run from a model: GRPO and its relatives (a run directory that resumes)"),
    "findings diff": (FindingsDiff, "the claims whose verdict differs between two runs"),
    "findings readme": (FindingsReadme, "write (or --check) the README's findings block from a findings.json"),
    "export hf": (ExportHF, "write a model as a Hugging Face directory (transformers loads it; safetensors + JSON)"),
    "export dataset": (ExportDataset, "write a task's train/validation/test parts for TRL or verl"),
    "import hf": (ImportHF, "bring a Hugging Face directory (e.g. trained by TRL) back as a checkpoint"),
}
"""Every command but the experiments' own: its arguments and its one-line help (a two-word name is a command with
actions). Each registered experiment is a command too (`reasonlab rl`), whose flags are its Config's fields and
RunExperiment's."""

SKIP = {"lab": {"lab.configs", "lab.seeds_per"}, "train": {"rl.seed"},
        "sweep": {"sweep.exp", "sweep.grid", "sweep.fixed"}}
EXPERIMENT_SKIP = {"lab.configs", "lab.only", "lab.all", "lab.experiment", "lab.seeds_per", "lab.power_seeds",
                   "lab.most_seeds"}
VALIDATED_LATER = (LabConfig, SweepConfig)
"""Configs the command completes before it validates them (the lab's experiments, a sweep's grid)."""

