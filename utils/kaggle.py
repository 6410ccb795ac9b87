"""The kaggle CLI for a bundle (utils.bundle): the exact upload, push and submit commands, and
--push to run them.

    python -m utils.kaggle build --runs runs/rb-attn runs/rl-attn --owner me --out bundle \
        --blend blend.json            # prints the upload, push and submit commands, in order
    python -m utils.kaggle build ... --push   # also uploads the datasets, pushes the submission
                                              # kernel and prints the submit command
    python -m utils.kaggle build ... --push --kernels train   # ... and retrains on Kaggle's GPU

Nothing touches the network without --push; `kaggle` is imported by nobody here (it
authenticates at import time): --push runs the kaggle CLI in a subprocess. Pushing a kernel runs
it (on Kaggle's GPU quota when it asks for one), so --push pushes only the submission kernel
unless --kernels names others. Needs kaggle>=1.8.4: the first release that sends
kernel-metadata.json's machine_shape and accepts `competitions submit -k -v` with `-f`.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from . import __version__
from .bundle import (
    ALWAYS_PUSHED,
    DEFAULT_LICENSE,
    FP16_TOL,
    NOTEBOOKS,
    OPTIONAL_KERNELS,
    ROLES,
    ROOT,
    SUBMISSION_FILE,
    T4_GPUS,
    BundleError,
    BundleSpec,
    base_source,
    build,
)
from .cli import HelpFormatter, cli_error, first_paragraph
from .competition import DEFAULT as DEFAULT_COMPETITION
from .runs import BLEND
from .wheels import WHEELS_DIR

# How the `kaggle` console script enters the CLI: `python -m kaggle` fails before kaggle 2.1
# (no kaggle/__main__.py in 1.8 or 2.0).
KAGGLE_ENTRY = "import sys; from kaggle.cli import main; sys.argv[0] = 'kaggle'; sys.exit(main())"
# What the kaggle CLI prints (with exit code 0) when the server refused part of a request.
KAGGLE_REFUSED = re.compile(r"creation error|push error|not valid", re.I)
PUSHED_VERSION = re.compile(r"Kernel version (\d+) successfully")
MESSAGE = f"kaggle-text-kit {__version__}"  # default version notes and submission message


def _kaggle() -> list:
    # The CLI of this interpreter when installed, else whatever `kaggle` is on PATH.
    if importlib.util.find_spec("kaggle"):
        return [sys.executable, "-c", KAGGLE_ENTRY]
    return ["kaggle"]


def dataset_commands(bundle: dict, message: str) -> list:
    """[(ref, create argv, new-version argv)] for the code and models datasets."""
    steps = []
    for key in ("code", "models"):
        if bundle[key]:
            p = bundle[key]["path"]
            steps.append(
                (
                    bundle[key]["id"],
                    ["datasets", "create", "-p", p, "--dir-mode", "zip"],
                    ["datasets", "version", "-p", p, "-m", message, "--dir-mode", "zip"],
                )
            )
    return steps


def kernels_to_push(bundle: dict, named=()) -> list:
    """The kernels --push pushes, in notebook order: the submission kernel, unless the kernel it
    reads its runs from is pushed too (it must finish first), and the ones named by role."""
    ids = {k["id"] for k in bundle["kernels"] if k["role"] in named}
    wait_for = [k for k in bundle.get("kernel_sources") or [] if k in ids]
    want = set(named) | ({ALWAYS_PUSHED} if not wait_for else set())
    return [k for k in bundle["kernels"] if k["role"] in want]


def submit_command(bundle: dict, message: str, version="N"):
    """The code-competition submit argv, or None when no submission kernel was built."""
    sub = [k for k in bundle["kernels"] if k["role"] == ALWAYS_PUSHED]
    if not sub:
        return None
    return [
        "competitions",
        "submit",
        bundle.get("competition") or DEFAULT_COMPETITION,
        "-f",
        SUBMISSION_FILE,
        "-k",
        sub[0]["id"],
        "-v",
        str(version),
        "-m",
        message,
    ]


def _show(argv) -> str:
    return shlex.join(["kaggle", *argv])


def _machine(k: dict) -> str:
    if not k["gpu"]:
        return "CPU"
    n = k["parameters"].get("num_processes")
    return f"GPU T4 x{T4_GPUS}" + (f", num_processes={n}" if n else "")


def print_commands(bundle: dict, message: str, file=None) -> None:
    """The exact kaggle CLI commands, in order, from upload to submit; then the optional kernels.
    Every command stands alone on its line, after `N. `, after `: ` or indented."""
    file = file or sys.stdout
    steps = dataset_commands(bundle, message)
    sub = [k for k in bundle["kernels"] if k["role"] == ALWAYS_PUSHED]
    last = len(steps) + len(sub)
    print(f"\nUpload, run and submit, in order (--push runs steps 1-{last}):", file=file)
    n = 0
    for ref, create, version in steps:
        n += 1
        print(f"{n:2d}. {_show(create)}", file=file)
        print(f"    # once {ref} exists, instead: {_show(version)}", file=file)
        print(
            f"    # then wait until it says ready: {_show(['datasets', 'status', ref])}", file=file
        )
    for k in sub:
        n += 1
        print(f"{n:2d}. {_show(['kernels', 'push', '-p', k['path']])}", file=file)
        print(
            f"    # pushing runs it ({_machine(k)}); wait until it says complete: "
            f"{_show(['kernels', 'status', k['id']])}",
            file=file,
        )
        print(f"{n + 1:2d}. {_show(submit_command(bundle, message))}", file=file)
        print(
            '    # N: the version `kernels push` printed ("Kernel version N successfully ...")',
            file=file,
        )
    rest = [k for k in bundle["kernels"] if k["role"] != ALWAYS_PUSHED]
    if rest:
        print(
            "\nOptional: each push runs the kernel on Kaggle; --push pushes these only when "
            f"named with --kernels {' '.join(k['role'] for k in rest)}",
            file=file,
        )
        for k in rest:
            print(f"    {_show(['kernels', 'push', '-p', k['path']])}  # {_machine(k)}", file=file)


def push(
    bundle: dict,
    message: str,
    runner=subprocess.run,
    wait_s: float = 600,
    poll_s: float = 15,
    kernels=(),
) -> dict:
    """Upload the datasets (create, or a new version when they exist), wait until Kaggle has
    processed them, then push the submission kernel and the kernels named by role in `kernels`:
    the kaggle CLI in a subprocess (credentials needed). Returns {kernel id: pushed version}."""
    cli = _kaggle()

    def call(argv, check=True):
        print("$", _show(argv), flush=True)
        res = runner([*cli, *argv], capture_output=True, text=True)
        out = (res.stdout or "") + (res.stderr or "")
        if out.strip():
            print(out.strip(), flush=True)
        if check and (res.returncode != 0 or KAGGLE_REFUSED.search(out)):
            raise BundleError(
                f"`kaggle {' '.join(argv[:2])}` failed (exit {res.returncode}); see its output above"
            )
        return res.returncode, out

    for ref, create, version in dataset_commands(bundle, message):
        exists, _ = call(["datasets", "status", ref], check=False)
        call(version if exists == 0 else create)
        deadline = time.monotonic() + wait_s
        while True:
            rc, out = call(["datasets", "status", ref], check=False)
            if rc == 0 and "ready" in out.lower():
                break
            if time.monotonic() > deadline:
                print(f"warning: {ref} not ready after {wait_s:.0f}s; pushing anyway", flush=True)
                break
            time.sleep(poll_s)
    versions = {}
    for k in kernels_to_push(bundle, kernels):
        _, out = call(["kernels", "push", "-p", k["path"]])
        m = PUSHED_VERSION.search(out)
        versions[k["id"]] = int(m.group(1)) if m else None
    return versions


# ----------------------------------------------------------------------------- CLI


def _mb(n: int) -> str:
    return f"{n / 2**20:.1f} MB"


def build_parser() -> argparse.ArgumentParser:
    """The CLI's flags: `build`, what to build (spec_of makes a utils.bundle.BundleSpec of them),
    and what is printed or pushed."""
    p = argparse.ArgumentParser(prog="python -m utils.kaggle", description=first_paragraph(__doc__),
                                formatter_class=HelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="write the datasets and kernels; print the kaggle commands",
                       formatter_class=HelpFormatter)
    b.add_argument("--runs", nargs="+", required=True, help="run folders (each with fold*/)")
    b.add_argument("--owner", required=True, help="your Kaggle user name")
    b.add_argument("--out", required=True, help="folder to write the bundle into")
    b.add_argument("--name", default="", help="slug prefix of datasets and kernels (default: the "
                   "competition's kit name, e.g. commonlit-kit)")
    b.add_argument("--competition", default="", help="a built-in slug or competition.json "
                   "(default: the one the runs were trained for)")
    b.add_argument("--blend", help=f"{BLEND} of exactly these runs (from the ensemble notebook); "
                   "default equal weights")
    b.add_argument("--fp32", action="store_true",
                   help="keep fp32 weights (default: fp16, half size)")
    b.add_argument("--kernel-sources", metavar="OWNER/KERNEL",
                   help="read the runs from this training kernel's output, not a models dataset")
    b.add_argument("--base-model-source", nargs="+", default=[], metavar="REF",
                   help="a LoRA run's base model (its folds hold adapters only), attached to the kernels "
                   "that load the runs: a Kaggle Model OWNER/MODEL/FRAMEWORK/VARIATION/VERSION (e.g. "
                   "google/gemma-2/transformers/gemma-2-9b-it/2) or a dataset OWNER/DATASET holding its folder")
    b.add_argument("--reranker", metavar="RUN", help="a reranker run (utils.rerank) the submission kernel runs "
                   "after the one retriever of --runs, reordering its top N")
    b.add_argument("--notebooks", nargs="+", help="notebooks that become kernels (default: the "
                   "kit's five, notebooks/01_eda.ipynb to 05_pseudo.ipynb)")
    b.add_argument("--fp16-tol", type=float, default=FP16_TOL,
                   help="largest |fp16 - fp32| prediction difference accepted")
    b.add_argument("--wheels", default=str(ROOT / WHEELS_DIR),
                   help="folder of wheels for the EDA kernel's offline install (`make wheels`)")
    b.add_argument("--no-wheels", action="store_true", help="no wheels in the code dataset (the "
                   "EDA kernel then needs textstat 0.7.8 on Kaggle's image)")
    b.add_argument("--license", default=DEFAULT_LICENSE, help="Kaggle license name of the datasets")
    b.add_argument("--message", default=MESSAGE, help="version notes and submission message")
    b.add_argument("--push", action="store_true", help="upload the datasets and push the "
                   "submission kernel (needs Kaggle credentials)")
    b.add_argument("--kernels", nargs="+", default=[], choices=OPTIONAL_KERNELS,
                   help="with --push, also push these kernels (a push runs the kernel on Kaggle)")
    return p


def spec_of(args: argparse.Namespace) -> BundleSpec:
    """What `build` is asked to build."""
    return BundleSpec(
        runs=args.runs,
        owner=args.owner,
        out=args.out,
        name=args.name,
        blend=args.blend,
        half=not args.fp32,
        kernel_sources=args.kernel_sources,
        notebooks=[Path(n) for n in args.notebooks or NOTEBOOKS],
        wheels=None if args.no_wheels else Path(args.wheels),
        license_name=args.license,
        tol=args.fp16_tol,
        competition=args.competition,
        base_model_sources=args.base_model_source,
        reranker=args.reranker,
    )


def print_built(bundle: dict, half: bool, file=None) -> None:
    """One line per dataset and kernel written: where, how big, on what machine."""
    file = file or sys.stdout
    code, models = bundle["code"], bundle["models"]
    wheels = len(code["wheels"])
    print(f"code dataset    {code['path']} ({_mb(code['bytes'])}, wheels: {wheels})", file=file)
    if models:
        kind = "fp16" if half else "fp32"
        lora = models.get("lora_bases") or {}
        adapters = f"; adapters only: {', '.join(lora)}" if lora else ""
        adapters += f"; reranker {models['reranker']}" if models.get("reranker") else ""
        print(
            f"models dataset  {models['path']} ({_mb(models['bytes'])}; weights {kind} "
            f"{_mb(models['weights_bytes'])} from {_mb(models['source_weights_bytes'])}; "
            f"max |diff| {models['max_diff']:.1e}{adapters})",
            file=file,
        )
    loading = " and ".join(k["role"] for k in bundle["kernels"] if ROLES[k["role"]]["loads"]) or "no"
    for ref in bundle.get("base_model_sources") or []:
        kind = "Kaggle Model" if base_source(ref)[0] == "model" else "dataset"
        print(f"base model      {ref} ({kind}, attached to the {loading} kernels: a LoRA run's folds hold "
              "adapters only)", file=file)
    for k in bundle["kernels"]:
        net = "internet on" if k["internet"] else "internet off"
        print(f"kernel          {k['path']} ({_machine(k)}, {net})", file=file)
    for ref in bundle.get("joined_datasets") or []:
        print(f"joined dataset  {ref} (attached to every kernel: the competition joins its tables)",
              file=file)


def main(argv=None, runner=subprocess.run) -> int:
    """CLI entry point: errors a user can act on are one line on stderr and exit code 2."""
    p = build_parser()
    args = p.parse_args(argv)
    if args.kernels and not args.push:
        p.error("--kernels names kernels for --push to push; add --push")
    try:
        bundle = build(spec_of(args))
    except (BundleError, OSError) as e:
        return cli_error(e)
    print_built(bundle, not args.fp32)
    for err in bundle["errors"]:
        cli_error(BundleError(err))
    print_commands(bundle, args.message)
    if bundle["errors"]:
        if args.push:
            cli_error(BundleError("not pushing an incomplete bundle"))
        return 2
    if args.push:
        try:
            versions = push(bundle, args.message, runner, kernels=args.kernels)
        except BundleError as e:
            return cli_error(e)
        print_after_push(bundle, args.message, versions)
    return 0


def print_after_push(bundle: dict, message: str, versions: dict, file=None) -> None:
    """What is left after --push: the submit command with the pushed version, or the push of a
    submission kernel that waits for its source kernel."""
    file = file or sys.stdout
    sub = submit_command(bundle, message)
    if not sub:
        return
    kid = sub[sub.index("-k") + 1]
    if kid not in versions:
        k = next(k for k in bundle["kernels"] if k["id"] == kid)
        print(
            f"\nWhen {', '.join(bundle['kernel_sources'])} has finished, push the submission "
            f"kernel, then submit as listed above:\n    {_show(['kernels', 'push', '-p', k['path']])}",
            file=file,
        )
        return
    version = versions[kid] or "N"
    print(
        f"\nWhen {kid} has run (it says complete: {_show(['kernels', 'status', kid])}), submit:"
        f"\n    {_show(submit_command(bundle, message, version))}",
        file=file,
    )
    if version == "N":
        print("    # N: the version `kernels push` printed above", file=file)


if __name__ == "__main__":
    sys.exit(main())
