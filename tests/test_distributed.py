"""Data-parallel training on 2 CPU processes (gloo), as on Kaggle's T4 x2 with NCCL.

Two processes with batch B each take one optimizer step on the mean gradient of 2 batches: the same
update as one process with batch B and grad_accum 2 over the same batch order. So a 2-process run is
compared with that single-process run (predictions agree to float rounding, ~1e-7), not with a
single-process run of the identical config, which takes twice the steps on half-size batches.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import cfg_for, tiny_data

from utils.batching import EpochBatches
from utils.train import run_cv

# versions: 2-process data-parallel training through accelerate
pytestmark = pytest.mark.versions

ROOT = Path(__file__).resolve().parents[1]
TOL = 1e-4  # measured max |pred difference| 2.4e-7: summation order of the gradient all-reduce


def free_port() -> int:
    # Not the default 29500: several test sessions may run side by side on one machine.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_env() -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def check_run(out: Path, log: str, reference: Path, n_rows: int) -> None:
    """Every row once in oof.csv, written by one process only, predictions as the reference run."""
    assert "2 process(es) on cpu" in log, log[-2000:]
    for k in (0, 1):  # a process that thought it was alone would print (and write) its own fold
        assert log.count(f"fold {k}: best") == 1, log[-2000:]
    assert sorted(p.name for p in out.iterdir()) == [
        "config.json", "fold0", "fold1", "folds.csv", "metrics.json", "oof.csv"]
    oof = pd.read_csv(out / "oof.csv", dtype={"id": str}).set_index("id").sort_index()
    ref = pd.read_csv(reference / "oof.csv", dtype={"id": str}).set_index("id").sort_index()
    assert len(oof) == n_rows and oof.index.is_unique and oof.index.equals(ref.index)
    assert (oof.fold == ref.fold).all()
    assert np.abs(oof.pred - ref.pred).max() < TOL
    for k in (0, 1):
        steps = [json.loads((run / f"fold{k}" / "history.json").read_text())["steps"]
                 for run in (out, reference)]
        assert steps[0] == steps[1]


@pytest.fixture(scope="module")
def reference(tiny_csv_module, tiny_bert, tmp_path_factory):
    """The single-process run equivalent to 2 processes: same batch size, grad_accum 2."""
    out = tmp_path_factory.mktemp("single") / "run"
    run_cv(cfg_for(tiny_csv_module, out, tiny_bert, grad_accum=2))
    return out


@pytest.fixture(scope="module")
def tiny_csv_module(tmp_path_factory):
    from conftest import tiny_frame

    path = tmp_path_factory.mktemp("data") / "train.csv"
    tiny_frame().to_csv(path, index=False)
    return path


@pytest.mark.parametrize("group_by_length", [True, False])
@pytest.mark.parametrize("n_rows", [30, 37, 41])
def test_each_process_gets_whole_batches_and_every_row(group_by_length, n_rows):
    from accelerate.data_loader import BatchSamplerShard

    lengths = np.random.default_rng(n_rows).integers(10, 300, n_rows)
    sampler = EpochBatches(lengths, 8, seed=42, group_by_length=group_by_length, processes=2)
    n_batches = -(-n_rows // 8)
    for epoch in range(8):  # the short batch falls at a different place each epoch
        sampler.set_epoch(epoch)
        # even_batches=False, as make_accelerator sets it: what every accelerate release accepts.
        shards = [list(BatchSamplerShard(sampler, 2, rank, even_batches=False)) for rank in (0, 1)]
        assert len(shards[0]) == len(shards[1]) == len(sampler) // 2  # same step count: no hang
        seen = [i for shard in shards for batch in shard for i in batch]
        assert set(seen) == set(range(n_rows))
        # Only an odd batch count repeats rows: one batch from the start evens the processes out.
        assert len(sampler) == n_batches + n_batches % 2
        assert len(seen) - n_rows == (len(list(sampler)[0]) if n_batches % 2 else 0)


def test_accelerator_accepts_the_kits_batch_samplers(tiny_csv_module, tiny_bert):
    # accelerate < 1.14 refuses a batch sampler without a batch size unless even_batches is off.
    from accelerate.data_loader import prepare_data_loader
    from torch.utils.data import DataLoader

    from utils.backbone import precision_for
    from utils.train import make_accelerator

    acc = make_accelerator(cfg_for(tiny_csv_module, "unused", tiny_bert), precision_for("auto"))
    assert acc.even_batches is False
    sampler = EpochBatches(np.arange(10, 30), 8, seed=1, group_by_length=True, processes=2)
    for rank in (0, 1):
        dl = prepare_data_loader(DataLoader(list(range(20)), batch_sampler=sampler), num_processes=2,
                                 process_index=rank, put_on_device=False, even_batches=acc.even_batches)
        assert [len(b) for b in dl] and len(list(dl)) == 2


def test_accelerate_launch_on_two_cpu_processes(tiny_csv_module, tiny_bert, reference, tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
           "--main_process_port", str(free_port()), "-m", "utils.train",
           "--train-csv", str(tiny_csv_module), "--out", str(out), "--model", tiny_bert,
           "--folds", "2", "--epochs", "2", "--batch-size", "8", "--eval-every", "2",
           "--lr", "0.001", "--no-progress"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    check_run(out, log, reference, 60)


def test_notebook_launcher_on_two_cpu_processes(tiny_csv_module, tiny_bert, reference, tmp_path):
    # What the training notebook runs when its num_processes parameter is > 1, from a plain process.
    out = tmp_path / "run"
    script = textwrap.dedent(f"""
        from accelerate import notebook_launcher
        from utils.config import TrainConfig
        from utils.train import run_cv

        cfg = TrainConfig(train_csv={str(tiny_csv_module)!r}, out={str(out)!r}, model={tiny_bert!r},
                          folds=2, epochs=2, batch_size=8, eval_every=2, lr=1e-3, progress=False)
        notebook_launcher(run_cv, args=(cfg,), num_processes=2, use_port="{free_port()}")
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=child_env(),
                          capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    check_run(out, log, reference, 60)


def test_pretraining_on_two_cpu_processes_resumes_as_it_would_have_ended(tiny_bert, tmp_path):
    """`accelerate launch -m utils.pretrain`: a run that dies in its second epoch (in a script that
    makes the held-out measurement raise) is finished by the same command and ends with the
    weights of an uninterrupted 2-process run."""
    from conftest import tiny_frame
    from safetensors.torch import load_file

    csv = tmp_path / "train.csv"
    tiny_frame(80).to_csv(csv, index=False)

    def launch(target, out, *extra):
        args = ["--texts", str(csv), "--model", tiny_bert, "--out", str(out), "--epochs", "3",
                "--batch-size", "8", "--lr", "0.01", "--no-progress"]
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes",
               "2", "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
               "--main_process_port", str(free_port()), *target, *args]
        proc = subprocess.run(cmd, cwd=tmp_path, env=child_env(), capture_output=True, text=True,
                              timeout=600)
        return proc.returncode, proc.stdout + proc.stderr

    rc, log = launch(["-m", "utils.pretrain"], tmp_path / "whole")
    assert rc == 0, log[-3000:]
    assert log.count("backbone saved") == 1 and log.count("epoch 3/3") == 1, log[-3000:]
    info = json.loads((tmp_path / "whole" / "pretrain.json").read_text())
    assert info["processes"] == 2

    dies = tmp_path / "dies.py"
    dies.write_text(textwrap.dedent("""
        import sys
        import utils.pretrain as p

        measured, calls = p.mlm_loss, []

        def dies_in_epoch_2(*args):  # held-out loss: before, after epoch 1, after epoch 2
            calls.append(1)
            if len(calls) == 3:
                raise SystemExit("the session died")
            return measured(*args)

        p.mlm_loss = dies_in_epoch_2
        sys.exit(p.main())
    """))
    out = tmp_path / "cut"
    rc, log = launch([str(dies)], out)
    assert rc != 0 and "the session died" in log
    assert not out.exists() and (tmp_path / "cut.resume.pt").is_file()
    rc, log = launch(["-m", "utils.pretrain"], out)
    assert rc == 0, log[-3000:]
    assert log.count("epoch 1 of 3 done") == 1 and log.count("backbone saved") == 1, log[-3000:]
    assert not (tmp_path / "cut.resume.pt").exists()
    a, b = (load_file(tmp_path / d / "model.safetensors") for d in ("whole", "cut"))
    assert a.keys() == b.keys() and all(np.abs((a[k] - b[k]).numpy()).max() < TOL for k in a)


def test_a_decoder_with_lora_trains_on_two_cpu_processes(tiny_csv_module, tiny_decoders, tmp_path):
    """DDP over a frozen base: only the adapters, pooling and head are all-reduced; the result is
    the single process's with grad_accum 2, as for an encoder."""
    flags = dict(pooling="last", lora_r=4, lora_dropout=0.0, lr=5e-3, head_lr=5e-3)  # dropout draws differ per process
    single = tmp_path / "single"
    run_cv(cfg_for(tiny_csv_module, single, tiny_decoders["qwen2"], grad_accum=2, **flags))
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
           "--main_process_port", str(free_port()), "-m", "utils.train",
           "--train-csv", str(tiny_csv_module), "--out", str(out), "--model", tiny_decoders["qwen2"],
           "--folds", "2", "--epochs", "2", "--batch-size", "8", "--eval-every", "2", "--pooling", "last",
           "--lora-r", "4", "--lora-dropout", "0", "--lr", "0.005", "--head-lr", "0.005", "--no-progress"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    check_run(out, log, single, 60)


def test_a_retriever_trains_on_two_cpu_processes(tiny_bert, tmp_path):
    """Queries against a catalogue, data-parallel: each process embeds its share of the catalogue
    and of the validation queries, gathered whole; every query is ranked against every item."""
    data = tiny_data("eedi-mining-misconceptions-in-mathematics", tmp_path / "d", 24)
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
           "--main_process_port", str(free_port()), "-m", "utils.train", "--competition",
           "eedi-mining-misconceptions-in-mathematics", "--train-csv", str(data / "train.csv"), "--out", str(out),
           "--model", tiny_bert, "--folds", "2", "--epochs", "1", "--batch-size", "4", "--max-len", "32",
           "--pooling", "mean", "--no-progress"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    oof = pd.read_csv(out / "oof.csv", dtype=str)
    assert len(oof) == 24 and oof["id"].is_unique
    assert all(len(c.split()) == 30 and len(set(c.split())) == 30 for c in oof["candidates"])  # every item, once
    assert "2 process(es)" in log and "valid map@25" in log


def test_a_fold_stopped_mid_epoch_on_two_cpu_processes_resumes_to_the_identical_result(tiny_csv_module, tiny_bert,
                                                                                       tmp_path):
    # Each process's random states (dropout) are saved and restored, and each skips its own batches.
    script = textwrap.dedent(f"""
        import sys
        from accelerate import notebook_launcher
        from utils.config import TrainConfig
        from utils.train import run_cv

        def stop(fold, step, value):
            if step == 7:
                raise SystemExit(3)

        def go(out, stopped):
            cfg = TrainConfig(train_csv={str(tiny_csv_module)!r}, out=out, model={tiny_bert!r}, folds=2,
                              only_folds=(1,), epochs=3, batch_size=4, eval_every=3, save_every=1, lr=1e-3,
                              head_dropout=0.3, progress=False)
            try:
                run_cv(cfg, on_validation=stop if stopped else None)
            except SystemExit:
                pass

        for out, stopped in (("ref", False), ("run", True), ("run", False)):
            notebook_launcher(go, args=(out, stopped), num_processes=2, use_port=str({free_port()}))
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=child_env(),
                          capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    assert "2 process(es) on cpu" in log and "fold 1: resumed at step 6/12" in log, log[-3000:]
    assert (tmp_path / "run" / "oof.csv").read_bytes() == (tmp_path / "ref" / "oof.csv").read_bytes()
    hist = [json.loads((tmp_path / r / "fold1" / "history.json").read_text())["history"] for r in ("ref", "run")]
    assert hist[0] == hist[1] and not (tmp_path / "run" / "resume").exists()
