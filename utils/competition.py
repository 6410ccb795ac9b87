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
    "multilabel": ("multilabel", "roc_auc", "probabilities"),  # several 0/1 labels, one probability each
}
SUBMISSIONS = ("values", "labels", "probabilities")
FOLDS = ("stratified", "group", "file")
LONG_TEXT = ("head", "head_tail", "windows")
# Where the backbone's own separator token goes in an input text ({sep} in a text_template; between
# the columns of three or more): utils.batching puts the tokenizer's token there when it tokenizes.
SEP = "\x1f"


class CompetitionError(ValueError):
    """A description that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class Competition:
    slug: str  # Kaggle's competition slug (kaggle competitions download SLUG)
    title: str = ""  # the competition's name, for titles and notebooks
    id_col: str = "id"
    text_cols: tuple = ("excerpt",)  # one column; two = a text pair; three or more: joined by {sep}
    text_template: str = ""  # columns into one text, e.g. "{keyword}: {text}" or "{a}{sep}{b}"; "" = none
    target_cols: tuple = ("target",)
    task: str = "regression"  # regression | multi_regression | binary | multiclass | ordinal | multilabel
    metric: str = ""  # "" = the task's default (rmse, mcrmse, f1, accuracy, qwk, roc_auc)
    metric_file: str = ""  # a Python file beside this description defining `metric` (a utils.metrics.Metric)
    metric_code: str = ""  # that file's source, filled in when read: the description carries its metric
    classes: tuple = ()  # class labels in the submission's order; binary: [negative, positive]; () = sorted
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

        if self.metric_code:
            from .metrics import register_code

            try:
                register_code(self.metric_code, self.metric, self.metric_file or "metric_code")
            except ValueError as e:
                bad("metric_file", str(e))
        elif self.metric_file:
            bad("metric_file", f"{self.metric_file!r} was not read (a description read from a file reads it)")

        if not self.slug or not isinstance(self.slug, str):
            raise CompetitionError("competition: field 'slug' is required (Kaggle's competition slug)")
        checks = [("task", tuple(TASKS)), ("folds", FOLDS), ("long_text", LONG_TEXT)]
        checks += [("submission", ("", *SUBMISSIONS))]
        for name, valid in checks:
            if getattr(self, name) not in valid:
                bad(name, f"{getattr(self, name)!r} is not one of {', '.join(v for v in valid if v)}")
        if self.metric and self.metric not in METRICS:
            bad("metric", f"{self.metric!r} is not one of {', '.join(METRICS)} (a metric of your own: "
                "metric_file, a Python file beside the description defining it)")
        if not self.text_cols or not all(isinstance(c, str) and c for c in self.text_cols):
            bad("text_cols", "one column or more: one text, two (a text pair), or several joined by the "
                "backbone's separator token (or a text_template)")
        if not self.target_cols:
            bad("target_cols", "at least one target column")
        if self.task in ("regression", "binary", "multiclass", "ordinal") and len(self.target_cols) != 1:
            bad("target_cols", f"task {self.task!r} has one target; several are multi_regression")
        if self.task == "multi_regression" and len(self.target_cols) < 2:
            bad("task", "multi_regression needs two target columns or more")
        if self.task == "multilabel" and len(self.target_cols) < 2:
            bad("task", "multilabel needs two 0/1 target columns or more (one is binary)")
        if not isinstance(self.id_col, str) or not self.id_col:
            bad("id_col", "the column of row ids that the sample submission names is required")
        rng = self.target_range
        if rng and (len(rng) != 2 or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in rng)
                    or not rng[0] < rng[1]):
            bad("target_range", f"expected [low, high], two numbers with low < high, got {list(rng)}")
        if self.classes:
            if self.model_task != "classification":
                bad("classes", f"class labels are for binary and multiclass tasks, not {self.task}")
            if len(set(map(str, self.classes))) != len(self.classes) or len(self.classes) < 2:
                bad("classes", f"two distinct labels or more, got {list(self.classes)}")
            if self.task == "binary" and len(self.classes) != 2:
                bad("classes", f"a binary task has two classes, [negative, positive], got {list(self.classes)}")
        if self.folds == "group" and not self.group_col:
            bad("group_col", "folds 'group' needs the column to group by")
        if self.folds == "file" and not self.folds_file:
            bad("folds_file", "folds 'file' needs the folds CSV's name")
        for name in ("train_joins", "test_joins"):
            for pair in getattr(self, name):
                if len(pair) not in (2, 3) or not all(isinstance(x, str) and x for x in pair):
                    bad(name, f"expected [[file, key], ...] or [[file, key, the table's key], ...], "
                        f"got {list(getattr(self, name))}")
        if self.text_template:
            import string

            try:
                used = {f for _, f, _, _ in string.Formatter().parse(self.text_template) if f}
            except ValueError as e:
                bad("text_template", f"{self.text_template!r} cannot be read ({e})")
            if not used - {"sep"} or not used <= {*self.text_cols, "sep"}:
                bad("text_template", f"{self.text_template!r} must use only text_cols {list(self.text_cols)} "
                    "(and {sep}: the backbone's separator token)")
        from .objective import objective_of

        obj = objective_of(self)
        if self.submission_kind not in obj.submissions:
            bad("submission", f"a {self.task} model's submission holds {' or '.join(obj.submissions)}, "
                f"not {self.submission}")
        refused = obj.refuses(METRICS[self.metric_name])
        if refused:
            bad("metric", f"{refused} (task {self.task!r})")

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
        """The model's input per row: a string, or a (first, second) pair for a text pair. Three
        columns or more without a template are joined by SEP (the backbone's separator token once
        tokenized), as is {sep} in a template. Missing values are empty strings."""
        cols = {c: df[c].fillna("").astype(str) for c in self.text_cols}
        if self.text_template:
            rows = pd.DataFrame(cols).to_dict("records")
            return [self.text_template.format(**r, sep=SEP).strip() for r in rows]
        if self.text_pair:
            return list(zip(cols[self.text_cols[0]], cols[self.text_cols[1]]))
        if len(self.text_cols) > 2:
            return [SEP.join(parts) for parts in zip(*cols.values())]
        return cols[self.text_cols[0]].tolist()

    @property
    def input_description(self) -> str:
        """The input in words, for tables and notebooks: a template, a pair, or columns joined."""
        if self.text_template:
            return self.text_template
        return (" + " if self.text_pair else " {sep} ").join(self.text_cols)

    # ---- JSON
    def to_dict(self) -> dict:
        return json.loads(json.dumps(dataclasses.asdict(self)))  # tuples -> lists

    @classmethod
    def from_dict(cls, d: dict, source: str = "competition.json", folder=None) -> Competition:
        """A description from its JSON form; one line naming the field on any error. `folder`: where
        the description's file is (its metric_file is read from there, its source kept in
        metric_code)."""
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
        if kw.get("metric_file") and folder is not None:
            path = Path(folder) / kw["metric_file"]
            if not path.is_file() and not kw.get("metric_code"):
                raise CompetitionError(f"{source}: field 'metric_file': {path} not found")
            if path.is_file():
                kw["metric_code"] = path.read_text(encoding="utf-8")
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
    return Competition.from_dict(d, path.name, path.parent)


def separator(tokenizer) -> str:
    """The text a tokenizer reads as its own separator token: [SEP], </s>, the end of sequence
    token for a decoder without one, else a newline; with spaces around it."""
    token = getattr(tokenizer, "sep_token", None) or getattr(tokenizer, "eos_token", None)
    return f" {token} " if token else "\n"


def with_separator(texts, tokenizer) -> list:
    """Texts (strings or pairs) with SEP replaced by the tokenizer's separator token."""
    texts = list(texts)
    marked = lambda t: SEP in t if isinstance(t, str) else any(SEP in str(x) for x in t)  # noqa: E731
    if not any(marked(t) for t in texts):
        return texts
    sep = separator(tokenizer)
    put = lambda t: str(t).replace(SEP, sep)  # noqa: E731
    return [put(t) if isinstance(t, str) else type(t)(put(x) for x in t) for t in texts]


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


def join_path(folder: Path, file: str) -> Path:
    """Where a joined table is: FILE beside the competition's files (`folder`); OWNER/DATASET/FILE,
    a table of another Kaggle dataset, where utils.env.dataset_file finds it (beside them, the
    attached dataset, or data/DATASET/), else a DataError naming every place looked."""
    from . import env
    from .data import DataError

    ref = env.dataset_file_ref(file)
    if ref is None:
        return folder / file
    try:
        return env.dataset_file(*ref, beside=folder)
    except FileNotFoundError as e:
        raise DataError(str(e)) from None


def read_split(comp: Competition, path, split: str = "train", blank: str = "", extra_cols=()) -> pd.DataFrame:
    """A train (targets checked) or test file with the tables its description joins onto it (beside
    it, or in another Kaggle dataset: join_path), checked as utils.data.read_csv checks a file: columns, ids, texts (`blank` as
    there), targets (numbers in target_range; labels present). One line naming the file, the
    column and the rows otherwise."""
    from .data import DataError, check_frame, load_csv

    path = Path(path)
    joins = comp.train_joins if split == "train" else comp.test_joins
    df = load_csv(path, comp.id_col)
    name = path.name
    for file, key, *theirs in joins:
        jpath = join_path(path.parent, file)
        if not jpath.is_file():
            raise DataError(f"{jpath}: file not found (joined onto {name} by {key!r})")
        their = theirs[0] if theirs else key  # the table's own name for the key (e.g. code for context)
        table = pd.read_csv(jpath, encoding="utf-8-sig", dtype={their: str})
        if their not in table.columns:
            raise DataError(f"{file} is missing column {their!r} (the join key); "
                            f"found: {', '.join(map(str, table.columns))}")
        if their != key:
            table = table.drop(columns=[key], errors="ignore").rename(columns={their: key})
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
        name = f"{name} (with {', '.join(j[0] for j in joins)} joined)"
    targets = comp.target_cols if split == "train" else ()
    extra = ((comp.group_col,) if split == "train" and comp.group_col else ()) + tuple(extra_cols)
    from .objective import objective_of

    classes = objective_of(comp).classes
    df = check_frame(df, name, comp.text_cols, targets, comp.id_col, extra, classes, blank,
                     () if classes else comp.target_range)
    if targets:
        check_labels(comp, df, name)
    return df


def label_text(value) -> str:
    """A label as text, as a CSV writes it: 1 for 1.0, so that [0, 1] in a description and a
    column of 0.0/1.0 name the same classes."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)


def check_labels(comp: Competition, df: pd.DataFrame, name: str) -> None:
    """A training file's labels against the description: every label among `classes`; string labels
    of a binary task only with `classes` (which one is positive); 0/1 in multilabel targets; at
    least two classes. One line naming the file, the column and a row."""
    from .data import DataError, _rows

    col = comp.target_cols[0]
    if comp.task == "multilabel":
        for c in comp.target_cols:
            bad = ~df[c].isin([0, 1]).to_numpy()
            if bad.any():
                raise DataError(f"{name}: column {c!r} of a multilabel task holds {df[c][bad].iloc[0]!r}, not 0 "
                                f"or 1, at {_rows(df, bad, comp.id_col)}")
        return
    if comp.model_task != "classification":
        return
    text = df[col].map(label_text)
    if comp.classes:
        bad = ~text.isin([label_text(c) for c in comp.classes]).to_numpy()
        if bad.any():
            raise DataError(f"{name}: column {col!r} holds {text[bad].iloc[0]!r}, not one of the description's "
                            f"classes {list(comp.classes)}, at {_rows(df, bad, comp.id_col)}")
    elif comp.task == "binary" and not set(text) <= {"0", "1"}:
        raise DataError(f"{name}: column {col!r} holds labels {sorted(set(text))[:2]}: a binary task with labels "
                        "other than 0/1 needs \"classes\": [negative, positive] in its description (F1 and "
                        "the submission's probability are for the positive one)")
    if text.nunique() < 2:
        raise DataError(f"{name}: column {col!r} holds one class only ({text.iloc[0]!r}): a classifier needs "
                        "rows of two classes or more")


# ----------------------------------------------------------------------------- inference


SHORT_TEXT = 64  # characters on average: a column this short is a phrase, not a document
MIN_GROUPS = 10  # a repeating column proposes grouped folds when it has at least this many values


def _read_head(path: Path, nrows: int) -> pd.DataFrame:
    from .data import DataError

    df = pd.read_csv(path, nrows=nrows, encoding="utf-8-sig")
    if len(df) == 0:
        raise DataError(f"{path}: no data rows (a header only): nothing to infer a description from")
    return df


def _tables(data_dir: Path, files: set, role: str, id_col: str, sample: str) -> tuple[str, pd.DataFrame, tuple, list]:
    """(the `role` table: the one holding the sample submission's id column, its rows with the
    others joined, the joins (file, key), why): the other tables of the role join by a shared
    column whose values are unique in them."""
    from .data import DataError

    names = sorted((f for f in files if role in f.lower() and f != sample), key=lambda f: (f != f"{role}.csv", f))
    heads = {f: list(pd.read_csv(data_dir / f, nrows=0, encoding="utf-8-sig").columns) for f in names}
    main = next((f for f in names if id_col in heads[f]), None)
    if main is None:
        raise DataError(f"{data_dir}: no {role} CSV has the sample submission's id column {id_col!r} "
                        f"({role} files: {', '.join(names) or 'none'})")
    df = _read_head(data_dir / main, 50_000 if role == "train" else 2000)
    why = [f"{role} file {main}: the {role} table holding {id_col!r}, the ids the sample submission names"
           if len(names) > 1 else ""]
    joins = []
    for f in names:
        shared = [c for c in heads[f] if c in df.columns and c != id_col] if f != main else []
        if not shared:
            continue
        table = pd.read_csv(data_dir / f, encoding="utf-8-sig", dtype={c: str for c in shared})
        key = next((c for c in shared if table[c].is_unique), None)
        if key is None:
            continue
        joins.append((f, key))
        df = df.merge(table, on=key, how="left", suffixes=("", f"_{Path(f).stem}")) if df[key].dtype == object \
            else df.astype({key: str}).merge(table, on=key, how="left", suffixes=("", f"_{Path(f).stem}"))
        why.append(f"{role}_joins {f} on {key!r}: a table sharing {key!r} with {main}, one row per value")
    return main, df, tuple(joins), [w for w in why if w]


def _targets(tr: pd.DataFrame, train: str, sample: str, sub: pd.DataFrame) -> tuple[tuple, tuple, list]:
    """(target columns, class order or (), why): the sample submission's columns when the train
    file has them; else the one train column whose labels are the sample's columns (a submission
    of class probabilities, in the sample's order)."""
    from .data import DataError

    cols = tuple(map(str, sub.columns[1:]))
    if all(c in tr.columns for c in cols):
        return cols, (), [f"target(s) {list(cols)}: the columns of {sample} besides its id"]
    for c in tr.columns:
        values = set(tr[c].dropna().astype(str))
        if values and values <= set(cols) and len(values) >= 2:
            return (str(c),), cols, [f"target {c!r} with classes {list(cols)} in the order of {sample}'s columns "
                                     f"(the submission holds one probability per class)"]
    raise DataError(f"{train} lacks {[c for c in cols if c not in tr.columns]} that {sample} names, and no "
                    f"column of it holds those labels: describe this competition by hand")


def _task(y: pd.DataFrame, targets: tuple, classes: tuple) -> tuple[str, tuple, list]:
    """(task, classes, why) from the training targets."""
    numeric = all(pd.api.types.is_numeric_dtype(y[c]) for c in targets)
    values = pd.unique(y.to_numpy().ravel())
    values = values[pd.notna(values)]
    binary01 = numeric and set(np.unique(values.astype(float))) <= {0.0, 1.0}
    if len(targets) > 1 and binary01:
        return "multilabel", (), [f"task multilabel: {len(targets)} target columns holding only 0 and 1 "
                                  "(one probability per label)"]
    if len(targets) > 1:
        return "multi_regression", (), [f"task multi_regression: {len(targets)} target columns"]
    if classes:
        return ("binary" if len(classes) == 2 else "multiclass"), classes, [
            f"task {'binary' if len(classes) == 2 else 'multiclass'}: {len(classes)} classes"]
    if not numeric:
        labels = tuple(sorted(map(str, values)))
        if len(labels) == 2:
            return "binary", labels, [f"task binary: two labels; classes {list(labels)}: [negative, positive] "
                                      f"guessed alphabetically: check which one the competition scores as "
                                      "positive (F1 and the submission's probability are for the second)"]
        return "multiclass", (), [f"task multiclass: {len(values)} distinct non-numeric labels"]
    if binary01:
        return "binary", (), ["task binary: the target holds only 0 and 1 (1 is the positive class)"]
    if len(values) <= 20 and np.all(np.mod(values.astype(float), 1) == 0):
        return "ordinal", (), [f"task ordinal: {len(values)} integer scores ({int(values.min())}-{int(values.max())})"]
    return "regression", (), ["task regression: a continuous numeric target"]


def _id_like(name) -> bool:
    """A column named as an id (id, essay_id, prompt_id): a key, never text."""
    return str(name).lower().endswith("id")


def _text_cols(tr: pd.DataFrame, te: pd.DataFrame, skip: set, train: str, test: str) -> tuple[tuple, list]:
    """(the input's text columns, why): every text column the train and test tables share, in the
    train table's order, when even the longest is a short phrase; else the longest text that is
    each row's own (not one repeated over many rows, such as a joined prompt)."""
    from .data import DataError

    shared = [c for c in tr.columns if c in te.columns and c not in skip and not _id_like(c)
              and not pd.api.types.is_numeric_dtype(te[c]) and not pd.api.types.is_numeric_dtype(tr[c])]
    if not shared:
        raise DataError(f"{train} and {test} share no text column besides the id")
    lengths = {c: float(te[c].fillna("").astype(str).str.len().mean()) for c in shared}
    sizes = ", ".join(f"{c} {lengths[c]:.0f}" for c in shared)
    if len(shared) > 1 and max(lengths.values()) < SHORT_TEXT:
        how = "a text pair" if len(shared) == 2 else "joined by the backbone's separator token"
        return tuple(shared), [f"text_cols {shared}: every text column {train} and {test} share, {how}: even the "
                               f"longest is a short phrase (mean characters: {sizes}); reorder them or write a "
                               "text_template (e.g. \"{a}{sep}{b}\") to change the input"]
    own = [c for c in shared if tr[c].nunique() >= 0.5 * len(tr)] or shared
    text = max(own, key=lengths.get)
    others = [c for c in shared if c != text]
    return (text,), [f"text column {text!r}: the longest text ({lengths[text]:.0f} characters on average) of "
                     f"the columns {train} and {test} share that is each row's own" + (
                         f"; not used: {', '.join(others)} (a text pair [{others[0]}, {text}] or a text_template "
                         "would add them)" if others else "")]


def _group(tr: pd.DataFrame, text_cols: tuple, keys: tuple) -> tuple[str, list]:
    """(the column to group folds by, or "", why): a text column (or join key) whose values repeat
    across many rows, so that near-duplicate inputs never sit on both sides of a fold; the longest
    such column when several repeat."""
    candidates = []
    for c in dict.fromkeys((*text_cols, *keys, *(c for c in tr.columns if _id_like(c)))):
        n, k = len(tr), tr[c].nunique()
        if k >= MIN_GROUPS and n / k >= 2:
            candidates.append((float(tr[c].astype(str).str.len().mean()), c, n / k, k))
    if not candidates:
        return "", []
    _, col, per, k = max(candidates)
    of = f"in the first {len(tr)} rows, " if len(tr) == 50_000 else ""
    return col, [f"folds grouped by {col!r}: {of}its {k} values repeat over {per:.0f} rows each on average; rows "
                 "sharing it are near-duplicates in input, and stratified folds would put them on both sides "
                 "(a far too optimistic CV)"]


def infer(data_dir) -> tuple[Competition, list]:
    """A description guessed from a competition's CSVs, and why each choice was made (lines)."""
    from .data import DataError

    data_dir = Path(data_dir)
    files = {p.name for p in data_dir.glob("*.csv")}
    pick = lambda want: next((f for f in sorted(files) if want in f.lower()), None)  # noqa: E731
    sample = pick("sample_submission") or pick("submission")
    if not sample:
        raise DataError(f"{data_dir}: no sample submission CSV found (files: {', '.join(sorted(files)) or 'none'})")
    sub = _read_head(data_dir / sample, 50)
    id_col = str(sub.columns[0])
    why = [f"id column {id_col!r}: the first column of {sample}"]
    train, tr, train_joins, w = _tables(data_dir, files, "train", id_col, sample)
    why += w
    test, te, test_joins, w = _tables(data_dir, files, "test", id_col, sample)
    why += w
    targets, classes, w = _targets(tr, train, sample, sub)
    why += w
    y = tr[list(targets)]
    task, classes, w = _task(y, targets, classes)
    why += w
    keys = tuple(k for _, k in (*train_joins, *test_joins))
    text_cols, w = _text_cols(tr, te, {id_col, *targets, *keys}, train, test)
    why += w
    metric = "roc_auc" if task == "multilabel" else TASKS[task][1]
    why.append(f"metric {metric}: the default for {task} (check the competition's page: e.g. pearson, "
               "spearman, roc_auc, log_loss, or a metric_file of your own)")
    rng = ()
    if task in ("regression", "multi_regression", "ordinal"):
        rng = (float(y.min().min()), float(y.max().max()))
        why.append(f"target_range [{rng[0]:g}, {rng[1]:g}]: the training targets' range (outside it a target is "
                   "refused; predictions are clipped to it)")
    group, w = _group(tr, text_cols, tuple(k for _, k in train_joins))
    why += w
    comp = Competition(slug=data_dir.resolve().name, id_col=id_col, text_cols=text_cols, target_cols=targets,
                       task=task, metric=metric if metric != TASKS[task][1] else "", target_range=rng,
                       classes=tuple(classes), submission="probabilities" if classes and len(targets) == 1
                       and classes == tuple(map(str, sub.columns[1:])) else "",
                       train_file=train, test_file=test, sample_submission=sample, train_joins=train_joins,
                       test_joins=test_joins, folds="group" if group else "stratified", group_col=group)
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
