"""Span competitions (utils/spans.py): locations parsed and written as NBME's files hold them, labels
given as text aligned, token targets and their way back to characters through real tokenizers
(WordPiece, byte-level BPE with and without trimmed offsets, SentencePiece's "▁"), decoding, and the
three metrics against hand computations and the competitions' own definitions.

The real data comes through $TWEET_SPANS_DATA (tweet-sentiment-extraction) and $NBME_DATA
(nbme-score-clinical-patient-notes); without them those tests skip, and in CI (CI set) they fail."""

from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import nbme_folder, tweet_table

from utils.spans import (
    align,
    best_span,
    char_labels,
    char_micro_f1,
    char_micro_scores,
    check_spans,
    decode_threshold,
    entity_fbeta,
    format_location,
    parse_location,
    strip_spans,
    token_targets,
    token_to_char_probs,
    word_jaccard,
)

WHERE = "train.csv, column location, row 17"


def _real(var: str) -> Path:
    folder = os.environ.get(var)
    if not folder or not Path(folder).is_dir():
        if os.environ.get("CI"):  # in CI a missing data set is a failure, not a skip
            raise FileNotFoundError(f"${var} does not name a folder: {folder!r}")
        pytest.skip(f"real data not found: set ${var}")
    return Path(folder)


@pytest.fixture(scope="module")
def tweets() -> pd.DataFrame:
    """Tweet Sentiment Extraction's train.csv ($TWEET_SPANS_DATA), empty cells as ''."""
    return pd.read_csv(_real("TWEET_SPANS_DATA") / "train.csv", keep_default_na=False)


@pytest.fixture(scope="module")
def nbme() -> pd.DataFrame:
    """NBME's train.csv ($NBME_DATA) with each row's note (pn_history) joined on."""
    data = _real("NBME_DATA")
    notes = pd.read_csv(data / "patient_notes.csv")
    return pd.read_csv(data / "train.csv").merge(notes[["pn_num", "pn_history"]], on="pn_num", how="left")


def test_spans_imports_without_torch_or_transformers():
    import subprocess
    import sys

    code = ("import sys, utils.spans; print(','.join(m for m in ('torch', 'transformers', 'tokenizers', 'sklearn') "
            "if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "", res.stdout + res.stderr[-2000:]


# ----------------------------------------------------------------------------- locations


def test_parse_location_reads_the_training_list_and_the_submission_forms():
    assert parse_location("['696 724']", WHERE) == ((696, 724),)
    assert parse_location("['85 99;126 138', '10 20']", WHERE) == ((10, 20), (85, 99), (126, 138))
    assert parse_location("85 99;126 138", WHERE) == ((85, 99), (126, 138))
    assert parse_location("[]", WHERE) == parse_location("", WHERE) == parse_location(float("nan"), WHERE) == ()
    assert parse_location(None, WHERE) == parse_location("  ", WHERE) == ()


@pytest.mark.parametrize("value, says", [
    ("['85 99", "not a Python list"), ("[1, 2]", "not a Python list"), ("['85 99', 3]", "not a Python list"),
    ("['85 99;']", "bad piece ''"), ("85-99", "not a location"), ("85 99 100", "not a location"),
    ("['5 3']", "starts after it ends"), ("['-1 3']", "negative offset"), ("4 -2", "negative offset"),
    ("['1 2']\n['3 4']", "not a Python list"), (17, "not a location string"),
])
def test_a_bad_location_is_one_line_naming_where_and_the_value(value, says):
    with pytest.raises(ValueError) as e:
        parse_location(value, WHERE)
    msg = str(e.value)
    assert msg.startswith(WHERE + ": ") and says in msg and "\n" not in msg
    assert repr(value)[:20] in msg


def test_a_location_is_never_run_as_code(tmp_path):
    marker = tmp_path / "ran"
    with pytest.raises(ValueError, match="not a Python list"):
        parse_location(f"[__import__('pathlib').Path({str(marker)!r}).touch()]", WHERE)
    assert not marker.exists()


def test_check_spans_sorts_merges_overlapping_and_touching_spans_and_drops_empty_ones():
    text = "x" * 20
    assert check_spans([(8, 12), (0, 3), (3, 4), (5, 9), (7, 7), (15, 20)], text) == ((0, 4), (5, 12), (15, 20))
    assert check_spans([], text) == ()
    for bad in ([(0, 21)], [(-1, 3)], [(5, 4)]):
        says = r"^row 3: span '-?\d+ \d+' is not inside a text of 20 characters \(0 <= start <= end <= 20\)$"
        with pytest.raises(ValueError, match=says):
            check_spans(bad, text, "row 3")


def test_format_location_writes_the_submission_cell_and_parses_back():
    assert format_location(((126, 138), (85, 99))) == "85 99;126 138"
    assert format_location(()) == ""
    rng = np.random.default_rng(0)
    for _ in range(200):
        cuts = np.sort(rng.choice(1000, size=2 * rng.integers(0, 5), replace=False))
        spans = tuple(zip(cuts[::2].tolist(), cuts[1::2].tolist()))
        assert parse_location(format_location(spans)) == spans
        assert parse_location(str([format_location(spans)]) if spans else "[]") == spans


def test_strip_spans_drops_whitespace_at_the_edges_only():
    text = " a b \r\n c  "
    assert strip_spans([(0, 4), (4, 9), (9, 11)], text) == ((1, 4), (8, 9))
    assert strip_spans([(0, 11)], text) == ((1, 9),)


# ----------------------------------------------------------------------------- labels given as text


def test_align_takes_the_first_verbatim_occurrence_and_says_it_was_exact():
    assert align(" Sooo SAD I will miss you", "Sooo SAD") == (((1, 9),), True)
    assert align("bad day, bad", "bad") == (((0, 3),), True)
    assert align("ooh noo", "h no") == (((2, 6),), True)  # a label cut mid-word, as Tweet's are
    assert align("anything", "") == ((), True) and align("anything", "  ") == ((), True)
    assert align("anything", float("nan")) == ((), True)


def test_align_falls_back_to_the_same_words_then_the_best_word_window_and_flags_it():
    text = "I  LOVE\tthis song so much"
    assert align(text, "love this") == (((3, 12),), False)  # whitespace and case differ
    (span,), exact = align("the cat sat on the mat", "cat sit on")
    # windows of whole words: "cat sat on" has Jaccard 2/4, "cat" 1/3, "on" 1/3: the first wins
    assert (span, exact) == ((4, 14), False)
    with pytest.raises(ValueError, match=r"^train.csv, row 9: 'dog' shares no word"):
        align("the cat sat", "dog", "train.csv, row 9")


def test_char_labels_mark_every_character_of_every_span():
    np.testing.assert_array_equal(char_labels(8, [(1, 3), (2, 4), (6, 8)]), [0, 1, 1, 1, 0, 0, 1, 1])
    assert char_labels(3, []).dtype == np.uint8 and char_labels(3, []).sum() == 0
    with pytest.raises(ValueError, match="outside a text of 3 characters"):
        char_labels(3, [(2, 4)])


# ----------------------------------------------------------------------------- tokens and back


def test_token_targets_by_hand_with_specials_bpe_spaces_and_the_other_text_of_a_pair():
    text = "I love it"
    # <s> I Ġlove Ġit </s> with untrimmed offsets: the spaces belong to the next word's token
    offsets = [(0, 0), (0, 1), (1, 6), (6, 9), (0, 0)]
    np.testing.assert_array_equal(token_targets(offsets, [(2, 6)], text), [-100, 0, 1, 0, -100])
    # a label holding the space after the word: the next token's space is not the span's
    np.testing.assert_array_equal(token_targets(offsets, [(2, 7)], text), [-100, 0, 1, 0, -100])
    np.testing.assert_array_equal(token_targets(offsets, [(0, 9)], text, ignore=-1), [-1, 1, 1, 1, -1])
    # a pair: the first text's offsets are not the note's; the mask hides them
    pair = [(0, 0), (0, 3), (0, 0), (0, 1), (2, 6), (7, 9), (0, 0)]
    mask = [False, False, False, True, True, True, False]
    np.testing.assert_array_equal(token_targets(pair, [(0, 1)], text, mask), [-100, -100, -100, 1, 0, 0, -100])
    with pytest.raises(ValueError, match="offsets of another text"):
        token_targets([(0, 12)], [(0, 1)], text)


def test_token_to_char_probs_by_hand_gaps_take_the_smaller_neighbour_edges_zero():
    text = " ab cd  ef "
    offsets = [(0, 0), (1, 3), (4, 6), (8, 10), (0, 0)]
    got = token_to_char_probs(offsets, [-100, 0.9, 0.7, 0.2, -100], len(text))
    np.testing.assert_allclose(got, [0, 0.9, 0.9, 0.7, 0.7, 0.7, 0.2, 0.2, 0.2, 0.2, 0], rtol=1e-6)
    # tokens sharing characters (byte-level pieces of one emoji): the larger
    np.testing.assert_allclose(token_to_char_probs([(0, 2), (0, 2), (2, 3)], [0.1, 0.8, 0.3], 3), [0.8, 0.8, 0.3])
    with pytest.raises(ValueError, match="3 token probabilities for 2 offsets"):
        token_to_char_probs([(0, 1), (1, 2)], [0.1, 0.2, 0.3], 2)


def test_decode_threshold_by_hand_strictly_above_stripped_and_joined_over_whitespace():
    text = "hello world, this  is"
    p = np.zeros(len(text))
    p[0:5], p[6:11], p[11], p[13:17], p[17:19] = 0.9, 0.8, 0.5, 0.9, 0.6
    assert decode_threshold(p, 0.5, text) == ((0, 11), (13, 17))  # 0.5 is not above 0.5; the comma splits
    assert decode_threshold(p, 0.5, text, join_whitespace=False) == ((0, 5), (6, 11), (13, 17))
    # at 0.4 the comma is in: only spaces separate the three pieces; the spaces after "this" are stripped
    assert decode_threshold(p, 0.4, text, join_whitespace=False) == ((0, 5), (6, 12), (13, 17))
    assert decode_threshold(p, 0.4, text) == ((0, 17),)
    assert decode_threshold(np.ones(3), 0.5, "   ") == ()
    with pytest.raises(ValueError, match="3 probabilities for a text of 4 characters"):
        decode_threshold(np.ones(3), 0.5, "abcd")


def test_a_trailing_combining_mark_stays_with_its_letter_through_decoding(tiny_mpnet):
    """"cafe\u0301" (e + a combining accent): the tokenizer's normalizer strips the accent, so no
    token's offsets cover it; a perfect prediction for the word's token decodes to the whole word,
    accent included, with one head (a probability per character) and with two (start and end)."""
    from utils.model import load_tokenizer
    from utils.spans import char_scores, decode, span_text

    text = "the cafe\u0301 sat"
    enc = load_tokenizer(tiny_mpnet)(text, return_offsets_mapping=True)
    offsets = enc["offset_mapping"]
    word = [i for i, (s, e) in enumerate(offsets) if (s, e) == (4, 8)]
    assert word and not any(s <= 8 < e for s, e in offsets)  # the accent (character 8) has no token
    one = np.zeros((len(offsets), 1))
    one[word] = 1.0
    two = np.zeros((len(offsets), 2))
    two[word[0], 0] = two[word[-1], 1] = 1.0
    for probs in (one, two):
        got = decode(text, char_scores(offsets, probs, len(text), text=text))
        assert span_text(text, got) == "cafe\u0301", got
    assert decode("cafe\u0301", np.array([[1.0]] * 4 + [[0.0]])) == ((0, 5),)


def _brute_best(s, e, max_len=None):
    best = None
    for i in range(len(s)):
        for j in range(i, len(s)):
            if max_len is not None and j + 1 - i > max_len:
                break
            if best is None or s[i] + e[j] > best[0]:
                best = (s[i] + e[j], i, j + 1)
    return best


def test_best_span_by_hand_and_against_every_pair():
    assert best_span([0, 5, 1, 2], [3, 0, 0, 4]) == (1, 4)
    assert best_span([0, 5, 1, 2], [3, 0, 0, 4], max_len=2) == (3, 4)
    assert best_span([9, 0, 0], [0, 0, 1], max_len=1) == (0, 1)  # an end before the start is never taken
    assert best_span([-np.inf, 1, 0], [5, 0, 0]) == (1, 2)
    rng = np.random.default_rng(0)
    for n in range(1, 40):
        s, e = rng.normal(size=n), rng.normal(size=n)
        for max_len in (None, 1, 3, n):
            score, i, j = _brute_best(s, e, max_len)
            got = best_span(s, e, max_len)
            assert got[0] < got[1] and (max_len is None or got[1] - got[0] <= max_len)
            assert s[got[0]] + e[got[1] - 1] == pytest.approx(score) and got == (i, j)
    with pytest.raises(ValueError, match="2 start scores and 3 end scores"):
        best_span([0, 1], [0, 1, 2])


# ----------------------------------------------------------------------------- metrics


def kaggle_jaccard(str1, str2):
    """Tweet Sentiment Extraction's metric as Kaggle's evaluation page gives it."""
    a = set(str1.lower().split())
    b = set(str2.lower().split())
    c = a.intersection(b)
    return float(len(c)) / (len(a) + len(b) - len(c))


def test_word_jaccard_is_kaggles_jaccard_and_scores_two_empty_texts_one():
    true = ["Sooo SAD", "my boss is bullying me...", "leave me alone", "fun fun FUN day"]
    pred = ["sooo sad!", "bullying me...", "Leave  me\talone", "fun"]
    assert word_jaccard(true, pred) == pytest.approx(np.mean([kaggle_jaccard(t, p) for t, p in zip(true, pred)]))
    # by hand: {sooo, sad} vs {sooo, sad!}: 1/3; 2/5; 1; {fun, day} vs {fun}: 1/2
    assert word_jaccard(true, pred) == pytest.approx((1 / 3 + 2 / 5 + 1 + 1 / 2) / 4)
    assert word_jaccard(["", "a"], ["  ", ""]) == 0.5
    assert word_jaccard([np.nan], [""]) == 1.0
    with pytest.raises(ValueError, match="2 true and 1 predicted"):
        word_jaccard(["a", "b"], ["a"])


def test_char_micro_f1_by_hand_and_as_the_competitions_binary_arrays():
    true = [[(0, 10)], [], [(3, 5), (4, 8)]]
    pred = [[(5, 15)], [(0, 2)], [(0, 6)]]
    # row 0: true 0-9, predicted 5-14: tp 5, fp 5, fn 5; row 1: fp 2 (0, 1); row 2: true 3-7 (overlaps
    # counted once), predicted 0-5: tp 3 (3, 4, 5), fp 3 (0, 1, 2), fn 2 (6, 7)
    got = char_micro_scores(true, pred)
    assert (got["tp"], got["fp"], got["fn"]) == (8, 10, 7)
    assert got["f1"] == pytest.approx(16 / 33) and got["precision"] == pytest.approx(8 / 18)
    assert got["recall"] == pytest.approx(8 / 15) and char_micro_f1(true, pred) == got["f1"]
    assert char_micro_f1([[]], [[]]) == 1.0 and char_micro_f1([[(0, 3)]], [[]]) == 0.0
    # oof.csv's and the submission's cells score as their spans: "s e;s e", "" and NaN (an empty cell)
    cells = (["0 10", "", "3 5;4 8"], ["5 15", "0 2", "0 6"])
    assert char_micro_scores(*cells) == got
    assert char_micro_f1(["0 3", float("nan")], ["0 3", ""]) == 1.0
    with pytest.raises(ValueError, match="predicted spans, row 2"):
        char_micro_f1(["0 3", "1 2"], ["0 3", "5 x"])
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(0)

    def pick(n):
        return [tuple(sorted(rng.integers(0, n + 1, 2).tolist())) for _ in range(rng.integers(0, 4))]

    rows = [(n, pick(n), pick(n)) for n in rng.integers(1, 60, 300).tolist()]
    # the competition's published approach: per row, 0/1 arrays over the characters, concatenated
    y = np.concatenate([char_labels(n, t) for n, t, _ in rows])
    p = np.concatenate([char_labels(n, q) for n, _, q in rows])
    assert char_micro_f1([t for _, t, _ in rows], [q for _, _, q in rows]) == pytest.approx(f1_score(y, p))


def test_entity_fbeta_by_hand_weighs_recall_beta_squared_times():
    true = {(0, "NAME", (0, 4)), (0, "EMAIL", (10, 20)), (1, "NAME", (3, 7))}
    pred = {(0, "NAME", (0, 4)), (1, "NAME", (3, 8))}
    p, r = 1 / 2, 1 / 3
    assert entity_fbeta(true, pred) == pytest.approx(26 * p * r / (25 * p + r))
    assert entity_fbeta(true, pred, beta=1) == pytest.approx(2 * p * r / (p + r))
    # F5: finding everything with as many wrong guesses beats finding a third with none wrong
    wide = pred | true | {(2, "NAME", (0, 1)), (2, "NAME", (1, 2)), (2, "NAME", (2, 3))}
    assert entity_fbeta(true, wide) > entity_fbeta(true, {(0, "NAME", (0, 4))})
    assert entity_fbeta([], []) == 1.0 and entity_fbeta(true, []) == 0.0 and entity_fbeta([], pred) == 0.0


# ----------------------------------------------------------------------------- real tokenizers

CORPUS = [
    "Sooo SAD I will miss you here in San Diego!!!", "my boss is bullying me...", " what interview! leave me alone",
    "17yo M c/o palpitations x 3 months,  FHx of MI", "heart attcak in dad\r\nmom with thyroid disease",
    "I`d have responded, if I were going", "Journey!? Wow... u just became cooler.  hehe... (is that possible!?)",
]


def tiny_tokenizer(kind: str, texts, add_prefix_space: bool = True, trim_offsets: bool = True):
    """A byte-level BPE (RoBERTa's, with the given prefix and offset trimming) or a BPE under
    SentencePiece's Metaspace ("▁"), trained on `texts`."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers

    if kind == "byte_level":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space, trim_offsets=trim_offsets)
        tok.post_processor = processors.RobertaProcessing(("</s>", 1), ("<s>", 0), trim_offsets=trim_offsets,
                                                          add_prefix_space=add_prefix_space)
        alphabet = pre_tokenizers.ByteLevel.alphabet()
    else:
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
        tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 0),
                                                                                                ("</s>", 1)])
        alphabet = []
    trainer = trainers.BpeTrainer(vocab_size=1500, special_tokens=["<s>", "</s>", "<unk>"], show_progress=False,
                                  initial_alphabet=alphabet)
    tok.train_from_iterator(texts, trainer)
    return tok


KINDS = {"bpe, prefix, trimmed": ("byte_level", True, True), "bpe, prefix, untrimmed": ("byte_level", True, False),
         "bpe, no prefix, untrimmed": ("byte_level", False, False), "sentencepiece ▁": ("metaspace", True, True)}


def _offsets(tok, text):
    if hasattr(tok, "encode_batch"):  # a tokenizers.Tokenizer
        return np.asarray(tok.encode(text).offsets).reshape(-1, 2)
    return np.asarray(tok(text, return_offsets_mapping=True)["offset_mapping"]).reshape(-1, 2)


def roundtrip_failures(tok, texts, rng, n_spans: int = 2) -> list:
    """Random spans of each text, targets through the tokenizer's offsets and back to characters:
    [(text, span, join_whitespace, decoded)] where the decoded spans are not the span stripped of
    whitespace, with or without joining over whitespace. Two kinds of span: from one token's start
    to another's end, and whole words with a space at an edge."""
    bad = []
    for text in texts:
        if not text.strip():
            continue
        off = _offsets(tok, text)
        real = np.flatnonzero(off[:, 1] > off[:, 0])
        words = [(m.start(), m.end()) for m in re.finditer(r"[^ ]+", text)]
        for _ in range(n_spans):
            i, j = sorted(rng.choice(real, 2))
            a, b = sorted(rng.choice(len(words), 2))
            for span in ((int(off[i, 0]), int(off[j, 1])),
                         (max(words[a][0] - int(rng.integers(0, 2)), 0), min(words[b][1] + 1, len(text)))):
                probs = token_to_char_probs(off, token_targets(off, [span], text), len(text))
                # one span: its inner spaces carry its probability, so it decodes whole without joining
                for join in (True, False):
                    got = decode_threshold(probs, 0.5, text, join_whitespace=join)
                    if got != strip_spans([span], text):
                        bad.append((text, span, join, got))
    return bad


@pytest.mark.versions
@pytest.mark.parametrize("kind", list(KINDS))
def test_tiny_bpe_and_sentencepiece_offsets_keep_a_spans_first_character(kind):
    tok = tiny_tokenizer(KINDS[kind][0], CORPUS * 3, *KINDS[kind][1:])
    text = "Sooo SAD I will miss you"
    off = _offsets(tok, text)
    assert (off[0] == 0).all() and (off[-1] == 0).all()  # <s>, </s>
    target = token_targets(off, [(5, 8)], text)  # "SAD"
    assert target[0] == target[-1] == -100
    assert all((t == 1) == (s < 8 and e > 5 and text[s:e].strip() != "") for (s, e), t in zip(off[1:-1], target[1:-1]))
    got = decode_threshold(token_to_char_probs(off, target, len(text)), 0.5, text)
    assert got == ((5, 8),)
    assert roundtrip_failures(tok, CORPUS, np.random.default_rng(0), n_spans=6) == []


@pytest.fixture(params=["all-MiniLM-L6-v2", "all-mpnet-base-v2"])
def wordpiece(request):
    """A real WordPiece tokenizer: all-MiniLM-L6-v2 (shipped with the kit's test install), then
    all-mpnet-base-v2 where the kit's model cache holds it (`python -m utils.models get all-mpnet-base-v2`)."""
    from transformers import AutoTokenizer

    from utils.models import local

    if request.param == "all-MiniLM-L6-v2":
        return AutoTokenizer.from_pretrained(request.getfixturevalue("minilm_path"))
    folder = local(request.param)
    if folder is None:
        pytest.skip(f"{request.param} is not in the kit's model cache: python -m utils.models get {request.param}")
    return AutoTokenizer.from_pretrained(folder)


@pytest.mark.versions
def test_wordpiece_targets_hand_checked_and_a_note_pair_masked(wordpiece):
    tok = wordpiece
    text = "17yo M c/o palpitations,  FHx of MI"
    enc = tok(text, return_offsets_mapping=True)
    target = token_targets(enc["offset_mapping"], [(11, 23)], text)  # "palpitations"
    words = [tok.convert_ids_to_tokens(i) for i, t in zip(enc["input_ids"], target) if t == 1]
    assert "".join(w.removeprefix("##") for w in words) == "palpitations"
    assert target[0] == target[-1] == -100 and set(target[1:-1]) == {0, 1}
    pair = tok("Palpitations", text, return_offsets_mapping=True)
    mask = np.array([s == 1 for s in pair.sequence_ids()])
    both = token_targets(pair["offset_mapping"], [(11, 23)], text, sequence_mask=mask)
    assert (both[~mask] == -100).all() and list(both[mask]) == list(target[1:-1])
    assert roundtrip_failures(tok, CORPUS, np.random.default_rng(0), n_spans=6) == []


@pytest.mark.integration
@pytest.mark.versions
def test_random_spans_of_real_tweets_survive_every_tokenizer_and_back(tweets, minilm_path):
    from transformers import AutoTokenizer

    from utils.models import local

    texts = tweets["text"].sample(400, random_state=0).tolist()
    toks = {k: tiny_tokenizer(v[0], tweets["text"].head(4000), *v[1:]) for k, v in KINDS.items()}
    toks["all-MiniLM-L6-v2"] = AutoTokenizer.from_pretrained(minilm_path)
    mpnet = local("all-mpnet-base-v2")  # in the kit's model cache only after `python -m utils.models get`
    if mpnet is not None:
        toks["all-mpnet-base-v2"] = AutoTokenizer.from_pretrained(mpnet)
    rng = np.random.default_rng(0)
    failed = {k: roundtrip_failures(tok, texts, rng)[:3] for k, tok in toks.items()}
    assert not any(failed.values()), failed


# ----------------------------------------------------------------------------- the real data


@pytest.mark.integration
def test_every_real_tweet_label_aligns_and_scores_one_against_itself(tweets):
    pairs = zip(tweets["text"], tweets["selected_text"])
    found = [align(t, s, f"train.csv, row {i}") for i, (t, s) in enumerate(pairs)]
    exact = np.array([x for _, x in found])
    spans = [sp for sp, _ in found]
    assert len(tweets) == 21995 and exact.all()  # this 80% copy holds every selected_text verbatim
    cut = [t[sp[0][0]:sp[0][1]] if sp else "" for t, sp in zip(tweets["text"], spans)]
    assert cut == tweets["selected_text"].tolist()
    assert word_jaccard(tweets["selected_text"], cut) == 1.0
    whole = word_jaccard(tweets["selected_text"], tweets["text"])
    assert abs(whole - 0.59) < 0.01  # the README's "about 0.59" for the whole tweet (0.5875 here)


@pytest.mark.integration
def test_every_real_nbme_location_parses_inside_its_note_and_matches_its_annotation(nbme):
    spans, differ, pieces = [], 0, 0
    for i, r in enumerate(nbme.itertuples()):
        where = f"train.csv, column location, row {i}"
        items, notes = ast.literal_eval(r.location), ast.literal_eval(r.annotation)
        assert len(items) == len(notes)
        row = check_spans(parse_location(r.location, where), r.pn_history, where)
        for item, note in zip(items, notes):
            # the annotation reads the pieces as written (13 rows write them out of order: "790 823;753 768")
            written = [tuple(int(x) for x in piece.split()) for piece in item.split(";")]
            assert parse_location(item, where) == tuple(sorted(written))
            pieces += len(written) > 1
            differ += " ".join(r.pn_history[s:e] for s, e in written) != note
        spans.append(row)
        assert parse_location(format_location(row)) == row
    assert len(nbme) == 11678 and differ == 4 and pieces > 0  # the README's 4 spans off by whitespace
    assert char_micro_f1(spans, spans) == 1.0 and char_micro_f1(spans, [()] * len(spans)) == 0.0


def test_the_span_metrics_are_in_the_registry_greater_is_better_and_score_by_hand():
    from utils.metrics import METRICS

    jaccard, f1, f5 = METRICS["jaccard"], METRICS["char_f1"], METRICS["f5"]
    assert all(m.greater_is_better and m.needs == "spans" and not m.rule for m in (jaccard, f1, f5))
    # rows: {a,b,c} vs {a,b}: 2/3; {x} vs {x}: 1 -> mean 5/6
    assert jaccard.score(["a b c", "X"], ["a b", "x"]) == pytest.approx(5 / 6)
    # [0, 4) against [2, 6): 2 true positives, 2 false positives, 2 misses -> F1 0.5
    assert f1.score([((0, 4),)], [((2, 6),)]) == pytest.approx(0.5)
    assert f1.loss([((0, 4),)], [((2, 6),)]) == pytest.approx(-0.5)  # what checkpoints minimise
    # one true entity found among two predicted: P 1/2, R 1, F5 = 26 * 0.5 / (25 * 0.5 + 1)
    assert f5.score([((0, 3),), ()], [((0, 3), (5, 6)), ()]) == pytest.approx(13 / 13.5)
    assert f5.score([((0, 3),), ()], [(), ((0, 3),)]) == 0.0  # the same place in another row is another entity


# ----------------------------------------------------------------------------- the span shape in the loop

TWEET, NBME = "tweet-sentiment-extraction", "nbme-score-clinical-patient-notes"


def _fast(tok):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", cls_token="<s>",
                                   sep_token="</s>", pad_token="<s>", unk_token="<unk>")


def _word_spans(text, rng, n=2) -> tuple:
    """Up to n spans of whole words of `text`, never neighbours (decoding joins spans that only
    whitespace separates), sorted."""
    words = [m.span() for m in re.finditer(r"\S+", text)][::2]
    picks = sorted(rng.choice(len(words), min(n, len(words)), replace=False)) if words else []
    return tuple(words[i] for i in picks)


def _one_hot(ds, heads: int) -> np.ndarray:
    """What a perfect model outputs: each window's targets as probabilities (windows, S, heads)."""
    width = max(len(x) for x in ds.input_ids)
    out = np.zeros((len(ds), width, heads))
    for w, t in enumerate(ds.targets):
        if heads == 1:
            out[w, : len(t), 0] = np.clip(t, 0, 1)
        else:
            out[w, t[0], 0] = out[w, t[1], 1] = 1.0
    return out


@pytest.mark.versions
@pytest.mark.parametrize("kind", [*KINDS, "all-MiniLM-L6-v2"])
@pytest.mark.parametrize("max_len", [512, 8])
def test_span_rows_round_trip_through_tokens_windows_and_characters(kind, max_len, request):
    """Targets made from spans, given back as a perfect model's token outputs, come back out of the
    character scores as the same spans, whole windows or strided ones, for BPE (Ġ, with and without
    offset trimming), SentencePiece (▁) and WordPiece: no first character lost or doubled."""
    from transformers import AutoTokenizer

    from utils.objective import SPANS
    from utils.shapes import SpanDataset
    from utils.spans import decode, strip_spans

    if kind in KINDS:
        tok = _fast(tiny_tokenizer(KINDS[kind][0], CORPUS * 3, *KINDS[kind][1:]))
    else:
        tok = AutoTokenizer.from_pretrained(request.getfixturevalue("minilm_path"))
    rng = np.random.default_rng(1)
    texts = [t for t in CORPUS if t.strip()] * 2
    many = SPANS.__class__("spans", "", (), ("spans",), ("spans",), (), count="many", labels_as="offsets")
    truth = [(t, _word_spans(t, rng)) for t in texts]
    ds = SpanDataset(texts, tok, max_len, truth, heads=1, objective=many)
    windows = np.bincount(ds.owner)
    assert ds.n_truncated == int((windows > 1).sum()) and (ds.n_truncated > 0) == (max_len < 30)
    assert max(ds.lengths) <= max_len
    chars = ds.per_text(_one_hot(ds, 1))
    assert chars.shape[:2] == (len(texts), max(map(len, texts)))
    # At float16's precision, as a fold's chars.npz keeps them: the validation score, oof.csv's answers
    # and a blend's decoding of the file agree to the character (a score of 0.50002 is 0.5 in both).
    noisy = ds.per_text(rng.uniform(0.45, 0.55, _one_hot(ds, 1).shape))
    assert noisy.dtype == np.float32 and np.array_equal(noisy, noisy.astype(np.float16).astype(np.float32))
    got = [decode(t, c[: len(t)], 0.5) for t, c in zip(texts, chars)]
    assert got == [strip_spans(s, t) for t, s in truth]
    one = dataclasses_replace(many, count="one", labels_as="text")
    truth1 = [(t, t[s[0][0]:s[0][1]] if s else "") for t, s in truth]
    ds1 = SpanDataset(texts, tok, 512, truth1, heads=2, objective=one)
    chars1 = ds1.per_text(_one_hot(ds1, 2))
    got1 = [t[s:e] for t, c in zip(texts, chars1) for s, e in decode(t, c[: len(t)])]
    assert got1 == [a for _, a in truth1]


def dataclasses_replace(obj, **kw):
    import dataclasses

    return dataclasses.replace(obj, **kw)


@pytest.mark.versions
@pytest.mark.parametrize("slug", [TWEET, NBME])
def test_a_span_run_trains_and_its_cv_is_the_metric_of_oof_answers(slug, tmp_path, tiny_bert, capsys):
    from helpers import cfg_for

    from utils.competition import load_competition
    from utils.metrics import METRICS
    from utils.objective import objective_of, read_chars
    from utils.runs import read_metrics, read_oof
    from utils.spans import decode
    from utils.train import run_cv

    comp = load_competition(slug)
    if slug == TWEET:
        (tmp_path / "data").mkdir()
        tweet_table().to_csv(tmp_path / "data" / "train.csv", index=False)
    else:
        nbme_folder(tmp_path / "data")
    run = tmp_path / "run"
    metrics = run_cv(cfg_for(tmp_path / "data" / "train.csv", run, tiny_bert, competition=slug, max_len=16,
                             max_steps=3))
    oof = read_oof(run)
    assert list(oof.frame.columns) == ["id", comp.target_cols[0], "pred", "fold"]
    y, p = oof.arrays()
    metric = METRICS[comp.metric_name]
    assert metrics["cv"] == pytest.approx(metric.score(y, p))  # exactly oof.csv's answers
    assert (run / "fold0" / "chars.npz").is_file() and (run / "fold1" / "chars.npz").is_file()
    saved = {k: read_chars(run / f"fold{k}") for k in (0, 1)}
    frame = oof.frame
    for k in (0, 1):
        rows = frame[frame["fold"] == k]
        assert list(saved[k]) == rows["id"].astype(str).tolist()  # in oof.csv's order
        if k == 0:  # a chars.npz of an older kit (its ids an object array): the fold's oof.csv names its rows
            with np.load(run / "fold0" / "chars.npz") as z:
                kept = {name: z[name] for name in ("lengths", "scores", "texts")}
            np.savez_compressed(run / "fold0" / "chars.npz", ids=rows["id"].astype(object).to_numpy(), **kept)
            old = read_chars(run / "fold0")
            assert list(old) == list(saved[0]) and all(np.array_equal(old[i][1], saved[0][i][1]) for i in old)
        assert [t for t, _ in saved[k].values()] == [str(x) for x in rows["id"].map(_texts(tmp_path / "data", comp))]
        assert all(c.shape == (len(t), 2 if slug == TWEET else 1) for t, c in saved[k].values())
        # Decoding the file gives back oof.csv's answers, as a blend of one run reads them (float16 both)
        t = {int(j): v for j, v in (metrics.get("thresholds_per_fold") or {}).items()}.get(k, 0.5)
        obj = objective_of(comp)
        assert [obj.cell(obj.written(x, decode(x, c, t))) for x, c in saved[k].values()] == \
            rows["pred"].fillna("").astype(str).tolist()
    # Prediction reads rows as the CV did: fold 0's model on its own validation rows gives its chars.npz.
    from utils.predict import predict_folds, predict_replicas
    from utils.tables import read_table

    train = read_table(comp, tmp_path / "data", "train").set_index(comp.id_col)
    valid = train.loc[frame.loc[frame["fold"] == 0, "id"].astype(str)]
    again = predict_folds(run, comp.input_texts(valid), progress=False)[0]
    for (text, c), p in zip(saved[0].values(), again):
        assert np.allclose(c, p[: len(text)], atol=2e-3)
    from utils.model import TextModel

    model, tok = TextModel.load(run / "fold0")
    texts = comp.input_texts(valid)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i][1]))  # the longest text in the second part
    texts = [texts[i] for i in order]
    from utils.shapes import shape_of

    one = predict_replicas([model], tok, texts, 16, shape=shape_of(comp))
    two = predict_replicas([model, model], tok, texts, 16, shape=shape_of(comp))
    assert one.shape == two.shape and np.allclose(one, two, atol=1e-6)
    if slug == NBME:  # each fold's threshold: the best on the other fold's character scores, no peeking
        obj = oof.objective
        thresholds = read_metrics(run)["thresholds_per_fold"]
        said = f"(each fold at the threshold its other folds fit: 0: {thresholds['0']:g}, 1: {thresholds['1']:g})"
        assert said in capsys.readouterr().out  # the last fold's line: why fold 0's score moved
        for k in (0, 1):
            other = 1 - k
            truth = [obj.answer(c) for c in frame.loc[frame["fold"] == other, "location"]]
            chars = list(saved[other].values())
            best = max(obj.THRESHOLDS, key=lambda t: (metric.score(truth, [decode(x, c, t) for x, c in chars]),
                                                      -abs(t - 0.5)))
            assert thresholds[str(k)] == pytest.approx(best)
            mine = frame[frame["fold"] == k]["pred"].fillna("").tolist()
            assert mine == [obj.cell(decode(x, c, best)) for x, c in saved[k].values()]
    else:
        assert "thresholds_per_fold" not in read_metrics(run)
    # The fold records its training rows' conditions; rows read with another one are said on stderr
    from utils.fold import read_fold

    trained = comp.input_texts(train.loc[frame.loc[frame["fold"] == 1, "id"].astype(str)])  # fold 0's training
    assert read_fold(run / "fold0").saved["seen"] == {"conditions": sorted({c for c, _ in trained})}
    capsys.readouterr()
    predict_folds(run, texts, progress=False)
    assert "condition no training row had" not in capsys.readouterr().err
    odd = [("a condition never trained on", t) for _, t in texts[:3]] + texts[3:]
    predict_folds(run, odd, progress=False)
    err = capsys.readouterr().err
    assert f"warning: {run}: 3 of {len(odd)} rows are read with a condition no training row had (e.g. " \
           "'a condition never trained on'; 1 such): their spans come from a model that never learned it" in err
    assert err.count("condition no training row had") == 1  # once for the run, not once per fold


def _texts(data: Path, comp):
    """id -> the span text, as the kit joins it."""
    from utils.tables import read_table

    df = read_table(comp, data, "train")
    return dict(zip(df[comp.id_col].astype(str), df[comp.span_col]))


def test_span_descriptions_are_checked_in_one_line():
    from utils.competition import BUILTIN, Competition, CompetitionError

    tweet = BUILTIN[TWEET]
    bad = [({"span_col": "sentiment"}, "span_col"), ({"span_labels": "tokens"}, "span_labels"),
           ({"span_count": "two"}, "span_count"), ({"metric": "char_f1"}, "metric"),
           ({"text_template": "{sentiment} {text}"}, "text_cols")]
    for change, field in bad:
        with pytest.raises(CompetitionError, match=f"field '{field}'"):
            Competition(**{**tweet.to_dict(), **change})
    with pytest.raises(CompetitionError, match="span_col is for task spans"):
        Competition(slug="x", span_col="excerpt")
    assert BUILTIN[NBME].span_side == 1 and BUILTIN[NBME].metric_name == "char_f1"
    assert Competition.from_dict(tweet.to_dict()) == tweet


def test_join_keys_written_with_leading_zeros_match(tmp_path):
    from utils.competition import BUILTIN
    from utils.tables import join_key, read_table

    assert join_key(pd.Series(["00016", "16", "000", "a07", 3])).tolist() == ["16", "16", "0", "a07", "3"]
    folder = nbme_folder(tmp_path)
    test = read_table(BUILTIN[NBME], folder, "test")
    notes = pd.read_csv(folder / "patient_notes.csv")
    assert test["pn_history"].tolist() == [notes["pn_history"][1]] * 2 + [notes["pn_history"][2]]
    assert test["feature_text"].tolist() == ["cat-OR-dog", "sun", "cat-OR-dog"]


@pytest.mark.parametrize("cell, message", [
    ("['5 4000']", "is not inside a text of"), ("['5 x']", "is not a location"), ("['9 3']", "starts after it ends")])
def test_bad_locations_name_the_file_column_and_row(tmp_path, cell, message):
    from utils.competition import BUILTIN
    from utils.data import DataError
    from utils.tables import read_table

    folder = nbme_folder(tmp_path)
    train = pd.read_csv(folder / "train.csv")
    train.loc[3, "location"] = cell
    train.to_csv(folder / "train.csv", index=False)
    with pytest.raises(DataError, match=rf"train.csv.*column 'location', row 5 \(id '{train['id'][3]}'\).*({message})"):
        read_table(BUILTIN[NBME], folder, "train")


def test_tweet_labels_not_in_their_text(tmp_path, capsys):
    from utils.competition import BUILTIN
    from utils.data import DataError
    from utils.tables import read_table

    df = tweet_table()
    df.loc[4, "selected_text"] = df.loc[4, "selected_text"].upper() + "  "  # the same words, not verbatim
    df.to_csv(tmp_path / "train.csv", index=False)
    read_table(BUILTIN[TWEET], tmp_path, "train")
    err = capsys.readouterr().err
    assert "not found verbatim in column 'text' at 1 of 24 rows (first: row 6)" in err
    df.loc[7, "selected_text"] = "zebra"
    df.to_csv(tmp_path / "train.csv", index=False)
    with pytest.raises(DataError, match=r"column 'selected_text', row 9 .*'zebra' shares no word with its text"):
        read_table(BUILTIN[TWEET], tmp_path, "train")


def test_a_span_run_refuses_to_go_on_with_a_changed_joined_table(tmp_path, tiny_bert, capsys):
    """NBME's rows are train.csv joined with patient_notes.csv and features.csv: a changed note or
    feature text is another run's input, refused in one line like a changed train.csv, not trained on
    beside the folds of the old one."""
    from helpers import assert_one_line_error, one_fold_argv

    from utils.train import main as train_main

    data = nbme_folder(tmp_path / "data")
    argv = [*one_fold_argv(data / "train.csv", tiny_bert, tmp_path / "run", "--competition", NBME, "--max-len",
                           "16"), "--max-steps", "1"]
    assert train_main(argv) == 0
    notes = pd.read_csv(data / "patient_notes.csv")
    for table, edit in (("patient_notes.csv", lambda t: t.assign(pn_history=t.pn_history + " birds sing")),
                        ("features.csv", lambda t: t.assign(feature_text="sun-OR-cat"))):
        before = (data / table).read_text()
        edit(pd.read_csv(data / table, dtype=str)).to_csv(data / table, index=False)
        assert train_main([*argv, "--only-folds", "1"]) == 2, table
        assert_one_line_error(capsys.readouterr().err, "joins_sha256 changed (the tables joined onto --train-csv)")
        (data / table).write_text(before)
    assert len(notes) == 8 and train_main([*argv, "--only-folds", "1"]) == 0  # as it was: the run goes on


def test_a_missing_feature_and_a_missing_condition_are_one_line(tmp_path):
    from utils.competition import BUILTIN
    from utils.data import DataError
    from utils.tables import read_table

    folder = nbme_folder(tmp_path)
    test = pd.read_csv(folder / "test.csv", dtype=str)
    test.loc[1, "feature_num"] = "007"
    test.to_csv(folder / "test.csv", index=False)
    with pytest.raises(DataError, match=r"test.csv: 1 rows have a 'feature_num' missing from features.csv, e.g. '7'"):
        read_table(BUILTIN[NBME], folder, "test")
    train = pd.read_csv(folder / "train.csv", dtype=str, keep_default_na=False)
    train.loc[2, "pn_num"] = " "  # a blank key: its row named (not every row, its column read as floats)
    train.to_csv(folder / "train.csv", index=False)
    with pytest.raises(DataError, match=r"train.csv: column 'pn_num' \(the key that joins patient_notes.csv\) is "
                                        r"blank in row 4 \(id \w+\)$"):
        read_table(BUILTIN[NBME], folder, "train")
    tweets = tweet_table().drop(columns=["sentiment"])
    tweets.to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(DataError, match="t.csv is missing column 'sentiment'"):
        from utils.tables import read_split

        read_split(BUILTIN[TWEET], tmp_path / "t.csv", "test")


@pytest.mark.versions
def test_a_slow_tokenizer_and_pooling_tokens_elsewhere_are_refused(tiny_bert, tmp_path):
    from transformers import BertTokenizer

    from utils.competition import BUILTIN
    from utils.config import TrainConfig, check_settings
    from utils.objective import objective_of
    from utils.shapes import SpanDataset

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\ncat\n")
    tok = BertTokenizer(str(vocab))  # slow in transformers 4.x; 5.x has only tokenizers-backed (fast) ones
    if tok.is_fast:
        assert SpanDataset(["cat"], tok, 16).per_text(np.zeros((1, 3, 1))).shape == (1, 3, 1)
    else:
        with pytest.raises(ValueError, match="span tasks need a fast tokenizer"):
            SpanDataset(["cat"], tok, 16, objective=objective_of(BUILTIN[TWEET]))
    with pytest.raises(ValueError, match="--pooling tokens .* is for span tasks"):
        cfg = TrainConfig(train_csv="t.csv", out="o", model="m", pooling="tokens")
        check_settings(cfg, BUILTIN["commonlitreadabilityprize"])
    # a pooling or fit that a span task replaces is said, once each; the defaults and its own are not
    from utils.config import ignored_settings

    asked = TrainConfig(train_csv="t.csv", out="o", model="m", pooling="mean", fit="head")
    assert ignored_settings(asked, BUILTIN[NBME]) == [
        "note: --pooling mean is not used: a spans model takes pooling 'tokens'",
        "note: --fit head is not used: a spans model takes fit 'windows'"]
    assert ignored_settings(TrainConfig(train_csv="t.csv", out="o", model="m", fit="windows"), BUILTIN[NBME]) == []
    assert ignored_settings(asked, BUILTIN["commonlitreadabilityprize"]) == []


def blended_pair(tmp_path, slug: str, models, **settings):
    """Two tiny runs of a span competition on 24 rows (one per model), then their blend:
    (competition, data folder, runs, blend_report, load_members)."""
    from helpers import cfg_for, tiny_data

    from utils import ensemble
    from utils.competition import load_competition
    from utils.train import run_cv

    comp, data = load_competition(slug), tmp_path / "data"
    tiny_data(slug, data, 24)
    runs = [tmp_path / "bert", tmp_path / "mpnet"]
    for run, model in zip(runs, models):
        run_cv(cfg_for(data / "train.csv", run, model, competition=slug, max_steps=3, **settings))
    return comp, data, runs, ensemble.blend_report(runs), ensemble.load_members(runs)


def submitted_blend(tmp_path, comp, data, runs, report):
    """The blend submitted by utils.predict (blend.json saved first), and what it must answer:
    (the test rows, the runs' test character scores blended by the report's weights, the submission)."""
    from utils import ensemble, predict
    from utils.tables import read_table

    ensemble.save_blend(tmp_path / "blend.json", report)
    out = tmp_path / "sub.csv"
    assert predict.main(["--test-csv", str(data / "test.csv"), "--runs", *map(str, runs), "--blend",
                         str(tmp_path / "blend.json"), "--out", str(out)]) == 0
    test = read_table(comp, data, "test")
    chars = [predict.predict_run(r, comp.input_texts(test), progress=False) for r in runs]
    mixed = sum(w * c for w, c in zip(report["weights"], chars))
    return test, mixed, pd.read_csv(out, keep_default_na=False, dtype=str)


@pytest.mark.versions
def test_two_tokenizers_blend_in_character_space_and_submit_the_blend(tmp_path, tiny_bert, tiny_mpnet):
    """A WordPiece and an MPNet run of Tweet blend their character scores: the members' scores are
    their chars.npz, the weights are fitted on the other folds by Jaccard of the decoded answers,
    and the submission answers the blend of the two runs' test character scores."""
    from utils.metrics import METRICS
    from utils.objective import objective_of
    from utils.spans import decode

    comp, data, runs, report, m = blended_pair(tmp_path, TWEET, (tiny_bert, tiny_mpnet), max_len=16)
    obj, metric = objective_of(comp), METRICS["jaccard"]
    assert m["P"].shape == (24, 2, max(len(t) for t, _ in m["y"]), 2)
    for i, name in enumerate(report["runs"]):  # each member scored as its own CV
        assert report["scores"][name] == pytest.approx(json_cv(runs[i]))
    honest = np.zeros(m["P"].shape[:1] + m["P"].shape[2:])
    for k, w in report["weights_per_fold"].items():
        held = m["folds"] == int(k)
        honest[held] = np.tensordot(m["P"][held], np.asarray(w), axes=([1], [0]))
    assert report["score_blend_cv"] == pytest.approx(metric.score(obj.truth(m["y"], 1), obj.scored(m["y"], honest)))
    test, mixed, sub = submitted_blend(tmp_path, comp, data, runs, report)
    texts = test["text"].tolist()
    want = [x[s:e] for x, c in zip(texts, mixed) for s, e in decode(x, c[: len(x)])]
    got = sub.set_index("textID").loc[test["textID"], "selected_text"]
    assert got.tolist() == want


def json_cv(run) -> float:
    import json

    return json.loads((Path(run) / "metrics.json").read_text())["cv"]


PII_RESHAPE = '''
import json

import pandas as pd

LABELS = ["NAME_STUDENT", "EMAIL"]


def reshape(df, split):
    """A row per (document, entity type): the type is the condition, its places the spans."""
    rows = []
    for _, d in df.iterrows():
        found = json.loads(d["entities"]) if split == "train" else []
        for label in LABELS:
            spans = ";".join(f"{s} {e}" for kind, s, e in found if kind == label)
            rows.append({"row_id": f"{d['document']}_{label}", "document": d["document"], "label": label,
                         "full_text": d["full_text"], "location": spans})
    return pd.DataFrame(rows)
'''


def pii_folder(folder: Path, n: int = 12) -> Path:
    """PII Data Detection's shape over the tiny words: documents, their entities as (type, start,
    end), a test file of documents and a sample submission of (document, type) rows."""
    from conftest import WORDS

    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    docs = []
    for i in range(n):
        words = list(rng.choice(WORDS, 10))
        text = " ".join(words[:4]) + " cat sat " + " ".join(words[4:]) + " dog"
        name, email = text.index("cat sat"), len(text) - 3
        docs.append({"document": i, "full_text": text,
                     "entities": json.dumps([["NAME_STUDENT", name, name + 7], ["EMAIL", email, email + 3]])})
    pd.DataFrame(docs).to_csv(folder / "train.csv", index=False)
    pd.DataFrame(docs[:2]).drop(columns="entities").assign(document=[100, 101]).to_csv(folder / "test.csv", index=False)
    pd.DataFrame({"row_id": [f"{d}_{k}" for d in (100, 101) for k in ("NAME_STUDENT", "EMAIL")],
                  "location": ""}).to_csv(folder / "sample_submission.csv", index=False)
    (folder / "pii.py").write_text(PII_RESHAPE)
    return folder


@pytest.mark.versions
def test_entities_of_several_types_are_spans_conditioned_on_their_type(tmp_path, tiny_bert):
    """PII Data Detection (and Feedback Prize's discourse types) in the same fields: a reshape makes
    a row per (document, entity type), the type the condition, its places offsets; F5 over each
    row's exact spans. Trained, its CV is F5 of oof.csv's answers, and the submission holds offsets
    inside each document in the sample's rows."""
    from helpers import cfg_for

    from utils import predict
    from utils.competition import load_competition
    from utils.metrics import METRICS
    from utils.runs import read_oof
    from utils.spans import check_spans, parse_location
    from utils.train import run_cv

    data = pii_folder(tmp_path / "pii")
    desc = {"slug": "pii-detection-removal-from-educational-data", "id_col": "row_id", "reshape": "pii",
            "reshape_file": "pii.py", "text_cols": ["label", "full_text"], "target_cols": ["location"],
            "task": "spans", "metric": "f5", "span_col": "full_text", "span_labels": "offsets", "span_count": "many",
            "folds": "group", "group_col": "document"}
    (data / "competition.json").write_text(json.dumps(desc))
    comp = load_competition(str(data / "competition.json"))
    run = tmp_path / "run"
    metrics = run_cv(cfg_for(data / "train.csv", run, tiny_bert, competition=str(data / "competition.json"),
                             max_len=16, max_steps=4, lr=5e-3, head_lr=5e-3))
    y, p = read_oof(run).arrays()
    assert len(y) == 24 and metrics["metric"] == "f5" and metrics["cv"] == pytest.approx(METRICS["f5"].score(y, p))
    assert all(len(a) == 1 for a in y)  # one place per (document, type) row
    out = tmp_path / "sub.csv"
    assert predict.main(["--test-csv", str(data / "test.csv"), "--runs", str(run), "--out", str(out)]) == 0
    sub = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert sub["row_id"].tolist() == pd.read_csv(data / "sample_submission.csv", dtype=str)["row_id"].tolist()
    text = pd.read_csv(data / "test.csv")["full_text"][0]
    for cell in sub["location"]:
        check_spans(parse_location(cell), text)
    assert comp.span_side == 1


@pytest.mark.versions
def test_a_lora_decoder_learns_spans_the_same_way(tmp_path, tiny_decoders):
    """A decoder (Llama's conventions: no pad token, a start token, SentencePiece offsets) with LoRA
    adapters trains a span task through the same loop; its answers are parts of their tweets."""
    from helpers import LORA, cfg_for, tweet_table

    from utils.runs import read_oof
    from utils.train import run_cv

    (tmp_path / "d").mkdir()
    tweet_table().to_csv(tmp_path / "d" / "train.csv", index=False)
    run = tmp_path / "run"
    metrics = run_cv(cfg_for(tmp_path / "d" / "train.csv", run, tiny_decoders["llama"], competition=TWEET,
                             max_len=24, max_steps=2, **{**LORA, "pooling": "tokens"}))
    oof = read_oof(run).frame
    texts = tweet_table().set_index("textID")["text"]
    assert np.isfinite(metrics["cv"]) and all(str(p) in texts[i] for i, p in zip(oof["id"], oof["pred"].fillna("")))
    kit = json.loads((run / "fold0" / "kit_config.json").read_text())
    assert kit["model"]["lora_r"] == 4 and kit["model"]["pooling"] == "tokens"


def test_no_pooling_hands_every_token_state_to_the_head():
    import torch

    from utils.pooling import NO_POOLING, POOLING_MODES, build_pooling

    pool = build_pooling(NO_POOLING, 8)
    h = torch.randn(2, 5, 8)
    assert NO_POOLING not in POOLING_MODES and pool.output_dim == 8 and torch.equal(pool(h, torch.ones(2, 5)), h)


def test_pseudo_labels_of_spans_are_character_scores_and_a_catalogue_is_refused_in_one_line(tmp_path):
    from utils.competition import BUILTIN
    from utils.config import TrainConfig, check_settings
    from utils.data import DataError
    from utils.pseudo import check_not_ranking

    check_not_ranking(BUILTIN[TWEET])  # other texts' character scores are made (tests/test_distil.py trains on them)
    cfg = TrainConfig(train_csv="t.csv", out="o", model="m", pseudo_csv="p.csv")
    check_settings(cfg, BUILTIN[NBME])
    eedi = "eedi-mining-misconceptions-in-mathematics"
    with pytest.raises(DataError, match="answers a ranking of a catalogue .*not yet for this one"):
        check_not_ranking(BUILTIN[eedi])
    with pytest.raises(ValueError, match=f"--pseudo-csv: {eedi} answers a ranking of a catalogue"):
        check_settings(cfg, BUILTIN[eedi])


def test_review_defects_of_the_span_rows(tmp_path):
    """A condition that leaves windows no room, several spans where one is answered, f5 on text
    answers, NaN scores and a start/end edge on the space a "▁" token covers: each said or handled."""
    from utils.competition import BUILTIN, Competition, CompetitionError
    from utils.data import DataError
    from utils.objective import objective_of
    from utils.spans import decode, token_edges_to_char
    from utils.tables import read_table

    # "▁boss" covers the space before it: the start score lands on "b", the end on the last "s"
    edges = token_edges_to_char([(0, 2), (2, 7)], [0.3, 0.7], 7, "start", text="my boss")
    assert edges.tolist() == pytest.approx([0.3, 0, 0, 0.7, 0, 0, 0])
    assert token_edges_to_char([(0, 2), (2, 7)], [0.3, 0.7], 7, "end", text="my boss")[6] == pytest.approx(0.7)
    assert decode("hello world", np.full((11, 2), np.nan)) == ()
    with pytest.raises(CompetitionError, match="f5 scores spans written as offsets"):
        Competition(**{**BUILTIN[TWEET].to_dict(), "metric": "f5"})
    folder = nbme_folder(tmp_path / "n")
    one = Competition(**{**BUILTIN[NBME].to_dict(), "span_count": "one"})
    train = pd.read_csv(folder / "train.csv")
    train.loc[0, "location"] = "['0 3', '5 9']"
    train.to_csv(folder / "train.csv", index=False)
    with pytest.raises(DataError, match=r"row 2 .*2 spans where span_count 'one' answers with one"):
        read_table(one, folder, "train")
    from utils.shapes import SpanDataset

    tok = _fast(tiny_tokenizer("byte_level", CORPUS * 3, True, True))
    long_condition = " ".join(["heart"] * 20)
    text = CORPUS[0] * 3
    with pytest.raises(ValueError, match=r"the condition 'heart heart .* takes 20 tokens \(24 with the special "
                                         r"tokens\) of max_len 16, leaving 0 for its text in each window \(at least 8 "
                                         r"needed\): train with a larger --max-len"):  # training refuses
        SpanDataset([(long_condition, text)], tok, 16, targets=[(text, "")], objective=objective_of(BUILTIN[TWEET]))
    # prediction (a condition no training row had) cuts it to its first tokens: half of each window is the text's
    ds = SpanDataset([(long_condition, text)], tok, 16, objective=objective_of(BUILTIN[TWEET]))
    assert all(len(ids) <= 16 and m.sum() == 8 for ids, m in zip(ds.input_ids[:-1], ds.masks[:-1]))
    assert tok.convert_ids_to_tokens(ds.input_ids[0])[:7] == ["<s>", *["Ġheart"] * 4, "</s>", "</s>"]  # 4 kept
    covered = np.zeros(len(text), bool)
    for o, m in zip(ds.offsets, ds.masks):
        covered[o[m, 0].min():o[m, 1].max()] = True
    assert covered[len(text) - len(text.lstrip()):].all()  # every character of the text read in some window
    # oof.csv's texts "NA" and "None" stay texts when read back (read_oof_csv reads every oof.csv)
    from utils.files import read_oof_csv

    pd.DataFrame({"id": ["a", "b"], "selected_text": ["NA", "None"], "pred": ["None", ""], "fold": 0}).to_csv(
        tmp_path / "oof.csv", index=False)
    frame = read_oof_csv(tmp_path / "oof.csv")
    y, p = objective_of(BUILTIN[TWEET]).outputs.oof_arrays(frame, ["selected_text"])
    assert list(y) == ["NA", "None"] and list(p) == ["None", ""]


def test_probe_defects_of_the_span_family(tmp_path, tiny_bert, capsys):
    """An independent probe's findings: a lone carriage return in a written text, runs that read an
    id's text differently blended position by position, the kit's separator character in a span
    text, a long condition at prediction, a join key read as floats, a span of a blank text."""
    from helpers import cfg_for

    from utils import ensemble
    from utils.competition import BUILTIN
    from utils.data import DataError
    from utils.files import read_oof_csv, write_csv
    from utils.objective import objective_of
    from utils.shapes import SpanDataset
    from utils.spans import check_spans
    from utils.tables import join_key
    from utils.train import run_cv

    # a text with a lone "\r" is quoted, so the file reads back as written (was: 4 rows of NaN)
    frame = pd.DataFrame({"id": ["a", "b"], "selected_text": ["good\rday", "fine"], "pred": ["a\rb", ""],
                          "fold": [0, 1]})
    write_csv(tmp_path / "oof.csv", frame)
    back = read_oof_csv(tmp_path / "oof.csv")
    assert back["selected_text"].tolist() == ["good\rday", "fine"] and back["pred"].fillna("").tolist() == ["a\rb", ""]
    write_csv(tmp_path / "plain.csv", frame.iloc[1:])  # files without one are written as before
    assert (tmp_path / "plain.csv").read_text() == "id,selected_text,pred,fold\nb,fine,,1\n"
    # a text holding \x1f (the kit's column separator) is read verbatim: the span's offsets index it
    obj, tok = objective_of(BUILTIN[NBME]), _fast(tiny_tokenizer("byte_level", CORPUS * 3, True, True))
    note = "my boss\x1fis bullying me"
    at = note.index("bullying")
    ds = SpanDataset([("boss", note)], tok, 64, targets=[(note, ((at, at + 8),))], objective=obj)
    on = ds.offsets[0][np.asarray(ds.targets[0]) == 1]
    assert note[on[:, 0].min():on[:, 1].max()].strip() == "bullying"
    # NBME's keys written 00016, 16 and (a column pandas read as floats) 16.0 are one key
    assert join_key(pd.Series(["00016", "16", "16.0", "16.", "0.0", "1.5", "x"])).tolist() == \
        ["16", "16", "16", "16", "0", "1.5", "x"]
    with pytest.raises(ValueError, match="row 3: span '129 132' of a blank text$"):
        check_spans([(129, 132)], "", "row 3")
    # two runs whose texts differ for the same ids (another version of the file): their blend is refused
    data = tmp_path / "data"
    data.mkdir()
    tweet_table().to_csv(data / "train.csv", index=False)
    other = tweet_table()
    other["text"] = "we like to play " + other["text"]
    other.to_csv(tmp_path / "other.csv", index=False)
    for run, csv in ((tmp_path / "a", data / "train.csv"), (tmp_path / "b", tmp_path / "other.csv")):
        run_cv(cfg_for(csv, run, tiny_bert, competition=TWEET, max_len=16, max_steps=1))
    with pytest.raises(DataError, match=r"b read the text of id '00000000' as 'we like to play .* but .*a as '.*': "
                                        "only runs trained on the same texts blend"):
        ensemble.blend_report([tmp_path / "a", tmp_path / "b"])


@pytest.mark.versions
def test_a_one_head_span_blend_decodes_at_thresholds_fitted_on_other_folds(tmp_path, tiny_bert, tiny_mpnet, capsys):
    """NBME's blend: each member scored as its own CV (each fold at the threshold its other folds
    fit), the blend's fold k decoded at the threshold that fold k's weights' blend of the other folds
    scores best, and the submission decodes the blended test scores at the threshold fitted on every
    out-of-fold row (blend.json's rule)."""
    from utils.metrics import METRICS
    from utils.objective import objective_of
    from utils.spans import decode, format_location

    comp, data, runs, report, m = blended_pair(tmp_path, NBME, (tiny_bert, tiny_mpnet), max_len=48, folds=3)
    obj, metric = objective_of(comp), METRICS["char_f1"]
    truth = obj.truth(m["y"], 1)
    for i, name in enumerate(report["runs"]):
        assert report["scores"][name] == pytest.approx(json_cv(runs[i]))

    def f1(rows, chars, t):
        return metric.score(truth[rows], obj.scored(m["y"][rows], chars[rows], t))

    answers = np.empty(len(truth), dtype=object)
    assert sorted(report["rules_per_fold"]) == [0, 1, 2]
    for k, w in report["weights_per_fold"].items():
        held = m["folds"] == int(k)
        mixed = np.tensordot(m["P"], np.asarray(w), axes=([1], [0]))
        t = max(obj.THRESHOLDS, key=lambda t: (f1(~held, mixed, t), -abs(t - 0.5)))
        assert report["rules_per_fold"][k] == {"threshold": pytest.approx(t)}
        answers[held] = obj.scored(m["y"][held], mixed[held], t)
    assert report["score_blend_cv"] == pytest.approx(metric.score(truth, answers))
    everyone = np.tensordot(m["P"], np.asarray(report["weights"]), axes=([1], [0]))
    t = report["rule"]["threshold"]
    assert t == max(obj.THRESHOLDS, key=lambda t: (f1(np.ones(len(truth), bool), everyone, t), -abs(t - 0.5)))
    test, mixed, sub = submitted_blend(tmp_path, comp, data, runs, report)
    notes = test["pn_history"].tolist()
    want = [format_location(decode(x, c[: len(x)], t)) for x, c in zip(notes, mixed)]
    got = sub.set_index("id").loc[test["id"], "location"]
    assert want != [format_location(decode(x, c[: len(x)], 0.5)) for x, c in zip(notes, mixed)]  # the rule matters
    assert got.tolist() == want
    # weights given by hand, no blend.json: the note says how labels are made (the span task's default)
    from utils import predict

    capsys.readouterr()
    assert predict.main(["--test-csv", str(data / "test.csv"), "--runs", *map(str, runs), "--weights", "0.5", "0.5",
                         "--out", str(tmp_path / "by_hand.csv")]) == 0
    assert "labels by the default rule (characters above 0.5)" in capsys.readouterr().err
    # a member's oof.csv sorted by hand: its character scores follow its rows by id, the blend is the same
    from utils import ensemble

    oof = pd.read_csv(runs[1] / "oof.csv", dtype=str, keep_default_na=False)
    oof.sort_values("id", ascending=False).to_csv(runs[1] / "oof.csv", index=False)
    again = ensemble.blend_report(runs)
    assert again["weights"] == pytest.approx(report["weights"])
    assert again["score_blend_cv"] == pytest.approx(report["score_blend_cv"])
    assert again["scores"] == pytest.approx(report["scores"])


def test_a_one_head_span_metric_fits_each_folds_threshold_without_its_rows():
    """Decoded (a one-head span blend's metric) on character scores whose best threshold differs per
    fold: fold k's threshold is the best of THRESHOLDS on the other folds' rows alone (by hand), the
    same as Metric.honest_score's generic loop, and the score decodes each fold at its own."""
    from utils.competition import BUILTIN
    from utils.metrics import METRICS, Metric
    from utils.objective import Decoded, objective_of

    obj = objective_of(BUILTIN[NBME])
    metric = obj.outputs.blend_metric_of(METRICS["char_f1"])
    assert isinstance(metric, Decoded) and metric.rule == "threshold"
    text = "pain in the left chest"
    levels = {0: (0.75, 0.55), 1: (0.45, 0.25), 2: (0.65, 0.35)}  # (span characters, the others) per fold
    rows, scores, folds = [], [], []
    for k, (inside, outside) in levels.items():
        for s, e in ((0, 4), (12, 16), (17, 22)):
            p = np.full((len(text), 1), outside)
            p[s:e] = inside
            rows.append((text, obj.written(text, ((s, e),))))
            scores.append(p)
            folds.append(k)
    y = np.empty(len(rows), dtype=object)
    for i, r in enumerate(rows):
        y[i] = r
    pred, folds = np.stack(scores), np.array(folds)
    score, rules = metric.honest_score(y, pred, folds)
    assert (score, rules) == Metric.honest_score(metric, y, pred, folds)
    answers = np.empty(len(y), dtype=object)
    for k in levels:
        others = folds != k
        f1 = lambda t: METRICS["char_f1"].score(obj.truth(y[others], 1), obj.scored(y[others], pred[others], t))  # noqa: E731,B023
        t = max(obj.THRESHOLDS, key=lambda t: (f1(t), -abs(t - 0.5)))
        assert rules[k] == {"threshold": t}
        answers[folds == k] = obj.scored(y[folds == k], pred[folds == k], t)
    assert rules[0] == {"threshold": 0.4} and rules[1] == {"threshold": 0.55}  # of [0.35, 0.45), [0.55, 0.65)
    assert score == pytest.approx(METRICS["char_f1"].score(obj.truth(y, 1), answers)) and score < 1
    assert metric.score_under(y, pred, folds, {str(k): r for k, r in rules.items()}) == pytest.approx(score)
    with pytest.raises(ValueError, match=r"no decision rule for fold\(s\) \[2\]"):
        metric.score_under(y, pred, folds, {0: rules[0], 1: rules[1]})


def test_a_very_long_span_text_says_how_many_of_an_epochs_windows_it_makes(capsys):
    # Plain texts say how many were cut; a span task reads a long text whole, in windows, and one very
    # long text can fill most of an epoch: the fold's line counts the windows and a warning names the row.
    from utils.competition import BUILTIN
    from utils.config import TrainConfig
    from utils.objective import objective_of
    from utils.shapes import SpanDataset
    from utils.train import truncation_note

    obj = objective_of(BUILTIN[TWEET])

    tok = _fast(tiny_tokenizer("byte_level", CORPUS * 3, True, True))
    texts = [CORPUS[0], CORPUS[1], " ".join(CORPUS) * 6]
    ds = SpanDataset(texts, tok, 16, targets=[(t, "") for t in texts], objective=obj)
    windows = int((ds.owner == 2).sum())
    assert ds.n_truncated == 1 and windows > len(ds.owner) / 2
    assert ds.fit_note == f"read whole in overlapping windows: {windows} of the {len(ds.owner)} windows (row 3 alone " \
                          f"{windows})"
    err = capsys.readouterr().err
    assert f"1 of 3 texts longer than max_len 16 make {windows} of the {len(ds.owner)} windows, most of an epoch " \
           f"(row 3 alone {windows})" in err
    line = truncation_note(TrainConfig(train_csv="t.csv", out="o", model="m", max_len=16), 0, 1, 3, ds.fit_note)
    assert line == f"fold 0: 1 of 3 texts longer than max_len 16, {ds.fit_note}" and "first tokens kept" not in line
    short = SpanDataset(texts[:2], tok, 512, targets=[(t, "") for t in texts[:2]], objective=obj)
    assert short.fit_note == "" and short.n_truncated == 0


def test_a_blank_tweet_is_left_out_of_training_and_the_cv_and_every_other_row_keeps_its_fold(tmp_path, tiny_bert,
                                                                                            capsys):
    # The real train.csv has one blank tweet with an empty selected_text: nothing to learn, and Kaggle's
    # Jaccard divides by zero there (the kit's scored it 1.0). Left out after the folds are made.
    from helpers import cfg_for, tweet_table, write_csv

    from utils import ensemble, runs
    from utils.train import run_cv

    table = tweet_table(30)
    for d in ("whole", "blank"):
        (tmp_path / d).mkdir()
    whole = write_csv(table, tmp_path / "whole" / "train.csv")
    table.loc[4, ["text", "selected_text"]] = ""
    blank = write_csv(table, tmp_path / "blank" / "train.csv")
    kw = dict(competition=TWEET, max_steps=1, max_len=16)
    run_cv(cfg_for(whole, tmp_path / "a", tiny_bert, **kw))
    capsys.readouterr()
    m = run_cv(cfg_for(blank, tmp_path / "b", tiny_bert, **kw))
    err = capsys.readouterr()
    assert "column 'text' is empty at row 6 (id 00000004): left out of training and of the CV" in err.out + err.err
    oof = runs.collect_oof(tmp_path / "b")
    assert "00000004" not in set(oof["id"].astype(str)) and len(oof) == 29 and np.isfinite(m["cv"])
    folds = {r: pd.read_csv(tmp_path / r / "folds.csv", dtype=str).set_index("id")["fold"] for r in ("a", "b")}
    assert folds["a"].equals(folds["b"])  # the same folds, the blank row's included
    run_cv(cfg_for(blank, tmp_path / "c", tiny_bert, **kw, pooling="mean"))
    assert ensemble.main(["--runs", str(tmp_path / "b"), str(tmp_path / "c"), "--out", str(tmp_path / "bl.json")]) == 0
