"""A competition description guessed from its CSVs: the sample submission names the id and the
targets, the training targets the task, the training file's text lengths the input; each choice
comes with the reason it was made, for the user to check before use.

    python -m utils.infer --data DIR --out competition.json   # then check it: --competition FILE

Light: pandas only, no torch.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from . import spans
from .cli import HelpFormatter, cli_error, first_paragraph
from .competition import TASKS, Competition, join_labels, template_columns
from .data import DataError
from .tables import join_key

SHORT_TEXT = 64  # characters on average: a column this short is a phrase, not a document
MIN_GROUPS = 10  # a repeating column proposes grouped folds when it has at least this many values
N_FOLDS = 5  # the folds training makes by default: grouping needs at least this many groups
CONDITION_WORDS = 4  # a condition (a rule, a question, a prompt) is a sentence: this many words on average
CONDITION_SHARE = 0.1  # ... repeated: at most this share of the rows' count of distinct values


def _read_head(path: Path, nrows: int) -> pd.DataFrame:
    df = pd.read_csv(path, nrows=nrows, encoding="utf-8-sig")
    if len(df) == 0:
        raise DataError(f"{path}: no data rows (a header only): nothing to infer a description from")
    return df


def _tables(data_dir: Path, files: set, role: str, id_col: str, sample: str) -> tuple[str, pd.DataFrame, tuple, list]:
    """(the `role` table: the one holding the sample submission's id column, its rows with the
    others joined, the joins (file, key), why): the other tables of the role join by a shared
    column whose values are unique in them."""
    other = "test" if role == "train" else "train"
    names = sorted((f for f in files if role in f.lower() and f != sample), key=lambda f: (f != f"{role}.csv", f))
    # Tables of neither role (NBME's patient_notes.csv, features.csv) join onto both, after the role's own.
    names += sorted(f for f in files if role not in f.lower() and other not in f.lower() and f != sample)
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
        joined = df.assign(**{key: join_key(df[key])}).merge(table.assign(**{key: join_key(table[key])}), on=key,
                                                             how="left", suffixes=("", f"_{Path(f).stem}"))
        if role not in f.lower() and joined[[c for c in table.columns if c != key]].isna().all(axis=None):
            continue  # a table of neither role whose keys match none of the rows: not this table's
        joins.append((f, key))
        df = joined
        why.append(f"{role}_joins {f} on {key!r}: a table sharing {key!r} with {main}, one row per value")
    return main, df, tuple(joins), [w for w in why if w]


def _targets(tr: pd.DataFrame, train: str, sample: str, sub: pd.DataFrame) -> tuple[tuple, tuple, list, tuple | None]:
    """(target columns, class order or (), why, label_join's answer or None): the sample
    submission's columns when the train file has them; else the one train column whose labels are
    the sample's columns (a submission of class probabilities, in the sample's order); else a
    label joined from training columns (label_join), or the column whose values the sample lists."""
    cols = tuple(map(str, sub.columns[1:]))
    if all(c in tr.columns for c in cols):
        return cols, (), [f"target(s) {list(cols)}: the columns of {sample} besides its id"], None
    for c in tr.columns:
        values = set(tr[c].dropna().astype(str))
        if values and values <= set(cols) and len(values) >= 2:
            return (str(c),), cols, [f"target {c!r} with classes {list(cols)} in the order of {sample}'s columns "
                                     f"(the submission holds one probability per class)"], None
    joined = label_join(tr, cols[0], sub[cols[0]]) if len(cols) == 1 else None
    if joined is not None:
        return cols, (), [], joined  # a label joined from training columns (infer adds it and says why)
    named = labels_column(tr, cols[0], sub[cols[0]]) if len(cols) == 1 else None
    if named is not None:
        return (named,), (), [f"target {named!r}: the answers {sample}'s {cols[0]!r} writes are its values"], None
    raise DataError(f"{train} lacks {[c for c in cols if c not in tr.columns]} that {sample} names, and no "
                    f"column of it holds those labels: describe this competition by hand")


def label_join(tr: pd.DataFrame, answer: str, cells: pd.Series) -> tuple | None:
    """(label_template, label_missing, why) when every answer the sample submission writes (a
    space-separated list of them, or one) is training columns' values joined by one separator
    ("True_Correct:NA"), a part that no value matches being how the competition writes a missing
    one (in a column that has missing cells); None otherwise. The columns are the ones the answer
    column's name joins by the same separator when it does ("Category:Misconception"), else the
    ones holding each part's values."""
    tokens = sorted({t for c in cells.dropna().astype(str) for t in c.split()})
    if not tokens:
        return None
    shared = set.intersection(*({ch for ch in t if not ch.isalnum() and ch not in "_-."} for t in tokens))
    texty = [c for c in tr.columns if c != answer and not pd.api.types.is_numeric_dtype(tr[c])]
    for sep in sorted(shared, key=lambda ch: answer.count(ch) != 1):  # the one the answer's name uses first
        split = [t.split(sep) for t in tokens]
        n = len(split[0])
        if n < 2 or any(len(p) != n for p in split):
            continue
        named = answer.split(sep) if answer.count(sep) == n - 1 else []
        cols, missing, missing_col = [], set(), ""
        for i in range(n):
            parts = {p[i] for p in split}
            candidates = [c for c in ([named[i]] if named and named[i] in tr.columns else texty) if c not in cols]
            for c in candidates:
                values = set(tr[c].dropna().astype(str).str.strip())
                unmatched = parts - values
                if parts & values and (not unmatched or (len(unmatched) == 1 and tr[c].isna().any())):
                    cols.append(c)
                    missing |= unmatched
                    missing_col = missing_col or (c if unmatched else "")
                    break
            else:
                break
        if len(cols) == n and len(missing) <= 1:
            template = sep.join("{" + str(c) + "}" for c in cols)
            marker = next(iter(missing), "")
            said = f"; a missing {missing_col!r} written {marker!r}" if marker else ""
            return template, marker, (f"target {answer!r}: the answers are {' and '.join(map(repr, cols))} joined by "
                                      f"{sep!r} (label_template {template!r}{said}), one class per joined label")
    return None


def labels_column(tr: pd.DataFrame, answer: str, cells: pd.Series) -> str | None:
    """The training column whose labels are every answer the sample writes (one, or a list of
    them per row: classes answered top k), a column of repeated labels, not ids; None if none."""
    tokens = {t for c in cells.dropna().astype(str) for t in c.split()}
    for c in tr.columns:
        values = set(tr[c].dropna().astype(str))
        if tokens and tokens <= values and not _id_like(c) and 2 <= len(values) <= len(tr) / 2:
            return str(c)
    return None


def sample_values(sub: pd.DataFrame, targets: tuple) -> str:
    """What the sample submission's target cells hold: "probabilities" (a fraction somewhere,
    e.g. every row 0.5), "labels" (0/1, whole numbers or words) or "" (no cell to read)."""
    cells = sub[[c for c in targets if c in sub.columns]]
    if cells.empty or cells.isna().all(axis=None):
        return ""
    numbers = cells.apply(pd.to_numeric, errors="coerce")
    if numbers.isna().any(axis=None):
        return "labels"
    x = numbers.to_numpy(dtype=float)
    return "probabilities" if ((x > 0) & (x < 1) & (np.mod(x, 1) != 0)).any() else "labels"


OFFSETS = re.compile(r"^\d+ \d+(;\d+ \d+)*$")  # a span as character offsets: "s e" or "s e;s e"


def _spans(tr: pd.DataFrame, train: str, targets: tuple) -> tuple | None:
    """A target that is part of a text: (how its labels are written, the column they index or "",
    why). Character offsets (NBME's location, "s e;s e" or a list of them: their text is found once
    the text columns are known, span_text) or a substring of another column in most rows (Tweet's
    selected_text). As a class or a value it would train on the wrong thing."""
    for t in (t for t in targets if not pd.api.types.is_numeric_dtype(tr[t])):
        cells = tr[t].dropna().astype(str).str.strip()
        cells = cells[~cells.isin(["", "[]"])]
        if cells.nunique() < max(20, len(cells) // 5):  # a span answer is nearly every row's own; classes are few
            continue
        if len(targets) > 1:
            raise DataError(f"{train}: column {t!r} holds parts of a text, beside other targets "
                            f"{[c for c in targets if c != t]}: a span task has one label column")
        pieces = cells.str.strip("[]").str.split(",").explode().str.strip().str.strip("'\"")
        pieces = pieces[pieces != ""]
        if len(pieces) and pieces.str.fullmatch(OFFSETS).mean() > 0.9:
            return "offsets", "", f"task spans: column {t!r} holds character offsets ({cells.iloc[0]!r})"
        for c in (c for c in tr.columns if c != t and not pd.api.types.is_numeric_dtype(tr[c])):
            both = tr[[c, t]].dropna().astype(str)
            both = both[both[t].str.len() > 0]
            inside = np.mean([a in b for a, b in zip(both[t], both[c])]) if len(both) else 0.0
            if inside > 0.9 and (both[t] != both[c]).mean() > 0.2:
                return "text", c, f"task spans: column {t!r} is a part of column {c!r} in {inside:.0%} of rows"
    return None


def span_text(tr: pd.DataFrame, target: str, text_cols: tuple) -> str:
    """The text column character offsets index: the shortest one that every row's offsets fit (the
    longest when none does: check_spans then names the row that does not)."""
    ends = np.array([max((e for _, e in spans.parse_location(v)), default=0) for v in tr[target]])
    lengths = {c: tr[c].fillna("").astype(str).str.len().to_numpy() for c in text_cols}
    fits = [c for c in text_cols if (ends <= lengths[c]).all()]
    return min(fits, key=lambda c: lengths[c].mean()) if fits else max(text_cols, key=lambda c: lengths[c].mean())


def _span_fields(tr: pd.DataFrame, te: pd.DataFrame, found: tuple, target: str, skip: set) -> tuple[dict, list]:
    """A span description's fields from what _spans found and the inferred text columns: the
    span column second, after one condition column (the other text column with the fewest
    distinct values), the labels' form and count, the metric; stratified on a condition of few
    values."""
    labels, column, why = found
    why = [why]
    text_cols = [c for c in tr.columns
                 if c in te.columns and c not in skip and not _id_like(c) and _written_text(tr[c])]
    column = column or span_text(tr, target, text_cols)
    others = sorted((c for c in text_cols if c != column), key=lambda c: tr[c].nunique())
    if others:
        why.append(f"text_cols [{others[0]!r}, {column!r}]: the spans index {column!r}, read after the condition "
                   f"{others[0]!r}" + (f" ({', '.join(map(repr, others[1:]))} left out: one condition)"
                                       if len(others) > 1 else ""))
    count = "one" if labels == "text" else "many"
    metric = "jaccard" if labels == "text" else "char_f1"
    how = "a start and an end" if count == "one" else "any number of spans"
    why.append(f"span_labels {labels!r}, span_count {count!r} ({how}), metric {metric} (check the competition's page)")
    fields = dict(text_cols=(*others[:1], column), span_col=column, span_labels=labels,
                  span_count=count, metric=metric if metric != TASKS["spans"][1] else "")
    if others and tr[others[0]].nunique() <= 20:
        fields["stratify_col"] = others[0]
        why.append(f"stratify_col {others[0]!r}: folds keep its {tr[others[0]].nunique()} values' shares")
    return fields, why


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


def _answers(sub: pd.DataFrame, targets: tuple, task: str, classes: tuple) -> tuple[dict, list]:
    """(the submission's fields: submission, answer_k, metric; why) from what the sample
    submission's cells hold: a space-separated list answers a classification's top k (MAP@k);
    fractions (a constant 0.5) are probabilities, scored by a probability metric (ROC AUC for two
    classes, log loss for more); 0/1 or words are labels, scored by a thresholded one (the task's
    default). {} when the sample says nothing the task's default does not."""
    if task not in ("binary", "multiclass") or len(targets) != 1:
        return {}, []
    col = targets[0] if targets[0] in sub.columns else str(sub.columns[1])
    if classes and tuple(map(str, sub.columns[1:])) == tuple(classes):  # one probability column per class
        return ({"metric": "log_loss"} if len(classes) > 2 else {"metric": "roc_auc"}), [
            f"metric {'log_loss' if len(classes) > 2 else 'roc_auc'}: the sample submission holds one probability "
            "per class, a probability metric (check the competition's page)"]
    lists = sub[col].dropna().astype(str).str.split()
    k = int(lists.str.len().max()) if len(lists) else 0
    if k > 1:
        return {"submission": "ranking", "answer_k": k, "answer_col": col if col != targets[0] else ""}, [
            f"submission ranking, answer_k {k}, metric map@{k}: the sample's {col!r} lists {k} answers per row, best "
            "first (the classes answered top k)"]
    kind = sample_values(sub, (col,))
    if kind == "probabilities":
        metric = "roc_auc" if task == "binary" else "log_loss"
        shown = sub[col].drop_duplicates().head(3).tolist()
        return {"submission": "probabilities", "metric": metric}, [
            f"metric {metric}, submission probabilities: the sample's {col!r} holds probabilities ({shown}), "
            f"so a probability metric scores it ({'ROC AUC for a binary target' if task == 'binary' else 'log loss'}"
            "; check the competition's page: log_loss is the other)"]
    if kind == "labels":
        metric = TASKS[task][1]
        return {"metric": metric}, [f"metric {metric}: the sample's {col!r} holds labels, so a thresholded metric "
                                    f"scores it; {metric} is the default for {task} (check the competition's page)"]
    return {}, []


def _id_like(name) -> bool:
    """A column named as an id (id, essay_id, prompt_id): a key, never text."""
    return str(name).lower().endswith("id")


def _written_text(values: pd.Series) -> bool:
    """A column of text: not numbers, nor numbers read as strings (a joined table's key-like columns)."""
    if pd.api.types.is_numeric_dtype(values):
        return False
    present = values.dropna()
    return not len(present) or pd.to_numeric(present, errors="coerce").isna().any()


def _text_cols(tr: pd.DataFrame, te: pd.DataFrame, skip: set, train: str, test: str) -> tuple[tuple, list, str]:
    """(the input's text columns, why): every text column the train and test tables share, in the
    train table's order, when even the longest is a short phrase; else the longest text that is
    each row's own (not one repeated over many rows, such as a joined prompt). Types and lengths
    are the training file's: a test file may be a stub of a few rows (Kaggle swaps in the real
    one when a notebook is scored), whose missing or short values would flip the choice."""
    shared = [c for c in tr.columns if c in te.columns and c not in skip and not _id_like(c) and _written_text(tr[c])]
    if not shared:
        raise DataError(f"{train} and {test} share no text column besides the id")
    lengths = {c: float(tr[c].fillna("").astype(str).str.len().mean()) for c in shared}
    sizes = ", ".join(f"{c} {lengths[c]:.0f}" for c in shared)
    if len(shared) > 1 and max(lengths.values()) < SHORT_TEXT:
        how = "a text pair" if len(shared) == 2 else "joined by the backbone's separator token"
        return tuple(shared), [f"text_cols {shared}: every text column {train} and {test} share, {how}: even the "
                               f"longest is a short phrase (mean characters in {train}: {sizes}); reorder them or "
                               "write a text_template (e.g. \"{a}{sep}{b}\") to change the input"], ""
    own = [c for c in shared if tr[c].nunique() >= 0.5 * len(tr)] or shared
    examples = numbered(own)
    text = max([c for c in own if c not in examples] or own, key=lengths.get)
    condition, why = _condition(tr, [c for c in shared if c not in own], text, lengths, train)
    others = [c for c in shared if c not in (text, condition, *examples)]
    if examples:
        first = examples[0]
        why.append(f"not used: {', '.join(examples)}, numbered columns of texts: worked examples"
                   + (f" of {condition!r}" if condition else "") + ". Into the input with a text_template (e.g. "
                   f"\"{{{condition or first}}}{{sep}}{{{first}}}{{sep}}{{{text}}}\", text_cols naming them, the text "
                   "judged last), or, with a reshape, as extra labelled rows (an example column per label)")
    if condition:
        return (condition, text), why, condition
    return (text,), [f"text column {text!r}: the longest text ({lengths[text]:.0f} characters on average in "
                     f"{train}) of "
                     f"the columns {train} and {test} share that is each row's own" + (
                         f"; not used: {', '.join(others)} (a text pair [{others[0]}, {text}] or a text_template "
                         "would add them)" if others else "")] + why, ""


def numbered(columns) -> list:
    """The columns named as a numbered series (positive_example_1, positive_example_2): two or
    more sharing a stem followed by a number."""
    stems = {c: re.sub(r"[_\- ]?\d+$", "", str(c)) for c in columns if re.search(r"\d$", str(c))}
    counts = pd.Series(list(stems.values())).value_counts()
    return [c for c, stem in stems.items() if counts.get(stem, 0) >= 2]


def _condition(tr: pd.DataFrame, repeated: list, text: str, lengths: dict, train: str) -> tuple[str, list]:
    """(the column each row is judged against, or "", why): a sentence (a rule, a question, a
    prompt) repeated over many rows, present in nearly every row; the shortest when several are. A
    tag of a word or two (a keyword, a subreddit) is not one: it is listed, not used."""
    found = []
    for c in repeated:
        present = tr[c].notna().mean()
        cell = tr[c].dropna().astype(str)
        words = float(cell.str.split().str.len().mean()) if len(cell) else 0.0
        k = tr[c].nunique()
        if present >= 0.9 and words >= CONDITION_WORDS and 2 <= k <= max(2, CONDITION_SHARE * len(tr)):
            found.append((lengths[c], c, k, words))
    if not found:
        return "", []
    _, c, k, words = min(found)  # the shortest: a question, not the article it is about
    return c, [f"text_cols [{c!r}, {text!r}]: a text pair, {text!r} judged against the condition {c!r} (a sentence of "
               f"{words:.0f} words on average repeated over the rows: {k} distinct in {len(tr)} rows of {train}); the "
               f"text judged is second, so a long one is what truncation cuts"]


def _condition_folds(tr: pd.DataFrame, te: pd.DataFrame, condition: str, test: str) -> tuple[str, list]:
    """(the column to group folds by, or "", why): the condition when the test file holds values
    of it that training never had (so CV must score conditions a model never saw)."""
    seen = set(tr[condition].dropna().astype(str))
    unseen = sorted(set(te[condition].dropna().astype(str)) - seen)
    k = len(seen)
    if not unseen:
        return "", [f"folds not grouped by {condition!r}: every value of it in {test} is one training has"]
    more = f"; only {k} in training: train with --folds {k} (grouped folds need one value per fold at least)" \
        if k < N_FOLDS else ""
    return condition, [f"folds grouped by {condition!r}: {len(unseen)} of its values in {test} are none of training's "
                       f"{k} (e.g. {unseen[0][:60]!r}), so a fold must score conditions its model never saw{more}"]


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


def _texty(column: pd.Series) -> bool:
    """Strings (object or pandas' string dtype), not numbers."""
    return column.dtype == object or pd.api.types.is_string_dtype(column)


def _ranking(data_dir: Path, files: set, sample: str, sub: pd.DataFrame):
    """(description, why) when the sample submission answers a list (space-separated, best first):
    options in columns of the train file (its answers are their names: multiple choice), or items
    of a catalogue (another table whose ids the sample lists: retrieval); None when it does not.
    A catalogue whose train file is not one row per answer (a wide table) is one line saying what
    to write."""
    if sub.shape[1] != 2 or not sub.iloc[:, 1].astype(str).str.contains(" ").all():
        return None
    id_col, answer = map(str, sub.columns)
    listed = [str(v).split() for v in sub[answer]]
    k, tokens = len(listed[0]), {t for row in listed for t in row}
    train = next((f for f in sorted(files) if "train" in f.lower() and f != sample), None)
    if train is None:
        raise DataError(f"{data_dir}: {sample} answers a list ({answer!r}) but there is no train CSV")
    tr = _read_head(data_dir / train, 50_000)
    test = next((f for f in sorted(files) if "test" in f.lower() and f != sample), "test.csv")
    why = [f"a ranking: {sample}'s {answer!r} lists {k} answers per row, best first (MAP@{k})"]
    if tokens <= set(map(str, tr.columns)):  # the answers name columns of the row: its options
        options = tuple(c for c in map(str, tr.columns) if c in tokens or (len(c) == 1 and c.isupper()))
        target = next((str(c) for c in tr.columns if str(c) not in options and str(c) != id_col
                       and set(tr[c].dropna().astype(str)) <= set(options) and tr[c].notna().any()), None)
        if target is None:
            raise DataError(f"{train}: {sample}'s answers are its columns {list(options)}, but no column holds "
                            "which is right: describe this competition by hand (task multiple_choice)")
        text = tuple(c for c in map(str, tr.columns) if c not in (*options, target, id_col) and _texty(tr[c]))
        why += [f"options {list(options)}: columns of {train} that the answers name; target {target!r}: the right one",
                f"text_cols {list(text)}: the other text columns"]
        return Competition(slug=data_dir.resolve().name, id_col=id_col, text_cols=text or ("prompt",),
                           target_cols=(target,), task="multiple_choice", options=options, answer_k=k,
                           answer_col=answer if answer != target else "", train_file=train, test_file=test,
                           sample_submission=sample), why
    for f in sorted(files - {train, test, sample}):
        table = _read_head(data_dir / f, 1_000_000)
        for c in table.columns:
            if tokens <= set(table[c].astype(str)) and table[c].is_unique:
                texts = [t for t in table.columns if t != c and _texty(table[t])]
                if not texts:
                    continue
                name = max(texts, key=lambda t: table[t].astype(str).str.len().mean())
                catalogue = (f, str(c), str(name))
                if id_col not in tr.columns:
                    raise DataError(f"{data_dir}: a catalogue ({f}: {c!r} is what {sample} lists) but {train} has "
                                    f"no {id_col!r} rows (a wide table): write the description by hand with "
                                    f"\"catalogue\": {json.dumps(list(catalogue))} and a \"reshape\" into one row per "
                                    f"{id_col} (see python -m utils.competition show "
                                    "eedi-mining-misconceptions-in-mathematics)")
                target = answer if answer in tr.columns else ""
                if not target:
                    raise DataError(f"{train} has no column {answer!r} naming each row's true item of {f}: "
                                    "describe this competition by hand (task retrieval)")
                text, w, _ = _text_cols(tr, tr, {id_col, target}, train, train)
                why += [f"catalogue {list(catalogue)}: {f}'s ids are what {sample} lists"] + w
                return Competition(slug=data_dir.resolve().name, id_col=id_col, text_cols=text,
                                   target_cols=(target,), task="retrieval", catalogue=catalogue, answer_k=k,
                                   train_file=train, test_file=test, sample_submission=sample), why
    if label_join(tr, answer, sub[answer]) is not None or labels_column(tr, answer, sub[answer]) is not None:
        return None  # classes answered top k: joined from training columns, or one column's
    raise DataError(f"{sample} answers a list of {k} ({answer!r}) but no column of {train} nor any table beside it "
                    "holds what it lists: describe this competition by hand (task retrieval or multiple_choice)")


def infer(data_dir) -> tuple[Competition, list]:
    """A description guessed from a competition's CSVs, and why each choice was made (lines)."""
    data_dir = Path(data_dir)
    files = {p.name for p in data_dir.glob("*.csv")}
    pick = lambda want: next((f for f in sorted(files) if want in f.lower()), None)  # noqa: E731
    sample = pick("sample_submission") or pick("submission")
    if not sample:
        raise DataError(f"{data_dir}: no sample submission CSV found (files: {', '.join(sorted(files)) or 'none'})")
    sub = _read_head(data_dir / sample, 50)
    id_col = str(sub.columns[0])
    why = [f"id column {id_col!r}: the first column of {sample}"]
    ranked = _ranking(data_dir, files, sample, sub)
    if ranked is not None:
        return ranked
    train, tr, train_joins, w = _tables(data_dir, files, "train", id_col, sample)
    why += w
    test, te, test_joins, w = _tables(data_dir, files, "test", id_col, sample)
    why += w
    targets, classes, w, joined = _targets(tr, train, sample, sub)
    why += w
    label = {}
    if joined is not None:  # the target is training columns joined: written as the sample writes it
        label = dict(label_template=joined[0], label_missing=joined[1])
        tr = tr.assign(**{targets[0]: join_labels(tr, *joined[:2])})
        why.append(joined[2])
    found = _spans(tr, train, targets)
    y = tr[list(targets)]
    task, classes, w = _task(y, targets, classes) if found is None else ("spans", (), [])
    why += w
    answers, w = _answers(sub, targets, task, classes)
    why += w
    keys = tuple(k for _, k in (*train_joins, *test_joins))
    spans_kw = {}
    condition = ""
    if found is None:
        skip = {id_col, *targets, *keys, *template_columns(label.get("label_template", ""))}
        text_cols, w, condition = _text_cols(tr, te, skip, train, test)
    else:  # the spans' text and its condition (_span_fields says why)
        spans_kw, w = _span_fields(tr, te, found, targets[0], {id_col, *targets, *keys})
        text_cols = spans_kw.pop("text_cols")
    why += w
    said = bool(answers)  # the sample's cells chose the metric (_answers said why)
    metric = answers.pop("metric", "") or ("roc_auc" if task == "multilabel" else TASKS[task][1])
    if found is None and not said:
        why.append(f"metric {metric}: the default for {task} (check the competition's page: e.g. pearson, "
                   "spearman, roc_auc, log_loss, or a metric_file of your own)")
    rng = ()
    if task in ("regression", "multi_regression", "ordinal"):
        rng = (float(y.min().min()), float(y.max().max()))
        why.append(f"target_range [{rng[0]:g}, {rng[1]:g}]: the training targets' range (outside it a target is "
                   "refused; predictions are clipped to it)")
    group, w = _condition_folds(tr, te, condition, test) if condition else ("", [])
    why += w
    if not group:
        group, w = _group(tr, tuple(c for c in text_cols if c != condition), tuple(k for _, k in train_joins))
        why += w
    if "submission" not in answers and classes and len(targets) == 1 and classes == tuple(map(str, sub.columns[1:])):
        answers["submission"] = "probabilities"
    comp = Competition(slug=data_dir.resolve().name, id_col=id_col, text_cols=text_cols, target_cols=targets,
                       task=task, metric=spans_kw.pop("metric", metric if metric != TASKS[task][1] else ""),
                       target_range=rng, **spans_kw, **label, **answers,
                       classes=tuple(classes),
                       train_file=train, test_file=test, sample_submission=sample, train_joins=train_joins,
                       test_joins=test_joins, folds="group" if group else "stratified", group_col=group)
    why.append(f"slug {comp.slug!r}: the folder's name (set it to the competition's Kaggle slug)")
    return comp, why


def main(argv=None) -> int:
    """CLI: infer a description from a folder of CSVs, say why each choice was made, and write it."""
    p = argparse.ArgumentParser(prog="python -m utils.infer", description=first_paragraph(__doc__),
                                formatter_class=HelpFormatter)
    p.add_argument("--data", required=True, help="folder with the train, test and sample submission CSVs")
    p.add_argument("--out", required=True, help="the competition.json to write (check it before use)")
    args = p.parse_args(argv)
    try:
        comp, why = infer(args.data)
        for line in why:
            print(f"- {line}")
        comp.save(args.out)
    except (DataError, OSError, ValueError) as e:  # a CompetitionError is a ValueError
        return cli_error(e)
    print(f"wrote {args.out}: check it, then pass --competition {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
