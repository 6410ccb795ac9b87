"""A Kaggle text competition, described once: files, columns, input text, targets, task, metric,
submission and folds. A frozen dataclass that round-trips through a JSON file; the built-in ones
are entries of BUILTIN, an unknown one is inferred from its CSVs (utils.infer):

    python -m utils.competition show feedback-prize-english-language-learning
    python -m utils.infer --data DIR --out competition.json   # a new one: then check the file

Everything else asks the description (and the metric it names, utils.metrics; the objective its
task is trained as, utils.objective) instead of branching on a competition's name; its tables are
read as it says by utils.tables. Light: pandas only, no torch.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import string
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .cli import HelpFormatter, cli_error, first_paragraph
from .data import DataError
from .files import write_json
from .metrics import METRICS, check_on_sample, register_code
from .objective import get_objective
from .reshape import RESHAPES
from .reshape import register_code as register_reshape

# task -> (what the model is trained as, the default metric, what a submission holds)
TASKS = {
    "regression": ("regression", "rmse", "values"),
    "multi_regression": ("regression", "mcrmse", "values"),
    "binary": ("classification", "f1", "labels"),
    "multiclass": ("classification", "accuracy", "labels"),
    "ordinal": ("regression", "qwk", "labels"),  # a regression output cut into integer scores
    "multilabel": ("multilabel", "roc_auc", "probabilities"),  # several 0/1 labels, one probability each
    # Rankings: the answer is the top answer_k candidates, best first, scored by MAP@answer_k.
    "retrieval": ("retrieval", "map@{k}", "ranking"),  # items of a catalogue table (Eedi's misconceptions)
    "multiple_choice": ("multiple_choice", "map@{k}", "ranking"),  # options in columns of the row (A-E)
    # Parts of a text: the answer is spans of the span_col text (utils.spans), written as it says.
    "spans": ("spans", "char_f1", "spans"),
}
SUBMISSIONS = ("values", "labels", "probabilities", "ranking", "spans")
# How a span task's labels (and answers) are written: the span's text, found in the row ("text":
# Tweet's selected_text), or character offsets "s e;s e" ("offsets": NBME's location).
SPAN_LABELS = ("text", "offsets")
# How many spans a row answers with: "one" (a start and an end, chosen together: Tweet) or "many"
# (any number, each character in or out: NBME).
SPAN_COUNTS = ("one", "many")
FOLDS = ("stratified", "group", "file")
LONG_TEXT = ("head", "head_tail", "windows")
# Where the backbone's own separator token goes in an input text ({sep} in a text_template; between
# the columns of three or more): utils.batching puts the tokenizer's token there when it tokenizes.
SEP = "\x1f"


class CompetitionError(ValueError):
    """A description that cannot be used; the message names the file and the field."""


def template_columns(template: str) -> tuple:
    """The columns a template names, in its order, once each ("{a}:{b}" -> ("a", "b"))."""
    return tuple(dict.fromkeys(f for _, f, _, _ in string.Formatter().parse(template) if f))


def join_labels(df: pd.DataFrame, template: str, missing: str = "") -> pd.Series:
    """One label per row of `df`: `template` (e.g. "{Category}:{Misconception}") filled with the
    row's values as written, a blank or missing part written `missing`."""
    parts = {c: df[c].astype("string").str.strip().fillna("").replace("", missing)
             for c in template_columns(template)}
    rows = pd.DataFrame(parts, index=df.index).to_dict("records")
    return pd.Series([template.format(**r) for r in rows], index=df.index, dtype=object)


@dataclass(frozen=True)
class Competition:
    slug: str  # Kaggle's competition slug (kaggle competitions download SLUG)
    title: str = ""  # the competition's name, for titles and notebooks
    id_col: str = "id"
    text_cols: tuple = ("excerpt",)  # one column; two = a text pair; three or more: joined by {sep}
    text_template: str = ""  # columns into one text, e.g. "{keyword}: {text}" or "{a}{sep}{b}"; "" = none
    target_cols: tuple = ("target",)
    label_template: str = ""  # the target joined from training columns, e.g. "{Category}:{Misconception}"
    label_missing: str = ""  # how a label_template writes a blank part (e.g. "NA"); "" = left empty
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
    # Rankings (task retrieval or multiple_choice; or a multiclass task answering its top classes):
    catalogue: tuple = ()  # retrieval: [file, id column, text column], the items answers are drawn from
    options: tuple = ()  # multiple_choice: the columns holding a row's options; the target names one
    answer_k: int = 0  # how many answers a ranking submission lists, best first (MAP@answer_k)
    answer_col: str = ""  # the submission's column for a ranking; "" = the target column
    no_answer: str = ""  # multiple_choice: the label of a row none of whose options is right (never trained
    #   on, scored 0: a reranker's candidates that miss the true item)
    reshape: str = ""  # the train/test tables into model rows first: a utils.reshape built-in or yours
    reshape_file: str = ""  # a Python file beside this description defining reshape(df, split)
    reshape_code: str = ""  # that file's source, filled in when read: the description carries it
    stratify_col: str = ""  # folds stratified on this column's values (Tweet's sentiment) instead of the target
    # Spans (task spans): the text column the spans index (a pair's other text is what the row is
    # conditioned on: Tweet's sentiment, NBME's feature), how the labels are written (SPAN_LABELS: the
    # answer is written alike, in the target column), how many spans a row answers with (SPAN_COUNTS).
    span_col: str = ""
    span_labels: str = ""
    span_count: str = ""

    def __post_init__(self):
        def bad(field, msg):
            raise CompetitionError(f"competition {self.slug!r}: field {field!r}: {msg}")

        for field, register in (("metric", register_code), ("reshape", register_reshape)):  # a file of one's own
            code, file = getattr(self, f"{field}_code"), getattr(self, f"{field}_file")
            if code:
                try:
                    register(code, getattr(self, field), file or f"{field}_code")
                except ValueError as e:
                    bad(f"{field}_file", str(e))
            elif file:
                bad(f"{field}_file", f"{file!r} was not read (a description read from a file reads it)")
        if not (self.reshape_code or self.reshape_file) and self.reshape and self.reshape not in RESHAPES:
            bad("reshape", f"{self.reshape!r} is not one of {', '.join(RESHAPES)} (one of your own: reshape_file, "
                "a Python file beside the description defining reshape(df, split))")
        if (self.reshape_file or self.reshape_code) and not self.reshape:
            bad("reshape", "a reshape_file's function needs a name: \"reshape\": \"NAME\"")

        if not self.slug or not isinstance(self.slug, str):
            raise CompetitionError("competition: field 'slug' is required (Kaggle's competition slug)")
        checks = [("task", tuple(TASKS)), ("folds", FOLDS), ("long_text", LONG_TEXT)]
        checks += [("submission", ("", *SUBMISSIONS))]
        for name, valid in checks:
            if getattr(self, name) not in valid:
                bad(name, f"{getattr(self, name)!r} is not one of {', '.join(v for v in valid if v)}")
        self._check_ranking(bad)
        self._check_spans(bad)
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
            try:
                used = {f for _, f, _, _ in string.Formatter().parse(self.text_template) if f}
            except ValueError as e:
                bad("text_template", f"{self.text_template!r} cannot be read ({e})")
            if not used - {"sep"} or not used <= {*self.text_cols, "sep"}:
                bad("text_template", f"{self.text_template!r} must use only text_cols {list(self.text_cols)} "
                    "(and {sep}: the backbone's separator token)")
        self._check_label_template(bad)
        obj = self.objective
        if self.submission_kind not in obj.submissions:
            bad("submission", f"a {self.task} model's submission holds {' or '.join(obj.submissions)}, "
                f"not {self.submission}")
        refused = obj.refuses(METRICS[self.metric_name])
        if refused:
            bad("metric", f"{refused} (task {self.task!r})")
        if self.metric_code:  # a metric of one's own scores made-up rows now, not after a fold trained
            try:
                y, pred = obj.sample(self)
                if METRICS[self.metric_name].needs == "spans":  # the answers as written, decoded from the scores
                    y, pred = obj.truth(y, 1), obj.scored(y, pred)
                check_on_sample(METRICS[self.metric_name], y, pred, self.metric_file or "metric_code")
            except ValueError as e:
                bad("metric_file", str(e))

    def _check_label_template(self, bad) -> None:
        """A joined target: one class label made of training columns, for a classification."""
        if not self.label_template:
            if self.label_missing:
                bad("label_missing", "how a label_template writes a blank part: it needs the label_template")
            return
        try:
            used = [f for _, f, _, _ in string.Formatter().parse(self.label_template) if f is not None]
        except ValueError as e:
            bad("label_template", f"{self.label_template!r} cannot be read ({e})")
        if not used or "" in used:
            bad("label_template", f"{self.label_template!r} must name the training columns it joins, e.g. "
                "\"{Category}:{Misconception}\"")
        if self.model_task != "classification" or len(self.target_cols) != 1:
            bad("label_template", f"a joined label is one class label (task binary or multiclass with one target "
                f"column, which it writes), not task {self.task!r} with targets {list(self.target_cols)}")
        if self.target_cols[0] in used:
            bad("label_template", f"the target {self.target_cols[0]!r} is what the template writes, not one of "
                "the columns it joins")

    @property
    def label_columns(self) -> tuple:
        """The training columns a label_template joins into the target (in its order), else ()."""
        return template_columns(self.label_template)

    def joined_labels(self, df: pd.DataFrame) -> pd.Series:
        """The target of each row as label_template joins it (a blank part written label_missing)."""
        return join_labels(df, self.label_template, self.label_missing)

    def _check_ranking(self, bad) -> None:
        """The ranking fields against the task: a catalogue for retrieval, options for multiple
        choice, answer_k for both (and a multiclass task that answers its top classes)."""
        ranking = self.task in ("retrieval", "multiple_choice")
        if not isinstance(self.answer_k, int) or isinstance(self.answer_k, bool) or self.answer_k < 0:
            bad("answer_k", f"how many answers a row lists, a whole number >= 1, got {self.answer_k!r}")
        if ranking and not self.answer_k:
            bad("answer_k", f"a {self.task} submission lists the top k answers: answer_k >= 1 (MAP@k)")
        if self.submission == "ranking" and not self.answer_k:
            bad("answer_k", "a ranking submission lists the top k classes: answer_k >= 1")
        if self.answer_k and not ranking and self.submission != "ranking":
            bad("answer_k", f"answer_k is for rankings (tasks retrieval, multiple_choice, or submission 'ranking'), "
                f"not a {self.task} task's {self.submission_kind}")
        if self.task == "retrieval":
            if len(self.catalogue) != 3 or not all(isinstance(c, str) and c for c in self.catalogue):
                bad("catalogue", f"retrieval draws answers from a table: [file, id column, text column], got "
                    f"{list(self.catalogue)}")
        elif self.catalogue:
            bad("catalogue", f"a catalogue of items is for task retrieval, not {self.task}")
        if self.task == "multiple_choice":
            if len(self.options) < 2 or not all(isinstance(c, str) and c for c in self.options):
                bad("options", f"multiple choice needs two option columns or more, got {list(self.options)}")
            if len(set(self.options)) != len(self.options):
                bad("options", f"an option column is named twice in {list(self.options)}")
            if self.answer_k > len(self.options):
                bad("answer_k", f"{self.answer_k} answers from {len(self.options)} options: answer_k <= "
                    f"{len(self.options)}")
        elif self.options:
            bad("options", f"option columns are for task multiple_choice, not {self.task}")
        if self.no_answer and (self.task != "multiple_choice" or self.no_answer in self.options):
            bad("no_answer", "the label of a multiple-choice row that no option answers, not an option itself")
        if self.answer_col and not (ranking or self.submission == "ranking"):
            bad("answer_col", "answer_col names a ranking's submission column")

    def _check_spans(self, bad) -> None:
        """The span fields against the task: the span column is one of the text columns (the last of
        a pair, or the only one), and the labels' form and the span count are named."""
        fields = {"span_col": self.span_col, "span_labels": self.span_labels, "span_count": self.span_count}
        if self.task != "spans":
            for name, value in fields.items():
                if value:
                    bad(name, f"{name} is for task spans, not {self.task}")
            return
        if self.span_col not in self.text_cols:
            bad("span_col", f"the text column the spans index, one of text_cols {list(self.text_cols)}; got "
                f"{self.span_col!r}")
        if len(self.text_cols) == 2 and self.span_col != self.text_cols[1]:
            bad("span_col", f"in a pair the spans index the second text (the first is the condition): "
                f"text_cols [{self.span_col!r}, ...] the other way round")
        if self.text_template or len(self.text_cols) > 2:
            bad("text_cols", "a span task reads its text whole, alone or paired with one condition column "
                "(Tweet's sentiment, NBME's feature text): one or two text columns, no text_template")
        if self.span_labels not in SPAN_LABELS:
            bad("span_labels", f"how the labels are written: {' or '.join(SPAN_LABELS)}; got {self.span_labels!r}")
        if self.span_count not in SPAN_COUNTS:
            bad("span_count", f"how many spans a row answers with: {' or '.join(SPAN_COUNTS)}; got "
                f"{self.span_count!r}")
        if len(self.target_cols) != 1:
            bad("target_cols", "a span task has one label column (its spans, as text or offsets)")
        wants = {"jaccard": "text", "char_f1": "offsets", "f5": "offsets"}.get(self.metric_name)
        if wants and self.span_labels != wants:
            bad("metric", f"{self.metric_name} scores spans written as {wants}, not {self.span_labels}")

    # ---- what the rest of the kit reads
    @property
    def span_side(self) -> int:
        """Which text of a row's input the spans index: 0 (the only text, or a pair's first), 1."""
        return self.text_cols.index(self.span_col) if self.span_col in self.text_cols else 0

    @property
    def model_task(self) -> str:
        """What the model is trained as: regression, classification, multilabel, retrieval or
        multiple_choice (utils.objective's kinds)."""
        return TASKS[self.task][0]

    @functools.cached_property
    def objective(self):
        """The utils.objective.Objective this competition's task is trained as, with what it keeps
        for this competition (a retriever's candidates, a span task's count): chosen once, here, so
        utils.objective never asks the description back."""
        return get_objective(self.model_task).for_competition(self)

    @property
    def metric_name(self) -> str:
        """The metric: the description's, else the task's default (a ranking's MAP@answer_k)."""
        if self.metric:
            return self.metric
        return f"map@{self.answer_k}" if self.submission == "ranking" else TASKS[self.task][1].format(k=self.answer_k)

    @property
    def ranking(self) -> bool:
        """The submission lists the top answer_k candidates of each row, best first."""
        return self.submission_kind == "ranking"

    @property
    def candidates(self) -> bool:
        """It ranks candidates, a catalogue's items or a row's options (not classes answered top k)."""
        return bool(self.catalogue or self.options)

    @property
    def span_task(self) -> bool:
        """The answer is parts of the span_col text (task spans): its figures and baselines are
        the span ones (utils.eda.span_facts), its submission a text or offsets per row."""
        return self.task == "spans"

    @property
    def answer_column(self) -> str:
        """The submission's column holding a ranking (the target's, unless answer_col says)."""
        return self.answer_col or self.target_cols[0]

    @property
    def submission_kind(self) -> str:
        return self.submission or TASKS[self.task][2]

    @property
    def binary(self) -> bool:
        """Two classes, [negative, positive]: F1 and a submitted probability are the positive one's."""
        return self.task == "binary"

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
        for field in ("metric", "reshape"):  # a file of one's own, carried in the description
            if kw.get(f"{field}_file") and folder is not None:
                path = Path(folder) / kw[f"{field}_file"]
                if not path.is_file() and not kw.get(f"{field}_code"):
                    raise CompetitionError(f"{source}: field '{field}_file': {path} not found")
                if path.is_file():
                    kw[f"{field}_code"] = path.read_text(encoding="utf-8")
        try:
            return cls(**kw)
        except CompetitionError as e:
            raise CompetitionError(f"{source}: {e}") from None

    def as_parameter(self) -> str:
        """How a notebook or kernel is told this competition: a built-in's slug, else its JSON."""
        return self.slug if BUILTIN.get(self.slug) == self else json.dumps(self.to_dict())

    def save(self, path) -> None:
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
        Competition(
            slug="eedi-mining-misconceptions-in-mathematics", title="Eedi - Mining Misconceptions in Mathematics",
            id_col="QuestionId_Answer", reshape="distractors",
            text_cols=("ConstructName", "SubjectName", "QuestionText", "CorrectAnswerText", "AnswerText"),
            text_template="{ConstructName} ({SubjectName}){sep}{QuestionText}{sep}Correct answer: "
                          "{CorrectAnswerText}{sep}Wrong answer: {AnswerText}",
            target_cols=("MisconceptionId",), task="retrieval", answer_k=25,
            catalogue=("misconception_mapping.csv", "MisconceptionId", "MisconceptionName"),
            folds="group", group_col="QuestionId", short_name="eedi",
            # The wrong answer ends the query: a cut that keeps the end keeps it (at --max-len 128,
            # "head" made 556 of the 3,503 distractors token-identical to a sibling of their question).
            long_text="head_tail",
        ),
        Competition(
            slug="kaggle-llm-science-exam", title="Kaggle - LLM Science Exam", text_cols=("prompt",),
            options=("A", "B", "C", "D", "E"), target_cols=("answer",), task="multiple_choice", answer_k=3,
            answer_col="prediction", short_name="science-exam",
        ),
        Competition(
            slug="tweet-sentiment-extraction", title="Tweet Sentiment Extraction", id_col="textID",
            text_cols=("sentiment", "text"), target_cols=("selected_text",), task="spans", metric="jaccard",
            span_col="text", span_labels="text", span_count="one", stratify_col="sentiment", short_name="tweet-spans",
        ),
        Competition(
            slug="nbme-score-clinical-patient-notes", title="NBME - Score Clinical Patient Notes",
            text_cols=("feature_text", "pn_history"), target_cols=("location",), task="spans",
            train_joins=(("patient_notes.csv", "pn_num"), ("features.csv", "feature_num")),
            test_joins=(("patient_notes.csv", "pn_num"), ("features.csv", "feature_num")),
            span_col="pn_history", span_labels="offsets", span_count="many",
            folds="group", group_col="pn_num", short_name="nbme",
        ),
    )
}
DEFAULT = "commonlitreadabilityprize"


def option_names(n: int) -> tuple:
    """A reranker's options: its query's candidates c0, c1, ... (utils.rerank)."""
    return tuple(f"c{j}" for j in range(n))


def is_reranker(comp: Competition) -> bool:
    """The competition is a reranker's (utils.rerank.description's): a multiple choice among the
    candidates c0... of a query (here, not in utils.rerank: utils.predict asks it too)."""
    return bool(comp.options) and comp.options == option_names(len(comp.options))


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


def main(argv=None) -> int:
    """CLI: show a built-in or saved description (a new competition's is inferred by utils.infer)."""
    p = argparse.ArgumentParser(prog="python -m utils.competition", description=first_paragraph(__doc__),
                                formatter_class=HelpFormatter,
                                epilog="a new competition: python -m utils.infer --data DIR --out competition.json")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("show", help="print a built-in or saved description as JSON", formatter_class=HelpFormatter)
    s.add_argument("competition", nargs="?", default=DEFAULT,
                   help=f"a built-in slug ({', '.join(BUILTIN)}) or a JSON file (default: %(default)s)")
    args = p.parse_args(argv)
    try:
        print(json.dumps(load_competition(args.competition).to_dict(), indent=2))
    except (CompetitionError, DataError, OSError, ValueError) as e:
        return cli_error(e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
