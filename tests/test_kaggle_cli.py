"""The commands `python -m utils.kaggle build` prints, and those `--push` runs, through the real
kaggle CLI: its own entry point (`kaggle.cli.main`, what the `kaggle` console script calls), its
own argument parser and its own metadata, file and slug checks, with dummy credentials and only
the network replaced. The lowest HTTP layer the CLI uses, `requests.Session.send` (kagglesdk's
client and the blob upload both go through it; kaggle>=1.8.4), is swapped for a recorder that
answers like Kaggle: datasets exist once created, blob uploads hand back tokens, `kernels push`
reports version 7, `datasets download` hands back RECORD_DIR/served/OWNER/DATASET.zip. Sockets are
closed off, so nothing can reach kaggle.com.

Run as a script, this file is that CLI: `python tests/test_kaggle_cli.py RECORD_DIR ARGS...`
appends one JSON line per request to RECORD_DIR/requests.jsonl (uploaded bytes beside it).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

PUSHED = 7  # the version the recorder's `kernels push` reports
UPLOAD_HOST = "https://upload.invalid"
# kagglesdk's RPC names (https://api.kaggle.com/v1/<service>/<name>) -> what the recorder does.
ROUTES = {
    "GetDatasetStatus": "dataset_status",
    "StartBlobUpload": "blob",
    "CreateDataset": "dataset_create",
    "CreateDatasetVersion": "dataset_version",
    "SaveKernel": "kernel_push",
    "GetKernelSessionStatus": "kernel_status",
    "CreateCodeSubmission": "submit",
    "GetSubmissionLimits": "limits",  # kaggle 2.x, after a submission: "N remaining today"
    "GetDatasetMetadata": "dataset_metadata",  # `datasets download`: the license it prints
    "DownloadDataset": "dataset_download",
}


def serve(record: Path) -> None:
    """Replace requests.Session.send with the recorder, and close every socket."""
    import socket

    import requests

    def no_socket(*a, **k):
        raise OSError("network denied in this test")

    socket.socket.connect = no_socket
    socket.create_connection = no_socket
    log = record / "requests.jsonl"
    exists = record / "datasets.txt"  # the datasets created so far, one ref a line

    def answer(kind, body, n):
        refs = exists.read_text().split() if exists.is_file() else []
        if kind == "dataset_status":
            ref = f"{body.get('ownerSlug')}/{body.get('datasetSlug')}"
            return (200, {"status": "READY"}) if ref in refs else (404, {"code": 404})
        if kind == "blob":
            return 200, {"token": f"tok{n}", "createUrl": f"{UPLOAD_HOST}/tok{n}"}
        if kind == "upload":
            return 200, {}
        if kind == "dataset_create":
            ref = f"{body['ownerSlug']}/{body['slug']}"
            exists.write_text("".join(f"{r}\n" for r in [*refs, ref]))
            return 200, {"ref": ref, "url": f"https://www.kaggle.com/{ref}", "status": "ok"}
        if kind == "dataset_version":
            ref = f"{body['ownerSlug']}/{body['datasetSlug']}"
            return 200, {"ref": ref, "url": f"https://www.kaggle.com/{ref}", "status": "ok"}
        if kind == "kernel_push":
            url = f"https://www.kaggle.com/code/{body['slug']}"
            return 200, {"ref": body["slug"], "url": url, "versionNumber": PUSHED}
        if kind == "kernel_status":
            return 200, {"status": "COMPLETE"}
        if kind == "submit":
            return 200, {"message": "Submission successful", "ref": 1234}
        if kind == "limits":
            return 200, {"numToday": 1, "numAllowedNow": 4}
        if kind == "dataset_metadata":
            return 200, {"info": {"licenses": [{"name": "CC0-1.0"}]}}
        if kind == "dataset_download":  # the dataset's files, zipped, as bytes
            served = record / "served" / body.get("ownerSlug", "") / f"{body.get('datasetSlug')}.zip"
            return (200, served.read_bytes()) if served.is_file() else (404, {"code": 404})
        return 404, {"code": 404, "message": "not recorded"}

    def send(self, request, **kwargs):
        n = sum(1 for _ in log.open()) if log.is_file() else 0
        rec = {"n": n, "method": request.method, "url": request.url}
        body = request.body
        if request.url.startswith(UPLOAD_HOST):
            rec["kind"] = "upload"
            data = body.read() if hasattr(body, "read") else body or b""
            data = data.encode() if isinstance(data, str) else data
            (record / f"{n:03d}.bin").write_bytes(data)
            rec["upload"] = f"{n:03d}.bin"
            parsed = {}
        else:
            rec["kind"] = ROUTES.get(request.url.rstrip("/").rsplit("/", 1)[-1], "other")
            parsed = json.loads(body) if body else {}
            rec["body"] = parsed
        status, payload = answer(rec["kind"], parsed, n)
        with log.open("a") as f:
            f.write(json.dumps(rec) + "\n")
        resp = requests.Response()
        resp.status_code, resp.url, resp.request = status, request.url, request
        if isinstance(payload, bytes):  # a file download: read back as content already received
            resp.headers.update({"Content-Type": "application/zip", "Content-Length": str(len(payload))})
            resp._content, resp._content_consumed = payload, True
            return resp
        resp.headers["Content-Type"] = "application/json"
        resp._content = json.dumps(payload).encode()
        return resp

    requests.Session.send = send


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
    sys.argv = ["kaggle", *sys.argv[2:]]
    from kaggle.cli import main

    sys.exit(main())


# ----------------------------------------------------------------------------- the tests

import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from helpers import BASE_HANDLE, OWNER, fake_notebooks, patent_data  # noqa: E402

from utils import bundle  # noqa: E402
from utils import kaggle as kit  # noqa: E402

# versions: the kaggle CLI itself (kaggle's floor) pushing and downloading what build prints
pytestmark = pytest.mark.versions

MESSAGE = "kaggle-text-kit 0.1.0"


class Kaggle:
    """The kaggle CLI with the recorder, as a subprocess with its own HOME and credentials."""

    def __init__(self, tmp: Path):
        self.record = tmp / "record"
        self.record.mkdir()
        home = tmp / "home"
        (home / ".kaggle").mkdir(parents=True)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("KAGGLE_")}
        self.env.update(
            HOME=str(home),
            KAGGLE_CONFIG_DIR=str(home / ".kaggle"),
            KAGGLE_USERNAME=OWNER,
            KAGGLE_KEY="0" * 32,
        )

    def __call__(self, args, **kw) -> subprocess.CompletedProcess:
        cmd = [sys.executable, __file__, str(self.record), *args]
        return subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=120)

    def runner(self, argv, **kw):
        """A `runner` for kit.push: strips the kit's way into the CLI, runs the recorder's."""
        cli = kit._kaggle()
        assert argv[: len(cli)] == cli, argv
        return self(argv[len(cli) :])

    def requests(self) -> list:
        log = self.record / "requests.jsonl"
        return [json.loads(ln) for ln in log.read_text().splitlines()] if log.is_file() else []


def uploads(record: Path, reqs) -> dict:
    """{file name asked for in a StartBlobUpload of `reqs`: (its token, the bytes put to its URL)}."""
    out = {}
    for r in reqs:
        if r["kind"] == "blob":
            url = f"{UPLOAD_HOST}/tok{r['n']}"
            put = next(p for p in reqs if p["kind"] == "upload" and p["url"] == url)
            out[r["body"]["name"]] = (f"tok{r['n']}", (record / put["upload"]).read_bytes())
    return out


def printed_commands(text: str) -> list:
    """Every `kaggle ...` command in build's output: after `N. `, after `: `, or indented."""
    cmds = []
    for line in text.splitlines():
        m = re.match(r"^\s*(?:\d+\. |#.*?: )?(kaggle .*)$", line)
        if m:
            cmds.append(shlex.split(m.group(1), comments=True)[1:])
    return cmds


def run_printed(out: str, tmp: Path) -> list:
    """Every kaggle command `build` printed (in `out`), run through the real CLI, each accepted;
    [(kernel folder name, its kernel-metadata.json, the push request's body)], one per push."""
    kaggle, pushed = Kaggle(tmp), []
    for cmd in printed_commands(out):
        res = kaggle([("1" if a == "N" else a) for a in cmd])
        assert res.returncode == 0 and not kit.KAGGLE_REFUSED.search(res.stdout + res.stderr), (cmd, res.stdout)
        if cmd[:2] == ["kernels", "push"]:
            meta = json.loads((Path(cmd[3]) / "kernel-metadata.json").read_text())
            body = [r for r in kaggle.requests() if r["kind"] == "kernel_push"][-1]["body"]
            pushed.append((Path(cmd[3]).name, meta, body))
    return pushed


def build_and_print(trained, tmp: Path, capsys, extra=()) -> tuple[list, str]:
    nbs = fake_notebooks(tmp / "nbs")
    argv = ["build", "--runs", *map(str, trained["runs"]), "--blend", str(trained["blend"])]
    argv += ["--owner", OWNER, "--out", str(tmp / "b"), "--no-wheels", "--notebooks"]
    argv += [*map(str, nbs), *extra]
    return argv, capsys.readouterr().out if kit.main(argv) == 0 else pytest.fail("build failed")


def _code_zip_names(data: bytes, tmp: Path) -> list:
    (tmp / "z.zip").write_bytes(data)
    return zipfile.ZipFile(tmp / "z.zip").namelist()


@pytest.mark.parametrize("which", ["trained", "trained_ell"])
def test_every_printed_command_is_accepted_by_the_kaggle_cli(which, request, tmp_path, capsys):
    """For CommonLit and for another competition (the slug and the kit name from its runs)."""
    from utils.predict import run_competition

    runs = request.getfixturevalue(which)
    comp = run_competition(runs["runs"][0])
    _, out = build_and_print(runs, tmp_path, capsys)
    cmds = printed_commands(out)
    b = tmp_path / "b"
    kinds = [c[:2] for c in cmds]
    assert kinds == [
        *[["datasets", "create"], ["datasets", "version"], ["datasets", "status"]] * 2,
        ["kernels", "push"],
        ["kernels", "status"],
        ["competitions", "submit"],
        *[["kernels", "push"]] * 4,  # the optional kernels: eda, train, ensemble, pseudo
    ]
    kaggle = Kaggle(tmp_path)
    seen = 0
    for cmd in cmds:
        # `-v N` is the placeholder for the version `kernels push` prints.
        argv = [("1" if a == "N" else a) for a in cmd]
        res = kaggle(argv)
        assert res.returncode == 0, (cmd, res.stdout, res.stderr)
        assert not kit.KAGGLE_REFUSED.search(res.stdout + res.stderr), res.stdout
        new, seen = kaggle.requests()[seen:], len(kaggle.requests())
        assert new, f"{cmd} sent nothing"
        assert not [r for r in new if r["kind"] == "other"], new
        last = new[-1]
        if cmd[:2] == ["datasets", "create"]:
            slug = Path(cmd[3]).name
            assert new[0]["kind"] == "dataset_status"  # the CLI's own "slug in use?" check
            assert last["kind"] == "dataset_create"
            assert {k: last["body"].get(k) for k in ("ownerSlug", "slug", "licenseName")} == {
                "ownerSlug": OWNER,
                "slug": slug,
                "licenseName": bundle.DEFAULT_LICENSE,
            }
            assert last["body"]["title"] == bundle.title_of(slug)
        elif cmd[:2] == ["datasets", "version"]:
            assert last["kind"] == "dataset_version"
            assert last["body"]["datasetSlug"] == Path(cmd[3]).name
            assert last["body"]["body"]["versionNotes"] == MESSAGE
        if cmd[:2] in (["datasets", "create"], ["datasets", "version"]):
            # Each entry of the folder (but the metadata) uploaded, folders as zips; the
            # dataset request names exactly the uploaded blobs.
            folder = Path(cmd[3])
            want = {
                p.name + (".zip" if p.is_dir() else "")
                for p in folder.iterdir()
                if p.name != "dataset-metadata.json"
            }
            ups = uploads(kaggle.record, new)
            assert set(ups) == want
            files = last["body"].get("files") or last["body"]["body"]["files"]
            assert sorted(f["token"] for f in files) == sorted(t for t, _ in ups.values())
            if folder.name.endswith("-code"):
                names = _code_zip_names(ups["utils.zip"][1], tmp_path)
                assert any(n.endswith("predict.py") for n in names), names
            else:
                assert json.loads(ups["blend.json"][1]) == json.loads(
                    (folder / "blend.json").read_text()
                )
                names = _code_zip_names(ups["bert-attn.zip"][1], tmp_path)
                assert any(n.endswith("fold0/kit_model.safetensors") for n in names), names
        elif cmd[:2] == ["datasets", "status"]:
            assert [r["kind"] for r in new] == ["dataset_status"]
            assert f"{last['body']['ownerSlug']}/{last['body']['datasetSlug']}" == cmd[2]
            assert "ready" in res.stdout
        elif cmd[:2] == ["kernels", "push"]:
            meta = json.loads((Path(cmd[3]) / "kernel-metadata.json").read_text())
            nb = json.loads((Path(cmd[3]) / meta["code_file"]).read_text())
            body = last["body"]
            assert [r["kind"] for r in new] == ["kernel_push"]
            assert body["slug"] == meta["id"] and body["newTitle"] == meta["title"]
            assert (body["language"], body["kernelType"]) == ("python", "notebook")
            assert body.get("enableGpu", False) is meta["enable_gpu"]
            assert body.get("machineShape") == meta.get("machine_shape")
            assert body.get("enableInternet", False) is meta["enable_internet"]
            assert body["datasetDataSources"] == meta["dataset_sources"]
            assert body["competitionDataSources"] == [comp.slug]
            sent = json.loads(body["text"])  # the notebook, with its injected parameters
            assert [c["source"] for c in sent["cells"]] == [
                "".join(c["source"]) for c in nb["cells"]
            ]
            assert "injected-parameters" in json.dumps(sent)
            assert f"Kernel version {PUSHED} successfully" in res.stdout
        elif cmd[:2] == ["kernels", "status"]:
            assert [r["kind"] for r in new] == ["kernel_status"]
            assert "COMPLETE" in res.stdout
        elif cmd[:2] == ["competitions", "submit"]:
            assert new[0]["kind"] == "submit"
            last = new[0]
            assert {
                k: last["body"].get(k)
                for k in ("competitionName", "kernelSlug", "kernelVersion", "fileName")
            } == {
                "competitionName": comp.slug,
                "kernelSlug": f"{comp.kit_name}-submission",
                "kernelVersion": 1,
                "fileName": "submission.csv",
            }
            assert last["body"]["submissionDescription"] == MESSAGE
    assert seen and not list(b.rglob("*.zip"))  # the CLI zipped into temp, not into the bundle


def test_the_old_submit_command_is_refused(tmp_path):
    """Why `-f submission.csv` is there: without it kaggle 2.x refuses a code submission."""
    from importlib.metadata import version

    if int(version("kaggle").split(".")[0]) < 2:
        pytest.skip("kaggle<2 sends a code submission without -f")
    kaggle = Kaggle(tmp_path)
    old = ["competitions", "submit", "commonlitreadabilityprize", "-k"]
    res = kaggle([*old, f"{OWNER}/commonlit-kit-submission", "-v", "1", "-m", MESSAGE])
    assert res.returncode == 1 and "No file specified" in res.stdout + res.stderr
    assert kaggle.requests() == []


def _kinds(reqs) -> list:
    return [r["kind"] for r in reqs]


def test_push_runs_the_kaggle_cli_and_prints_the_pushed_version(trained, tmp_path, capsys):
    argv, _ = build_and_print(trained, tmp_path, capsys)
    kaggle = Kaggle(tmp_path)
    assert kit.main([*argv, "--push", "--kernels", "train"], runner=kaggle.runner) == 0
    out = capsys.readouterr().out
    reqs = kaggle.requests()

    def created(slug):  # push's "exists?", the CLI's "slug in use?", uploads, create, "ready?"
        n = len(list((tmp_path / "b" / slug).iterdir())) - 1  # all but dataset-metadata.json
        return (
            ["dataset_status"] * 2 + ["blob", "upload"] * n + ["dataset_create", "dataset_status"]
        )

    code, models = created("commonlit-kit-code"), created("commonlit-kit-models")
    assert _kinds(reqs) == [*code, *models, "kernel_push", "kernel_push"]
    train, sub = [r["body"] for r in reqs if r["kind"] == "kernel_push"]
    assert (train["slug"], sub["slug"]) == (
        f"{OWNER}/commonlit-kit-train",
        f"{OWNER}/commonlit-kit-submission",
    )
    for k in (train, sub):
        assert (k["enableGpu"], k["machineShape"]) == (True, "NvidiaTeslaT4")
    assert "num_processes = 2" in json.dumps(json.loads(train["text"]))
    submit = (
        "kaggle competitions submit commonlitreadabilityprize -f submission.csv "
        f"-k {OWNER}/commonlit-kit-submission -v {PUSHED} -m 'kaggle-text-kit 0.1.0'"
    )
    assert submit in [ln.strip() for ln in out.splitlines()]
    res = kaggle(shlex.split(submit)[1:])
    assert res.returncode == 0, res.stdout + res.stderr
    submitted = [r["body"] for r in kaggle.requests() if r["kind"] == "submit"]
    assert [(b["kernelSlug"], b["kernelVersion"]) for b in submitted] == [
        ("commonlit-kit-submission", PUSHED)
    ]

    # Again: the datasets exist now, so new versions; only the submission kernel is pushed.
    seen = len(kaggle.requests())
    assert kit.main([*argv, "--push"], runner=kaggle.runner) == 0
    again = kaggle.requests()[seen:]
    n = len(list((tmp_path / "b" / "commonlit-kit-code").iterdir())) - 1
    versioned = ["dataset_status", *["blob", "upload"] * n, "dataset_version", "dataset_status"]
    assert _kinds(again)[: len(versioned)] == versioned
    pushed = [r["body"]["slug"] for r in again if r["kind"] == "kernel_push"]
    assert pushed == [f"{OWNER}/commonlit-kit-submission"]


def test_a_joined_datasets_kernels_are_accepted_by_the_kaggle_cli(tmp_path, capsys):
    """A competition joining xhlulu/cpc-codes/titles.csv: every printed command runs through the
    CLI, and each pushed kernel sends the attached dataset as one of its data sources."""
    desc = patent_data(tmp_path / "data") / "competition.json"
    nbs = fake_notebooks(tmp_path / "nbs")
    argv = ["build", "--runs", "runs/bert-attn", "--owner", OWNER, "--out", str(tmp_path / "b"), "--no-wheels",
            "--kernel-sources", f"{OWNER}/kit-train-run", "--competition", str(desc), "--notebooks", *map(str, nbs)]
    assert kit.main(argv) == 0
    pushed = []
    for _, meta, body in run_printed(capsys.readouterr().out, tmp_path):
        assert body["datasetDataSources"] == meta["dataset_sources"]
        pushed.append(body["datasetDataSources"])
    assert len(pushed) == 5  # the submission kernel and the four optional ones
    assert all(sources == [f"{OWNER}/us-patent-phrase-to-kit-code", "xhlulu/cpc-codes"] for sources in pushed)


def test_the_download_command_of_a_missing_table_fetches_it_where_it_is_looked_up(tmp_path, monkeypatch):
    """The command in the one-line error, run through the CLI, puts titles.csv in data/cpc-codes/,
    where the next lookup finds it."""
    from utils import env
    from utils.competition import load_competition
    from utils.data import DataError
    from utils.tables import read_split

    data = patent_data(tmp_path / "data")
    table = pd.read_csv(data / "titles.csv")
    (data / "titles.csv").unlink()
    monkeypatch.setattr(env, "project_root", lambda: tmp_path / "root")
    monkeypatch.setenv("KAGGLE_INPUT_ROOT", str(tmp_path / "input"))
    comp = load_competition(str(data / "competition.json"))
    with pytest.raises(DataError) as e:
        read_split(comp, data / "test.csv", "test")
    cmd = shlex.split(re.search(r"`(kaggle datasets download [^`]*)`", str(e.value)).group(1))
    assert cmd[:5] == ["kaggle", "datasets", "download", "-d", "xhlulu/cpc-codes"]
    kaggle = Kaggle(tmp_path)
    served = kaggle.record / "served" / "xhlulu" / "cpc-codes.zip"
    served.parent.mkdir(parents=True)
    with zipfile.ZipFile(served, "w") as z:
        z.writestr("titles.csv", table.to_csv(index=False))
    res = kaggle(cmd[1:])
    assert res.returncode == 0, res.stdout + res.stderr
    assert [r["kind"] for r in kaggle.requests()] == ["dataset_metadata", "dataset_download"]
    assert (tmp_path / "root" / "data" / "cpc-codes" / "titles.csv").is_file()
    df = read_split(comp, data / "test.csv", "test")
    assert df["title"].notna().all() and set(df["title"]) <= set(table["title"])


def test_a_lora_runs_kernels_attach_its_base_model_through_the_kaggle_cli(trained_lora, tmp_path, capsys):
    """Every printed command of a LoRA run's bundle runs through the CLI; the kernels that load the
    runs send the Kaggle Model as a model source and the dataset holding a base as a data source."""
    nbs = fake_notebooks(tmp_path / "nbs")
    dataset = f"{OWNER}/tiny-llama-base"
    argv = ["build", "--runs", str(trained_lora["runs"][0]), "--owner", OWNER, "--out", str(tmp_path / "b"),
            "--no-wheels", "--base-model-source", BASE_HANDLE, dataset, "--notebooks", *map(str, nbs)]
    assert kit.main(argv) == 0
    kernels = run_printed(capsys.readouterr().out, tmp_path)
    pushed = {}
    for name, meta, body in kernels:
        assert body.get("modelDataSources", []) == meta["model_sources"]
        assert body["datasetDataSources"] == meta["dataset_sources"]
        pushed[name] = (meta["model_sources"], meta["dataset_sources"][-1])
    assert len(kernels) == len(pushed) == 5
    for name, (models, last) in pushed.items():
        loads = name.endswith(("-submission", "-pseudo"))
        assert models == ([BASE_HANDLE] if loads else []), name
        assert (last == dataset) is loads, name


MODEL_REFS = (
    "google/gemma-2/transformers/gemma-2-9b-it/2",
    "metaresearch/llama-3.1/transformers/8b/1",
    "google/gemma-2/transformers/gemma-2-9b-it",  # no version
    "google/gemma-2/transformers/gemma-2-9b-it/v2",  # a version that is not a number
    "google/gemma-2//gemma-2-9b-it/2",  # no framework
)


@pytest.mark.parametrize("ref", MODEL_REFS)
def test_the_bundle_takes_the_kaggle_models_the_kaggle_cli_takes(ref, tmp_path):
    """A model source in kernel-metadata.json, pushed through the CLI: it refuses what base_source
    refuses, and sends what it accepts."""
    import nbformat

    kernel = tmp_path / "k"
    kernel.mkdir()
    (kernel / "k.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))
    meta = bundle.kernel_metadata(OWNER, "commonlit-kit-submission", "k.ipynb", False, [], models=[ref])
    (kernel / "kernel-metadata.json").write_text(json.dumps(meta))
    kaggle = Kaggle(tmp_path)
    res = kaggle(["kernels", "push", "-p", str(kernel)])
    sent = [r["body"].get("modelDataSources") for r in kaggle.requests() if r["kind"] == "kernel_push"]
    try:
        bundle.base_source(ref)
        ours = True
    except bundle.BundleError:
        ours = False
    assert ours == (sent == [[ref]]), (res.stdout, res.stderr)
    if not ours:
        assert sent == [] and "model instance version" in (res.stdout + res.stderr).lower()
