"""Hyperparameter search with Optuna: each trial is a kit run on the chosen folds; a trial whose
validation falls behind the others' at the same step is pruned; the study lives in a SQLite file
in OUT, so an interrupted study resumes.

    python -m utils.tune --train-csv data/train.csv --model roberta-base --only-folds 0 \\
        --trials 20 --space lr,head_lr,llrd,warmup --out runs/tune-rb

Every utils.train option sets what the trials share; --space names the settings searched (SPACE).
A LoRA run (--lora-r, a decoder LLM's usual setting) searches its adapters too (--space
lr,lora_r,lora_alpha: the rank the trials start from is then drawn), and its lr over the range
adapters train at (LORA_SPACE); a decoder's poolings include "last" (its last real token).
Trial n's run is OUT/trial<n>; the best trial is printed as the utils.train command that
reproduces it. The tuned folds' CV flatters the setting found (it was picked on those folds'
validation rows): tune on some folds (--only-folds 0) and judge it on the others, or keep a fold
out of tuning altogether.

Resuming (the same OUT): a trial still RUNNING in the study was left by a process that stopped
(one tune process per study), so it is marked FAIL, said in one line, and takes no place among
--trials; the sampler is seeded with --seed plus the number of trials the study already holds, so
a resumed study draws new settings instead of replaying the first call's.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

from . import train
from .backbone import family_of
from .cli import cli_error, first_paragraph
from .config import build_parser, competition_for, for_competition, parse_args, to_command
from .metrics import get_metric

# name -> how Optuna draws it: ("log", low, high), ("float", low, high), ("int", low, high), ("cat", choices)
SPACE = {
    "lr": ("log", 5e-6, 2e-4),
    "head_lr": ("log", 1e-4, 1e-2),
    "llrd": ("float", 0.7, 1.0),
    "warmup": ("float", 0.0, 0.2),
    "weight_decay": ("log", 1e-4, 0.1),
    "head_dropout": ("float", 0.0, 0.3),
    "epochs": ("int", 2, 5),
    "batch_size": ("cat", (8, 16, 32)),
    "pooling": ("cat", ("attention", "mean", "attention+mean")),
    "layers": ("int", 1, 4),
    "max_grad_norm": ("cat", (0.0, 1.0, 10.0)),
    "ema": ("cat", (0.0, 0.999)),  # a moving average of the weights, off or on
    "lora_r": ("cat", (4, 8, 16, 32, 64)),  # LoRA's rank (runs with --lora-r only)
    "lora_alpha": ("cat", (8.0, 16.0, 32.0, 64.0)),  # LoRA's scale numerator
    "lora_dropout": ("float", 0.0, 0.1),
}
LORA_ONLY = ("lora_r", "lora_alpha", "lora_dropout")  # settings with no effect without adapters
# What a LoRA run searches instead: adapters on a frozen base train at larger rates than a whole
# backbone does (QLoRA's 2e-4; 1e-3 on small models), so the encoders' lr range would stop short.
LORA_SPACE = {"lr": ("log", 2e-5, 1e-3)}
# A decoder's poolings: "last" is its natural one (the last real token has seen the whole text);
# "cls" never (its first token has seen nothing).
DECODER_SPACE = {"pooling": ("cat", ("last", "attention", "mean", "attention+mean"))}
# A validation's step in the study: folds one after the other (fold k's steps from k * STRIDE).
STRIDE = 10**6


def space_for(base) -> dict:
    """SPACE as the trials' run searches it: LORA_SPACE's ranges for a LoRA run, DECODER_SPACE's
    for a decoder backbone (its family, utils.backbone.family_of)."""
    space = dict(SPACE)
    if base.lora_r:
        space.update(LORA_SPACE)
    if family_of(train.backbone_config(base)).decoder:
        space.update(DECODER_SPACE)
    return space


def check_space(base, space) -> None:
    """Refuse, in one line, a setting SPACE does not know, an empty search, or LoRA's settings
    searched for a run that trains without adapters (every trial would be the same run)."""
    bad = [s for s in space if s not in SPACE]
    if bad or not space:
        raise ValueError(f"--space {','.join(bad) or '(empty)'}: choose from {', '.join(SPACE)}")
    lora = [s for s in space if s in LORA_ONLY]
    if lora and not base.lora_r:
        raise ValueError(f"--space {','.join(lora)}: the trials train the whole backbone, without LoRA "
                         "adapters (--lora-r 0); give --lora-r (e.g. 8: the search then draws the rank) "
                         "to search LoRA's settings, or leave them out of --space")


def suggest(trial, name: str, space: dict | None = None):
    kind, *spec = (space or SPACE)[name]
    if kind == "log":
        return trial.suggest_float(name, spec[0], spec[1], log=True)
    if kind == "float":
        return trial.suggest_float(name, spec[0], spec[1])
    if kind == "int":
        return trial.suggest_int(name, spec[0], spec[1])
    return trial.suggest_categorical(name, list(spec[0]))


def require_optuna():
    """The optuna module; without it, a ValueError saying how to install it (an optional package:
    the kit trains without it); a ValueError naming the file when a module of that name that is
    not Optuna comes first on the path (an optuna.py in the working folder)."""
    try:
        import optuna
    except ImportError:
        raise ValueError("python -m utils.tune needs Optuna, which is not installed: pip install "
                         "'optuna>=3.0'") from None
    if not hasattr(optuna, "create_study"):
        where = getattr(optuna, "__file__", None) or list(getattr(optuna, "__path__", []))
        raise ValueError(f"the module optuna imported from {where} is not Optuna (it has no create_study): it "
                         "shadows the installed package; rename it, or run from another folder")
    return optuna


def tune(base, space, trials: int, out, pruner=None, sampler=None, log=print, comp=None) -> dict:
    """Run the study in OUT/study.db until it holds `trials` finished trials (complete or pruned)
    for the competition `comp` (None: the one base.competition names), resolved once here;
    returns {"best": params, "value", "command", "n_complete", "n_pruned", "minutes"}."""
    optuna = require_optuna()
    check_space(base, space)
    ranges = space_for(base)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    comp = comp if comp is not None else competition_for(base)
    metric = get_metric(comp.metric_name)
    study = optuna.create_study(
        study_name="kit", storage=f"sqlite:///{out / 'study.db'}", load_if_exists=True,
        direction="maximize" if metric.greater_is_better else "minimize",
        pruner=pruner or optuna.pruners.MedianPruner(n_startup_trials=2))
    stale = [t.number for t in study.trials if t.state == optuna.trial.TrialState.RUNNING]
    for number in stale:
        study.tell(number, state=optuna.trial.TrialState.FAIL)
    if stale:
        log(f"study {out / 'study.db'}: trial {', '.join(map(str, stale))} left RUNNING by a stopped process, "
            "marked FAIL")
    # Seeded past the trials already drawn: the same seed would replay the first call's settings.
    study.sampler = sampler or optuna.samplers.TPESampler(seed=base.seed + len(study.trials))

    def objective(trial):
        params = {name: suggest(trial, name, ranges) for name in space}
        # A trial is short and may be pruned: no fold state is saved for it to go on from.
        cfg = dataclasses.replace(base, out=str(out / f"trial{trial.number}"), save_every=-1, **params)
        t0 = time.time()

        def report(fold, step, value):
            trial.report(value, fold * STRIDE + step)
            if trial.should_prune():
                trial.set_user_attr("minutes", (time.time() - t0) / 60)
                raise optuna.TrialPruned(f"{metric.name} {value:.4f} at fold {fold} step {step}")

        m = train.run_cv(cfg, comp, on_validation=report)  # looked up when called (tests replace it)
        trial.set_user_attr("minutes", (time.time() - t0) / 60)
        trial.set_user_attr("command", to_command(for_competition(cfg, comp), comp))
        return m["cv"]

    counted = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    finished = lambda: [t for t in study.trials if t.state in counted]  # noqa: E731
    left = trials - len(finished())
    if left > 0:
        log(f"study {out / 'study.db'}: {len(finished())} trial(s) done, {left} to run")
        study.optimize(objective, n_trials=left, catch=())
    done = finished()
    complete = [t for t in done if t.state == optuna.trial.TrialState.COMPLETE]
    if not complete:
        raise RuntimeError(f"no trial completed in {out / 'study.db'} ({len(done)} pruned)")
    best = study.best_trial
    return {"best": best.params, "value": best.value, "metric": metric.name, "trial": best.number,
            "command": best.user_attrs.get("command"), "n_complete": len(complete),
            "n_pruned": sum(t.state == optuna.trial.TrialState.PRUNED for t in done),
            "minutes": sum(t.user_attrs.get("minutes", 0.0) for t in done)}


def main(argv=None) -> int:
    """CLI: utils.train's options plus --trials and --space."""
    p = build_parser()
    p.prog, p.description = "python -m utils.tune", first_paragraph(__doc__)
    p.add_argument("--trials", type=int, default=20,
                   help="finished trials the study should hold (a rerun adds the rest)")
    p.add_argument("--space", default="lr,head_lr,llrd,warmup",
                   help=f"comma-separated settings to search, from: {', '.join(SPACE)}")
    args = p.parse_args(argv)
    train_argv = list(argv if argv is not None else sys.argv[1:])
    for flag in ("--trials", "--space"):  # the trials' shared settings are utils.train's own
        if flag in train_argv:
            i = train_argv.index(flag)
            del train_argv[i:i + 2]
    try:
        require_optuna()  # before reading any data
        base, comp = parse_args(train_argv)
        res = tune(base, [s for s in args.space.split(",") if s], args.trials, base.out, comp=comp)
    except (ValueError, OSError, RuntimeError) as e:
        return cli_error(e)
    print(f"best trial {res['trial']}: {res['metric']} {res['value']:.4f} ({res['n_complete']} complete, "
          f"{res['n_pruned']} pruned, {res['minutes']:.1f} min in all)")
    print(f"reproduce it: {res['command']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
