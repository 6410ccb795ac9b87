"""The backbone families Kagglers bring, each a tiny random model with a real tokenizer of its kind
built offline and saved in its hub layout (tests/conftest.py's ENCODERS: DeBERTa-v3 as spm.model +
tokenizer_config.json and no tokenizer.json, XLM-RoBERTa's sentencepiece.bpe.model, ModernBERT's
byte-level BPE), through every shape of competition, masked-LM pretraining, LoRA, the memory
estimate and the offline kernel; the decoders Qwen3 and Gemma 3 beside Llama, Qwen2 and Gemma 2;
and what each family needs installed, said in one line when it is missing."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import ENCODERS, tiny_frame
from helpers import (
    OWNER,
    assert_fold_reproduces_its_oof,
    cfg_for,
    input_tree,
    run_offline,
    submission_notebook,
    tiny_data,
)

from utils import backbone as bb
from utils.batching import Collator, TextDataset
from utils.competition import load_competition
from utils.fold import ModelSpec
from utils.model import TextModel, load_fold, load_tokenizer, max_positions

# versions: tokenizers converted from SentencePiece, model classes and LoRA differ across transformers
pytestmark = pytest.mark.versions

TWEET, NBME = "tweet-sentiment-extraction", "nbme-score-clinical-patient-notes"
SCIENCE, EEDI, TWEETS = "kaggle-llm-science-exam", "eedi-mining-misconceptions-in-mathematics", "nlp-getting-started"
TINY = dict(max_steps=2, max_len=32, lr=2e-5, only_folds=(0,))  # one fold of 2, two steps


def one_line(e) -> str:
    text = str(e.value)
    assert "\n" not in text and "Traceback" not in text
    return text


# ----------------------------------------------------------------------------- tokenizers and loading


@pytest.mark.parametrize("family", ENCODERS)
def test_each_family_loads_from_its_hub_layout_and_padding_moves_nothing(tiny_encoders, family):
    """The hub layout as published (DeBERTa-v3: no tokenizer.json, the fast tokenizer converted from
    spm.model), a fast tokenizer (offsets for spans), only ids and a mask fed to the model (DeBERTa-v3's
    type_vocab_size is 0, ModernBERT takes no token types), and a padded batch computing what each
    text alone does (ModernBERT's non-flash attention, DeBERTa's relative positions)."""
    folder = Path(tiny_encoders[family])
    assert (folder / "tokenizer.json").is_file() == (family == "modernbert")
    tok = load_tokenizer(str(folder))
    assert tok.is_fast and tok.mask_token is not None and tok.pad_token_id is not None
    texts = ["the cat sat on a mat", ("a dog ran home", "birds sing"), "17 y/o male c/o chest pain x2 days"]
    ds = TextDataset(texts, tok, 64)
    batch = Collator(tok.pad_token_id)([ds[i] for i in range(len(texts))])
    assert "token_type_ids" not in batch  # ids and a mask only
    assert (batch["attention_mask"] == 0).any()  # really padded
    model = TextModel.from_backbone(str(folder), ModelSpec(pooling="attention")).eval()
    with torch.no_grad():
        both = model(batch["input_ids"], batch["attention_mask"])
        for i in range(len(texts)):
            n = int(batch["attention_mask"][i].sum())
            alone = model(batch["input_ids"][i:i + 1, :n], batch["attention_mask"][i:i + 1, :n])
            assert torch.allclose(both[i], alone[0], atol=1e-5), family
    config = model.backbone.config
    if family == "deberta-v3":
        assert config.type_vocab_size == 0 and max_positions(str(folder)) is None  # relative positions only
    else:
        assert max_positions(str(folder)) == 512


def test_deberta_v3_reads_past_512_tokens_only_at_the_length_asked(tiny_encoders):
    """DeBERTa-v3's tokenizer says it takes 10^30 tokens: the kit cuts at --max-len, never at the
    tokenizer's model_max_length, and its relative positions read 600 tokens."""
    folder = tiny_encoders["deberta-v3"]
    tok = load_tokenizer(folder)
    assert tok.model_max_length > 10**6
    text = " ".join(["the cat sat on a mat"] * 200)
    assert len(tok(text)["input_ids"]) > 700
    ds = TextDataset([text], tok, 600)
    assert len(ds.input_ids[0]) == 600
    model = TextModel.from_backbone(folder, ModelSpec(pooling="mean")).eval()
    with torch.no_grad():
        out = model(torch.tensor(ds.input_ids), torch.ones(1, 600, dtype=torch.long))
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("family", ENCODERS)
def test_span_targets_decode_to_the_exact_characters_without_a_gained_space(tiny_encoders, family):
    """NBME's character spans through each tokenizer's offsets (SentencePiece's "▁word" and byte-level
    BPE's "Ġword" cover the space before the word): token targets, then character scores, then the
    decoded spans are the labelled characters, no space gained at either edge."""
    from utils.spans import decode, token_targets, token_to_char_probs

    tok = load_tokenizer(tiny_encoders[family])
    text = "17 y/o male c/o chest pain x2 days; denies fever.  Dad with MI at 52, the cat and the sun"
    spans = tuple((text.index(w), text.index(w) + len(w)) for w in ("chest pain", "fever", "MI", "cat and the"))
    enc = tok(text, return_offsets_mapping=True)
    offsets = enc["offset_mapping"]
    if family != "xlm-roberta":  # (transformers 5 trims XLM-R's offsets; 4.x does not)
        assert any(e > s and text[s].isspace() for s, e in offsets)  # offsets that hold the space before
    targets = token_targets(offsets, spans, text)
    probs = np.where(targets == 1, 0.9, 0.1).astype(np.float32)
    found = decode(text, token_to_char_probs(offsets, probs, len(text))[:, None])
    assert found == spans, [text[s:e] for s, e in found]


# ----------------------------------------------------------------------------- every shape, trained


@pytest.fixture(scope="module", params=ENCODERS)
def family_runs(request, tmp_path_factory, tiny_encoders):
    """One family's runs, once per module: masked-LM pretraining on the texts, then values on the
    pretrained backbone (2 folds), classes, NBME's spans, options and a catalogue (one fold each)."""
    from utils.pretrain import PretrainConfig, pretrain
    from utils.train import run_cv

    family = request.param
    tmp = tmp_path_factory.mktemp(f"runs-{family}")
    tiny_frame(12).to_csv(tmp / "train.csv", index=False)
    mlm = pretrain(PretrainConfig(texts=(str(tmp / "train.csv"),), model=tiny_encoders[family], out=str(tmp / "mlm"),
                                  epochs=1, batch_size=8, max_len=32, progress=False))
    runs = {"mlm": (tmp / "mlm", mlm)}
    m = run_cv(cfg_for(tmp / "train.csv", tmp / "values", str(tmp / "mlm"), max_steps=2, lr=2e-5))
    runs["values"] = (tmp / "values", m)
    for slug in (TWEETS, NBME, SCIENCE, EEDI):
        data = tiny_data(slug, tmp / slug, 12)
        comp = load_competition(slug)
        m = run_cv(cfg_for(data / comp.train_file, tmp / f"run-{slug}", tiny_encoders[family], competition=slug,
                           pooling="mean", **TINY))
        runs[slug] = (tmp / f"run-{slug}", m, data)
    return family, tmp, runs


def test_every_shape_trains_and_a_fold_reproduces_its_oof(family_runs):
    family, tmp, runs = family_runs
    out, metrics = runs["values"]
    assert metrics["folds_done"] == [0, 1] and np.isfinite(metrics["cv"])
    assert_fold_reproduces_its_oof(out, 1, tmp / "train.csv")  # reloaded from its folder alone
    saved = json.loads((out / "fold0" / "config.json").read_text())
    assert saved["model_type"] == {"deberta-v3": "deberta-v2"}.get(family, family)
    for slug in (TWEETS, NBME, SCIENCE, EEDI):
        assert runs[slug][1]["folds_done"] == [0] and np.isfinite(runs[slug][1]["cv"]), slug


def test_masked_lm_pretraining_moves_the_backbone_the_run_then_trains(family_runs, tiny_encoders):
    """Each family has a masked-LM head: pretraining measures a finite held-out loss before and after,
    moves the backbone's weights, and saves a backbone the values run trained from."""
    from safetensors.torch import load_file

    family, tmp, runs = family_runs
    mlm, report = runs["mlm"]
    assert np.isfinite(report["loss_before"]) and np.isfinite(report["loss_after"])
    assert load_tokenizer(str(mlm)).mask_token is not None
    before = load_file(str(Path(tiny_encoders[family]) / "model.safetensors"))
    after = load_file(str(mlm / "model.safetensors"))
    assert [k for k in after if k in before and not torch.equal(after[k], before[k])]
    assert json.loads((runs["values"][0] / "fold0" / "kit_config.json").read_text())["train"]["model"] == str(mlm)


@pytest.mark.parametrize("slug", [TWEETS, NBME, SCIENCE, EEDI])
def test_each_shapes_submission_answers_the_samples_rows(family_runs, slug, tmp_path):
    from utils import predict
    from utils.spans import parse_location

    family, tmp, runs = family_runs
    run, _, data = runs[slug]
    comp = load_competition(slug)
    got = predict.submit([run], data / comp.test_file, tmp_path / "submission.csv", progress=False)
    sample = pd.read_csv(data / comp.sample_submission, dtype=str)
    assert list(got.columns) == list(sample.columns) and len(got) == len(sample)
    if slug == NBME:  # offsets of the note's characters, none starting or ending on a space
        from utils.tables import read_table

        texts = read_table(comp, data, "test").set_index(comp.id_col)[comp.span_col]
        got = pd.read_csv(tmp_path / "submission.csv", dtype=str, keep_default_na=False)
        for rid, loc in zip(got[comp.id_col], got[comp.answer_column]):
            text = texts.loc[rid]
            for s, e in parse_location(loc):
                assert not text[s].isspace() and not text[e - 1].isspace(), (family, text[s:e])


def test_a_fold_records_its_tokenizer_and_a_different_tokenization_is_refused_in_one_line(family_runs, tmp_path):
    """transformers 5 rebuilt SentencePiece tokenizers with another normalizer: a fold trained on 4.x
    may tokenize otherwise on 5.x. The fold records its tokenizer's ids and offsets on fixed texts;
    loaded where the ids differ (or, for a span task, the offsets), it is refused in one line, never
    silently mixed."""
    import transformers

    family, tmp, runs = family_runs

    def altered(fold, what, name):
        copy = shutil.copytree(fold, tmp_path / name)
        record = json.loads((copy / "kit_config.json").read_text())
        first = record["tokenizer"]["probe"][1]
        if what == "ids":
            first["ids"][1] = first["ids"][1] + 1
        else:  # the space before a word counted in, as a 4.x SentencePiece tokenizer may give
            k = next(i for i, (s, e) in enumerate(first["offsets"]) if e > s + 1)
            first["offsets"][k][0] += 1
        record["tokenizer"]["transformers"] = "4.57.3"
        (copy / "kit_config.json").write_text(json.dumps(record))
        return copy

    values, spans = runs["values"][0] / "fold0", runs[NBME][0] / "fold0"
    for fold in (values, spans):
        saved = json.loads((fold / "kit_config.json").read_text())["tokenizer"]
        assert saved["transformers"] == transformers.__version__ and saved["probe"][0]["offsets"]
        load_fold(fold, "cpu")  # the same tokenization here: loads
    for fold, what in ((values, "ids"), (spans, "ids"), (spans, "offsets")):
        copy = altered(fold, what, f"{fold.parent.name}-{what}")
        with pytest.raises(ValueError) as e:
            load_fold(copy, "cpu")
        msg = one_line(e)
        assert f"gives other {what} here" in msg and "transformers 4.57.3" in msg and str(copy) in msg
    load_fold(altered(values, "offsets", "values-offsets"), "cpu")  # offsets place a span task's answers only


def test_a_tokenizer_saved_by_transformers_5_loads_with_the_same_ids_here(tiny_encoders, tmp_path):
    """transformers 5 writes `extra_special_tokens` as a list, which 4.x read as a dict and failed on
    (a fold trained on 5 could not be predicted in a kernel on 4.57): it loads, to the same ids."""
    from utils.model import tokenizer_identity

    tok = load_tokenizer(tiny_encoders["deberta-v3"])
    tok.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    config["extra_special_tokens"] = ["[PAD]", "[CLS]", "[SEP]"]  # as transformers 5 writes it
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    assert tokenizer_identity(load_tokenizer(str(tmp_path)))["probe"] == tokenizer_identity(tok)["probe"]


@pytest.mark.parametrize("family", ENCODERS)
def test_lora_adapts_each_familys_own_projections_and_the_memory_estimate_counts_them(tiny_encoders, family):
    pytest.importorskip("peft")
    from transformers import AutoConfig

    folder = tiny_encoders[family]
    fam = bb.family_of(AutoConfig.from_pretrained(folder))
    model = TextModel.from_backbone(folder, ModelSpec(pooling="mean", lora_r=4))
    adapted = {n.split(".lora_A")[0].split(".")[-1] for n, _ in model.named_parameters() if "lora_A" in n}
    assert adapted == set(fam.lora_targets), adapted
    trained = sum(p.numel() for n, p in model.backbone.named_parameters() if p.requires_grad)
    config = model.backbone.config
    est = bb.estimate_memory(config, "bf16", 4, 64, lora_r=4)
    base = TextModel.from_backbone(folder, ModelSpec(pooling="mean")).backbone  # without BERT's pooler
    assert est.params == sum(p.numel() for p in base.parameters())  # counted without loading it
    assert est.trained == trained  # the adapters the estimate counts are the ones peft made
    full = bb.estimate_memory(config, "bf16", 4, 64)
    double = bb.estimate_memory(config, "bf16", 8, 64)
    assert est.total < full.total and double.activations == pytest.approx(2 * full.activations)


@pytest.mark.parametrize("family", ENCODERS)
def test_gradient_checkpointing_gives_the_gradients_it_saves_memory_for(tiny_encoders, family):
    """Recomputed layers give the gradients stored ones do (checkpointing had bugs in DeBERTa and
    ModernBERT across releases)."""
    tok = load_tokenizer(tiny_encoders[family])
    ds = TextDataset(["the cat sat on a mat", "a dog ran home while birds sing"], tok, 32)
    batch = Collator(tok.pad_token_id)([ds[0], ds[1]])
    grads = []
    for on in (False, True):
        torch.manual_seed(0)
        model = TextModel.from_backbone(tiny_encoders[family], ModelSpec(pooling="mean"), gradient_checkpointing=on)
        model.train()
        model(batch["input_ids"], batch["attention_mask"]).sum().backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys()
    for n in grads[0]:
        assert torch.allclose(grads[0][n], grads[1][n], atol=1e-5), (family, n)


# ----------------------------------------------------------------------------- what a family needs


def test_a_family_newer_than_this_transformers_is_one_line_naming_the_release(tiny_encoders, monkeypatch):
    import transformers

    with pytest.raises(ValueError) as e:
        bb.check_floor("modernbert", "answerdotai/ModernBERT-base", "4.47.1")
    assert "ModernBERT needs transformers >= 4.48 (this is 4.47.1)" in one_line(e)
    bb.check_floor("modernbert", "x", "4.48.0")
    bb.check_floor("qwen3", "x", "4.51.3")
    with pytest.raises(ValueError, match="Gemma 3 needs transformers >= 4.50"):
        bb.check_floor("gemma3_text", "x", "4.49.0")
    monkeypatch.setattr(transformers, "__version__", "4.46.3")
    with pytest.raises(ValueError) as e:
        load_tokenizer(tiny_encoders["modernbert"])
    assert "pip install -U 'transformers>=4.48'" in one_line(e) and tiny_encoders["modernbert"] in str(e.value)
    # a hub name: transformers only says it does not know the model type

    def unknown(*args, **kw):
        raise ValueError("The checkpoint you are trying to load has model type `modernbert` but Transformers does "
                         "not recognize this architecture.")

    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", unknown)
    with pytest.raises(ValueError) as e:
        max_positions("answerdotai/ModernBERT-base")
    assert one_line(e) == ("answerdotai/ModernBERT-base: ModernBERT needs transformers >= 4.48 (this is 4.46.3): "
                           "pip install -U 'transformers>=4.48'")


@pytest.mark.parametrize("package", ["sentencepiece", "google.protobuf"])
@pytest.mark.parametrize("family", ["deberta-v3", "xlm-roberta"])
def test_a_sentencepiece_tokenizer_without_its_packages_names_the_missing_one(tiny_encoders, family, package,
                                                                             monkeypatch):
    """Without sentencepiece (or protobuf) transformers 5 falls back to tiktoken and asks to install
    that; the kit names the package the SentencePiece model needs."""
    monkeypatch.setitem(sys.modules, package, None)
    with pytest.raises(ValueError) as e:
        load_tokenizer(tiny_encoders[family])
    name = package.split(".")[-1]
    assert f"needs {name}, which is not installed: pip install {name}" in one_line(e)
    assert "tiktoken" not in str(e.value)


@pytest.mark.parametrize("error", [
    ValueError("`tiktoken` is required to read a `tiktoken` file. Install it with `pip install tiktoken`."),  # 5.x
    AttributeError("'NoneType' object has no attribute 'endswith'"),  # 4.57.3 (huggingface/transformers#42583)
])
def test_a_hub_models_sentencepiece_tokenizer_without_sentencepiece_names_it(error, monkeypatch):
    import utils.model as um

    def fails(*args, **kw):
        raise error

    monkeypatch.setattr(um, "_pretrained", fails)
    monkeypatch.setitem(sys.modules, "sentencepiece", None)
    with pytest.raises(ValueError) as e:
        load_tokenizer("microsoft/deberta-v3-base")
    assert one_line(e) == ("the tokenizer of microsoft/deberta-v3-base (a SentencePiece model) needs sentencepiece, "
                           "which is not installed: pip install sentencepiece")
    monkeypatch.delitem(sys.modules, "sentencepiece")  # installed: transformers' own error stands
    with pytest.raises(type(error), match="tiktoken|endswith"):
        load_tokenizer("microsoft/deberta-v3-base")


@pytest.mark.parametrize("family", ["deberta-v3", "xlm-roberta"])
def test_a_corrupt_sentencepiece_model_is_named_unreadable_not_a_missing_tiktoken(tiny_encoders, family, tmp_path):
    folder = shutil.copytree(tiny_encoders[family], tmp_path / family)
    spm = next(folder.glob("*.model"))
    spm.write_bytes(spm.read_bytes()[:200])  # a truncated download
    with pytest.raises(ValueError) as e:
        load_tokenizer(str(folder))
    assert f"{spm} is unreadable" in one_line(e) and "tiktoken" not in str(e.value)


def test_a_model_folder_without_a_vocabulary_is_refused_before_training(tiny_encoders, tiny_csv, tmp_path):
    """With no spm.model (nor any vocabulary) transformers 5 builds DeBERTa-v3's tokenizer from its
    special tokens alone, and every word would train as [UNK]."""
    from utils.train import run_cv

    folder = shutil.copytree(tiny_encoders["deberta-v3"], tmp_path / "deberta")
    (folder / "spm.model").unlink()
    with pytest.raises(ValueError) as e:
        run_cv(cfg_for(tiny_csv, tmp_path / "run", str(folder), **TINY))
    assert f"model folder {folder} has no tokenizer vocabulary" in one_line(e)
    assert not list((tmp_path / "run").glob("fold*"))


# ----------------------------------------------------------------------------- decoders


def test_qwen3_pools_its_real_last_token_whatever_the_padding_side(tiny_decoders):
    """Qwen3 pads with <|endoftext|> and ends a turn with <|im_end|>: last-token pooling takes the
    <|im_end|> state of each text, padded on the left or on the right, never a pad's."""
    folder = tiny_decoders["qwen3"]
    tok = load_tokenizer(folder)
    assert tok.pad_token == "<|endoftext|>" and tok.eos_token == "<|im_end|>" and tok.pad_token_id != tok.eos_token_id
    texts = ["the cat sat on a mat<|im_end|>", "a dog ran home while birds sing and trees grow<|im_end|>"]
    ds = TextDataset(texts, tok, 64)
    assert all(ids[-1] == tok.eos_token_id for ids in ds.input_ids)
    torch.manual_seed(0)
    model = TextModel.from_backbone(folder, ModelSpec(pooling="last", num_outputs=0, lora_r=2)).eval()
    with torch.no_grad():
        alone = [model.backbone(input_ids=torch.tensor([ids])).last_hidden_state[0, -1] for ids in ds.input_ids]
        for side in ("left", "right"):
            b = Collator(tok.pad_token_id, padding_side=side)([ds[0], ds[1]])
            assert (b["input_ids"] == tok.pad_token_id).any()
            pooled = model(b["input_ids"], b["attention_mask"])
            for i in range(2):
                assert torch.allclose(pooled[i], alone[i], atol=1e-5), side


@pytest.mark.parametrize("family", ["qwen3", "gemma3"])
def test_qwen3_and_gemma3_train_with_lora_and_a_fold_reproduces_its_oof(tiny_decoders, family, tmp_path):
    from helpers import lora_for

    from utils.train import run_cv

    tiny_csv = tmp_path / "train.csv"
    tiny_frame(16).to_csv(tiny_csv, index=False)
    metrics = run_cv(lora_for(tiny_csv, tmp_path / "run", tiny_decoders[family], max_steps=2, only_folds=(1,)))
    assert metrics["folds_done"] == [1] and np.isfinite(metrics["cv"])
    assert_fold_reproduces_its_oof(tmp_path / "run", 1, tiny_csv)  # the adapters reloaded onto the base


@pytest.mark.parametrize("family", ["gemma2", "gemma3"])
def test_gemma_never_runs_in_fp16_by_the_one_precision_rule(tiny_decoders, family, monkeypatch):
    from transformers import AutoConfig

    fam = bb.family_of(AutoConfig.from_pretrained(tiny_decoders[family]))
    assert fam.decoder and not fam.fp16
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for has_bf16, want in ((False, "fp32"), (True, "bf16")):  # a T4, then an A100 / L4 / H100
        monkeypatch.setattr(bb, "gpu_has_bf16", lambda v=has_bf16: v)
        p = bb.precision_for("auto", fam, "cuda")
        assert p.name == want
        assert (want == "fp32") == ("fp16" in p.note)  # on a T4 the note says why not fp16
    assert "warning" in bb.precision_for("fp16", fam, "cuda").note


# ----------------------------------------------------------------------------- the bundle and the offline kernel


@pytest.mark.integration
def test_deberta_v3_bundled_runs_predict_offline_in_the_kernel(family_runs, tmp_path):
    """DeBERTa-v3's values run (its tokenizer converted from spm.model) through the bundle (fp16
    copies) and the submission kernel with the network off: what utils.predict writes from the same
    bundled folds."""
    from utils import predict
    from utils.bundle import BundleSpec, build

    family, tmp, runs = family_runs
    if family != "deberta-v3":
        pytest.skip("one family through the kernel: DeBERTa-v3's SentencePiece tokenizer")
    run = runs["values"][0]
    test = tiny_frame(6, seed=7).drop(columns=["target", "standard_error"]).assign(id=[f"t{i}" for i in range(6)])
    data = tmp_path / "data"
    data.mkdir()
    test.to_csv(data / "test.csv", index=False)
    test[["id"]].assign(target=0.0).to_csv(data / "sample_submission.csv", index=False)
    out = build(BundleSpec([run], OWNER, tmp_path / "bundle", notebooks=[submission_notebook(tmp_path)], wheels=None))
    kernel = Path(out["kernels"][0]["path"])
    meta = json.loads((kernel / "kernel-metadata.json").read_text())
    inp = tmp_path / "input"
    input_tree(inp, "new", out, data / "test.csv", [data / "sample_submission.csv"])
    work = run_offline(kernel / meta["code_file"], inp, tmp_path)
    got = pd.read_csv(work / "submission.csv", dtype={"id": str})
    models = Path(out["models"]["path"])
    want = predict.submit([models / r for r in out["models"]["runs"]], data / "test.csv", tmp_path / "want.csv",
                          progress=False)
    assert got["id"].tolist() == want["id"].astype(str).tolist()
    assert np.abs(got["target"].to_numpy() - want["target"].to_numpy()).max() < 1e-4
