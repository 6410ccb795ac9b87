import json

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import tiny_frame
from helpers import write_csv

import utils.pretrain as pretrain_mod
from utils.pretrain import (
    PretrainConfig,
    collect_texts,
    load_mlm,
    main,
    normalise,
    pretrain,
    split_texts,
)

# versions: masked-LM pretraining on transformers' models and collators
pytestmark = pytest.mark.versions


def pretrain_cfg(csvs, out, model, **kw):
    base = dict(
        texts=tuple(map(str, csvs)),
        out=str(out),
        model=model,
        epochs=1,
        batch_size=8,
        lr=3e-3,
        valid_fraction=0.25,
        seed=1,
        progress=False,
    )
    return PretrainConfig(**{**base, **kw})


def test_output_round_trips_into_training_and_prediction(tiny_bert, tiny_csv, tmp_path):
    from transformers import AutoModel

    from utils.config import TrainConfig
    from utils.predict import predict_run
    from utils.train import run_cv

    backbone = tmp_path / "itpt"
    info = pretrain(pretrain_cfg([tiny_csv], backbone, tiny_bert, epochs=2))
    saved = json.loads((backbone / "pretrain.json").read_text())
    assert saved["loss_before"] == pytest.approx(info["loss_before"])
    assert saved["settings"]["model"] == tiny_bert and saved["versions"]["transformers"]
    # The folder loads as a plain encoder: no weight newly initialised, none left over ...
    encoder, loading = AutoModel.from_pretrained(backbone, output_loading_info=True)
    assert not loading["missing_keys"] and not loading["unexpected_keys"]
    # ... and its encoder weights are the trained ones, not the input checkpoint's.
    before = AutoModel.from_pretrained(tiny_bert).state_dict()
    after = encoder.state_dict()
    assert before.keys() == after.keys()
    key = "encoder.layer.0.attention.self.query.weight"
    assert not torch.equal(before[key], after[key])
    assert torch.equal(before["pooler.dense.weight"], after["pooler.dense.weight"])  # not trained

    run = tmp_path / "run"
    cfg = TrainConfig(
        train_csv=str(tiny_csv),
        out=str(run),
        model=str(backbone),
        folds=2,
        epochs=2,
        batch_size=8,
        eval_every=2,
        lr=1e-3,
        only_folds=(0,),
        progress=False,
    )
    metrics = run_cv(cfg)
    assert metrics["metric"] == "rmse" and np.isfinite(metrics["cv"])
    pred = predict_run(run, ["the cat sat on a mat.", "epistemological scrutiny"], progress=False)
    assert pred.shape == (2,) and np.isfinite(pred).all()


def test_held_out_mlm_loss_falls_with_training(tiny_roberta, tmp_path):
    csv = write_csv(tiny_frame(120), tmp_path / "train.csv")
    info = pretrain(pretrain_cfg([csv], tmp_path / "a", tiny_roberta, epochs=4))
    assert info["loss_after"] < info["loss_before"] - 0.02
    assert [h["epoch"] for h in info["history"]] == [1, 2, 3, 4]
    assert info["n_valid_masked_tokens"] > 50


def test_held_out_masking_is_fixed(tiny_bert, tmp_path):
    # With lr 0 the weights never change, so before and after can only differ if the held-out
    # tokens were masked anew for the second measurement.
    csv = write_csv(tiny_frame(60), tmp_path / "train.csv")
    info = pretrain(pretrain_cfg([csv], tmp_path / "a", tiny_bert, lr=0.0))
    assert info["loss_after"] == pytest.approx(info["loss_before"], abs=1e-6)
    again = pretrain(pretrain_cfg([csv], tmp_path / "b", tiny_bert, lr=1e-2, epochs=2))
    assert again["loss_before"] == pytest.approx(info["loss_before"], abs=1e-6)  # same seed
    assert again["loss_after"] != pytest.approx(again["loss_before"], abs=1e-4)


def test_duplicates_dropped_and_held_out_texts_never_trained_on(tiny_bert, tmp_path, monkeypatch):
    df = tiny_frame(40)
    a = write_csv(df, tmp_path / "train.csv")
    # b: no id column (a plain corpus), two duplicates of a (one differing only in whitespace),
    # one duplicate within b itself, and 10 new texts.
    extra = tiny_frame(10, seed=5).excerpt.tolist()
    texts_b = ["  " + df.excerpt[3].replace(" ", "\n  ") + " ", df.excerpt[7], *extra, extra[0]]
    b = write_csv(pd.DataFrame({"excerpt": texts_b}), tmp_path / "corpus.csv")

    datasets = []

    class Spy(pretrain_mod.TextDataset):
        def __init__(self, texts, *args, **kw):
            datasets.append([normalise(t) for t in texts])
            super().__init__(texts, *args, **kw)

    monkeypatch.setattr(pretrain_mod, "TextDataset", Spy)
    out = tmp_path / "itpt"
    info = pretrain(pretrain_cfg([a, b], out, tiny_bert))
    assert (info["n_rows"], info["n_duplicates"], info["n_texts"]) == (53, 3, 50)
    assert (info["n_train"], info["n_valid"]) == (38, 12)

    split = pd.read_csv(out / "pretrain_texts.csv", keep_default_na=False)
    assert len(split) == 53 and split.split.value_counts().to_dict() == {
        "train": 38,
        "valid": 12,
        "duplicate": 3,
    }
    dup = split[split.split == "duplicate"]
    assert dup.source.tolist() == [str(b)] * 3 and dup.row.tolist() == [2, 3, 14]
    assert split[split.source == str(a)].id.tolist() == df.id.tolist()

    # What the training and held-out datasets were built from: disjoint, and as recorded.
    source = {str(a): df.excerpt.tolist(), str(b): texts_b}
    text_of = lambda r: normalise(source[r.source][r.row - 2])  # noqa: E731
    recorded = {
        s: {text_of(r) for r in split[split.split == s].itertuples()} for s in ("train", "valid")
    }
    assert len(datasets) == 2
    built = {s: next(set(d) for d in datasets if set(d) == recorded[s]) for s in recorded}
    assert not built["train"] & built["valid"]
    assert len(built["train"]) + len(built["valid"]) == 50


def test_split_is_seeded_and_sized():
    a, b = split_texts(200, 0.1, 3), split_texts(200, 0.1, 3)
    assert a.sum() == 20 and (a == b).all()
    assert not (a == split_texts(200, 0.1, 4)).all()
    assert split_texts(5, 0.01, 0).sum() == 1  # at least one text held out
    assert split_texts(5, 0.0, 0).sum() == 0


def test_collect_texts_reads_a_csv_without_id_column(tmp_path):
    path = write_csv(pd.DataFrame({"excerpt": ["a b", "a  b", "c"]}), tmp_path / "x.csv")
    rows = collect_texts([path])
    assert rows.duplicate.tolist() == [False, True, False] and rows.row.tolist() == [2, 3, 4]


def test_backbone_without_mlm_head_gets_a_fresh_one(tiny_bert, tiny_csv, tmp_path, capsys):
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    assert (
        main(
            [
                "--texts",
                str(tiny_csv),
                "--model",
                tiny_bert,
                "--out",
                str(tmp_path / "a"),
                "--epochs",
                "1",
                "--no-progress",
            ]
        )
        == 0
    )
    lines = [
        x for x in capsys.readouterr().out.splitlines() if x.startswith("fresh masked-LM head")
    ]
    assert len(lines) == 1
    assert json.loads((tmp_path / "a" / "pretrain.json").read_text())["fresh_head"]

    # A checkpoint saved with its MLM head keeps it: no fresh head, no line.
    with_head = tmp_path / "with-head"
    AutoModelForMaskedLM.from_pretrained(tiny_bert).save_pretrained(with_head)
    AutoTokenizer.from_pretrained(tiny_bert).save_pretrained(with_head)
    model, fresh = load_mlm(str(with_head))
    assert fresh == []
    assert (
        main(
            [
                "--texts",
                str(tiny_csv),
                "--model",
                str(with_head),
                "--out",
                str(tmp_path / "b"),
                "--epochs",
                "1",
                "--no-progress",
            ]
        )
        == 0
    )
    assert "fresh masked-LM head" not in capsys.readouterr().out


@pytest.mark.parametrize(
    "case, expected",
    [
        ("missing_column", "missing column 'excerpt'"),
        ("missing_column_no_id", "missing column 'excerpt'"),
        ("empty_file", "cannot be read"),
        ("header_only", "no data rows"),
        ("blank_text", "column 'excerpt' is empty at row 3"),
        ("one_text", "none left to train on"),
        ("model_not_found", "model not found"),
        ("earlier_output", "--overwrite"),
    ],
)
def test_bad_input_is_one_line_error_exit_2(case, expected, tiny_bert, tmp_path, capsys):
    csv = tmp_path / "train.csv"
    frame = tiny_frame(10)
    model, out = tiny_bert, tmp_path / "out"
    if case == "missing_column":
        frame.rename(columns={"excerpt": "text"}).to_csv(csv, index=False)
    elif case == "missing_column_no_id":
        frame[["target"]].to_csv(csv, index=False)
    elif case == "empty_file":
        csv.write_text("")
    elif case == "header_only":
        csv.write_text("id,excerpt\n")
    elif case == "blank_text":
        frame[["excerpt", "target"]].assign(excerpt=["x", " ", *frame.excerpt[2:]]).to_csv(
            csv, index=False
        )
    elif case == "one_text":
        frame[["id", "excerpt"]].assign(excerpt="the same text").to_csv(csv, index=False)
    else:
        frame.to_csv(csv, index=False)
    if case == "model_not_found":
        model = str(tmp_path / "no-such-model")
    if case == "earlier_output":
        out.mkdir()
        (out / "pretrain.json").write_text("{}")
    rc = main(["--texts", str(csv), "--model", model, "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err) == 1 and err[0].startswith("error: ") and expected in err[0]
    assert case == "earlier_output" or not out.exists()


def test_refuses_to_replace_a_folder_it_did_not_write(tiny_bert, tiny_csv, tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    argv = ["--texts", str(tiny_csv), "--model", tiny_bert, "--out", str(out), "--overwrite"]
    assert main(argv) == 2
    assert "not written by utils.pretrain" in capsys.readouterr().err
    assert (out / "notes.txt").read_text() == "keep me"


def test_an_interrupted_pretraining_resumes_and_ends_as_an_uninterrupted_one(
    tiny_bert, tmp_path, monkeypatch, capsys
):
    csv = write_csv(tiny_frame(60), tmp_path / "train.csv")
    whole = pretrain(pretrain_cfg([csv], tmp_path / "whole", tiny_bert, epochs=3, lr=1e-2))

    out = tmp_path / "cut"
    resume_file = pretrain_mod.resume_path(out)
    measured = pretrain_mod.mlm_loss
    calls = []

    def dies_in_epoch_3(*args):  # held-out loss: before, after epoch 1, after epoch 2, ...
        calls.append(1)
        if len(calls) == 3:
            assert resume_file.is_file()  # epoch 1's state is on disk before epoch 2 ends
            raise KeyboardInterrupt("the session died")
        return measured(*args)

    monkeypatch.setattr(pretrain_mod, "mlm_loss", dies_in_epoch_3)
    with pytest.raises(KeyboardInterrupt):
        pretrain(pretrain_cfg([csv], out, tiny_bert, epochs=3, lr=1e-2))
    assert not out.exists() and resume_file.is_file()
    assert torch.load(resume_file, weights_only=True)["history"][0]["epoch"] == 1

    monkeypatch.setattr(pretrain_mod, "mlm_loss", measured)
    capsys.readouterr()
    resumed = pretrain(pretrain_cfg([csv], out, tiny_bert, epochs=3, lr=1e-2))
    assert "epoch 1 of 3 done" in capsys.readouterr().out
    assert not resume_file.exists()
    assert resumed["steps"] == whole["steps"]
    for key in ("loss_before", "loss_after"):
        assert resumed[key] == pytest.approx(whole[key], abs=1e-6)
    assert [h["train_loss"] for h in resumed["history"]] == pytest.approx(
        [h["train_loss"] for h in whole["history"]], abs=1e-6
    )
    from safetensors.torch import load_file

    a = load_file(tmp_path / "whole" / "model.safetensors")
    b = load_file(out / "model.safetensors")
    assert a.keys() == b.keys()
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


def test_a_resume_with_other_settings_or_texts_is_refused(tiny_bert, tmp_path, capsys):
    csv = write_csv(tiny_frame(40), tmp_path / "train.csv")
    out = tmp_path / "out"
    cfg = pretrain_cfg([csv], out, tiny_bert, epochs=2)
    texts = collect_texts([csv])["text"].tolist()
    identity = pretrain_mod.training_identity(cfg, texts[:30], texts[30:])
    torch.save({"identity": {**identity, "lr": 1.0}}, pretrain_mod.resume_path(out))
    argv = ["--texts", str(csv), "--model", tiny_bert, "--out", str(out), "--epochs", "2",
            "--batch-size", "8", "--lr", "0.003", "--valid-fraction", "0.25", "--seed", "1",
            "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "other settings or texts" in err[0] and "lr: 1.0 -> 0.003" in err[0]

    pretrain_mod.resume_path(out).write_bytes(b"not a checkpoint")
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot be read" in err[0] and "delete it" in err[0]
    assert not out.exists()


@pytest.mark.integration
def test_minilm_on_real_data(minilm_path, real_data, tmp_path, capsys):
    from transformers import AutoModel

    sample = pd.read_csv(real_data / "train.csv").sample(n=64, random_state=0)
    csv = write_csv(sample, tmp_path / "train.csv")
    out = tmp_path / "minilm-itpt"
    info = pretrain(pretrain_cfg([csv, real_data / "test.csv"], out, minilm_path, max_len=64, lr=5e-5))
    assert "fresh masked-LM head" in capsys.readouterr().out  # a sentence-transformers checkpoint
    assert np.isfinite(info["loss_before"]) and np.isfinite(info["loss_after"])
    _, loading = AutoModel.from_pretrained(out, output_loading_info=True)
    assert not loading["missing_keys"] and not loading["unexpected_keys"]
