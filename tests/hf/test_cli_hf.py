"""`reasonlab export hf | export dataset | import hf`: what a user runs, bad input as one line and exit 2 with nothing
written, and the extra loaded only where it is needed."""
import json
import os
import subprocess
import sys

import pytest

from reasonlab.cli import main
from reasonlab.io.checkpoint import load_model, save_model
from reasonlab.methods.budget import budget_model
from reasonlab.train.sft import build_model

from .hfkit import need


def one_line_error(capsys, code, argv, msg):
    assert main(argv) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("reasonlab: error:") and msg in err, err


def test_export_then_import_then_eval_and_sample(tmp_path, capsys, shipped):
    out = tmp_path / "base0"
    assert main(["export", "hf", str(out), "--seed", "0", "--n-test", "20"]) == 0
    said = capsys.readouterr().out
    assert f"exported base-seed0 (18-word vocabulary) to {out}" in said
    card = (out / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: transformers") and "## Accuracy" in card and "free share" in card
    assert '"phases"' in card     # the recipe it was trained by
    assert main(["export", "hf", str(out), "--seed", "0", "--n-test", "0"]) == 0    # an earlier export is replaced
    assert "## Accuracy" not in (out / "README.md").read_text()
    assert main(["import", "hf", str(out)]) == 0
    stem = os.path.join(os.environ["REASONLAB_CACHE"], "imported", "base0")
    assert f"as {stem}" in capsys.readouterr().out
    model, meta = load_model(stem)
    assert meta["imported_from"] == str(out) and meta["dtype"] == "F32"
    assert all((model.state_dict()[k] == v).all() for k, v in shipped["base-seed0"].state_dict().items())
    assert main(["eval", "--checkpoint", stem, "--n-test", "5"]) == 0
    assert "free share" in capsys.readouterr().out
    assert main(["sample", "3 5 9 2 7", "--checkpoint", stem, "--force", "S"]) == 0
    assert "S 8 9 6 A 6 </s>" in capsys.readouterr().out


def test_a_budget_checkpoint_exports_with_its_vocabulary(tmp_path, capsys, shipped):
    stem = str(tmp_path / "budget")
    save_model(stem, budget_model(shipped["base-seed0"]), {"note": "warm start"})
    assert main(["export", "hf", str(tmp_path / "b"), "--checkpoint", stem + ".json", "--n-test", "0"]) == 0
    assert "(37-word vocabulary)" in capsys.readouterr().out
    card = (tmp_path / "b" / "README.md").read_text()
    assert "budget tokens B0..B8" in card and '"note": "warm start"' in card and "## Accuracy" not in card
    assert json.loads((tmp_path / "b" / "config.json").read_text())["vocab_size"] == 37
    assert main(["import", "hf", str(tmp_path / "b"), "--out", str(tmp_path / "back")]) == 0
    assert load_model(str(tmp_path / "back"))[0].cfg.vocab_size == 37


def test_the_export_loads_in_transformers_offline(tmp_path, capsys):
    transformers = need("transformers")
    assert main(["export", "hf", str(tmp_path / "m"), "--n-test", "0"]) == 0
    tok = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "m"), local_files_only=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path / "m"), local_files_only=True)
    ids = tok("<s> 3 5 9 2 7 _ _ _ = S", return_tensors="pt").input_ids
    assert tok.decode(model.generate(ids, max_new_tokens=13, do_sample=False)[0, ids.shape[1]:]) == "8 9 6 A 6 </s>"


@pytest.mark.parametrize("make,argv,msg", [
    (None, ["import", "hf", "{tmp}/nothing"], "is not a directory"),
    ("pickle", ["import", "hf", "{tmp}/d"], "holds only pytorch_model.bin"),
    ("llama", ["import", "hf", "{tmp}/d"], "model_type"),
    ("other", ["import", "hf", "{base}", "--out", "{tmp}/d/notes.txt/m"], "is a file, not a directory"),
    ("spaces", ["import", "hf", "{tmp}/my model"], "give --out"),
    ("other", ["export", "hf", "{tmp}/d"], "holds other files"),
    (None, ["export", "hf", "{tmp}/d", "--checkpoint", "{tmp}/none"], "not found"),
    (None, ["export", "hf", "{tmp}/d", "--n-test", "-1"], "--n-test must be >= 0"),
    (None, ["export", "dataset", "{tmp}/d", "--n-train", "0"], "--n-train must be positive"),
    (None, ["export", "dataset", "{tmp}/d", "--n-test", "30000"], "--n-test must be at most 25,000"),
    (None, ["export", "dataset", "{tmp}/d", "--n-train", "100001"], "--n-train must be at most 100,000"),
    (None, ["export", "dataset", "{tmp}/d", "--style", "openrlhf"], "invalid choice"),
    ("other", ["export", "dataset", "{tmp}/d"], "holds other files"),
    (None, ["export", "dataset", "{tmp}/d", "--task", "nope"], "unknown task 'nope'"),
    (None, ["export", "hf", "{tmp}/d", "--task", "compose:n_f=0"], "n_f must be in 1..8"),
    (None, ["import", "hf", "{base}", "--task", "nope"], "unknown task 'nope'"),
    (None, ["import", "hf", "{base}", "--task", "add", "--out", "{tmp}/m"], "holds a model of task digits"),
    ("add", ["export", "hf", "{tmp}/d", "--checkpoint", "{tmp}/add", "--task", "digits"], "is a model of task add"),
])
def test_bad_input_is_one_line_and_exit_2_with_nothing_written(tmp_path, capsys, base_dir, make, argv, msg):
    d = tmp_path / "d"
    if make in ("pickle", "llama"):
        d.mkdir()
        for f in os.listdir(base_dir):
            (d / f).write_bytes((open(os.path.join(base_dir, f), "rb")).read())
    if make == "pickle":
        (d / "model.safetensors").rename(d / "pytorch_model.bin")
    if make == "llama":
        cfg = json.loads((d / "config.json").read_text())
        (d / "config.json").write_text(json.dumps(dict(cfg, model_type="llama")))
    if make == "spaces":
        (tmp_path / "my model").mkdir()
    if make == "add":
        save_model(str(tmp_path / "add"), build_model(0, task="add"), {"task": "add"})
    if make == "other":
        d.mkdir()
        (d / "notes.txt").write_text("mine")
    before = sorted(os.listdir(tmp_path))
    cache = os.environ["REASONLAB_CACHE"]
    one_line_error(capsys, 2, [a.format(tmp=tmp_path, base=base_dir) for a in argv], msg)
    assert sorted(os.listdir(tmp_path)) == before
    assert not os.path.exists(os.path.join(cache, "imported")) or not os.listdir(os.path.join(cache, "imported"))


def test_a_model_of_another_task_goes_out_and_comes_back(tmp_path, capsys):
    """A checkpoint of the add task: exported with its task named in config.json, its card and its tokenizer; the
    import knows the task (a --task of another is refused) and saves it with the checkpoint, which eval and sample
    then read ("473 215": two numbers, as the add task shows them)."""
    stem = str(tmp_path / "add")
    save_model(stem, build_model(0, task="add"), {"task": "add"})
    out = tmp_path / "hf"
    assert main(["export", "hf", str(out), "--checkpoint", stem, "--n-test", "1"]) == 0
    assert "(38-word vocabulary)" in capsys.readouterr().out
    assert json.loads((out / "config.json").read_text())["reasonlab_task"] == "add"
    card = (out / "README.md").read_text()
    assert "task `add`" in card and "## Accuracy" in card and "the task's 38 words" in card
    one_line_error(capsys, 2, ["import", "hf", str(out), "--task", "digits", "--out", str(tmp_path / "x")],
                   "holds a model of task add")
    assert main(["import", "hf", str(out), "--out", str(tmp_path / "back")]) == 0
    assert "task add:" in capsys.readouterr().out
    assert load_model(str(tmp_path / "back"))[1]["task"] == "add"
    assert main(["sample", "473 215", "--checkpoint", str(tmp_path / "back"), "--force", "T"]) == 0
    assert "problem 473 + 215  (answer 0 6 8 8)" in capsys.readouterr().out
    assert main(["eval", "--checkpoint", str(tmp_path / "back"), "--n-test", "1"]) == 0
    assert "free share" in capsys.readouterr().out


def test_export_dataset_of_a_task(tmp_path, capsys):
    datasets = need("datasets")
    assert main(["export", "dataset", str(tmp_path / "c"), "--task", "compose:n_f=4", "--n-train", "2",
                 "--n-test", "2"]) == 0
    assert "wrote the compose:n_f=4 task's parts (train 14, validation 14, test 14 rows" in capsys.readouterr().out
    dd = datasets.load_from_disk(str(tmp_path / "c"))
    assert set(dd["test"]["task"]) == {"compose:n_f=4"} and "digits" not in dd["test"].column_names
    assert all(json.loads(p)["knobs"] == {"n_f": 4} for p in dd["test"]["problem"])


def test_export_dataset_in_both_styles(tmp_path, capsys):
    datasets = need("datasets")
    assert main(["export", "dataset", str(tmp_path / "trl"), "--n-train", "5", "--n-test", "3"]) == 0
    assert "train 35, validation" in capsys.readouterr().out
    dd = datasets.load_from_disk(str(tmp_path / "trl"))
    assert set(dd) == {"train", "validation", "test"} and {"prompt", "digits", "answer", "full"} <= set(dd["train"][0])
    assert main(["export", "dataset", str(tmp_path / "trl"), "--n-train", "6", "--budget-kind", "max"]) == 0   # replaced
    assert datasets.load_from_disk(str(tmp_path / "trl"))["train"].num_rows == 42
    assert main(["export", "dataset", str(tmp_path / "verl"), "--style", "verl", "--n-train", "5", "--n-test", "3"]) == 0
    assert sorted(os.listdir(tmp_path / "verl")) == ["test.parquet", "train.parquet", "validation.parquet"]
    rows = datasets.load_dataset("parquet", data_files=str(tmp_path / "verl" / "train.parquet"), split="train",
                                 cache_dir=str(tmp_path / "cache"))
    assert rows[0]["prompt"][0]["role"] == "user" and rows[0]["extra_info"]["split"] == "train"


def test_the_extra_is_imported_only_where_needed():
    """`reasonlab export hf --help`, a usage error and every module of reasonlab.hf load none of the Hugging Face
    libraries (the wheel's check imports every module without the extra)."""
    code = ("import sys\nfrom reasonlab.cli import main\ntry:\n    main(['export', 'hf', '--help'])\n"
            "except SystemExit:\n    pass\nmain(['import', 'hf'])\nimport reasonlab.hf.card, reasonlab.hf.data, reasonlab.hf.rewards\n"
            "import reasonlab.hf.trl, reasonlab.cli.hf\nfrom reasonlab.hf import export_hf, import_hf, rows, grpo_kwargs\n"
            "print(sorted(m for m in ('transformers', 'trl', 'datasets', 'tokenizers', 'accelerate', 'torch')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "['torch']"      # torch for the export itself, nothing else
    out = subprocess.run([sys.executable, "-m", "reasonlab.cli", "export", "hf", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "safetensors" in out.stdout
