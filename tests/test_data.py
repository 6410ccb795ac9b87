import numpy as np
import pandas as pd
import pytest
import torch
from conftest import tiny_frame
from helpers import write_csv

from utils.batching import (
    Collator,
    EpochBatches,
    TextDataset,
    deal_evenly,
    length_grouped_batches,
    sorted_batches,
    start_epoch,
)
from utils.data import DataError, make_folds, read_csv, read_folds
from utils.model import load_tokenizer


def test_reads_valid_file_and_keeps_extra_columns(tmp_path):
    df = tiny_frame(10).assign(extra=1)
    out = read_csv(write_csv(df, tmp_path / "train.csv"), "excerpt")
    assert list(out.columns) == list(df.columns)
    assert out["target"].dtype == float


@pytest.mark.parametrize(
    "mutate,match",
    [
        (lambda d: d.drop(columns="excerpt"), r"train.csv is missing column 'excerpt'; found: id, "),
        (lambda d: d.assign(excerpt=d.excerpt.where(d.index != 3, "  ")), r"'excerpt' is empty at row 5 \(id id0003\)"),
        (lambda d: d.assign(excerpt=d.excerpt.where(d.index != 0, None)), r"'excerpt' is empty at row 2 \(id id0000\)"),
        (
            lambda d: d.assign(target=d.target.astype(object).where(d.index != 4, "hard")),
            r"'target' is not a finite number at row 6 \(id id0004\)",
        ),
        (
            lambda d: d.assign(id=d.id.where(d.index != 7, "id0001")),
            r"duplicate ids at row 3 \(id id0001\), row 9 \(id id0001\)",
        ),
        (lambda d: d.iloc[:0], r"train.csv has no data rows"),
    ],
)
def test_bad_input_names_file_column_and_rows(tmp_path, mutate, match):
    with pytest.raises(DataError, match=match):
        read_csv(write_csv(mutate(tiny_frame(10)), tmp_path / "train.csv"), "excerpt")


def test_bom_and_crlf_are_read_correctly(tmp_path):
    df = tiny_frame(5)
    df.loc[2, "excerpt"] = "First line.\nSecond line, with \"quotes\"."
    path = tmp_path / "train.csv"
    path.write_bytes(b"\xef\xbb\xbf" + df.to_csv(index=False, lineterminator="\r\n").encode())
    out = read_csv(path, "excerpt")
    assert list(out.columns)[0] == "id"
    assert out.loc[2, "excerpt"].startswith("First line.") and "quotes" in out.loc[2, "excerpt"]
    assert out["id"].tolist() == df["id"].tolist()


def test_test_file_with_one_row_works_and_missing_file_is_clear(tmp_path):
    df = tiny_frame(1).drop(columns=["target", "standard_error"])
    assert len(read_csv(write_csv(df, tmp_path / "test.csv"), "excerpt", target_cols=())) == 1
    with pytest.raises(DataError, match="nope.csv: file not found"):
        read_csv(tmp_path / "nope.csv", "excerpt")


@pytest.mark.parametrize("n,k", [(60, 2), (2834, 5), (37, 5)])
def test_folds_disjoint_cover_and_depend_only_on_data_and_fold_seed(n, k):
    df = tiny_frame(n)
    folds = make_folds(df, k, seed=42)
    assert set(folds) == set(range(k))  # 0-based, every fold used, every row assigned
    assert (folds >= 0).all() and len(folds) == n
    sizes = np.bincount(folds)
    assert sizes.max() - sizes.min() <= 1 + n // 20
    assert (make_folds(df, k, seed=42) == folds).all()
    assert (make_folds(df, k, seed=7) != folds).any()


def test_folds_are_stratified_on_target():
    df = tiny_frame(500)
    folds = make_folds(df, 5, seed=0)
    means = [df.target[folds == k].mean() for k in range(5)]
    assert np.ptp(means) < 0.1 * df.target.std()


def test_read_folds_checks_coverage(tmp_path):
    df = tiny_frame(10)
    pd.DataFrame({"id": df.id, "fold": np.arange(10) % 2}).to_csv(tmp_path / "f.csv", index=False)
    assert (read_folds(tmp_path / "f.csv", df.id) == np.arange(10) % 2).all()
    pd.DataFrame({"id": df.id[:8], "fold": 0}).to_csv(tmp_path / "g.csv", index=False)
    with pytest.raises(DataError, match="no fold for 2 training ids"):
        read_folds(tmp_path / "g.csv", df.id)


@pytest.mark.versions
def test_a_prepared_loader_starts_at_the_epoch_it_is_given():
    # accelerate's prepared loader counts its passes from 0 (and 1.x sets that count on the
    # sampler when a pass begins): a loader first used at epoch 2 must still give epoch 2's order.
    from accelerate import Accelerator

    lengths = np.random.default_rng(0).integers(5, 300, 100)
    sampler = EpochBatches(lengths, 8, seed=3, group_by_length=True)
    expected = []
    for epoch in (2, 3):
        sampler.set_epoch(epoch)
        expected.append(list(sampler))
    assert expected[0] != expected[1]
    ds = [{"index": i} for i in range(100)]
    fresh = EpochBatches(lengths, 8, seed=3, group_by_length=True)
    collate = lambda items: [x["index"] for x in items]  # noqa: E731
    dl = Accelerator(cpu=True).prepare(
        torch.utils.data.DataLoader(ds, batch_sampler=fresh, collate_fn=collate)
    )
    got = []
    for epoch in (2, 3):
        start_epoch(dl, fresh, epoch)
        got.append(list(dl))
    assert got == expected


@pytest.mark.versions
def test_dataset_truncates_counts_and_collates_to_multiple_of_8(tiny_bert):
    tok = load_tokenizer(tiny_bert)
    texts = ["the cat sat", "the cat sat on a mat while a dog ran home " * 3]
    ds = TextDataset(texts, tok, max_len=12, targets=np.array([[1.0], [2.0]]))
    assert ds.n_truncated == 1
    assert len(ds[1]["input_ids"]) == 12 and len(ds[0]["input_ids"]) == 5
    batch = Collator(tok.pad_token_id)([ds[0], ds[1]])
    assert batch["input_ids"].shape == (2, 16)
    assert batch["attention_mask"].sum(1).tolist() == [5, 12]
    assert (batch["input_ids"][0, 5:] == tok.pad_token_id).all()
    assert batch["target"].dtype == torch.float32 and batch["index"].tolist() == [0, 1]


@pytest.mark.versions
@pytest.mark.parametrize("kind", ["bert", "roberta"])
def test_long_texts_are_fitted_head_or_head_and_tail_without_a_length_warning(
    kind, tiny_bert, tiny_roberta, capfd, caplog
):
    from utils.batching import encode

    tok = load_tokenizer(tiny_bert if kind == "bert" else tiny_roberta)
    vocab = "the cat sat on a mat while dog ran home".split()
    long = " ".join(vocab[i % 10] for i in range(700))  # past the 512 positions the model takes
    texts = ["the cat sat", long, " ".join(vocab * 2)]
    head, cut = encode(texts, tok, 16)
    assert head == tok(texts, truncation=True, max_length=16)["input_ids"] and cut == [1, 2]
    tail, _ = encode(texts, tok, 16, "head_tail")
    full = tok(texts[1], verbose=False)["input_ids"]
    # 14 tokens of room: the first 3 and the last 11, between the special tokens
    assert tail[1] == full[:1 + 3] + full[-(11 + 1):] and tail[0] == head[0]
    pairs = [("the cat", " ".join(vocab * 3))]
    assert encode(pairs, tok, 12)[0] == tok(["the cat"], [" ".join(vocab * 3)], truncation="only_second",
                                            max_length=12)["input_ids"]
    ends = encode(pairs, tok, 12, "head_tail")[0][0]
    assert len(ends) == 12 and ends[-2] == tok.convert_tokens_to_ids("home")  # the second text's end
    # A long first text before a short second (a query and a candidate) keeps the room the second
    # leaves it, more than half, and with head_tail its own end; the second stays whole.
    query, candidate = " ".join(vocab * 3), "the cat"
    whole = tok([query], [candidate])["input_ids"][0]
    cut = encode([(query, candidate)], tok, 16, "head_tail")[0][0]
    n_cand = len(tok(candidate, add_special_tokens=False)["input_ids"])
    assert len(cut) == 16 and cut[-(n_cand + 1):] == whole[-(n_cand + 1):]  # the candidate, whole
    n_query = len(tok(query, add_special_tokens=False)["input_ids"])
    n_special = len(whole) - n_query - n_cand  # [CLS] query [SEP] candidate [SEP], or RoBERTa's four
    room = 16 - n_special - n_cand
    assert room > (16 - n_special) // 2
    assert cut[1:1 + room] == whole[1:1 + room // 4] + whole[1 + n_query - (room - room // 4):1 + n_query]
    assert encode([(query, candidate)], tok, 16)[0][0][1:1 + room] == whole[1:1 + room]  # head: its start
    assert "longer than the specified maximum" not in capfd.readouterr().err + caplog.text
    with pytest.raises(ValueError, match="unknown fit 'tail'; valid: head, head_tail"):
        encode(texts, tok, 16, "tail")


@pytest.mark.versions
def test_max_len_above_the_backbone_is_one_clear_line(tiny_bert, tiny_csv, tmp_path, capsys):
    from helpers import assert_one_line_error

    from utils.model import max_positions
    from utils.train import main

    assert max_positions(tiny_bert) == 512
    argv = ["--train-csv", str(tiny_csv), "--out", str(tmp_path / "r"), "--model", tiny_bert, "--max-len", "1024"]
    assert main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, "--max-len 1024 is above what", "(512 tokens)",
                          "--fit head_tail")
    assert not list((tmp_path / "r").glob("fold*"))


def test_batch_orders():
    lengths = np.random.default_rng(0).integers(5, 300, 1000)
    for batches in (length_grouped_batches(lengths, 16, seed=1), sorted_batches(lengths, 16)):
        flat = sorted(i for b in batches for i in b)
        assert flat == list(range(1000))  # every row once
    grouped = length_grouped_batches(lengths, 16, seed=1)
    spread = np.mean([np.ptp(lengths[b]) for b in grouped])
    random_spread = np.mean([np.ptp(lengths[b]) for b in np.array_split(np.arange(1000), 63)])
    assert spread < 0.2 * random_spread
    assert grouped != length_grouped_batches(lengths, 16, seed=2)
    s = sorted_batches(lengths, 16)
    assert lengths[s[0]].min() >= lengths[s[-1]].max()
    sampler = EpochBatches(lengths, 16, seed=3, group_by_length=True)
    first = list(sampler)
    sampler.set_epoch(1)
    assert list(sampler) != first and len(sampler) == 63
    sampler.set_epoch(0)
    assert list(sampler) == first
    # Data-parallel: the count is padded to a multiple of the processes with the first batches.
    three = EpochBatches(lengths, 16, seed=3, group_by_length=True, processes=3)
    dealt = list(three)
    assert len(three) == len(dealt) == 63 and dealt == first  # 63 = 3 x 21: nothing added
    two = EpochBatches(lengths, 16, seed=3, group_by_length=True, processes=2)
    assert len(two) == 64 and list(two) == first + first[:1]
    assert deal_evenly([[1], [2], [3]], 4) == [[1], [2], [3], [1]]
    assert deal_evenly([[1]], 3) == [[1], [1], [1]] and deal_evenly([[1], [2]], 1) == [[1], [2]]


@pytest.mark.versions
@pytest.mark.parametrize("kind", ["bert", "roberta"])
def test_sliding_windows_cover_every_token_of_a_long_text(kind, tiny_bert, tiny_roberta):
    from utils.batching import TextDataset, encode_windows

    tok = load_tokenizer(tiny_bert if kind == "bert" else tiny_roberta)
    vocab = "the cat sat on a mat while dog ran home".split()
    long = " ".join(vocab[i % 10] + str(i % 7) for i in range(90))
    texts = ["the cat sat", long]
    wins, owner, n_cut = encode_windows(texts, tok, 16)
    full = tok(long, verbose=False)["input_ids"]
    body = full[1:-1]
    assert n_cut == 1 and owner[0] == 0 and wins[0] == tok("the cat sat")["input_ids"]
    mine = [w for w, o in zip(wins, owner) if o == 1]
    assert all(len(w) <= 16 and w[0] == full[0] and w[-1] == full[-1] for w in mine)
    assert mine[0][1:-1] == body[:14] and mine[-1][1:-1] == body[-14:]  # from the start to the end
    # 14 tokens of room, 7 apart, the last window ending at the text's end: every token read
    starts = list(range(0, len(body) - 14 + 1, 7))
    starts += [len(body) - 14] if starts[-1] + 14 < len(body) else []
    assert [w[1:-1] for w in mine] == [body[s:s + 14] for s in starts]
    assert set().union(*(range(s, s + 14) for s in starts)) == set(range(len(body)))
    pair_wins, pair_owner, _ = encode_windows([("the cat", long)], tok, 24)
    question = tok("the cat", long, verbose=False)["input_ids"][:4 if kind == "bert" else 5]
    assert len(pair_wins) > 1 and all(w[:len(question)] == question for w in pair_wins)  # the question in each
    ds = TextDataset(texts, tok, 16, targets=[[1.0], [2.0]], fit="windows")
    assert len(ds) == len(wins) and ds.n_texts == 2 and ds[len(ds) - 1]["target"].tolist() == [2.0]
    pred = np.arange(len(ds), dtype=float)[:, None]
    assert ds.per_text(pred)[:, 0].tolist() == [0.0, float(np.mean(np.arange(1, len(ds))))]
