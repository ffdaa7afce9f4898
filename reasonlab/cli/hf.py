"""`reasonlab export hf | export dataset | import hf`: the Hugging Face bridge on the command line (reasonlab.hf).
The model export and the import need safetensors and JSON only; the dataset export needs the optional extra."""
from __future__ import annotations

import importlib.util
import os
import sys

from .. import __version__
from ..hf.card import example, model_card
from ..hf.data import SPLITS, dataset
from ..hf.export import FILES, check_target, export_hf, import_hf, replace_dir
from ..io.checkpoint import CheckpointError, load_model, save_model
from ..io.files import cache_dir, check_name, resolve, writable_dir
from ..tasks import get
from ..train.sft import base_cfg, base_name
from ..train.zoo import base_model
from .guard import UsageError, check_device

DATASET_FILES = ("dataset_dict.json", *SPLITS, *(f"{s}.parquet" for s in SPLITS))
"""What a dataset export writes (save_to_disk's index and split folders, or verl's parquet files)."""


def cmd_export(args):
    if args.action == "hf":
        export_model(args)
    else:
        export_dataset(args)


def export_model(args):
    """The base model of --seed and --task, or --checkpoint (of its own task), as a transformers directory with its
    model card."""
    check_target(args.dir, FILES)   # new, empty or an earlier export: said before the card's evaluation runs
    device = check_device(args.device)
    log = lambda s: print(s, file=sys.stderr)   # noqa: E731
    if args.checkpoint:
        try:
            model, meta = load_model(resolve(args.checkpoint))
        except CheckpointError as e:
            raise UsageError(str(e)) from None
        name, source = os.path.basename(resolve(args.checkpoint)), f"The checkpoint `{resolve(args.checkpoint)}`."
        training = {k: v for k, v in meta.items() if k not in ("sha256", "model")}
    else:
        model = base_model(args.seed, cache=args.cache_dir, device=device, log=log, task=args.task)
        name = base_name(args.seed, task=args.task)
        source = (f"The lab's base model for seed {args.seed}: supervised on the task's three formats by the base "
                  "recipe (`reasonlab.train.sft.BASE_CFG`: T first, then S and T until forced S and T reach 0.95, "
                  "then the 50/30/20 A/S/T mix, which sets its preference for answering directly).")
        training = base_cfg(args.seed, task=args.task)
    card = model_card(model.cpu().eval(), f"reasonlab {name}", source, training, args.n_test, task=args.task)
    target = export_hf(model, args.dir, card, task=args.task)
    print(f"exported {name} ({model.cfg.vocab_size}-word vocabulary) to {target}")
    print(f"  task {args.task} (config.json's reasonlab_task); transformers: "
          f"AutoModelForCausalLM.from_pretrained({target!r}), AutoTokenizer.from_pretrained(...)")


def export_dataset(args):
    """The task's parts as a DatasetDict (save_to_disk) or verl's parquet files, its problems as JSON per row."""
    check_target(args.dir, DATASET_FILES)
    if importlib.util.find_spec("datasets") is None:
        raise UsageError("export dataset needs the optional extra: pip install 'reasonlab[hf]'")
    import datasets  # the optional extra; its progress bars would print one per split
    datasets.disable_progress_bars()
    budget = None if args.budget_kind == "none" else args.budget_kind
    dd = dataset(args.style, args.n_train, args.n_test, args.seed, budget, task=args.task)

    def write(tmp):
        if args.style == "trl":
            dd.save_to_disk(tmp)
        else:
            for split, ds in dd.items():
                ds.to_parquet(os.path.join(tmp, f"{split}.parquet"))
    target = replace_dir(args.dir, DATASET_FILES, write)
    sizes = ", ".join(f"{s} {len(ds):,}" for s, ds in dd.items())
    how = "datasets.load_from_disk" if args.style == "trl" else "verl's data.train_files / data.val_files"
    print(f"wrote the {args.task} task's parts ({sizes} rows, {args.style} style) to {target}; read it with {how}")


def cmd_import(args):
    """A Hugging Face directory, checked (reasonlab.hf.export.import_hf: the task its config.json names, which --task
    may only repeat, and that task's vocabulary), saved as a checkpoint of that task; on any failure nothing is
    written (the cache's folder included)."""
    if args.out:
        stem = os.path.abspath(resolve(args.out))
    else:
        name = os.path.basename(os.path.normpath(os.path.abspath(args.dir)))
        try:
            check_name(name)
        except ValueError:
            raise UsageError(f"import: the directory's name {name!r} is not a usable checkpoint name: give --out"
                             ) from None
        stem = os.path.join(cache_dir(args.cache_dir), "imported", name)
    model, info = import_hf(args.dir, args.task)
    writable_dir(os.path.dirname(stem), "model cache" if not args.out else "--out's directory")
    save_model(stem, model, {"imported_from": info["source"], "dtype": info["dtype"], "version": __version__,
                             "task": info["task"]})
    task = get(info["task"])
    print(f"imported {info['source']} ({info['vocab_size']}-word vocabulary, {info['dtype']} weights) as {stem}")
    print(f"  task {task.spec}: reasonlab eval --checkpoint {stem}   |   reasonlab sample "
          f"\"{task.show(example(task))}\" --checkpoint {stem}")
