"""A Kaggle text competition, described once: files, columns, input text, targets, task, metric,
submission and folds. A frozen dataclass that round-trips through a JSON file; the built-in ones
are entries of BUILTIN, an unknown one is inferred from its CSVs:

    python -m utils.competition show feedback-prize-english-language-learning
    python -m utils.competition init --data DIR --out competition.json   # then check the file

Everything else asks the description (and the metric it names, utils.metrics) instead of
branching on a competition's name. Light: pandas only, no torch.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .cli import HelpFormatter, cli_error, first_paragraph
from .metrics import METRICS

# task -> (what the model is trained as, the default metric, what a submission holds)
TASKS = {
    "regression": ("regression", "rmse", "values"),
    "multi_regression": ("regression", "mcrmse", "values"),
    "binary": ("classification", "f1", "labels"),
    "multiclass": ("classification", "accuracy", "labels"),
    "ordinal": ("regression", "qwk", "labels"),  # a regression output cut into integer scores
}
SUBMISSIONS = ("values", "labels", "probabilities")
FOLDS = ("stratified", "group", "file")
LONG_TEXT = ("head", "head_tail", "windows")


class CompetitionError(ValueError):
    """A description that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class Competition:
    slug: str  # Kaggle's competition slug (kaggle competitions download SLUG)
    title: str = ""  # the competition's name, for titles and notebooks
    id_col: str = "id"
    text_cols: tuple = ("excerpt",)  # one column; two = a tokenizer text pair (e.g. question, answer)
    text_template: str = ""  # several columns into one text, e.g. "{keyword}: {text}"; "" = none
    target_cols: tuple = ("target",)
    task: str = "regression"  # regression | multi_regression | binary | multiclass | ordinal
    metric: str = ""  # "" = the task's default (rmse, mcrmse, f1, accuracy, qwk)
    target_range: tuple = ()  # (low, high): targets outside are bad input, values clipped to it
    submission: str = ""  # values | labels | probabilities; "" = the task's default
    train_file: str = "train.csv"
    test_file: str = "test.csv"
    sample_submission: str = "sample_submission.csv"
    train_joins: tuple = ()  # ((file, key), ...): tables joined onto the train file by key
    test_joins: tuple = ()  # the same for the test file (e.g. prompts_test.csv)
    folds: str = "stratified"  # stratified (binned target / label) | group (by group_col) | file
    group_col: str = ""  # folds="group": rows sharing it stay in one fold
    folds_file: str = ""  # folds="file": an id,fold CSV beside the data
    long_text: str = "head"  # texts past max_len: head | head_tail | windows (averaged)
    standard_error_col: str = ""  # a per-row label noise column, if the data has one
    short_name: str = ""  # prefix of the kit's Kaggle datasets and kernels; "" = from the slug

    def __post_init__(self):
        def bad(field, msg):
            raise CompetitionError(f"competition {self.slug!r}: field {field!r}: {msg}")

        if not self.slug or not isinstance(self.slug, str):
            raise CompetitionError("competition: field 'slug' is required (Kaggle's competition slug)")
        checks = [("task", tuple(TASKS)), ("folds", FOLDS), ("long_text", LONG_TEXT)]
        checks += [("metric", ("", *METRICS)), ("submission", ("", *SUBMISSIONS))]
        for name, valid in checks:
            if getattr(self, name) not in valid:
                bad(name, f"{getattr(self, name)!r} is not one of {', '.join(v for v in valid if v)}")
        if not self.text_cols or len(self.text_cols) > 2 and not self.text_template:
            bad("text_cols", "one column, two (a text pair), or several with a text_template")
        if not self.target_cols:
            bad("target_cols", "at least one target column")
        if self.task in ("regression", "binary", "multiclass", "ordinal") and len(self.target_cols) != 1:
            bad("target_cols", f"task {self.task!r} has one target; several are multi_regression")
        if self.task == "multi_regression" and len(self.target_cols) < 2:
            bad("task", "multi_regression needs two target columns or more")
        if self.target_range and (len(self.target_range) != 2 or not self.target_range[0] < self.target_range[1]):
            bad("target_range", f"expected [low, high] with low < high, got {list(self.target_range)}")
        if self.folds == "group" and not self.group_col:
            bad("group_col", "folds 'group' needs the column to group by")
        if self.folds == "file" and not self.folds_file:
            bad("folds_file", "folds 'file' needs the folds CSV's name")
        for name in ("train_joins", "test_joins"):
            for pair in getattr(self, name):
                if len(pair) != 2 or not all(isinstance(x, str) and x for x in pair):
                    bad(name, f"expected [[file, key], ...], got {list(getattr(self, name))}")
        if self.text_template:
            import string

            used = {f for _, f, _, _ in string.Formatter().parse(self.text_template) if f}
            if not used or not used <= set(self.text_cols):
                bad("text_template", f"{self.text_template!r} must use only text_cols {list(self.text_cols)}")
        kinds = ("labels", "probabilities") if self.model_task == "classification" else ("values", "labels")
        if self.submission_kind not in kinds:
            bad("submission", f"a {self.task} model's submission holds {' or '.join(kinds)}, not {self.submission}")
        m = METRICS[self.metric_name]
        wants = ("classification" if m.needs == "probabilities" or m.rule == "threshold"
                 else "regression" if m.needs == "values" or m.rule == "cutpoints" else "")
        if wants and wants != self.model_task:
            bad("metric", f"{m.name} scores {wants} outputs, but task {self.task!r} is trained as "
                f"{self.model_task}")

    # ---- what the rest of the kit reads
    @property
    def model_task(self) -> str:
        """What the model is trained as: "regression" or "classification"."""
        return TASKS[self.task][0]

    @property
    def metric_name(self) -> str:
        return self.metric or TASKS[self.task][1]

    @property
    def submission_kind(self) -> str:
        return self.submission or TASKS[self.task][2]

    @property
    def continuous(self) -> bool:
        """The targets are continuous values (not class labels, not integer scores)."""
        return self.task in ("regression", "multi_regression")

    @property
    def kit_name(self) -> str:
        """The kit's datasets and kernels are named after it: NAME-code, NAME-models,
        NAME-submission, ... (short enough for Kaggle's 50-character slugs)."""
        short = self.short_name
        if not short:
            for word in self.slug.split("-"):
                if short and len(short) + len(word) + 1 > 24:
                    break
                short = f"{short}-{word}" if short else word[:24]
        return f"{short}-kit"

    @property
    def text_pair(self) -> bool:
        """Two text columns and no template: the tokenizer gets them as a text pair."""
        return len(self.text_cols) == 2 and not self.text_template

    def input_texts(self, df: pd.DataFrame) -> list:
        """The model's input per row: a string, or a (first, second) pair for a text pair.
        Missing values are empty strings."""
        cols = {c: df[c].fillna("").astype(str) for c in self.text_cols}
        if self.text_template:
            rows = pd.DataFrame(cols).to_dict("records")
            return [self.text_template.format(**r).strip() for r in rows]
        if self.text_pair:
            return list(zip(cols[self.text_cols[0]], cols[self.text_cols[1]]))
        return cols[self.text_cols[0]].tolist()

    # ---- JSON
    def to_dict(self) -> dict:
        return json.loads(json.dumps(dataclasses.asdict(self)))  # tuples -> lists

    @classmethod
    def from_dict(cls, d: dict, source: str = "competition.json") -> Competition:
        """A description from its JSON form; one line naming the field on any error."""
        if not isinstance(d, dict):
            raise CompetitionError(f"{source}: expected a JSON object of fields, found {type(d).__name__}")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - set(fields))
        if unknown:
            raise CompetitionError(f"{source}: unknown field {unknown[0]!r}; valid: {', '.join(fields)}")
        if "slug" not in d:
            raise CompetitionError(f"{source}: field 'slug' is required (Kaggle's competition slug)")
        kw = {}
        for name, value in d.items():
            default = fields[name].default if name != "slug" else ""
            if isinstance(default, tuple):
                if isinstance(value, str) and name in ("text_cols", "target_cols"):
                    value = [value]
                if not isinstance(value, list):
                    raise CompetitionError(f"{source}: field {name!r} must be a list, got {value!r}")
                value = tuple(tuple(v) if isinstance(v, list) else v for v in value)
            elif not isinstance(value, type(default)):
                raise CompetitionError(f"{source}: field {name!r} must be a {type(default).__name__}, "
                                       f"got {value!r}")
            kw[name] = value
        try:
            return cls(**kw)
        except CompetitionError as e:
            raise CompetitionError(f"{source}: {e}") from None

    def as_parameter(self) -> str:
        """How a notebook or kernel is told this competition: a built-in's slug, else its JSON."""
        return self.slug if BUILTIN.get(self.slug) == self else json.dumps(self.to_dict())

    def save(self, path) -> None:
        from .files import write_json

        write_json(path, self.to_dict())


BUILTIN = {
    c.slug: c
    for c in (
        Competition(
            slug="commonlitreadabilityprize", title="CommonLit Readability Prize",
            text_cols=("excerpt",), target_cols=("target",), task="regression",
            standard_error_col="standard_error", short_name="commonlit",
        ),
        Competition(
            slug="feedback-prize-english-language-learning",
            title="Feedback Prize - English Language Learning", id_col="text_id",
            text_cols=("full_text",), task="multi_regression", target_range=(1.0, 5.0),
            target_cols=("cohesion", "syntax", "vocabulary", "phraseology", "grammar", "conventions"),
            long_text="head_tail",
        ),
        Competition(
            slug="nlp-getting-started", title="Natural Language Processing with Disaster Tweets",
            text_cols=("keyword", "text"), text_template="{keyword} {text}", target_cols=("target",),
            task="binary",
        ),
        Competition(
            slug="commonlit-evaluate-student-summaries", title="CommonLit - Evaluate Student Summaries",
            id_col="student_id", text_cols=("prompt_question", "text"),
            target_cols=("content", "wording"), task="multi_regression",
            train_file="summaries_train.csv", test_file="summaries_test.csv",
            train_joins=(("prompts_train.csv", "prompt_id"),),
            test_joins=(("prompts_test.csv", "prompt_id"),),
            folds="group", group_col="prompt_id",
        ),
        Competition(
            slug="learning-agency-lab-automated-essay-scoring-2",
            title="Learning Agency Lab - Automated Essay Scoring 2.0", id_col="essay_id",
            text_cols=("full_text",), target_cols=("score",), task="ordinal", target_range=(1.0, 6.0),
            long_text="head_tail",
        ),
    )
}
DEFAULT = "commonlitreadabilityprize"


def load_competition(name_or_file: str | Competition = "") -> Competition:
    """A built-in description by slug, one from a JSON file, or the JSON text itself (what a
    Kaggle kernel gets as a parameter); "" is CommonLit Readability."""
    if isinstance(name_or_file, Competition):
        return name_or_file
    name = str(name_or_file or DEFAULT)
    if name in BUILTIN:
        return BUILTIN[name]
    if name.lstrip().startswith("{"):
        try:
            return Competition.from_dict(json.loads(name), "--competition's JSON")
        except ValueError as e:
            if isinstance(e, CompetitionError):
                raise
            raise CompetitionError(f"--competition's JSON cannot be read ({e})") from None
    path = Path(name)
    if not path.is_file():
        raise CompetitionError(f"unknown competition {name!r}: not a built-in one "
                               f"({', '.join(BUILTIN)}) nor a JSON file")
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CompetitionError(f"{path}: cannot be read as JSON ({e})") from None
    return Competition.from_dict(d, path.name)


def described(comp: Competition) -> dict:
    """The training settings (utils.config.TrainConfig's fields) a description sets."""
    return dict(text_col=comp.text_cols[-1], target_cols=tuple(comp.target_cols), id_col=comp.id_col,
                task=comp.model_task, standard_error_col=comp.standard_error_col or "standard_error")


def from_settings(settings: dict) -> Competition:
    """The competition of a run's settings (TrainConfig's fields, or a run's config.json): its
    `competition` when it names one; else the one the column flags describe: CommonLit
    Readability when they are its columns, else slug "custom" (classification scored by log-loss,
    as before descriptions existed)."""
    if settings.get("competition"):
        return load_competition(settings["competition"])
    commonlit = BUILTIN[DEFAULT]
    # A setting a run did not record had the default competition's value (the flags' defaults).
    mine = {k: tuple(settings[k]) if k == "target_cols" and k in settings else settings.get(k, v)
            for k, v in described(commonlit).items()}
    if mine == described(commonlit):
        return commonlit
    if mine["task"] == "classification":
        task, metric = "multiclass", "log_loss"
    else:
        task, metric = ("regression" if len(mine["target_cols"]) == 1 else "multi_regression"), ""
    return Competition(slug="custom", title="custom columns", id_col=mine["id_col"], text_cols=(mine["text_col"],),
                       target_cols=mine["target_cols"], task=task, metric=metric,
                       standard_error_col=mine["standard_error_col"])


# ----------------------------------------------------------------------------- data


def read_table(comp: Competition, data_dir, split: str = "train", blank: str = "") -> pd.DataFrame:
    """The train or test file of the folder `data_dir`, as read_split reads it."""
    name = comp.train_file if split == "train" else comp.test_file
    return read_split(comp, Path(data_dir) / name, split, blank)


def read_split(comp: Competition, path, split: str = "train", blank: str = "", extra_cols=()) -> pd.DataFrame:
    """A train (targets checked) or test file with the tables its description joins onto it (found
    beside it), checked as utils.data.read_csv checks a file: columns, ids, texts (`blank` as
    there), targets (numbers in target_range; labels present). One line naming the file, the
    column and the rows otherwise."""
    from .data import DataError, check_frame, load_csv

    path = Path(path)
    joins = comp.train_joins if split == "train" else comp.test_joins
    df = load_csv(path, comp.id_col)
    name = path.name
    for file, key in joins:
        jpath = path.parent / file
        if not jpath.is_file():
            raise DataError(f"{jpath}: file not found (joined onto {name} by {key!r})")
        table = pd.read_csv(jpath, encoding="utf-8-sig", dtype={key: str})
        for frame, fname in ((df, name), (table, file)):
            if key not in frame.columns:
                raise DataError(f"{fname} is missing column {key!r} (the join key); "
                                f"found: {', '.join(map(str, frame.columns))}")
        dup = table[key].duplicated()
        if dup.any():
            raise DataError(f"{file}: column {key!r} repeats {table[key][dup].iloc[0]!r}: one row per key")
        df[key] = df[key].astype(str)
        unmatched = ~df[key].isin(table[key])
        if unmatched.any():
            raise DataError(f"{name}: {int(unmatched.sum())} rows have a {key!r} missing from {file}, "
                            f"e.g. {df[key][unmatched].iloc[0]!r}")
        df = df.merge(table, on=key, how="left", suffixes=("", f"_{Path(file).stem}"))
    if joins:
        name = f"{name} (with {', '.join(f for f, _ in joins)} joined)"
    targets = comp.target_cols if split == "train" else ()
    extra = ((comp.group_col,) if split == "train" and comp.group_col else ()) + tuple(extra_cols)
    from .objective import objective_of

    return check_frame(df, name, comp.text_cols, targets, comp.id_col, extra, objective_of(comp).classes, blank,
                       () if objective_of(comp).classes else comp.target_range)


# ----------------------------------------------------------------------------- inference


def infer(data_dir) -> tuple[Competition, list]:
    """A description guessed from a competition's CSVs, and why each choice was made (lines)."""
    from .data import DataError

    data_dir = Path(data_dir)
    files = {p.name for p in data_dir.glob("*.csv")}
    why = []
    pick = lambda want: next((f for f in sorted(files) if want in f.lower()), None)  # noqa: E731
    sample = pick("sample_submission") or pick("submission")
    train = "train.csv" if "train.csv" in files else pick("train")
    test = "test.csv" if "test.csv" in files else pick("test")
    for kind, f in (("train", train), ("test", test), ("sample submission", sample)):
        if not f:
            raise DataError(f"{data_dir}: no {kind} CSV found (files: {', '.join(sorted(files)) or 'none'})")
    tr = pd.read_csv(data_dir / train, nrows=5000, encoding="utf-8-sig")
    te = pd.read_csv(data_dir / test, nrows=2000, encoding="utf-8-sig")
    sub = pd.read_csv(data_dir / sample, nrows=50, encoding="utf-8-sig")
    id_col, targets = str(sub.columns[0]), tuple(map(str, sub.columns[1:]))
    why.append(f"id column {id_col!r} and target(s) {list(targets)}: the columns of {sample}")
    missing = [c for c in (id_col, *targets) if c not in tr.columns]
    if missing:
        raise DataError(f"{train} lacks {missing} that {sample} names: describe this competition by hand")
    shared = [c for c in te.columns if c in tr.columns and c != id_col
              and not pd.api.types.is_numeric_dtype(te[c])]
    if not shared:
        raise DataError(f"{train} and {test} share no text column besides {id_col!r}")
    lengths = {c: float(te[c].fillna("").astype(str).str.len().mean()) for c in shared}
    text = max(lengths, key=lengths.get)
    why.append(f"text column {text!r}: the longest text ({lengths[text]:.0f} characters on average) "
               f"of the columns {train} and {test} share ({', '.join(shared)})")
    y = tr[list(targets)]
    numeric = all(pd.api.types.is_numeric_dtype(y[c]) for c in targets)
    values = pd.unique(y.to_numpy().ravel())
    if len(targets) > 1:
        task = "multi_regression"
        why.append(f"task multi_regression: {len(targets)} target columns")
    elif not numeric:
        task = "multiclass"
        why.append(f"task multiclass: {len(values)} distinct non-numeric labels")
    elif set(np.unique(values)) <= {0, 1}:
        task = "binary"
        why.append("task binary: the target holds only 0 and 1")
    elif len(values) <= 20 and np.all(np.mod(values.astype(float), 1) == 0):
        task = "ordinal"
        why.append(f"task ordinal: {len(values)} integer scores ({int(values.min())}-{int(values.max())})")
    else:
        task = "regression"
        why.append("task regression: a continuous numeric target")
    why.append(f"metric {TASKS[task][1]}: the default for {task} (check the competition's page)")
    rng = ()
    if task in ("multi_regression", "ordinal"):
        rng = (float(y.min().min()), float(y.max().max()))
        why.append(f"target_range {list(rng)}: the training targets' range")
    comp = Competition(slug=data_dir.resolve().name, id_col=id_col, text_cols=(text,),
                       target_cols=targets, task=task, target_range=rng, train_file=train,
                       test_file=test, sample_submission=sample)
    why.append(f"slug {comp.slug!r}: the folder's name (set it to the competition's Kaggle slug)")
    return comp, why


def main(argv=None) -> int:
    """CLI: show a description, or infer one from a folder of CSVs."""
    from .data import DataError

    p = argparse.ArgumentParser(prog="python -m utils.competition", description=first_paragraph(__doc__), formatter_class=HelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("show", help="print a built-in or saved description as JSON", formatter_class=HelpFormatter)
    s.add_argument("competition", nargs="?", default=DEFAULT,
                   help=f"a built-in slug ({', '.join(BUILTIN)}) or a JSON file (default: %(default)s)")
    i = sub.add_parser("init", help="infer a description from a competition's CSVs", formatter_class=HelpFormatter)
    i.add_argument("--data", required=True, help="folder with the train, test and sample submission CSVs")
    i.add_argument("--out", required=True, help="the competition.json to write (check it before use)")
    args = p.parse_args(argv)
    try:
        if args.cmd == "show":
            print(json.dumps(load_competition(args.competition).to_dict(), indent=2))
            return 0
        comp, why = infer(args.data)
        for line in why:
            print(f"- {line}")
        comp.save(args.out)
    except (CompetitionError, DataError, OSError, ValueError) as e:
        return cli_error(e)
    print(f"wrote {args.out}: check it, then pass --competition {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
