"""A competition's tables, as its description (utils.competition) says to read them: the train or
test file with the tables joined onto it, checked (columns, ids, texts, targets, labels), and the
folds training makes of it. One line naming the file, the column and the rows on bad input.

Light: pandas and scikit-learn, no torch.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from . import env
from .competition import Competition
from .data import DataError, _rows, check_frame, item_id, load_csv, make_folds
from .objective import objective_of
from .reshape import RESHAPES
from .reshape import apply as apply_reshape


def read_table(comp: Competition, data_dir, split: str = "train", blank: str = "") -> pd.DataFrame:
    """The train or test file of the folder `data_dir`, as read_split reads it."""
    name = comp.train_file if split == "train" else comp.test_file
    return read_split(comp, Path(data_dir) / name, split, blank)


def join_path(folder: Path, file: str) -> Path:
    """Where a joined table is: FILE beside the competition's files (`folder`); OWNER/DATASET/FILE,
    a table of another Kaggle dataset, where utils.env.dataset_file finds it (beside them, the
    attached dataset, or data/DATASET/), else a DataError naming every place looked."""
    ref = env.dataset_file_ref(file)
    if ref is None:
        return folder / file
    try:
        return env.dataset_file(*ref, beside=folder)
    except FileNotFoundError as e:
        raise DataError(str(e)) from None


def read_split(comp: Competition, path, split: str = "train", blank: str = "", extra_cols=()) -> pd.DataFrame:
    """A train (targets checked) or test file with the tables its description joins onto it (beside
    it, or in another Kaggle dataset: join_path), checked as utils.data.read_csv checks a file:
    columns, ids, texts (`blank` as there), targets (numbers in target_range; labels present). One
    line naming the file, the column and the rows otherwise."""
    path = Path(path)
    joins = comp.train_joins if split == "train" else comp.test_joins
    texts = (*comp.text_cols, *comp.options)  # read as written: a text "None" or "NA" is a text
    df = load_csv(path, None if comp.reshape else comp.id_col, texts)
    name = path.name
    for file, key, *theirs in joins:
        jpath = join_path(path.parent, file)
        if not jpath.is_file():
            raise DataError(f"{jpath}: file not found (joined onto {name} by {key!r})")
        their = theirs[0] if theirs else key  # the table's own name for the key (e.g. code for context)
        table = load_csv(jpath, their, texts)
        if their not in table.columns:
            raise DataError(f"{file} is missing column {their!r} (the join key); "
                            f"found: {', '.join(map(str, table.columns))}")
        if their != key:
            table = table.drop(columns=[key], errors="ignore").rename(columns={their: key})
        for frame, fname, ids in ((df, name, comp.id_col), (table, file, None)):
            if key not in frame.columns:
                raise DataError(f"{fname} is missing column {key!r} (the join key); "
                                f"found: {', '.join(map(str, frame.columns))}")
            blank = (frame[key].isna() | (frame[key].astype(str).str.strip() == "")).to_numpy()
            if blank.any():  # (a blank cell would also read the column as floats)
                raise DataError(f"{fname}: column {key!r} (the key that joins {file}) is blank in "
                                f"{_rows(frame, blank, ids)}")
        dup = table[key].duplicated()
        if dup.any():
            raise DataError(f"{file}: column {key!r} repeats {table[key][dup].iloc[0]!r}: one row per key")
        df[key], table[key] = join_key(df[key]), join_key(table[key])
        unmatched = ~df[key].isin(table[key])
        if unmatched.any():
            raise DataError(f"{name}: {int(unmatched.sum())} rows have a {key!r} missing from {file}, "
                            f"e.g. {df[key][unmatched].iloc[0]!r}")
        df = df.merge(table, on=key, how="left", suffixes=("", f"_{Path(file).stem}"))
    if joins:
        name = f"{name} (with {', '.join(j[0] for j in joins)} joined)"
    if split == "train" and comp.label_template:
        df = with_joined_labels(comp, df, name)
    if comp.reshape:
        df = reshaped(comp.reshape, df, split, name)
        if comp.id_col in df.columns:
            df[comp.id_col] = df[comp.id_col].astype(str)
        name = f"{name} (reshaped by {comp.reshape!r})"
    targets = comp.target_cols if split == "train" else ()
    extra = tuple(c for c in (comp.group_col, comp.stratify_col) if split == "train" and c) + tuple(extra_cols)
    extra += tuple(c for c in comp.options if c not in extra)
    obj = objective_of(comp)
    if obj.blank_answers:  # an empty answer is an answer (no span): checked by the objective, not as a label
        extra, targets = extra + tuple(targets), ()
    labelled = obj.labelled
    df = check_frame(df, name, comp.text_cols, targets, comp.id_col, extra, labelled, blank,
                     () if labelled else comp.target_range)
    warn_blank_options(df, name, comp.options, comp.id_col)
    if targets:  # labels as the objective reads them (a retriever's: ids as its catalogue writes them)
        df[targets[0]] = obj.labels_as_read(df[targets[0]])
    if split == "train":
        check_labels(comp, df, name, path.parent)
    return df


def with_joined_labels(comp: Competition, df: pd.DataFrame, name: str) -> pd.DataFrame:
    """The target column written by the description's label_template from the columns it joins
    (MAP 2025's "Category:Misconception"); one line naming what is missing or unusable."""
    missing = [c for c in comp.label_columns if c not in df.columns]
    if missing:
        raise DataError(f"{name} is missing column {missing[0]!r} (label_template {comp.label_template!r} joins it "
                        f"into {comp.target_cols[0]!r}); found: {', '.join(map(str, df.columns))}")
    labels = comp.joined_labels(df)
    spaced = labels.str.contains(r"\s").to_numpy()
    if comp.ranking and spaced.any():  # a submission lists its answers separated by spaces
        raise DataError(f"{name}: the joined label {labels[spaced].iloc[0]!r} holds a space, which the submission's "
                        f"space-separated answers cannot: {_rows(df, spaced, comp.id_col)}")
    return df.assign(**{comp.target_cols[0]: labels})


def join_key(values: pd.Series) -> pd.Series:
    """A join key as text, whole numbers without leading zeros: NBME's test file writes the note
    `00016` and the feature `000` where its other tables write 16 and 0 (and a column that pandas
    read as floats, 16.0)."""
    text = values.astype(str).str.strip()
    whole = text.str.fullmatch(r"[0-9]+(\.0*)?")
    return text.where(~whole, text[whole].str.split(".").str[0].str.lstrip("0").replace("", "0"))


def warn_blank_options(df: pd.DataFrame, name: str, options, id_col: str) -> None:
    """One warning line naming the option columns that are blank somewhere, how many rows each,
    and the first rows: a blank option is scored (and may be ranked) as an empty text."""
    blank = {c: (df[c].isna() | (df[c].astype(str).str.strip() == "")).to_numpy() for c in options}
    counts = {c: int(b.sum()) for c, b in blank.items() if b.any()}
    if not counts:
        return
    cols = ", ".join(f"{c!r} ({n} row{'s' if n > 1 else ''})" for c, n in counts.items())
    rows = np.logical_or.reduce([blank[c] for c in counts])
    print(f"warning: {name}: option column{'s' if len(counts) > 1 else ''} {cols} blank at {_rows(df, rows, id_col)}; "
          "a blank option is scored and ranked as an empty text", file=sys.stderr, flush=True)


def reshaped(reshape: str, df: pd.DataFrame, split: str, name: str) -> pd.DataFrame:
    """utils.reshape.apply's rows; when the reshape fails on some rows and not on others, its one
    line also names the first row it fails on and the cell the error quotes."""
    try:
        return apply_reshape(reshape, df, split, name)
    except DataError as e:
        where = failing_row(RESHAPES.get(reshape), df, split)
        raise DataError(f"{e}; {where}" if where else str(e)) from None


def failing_row(fn, df: pd.DataFrame, split: str) -> str:
    """'the first row it fails on: row R (column C holds V)' for a function of a table that fails
    on `df` and not on the rows before R (the same error), else ''. A bisection over prefixes."""
    def error(part):
        try:
            fn(part.copy(), split)
        except Exception as e:  # noqa: BLE001 (a reshape's own error, compared below)
            return f"{type(e).__name__}: {e}"
        return ""

    whole = error(df) if fn is not None else ""
    if not whole:
        return ""
    lo, hi = 0, len(df)  # the rows before lo pass; the rows before hi fail
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if error(df.iloc[:mid]) == whole else (mid, hi)
    row = hi - 1
    if row == 0 and len(df) > 1 and error(df.iloc[1:2]) == whole:
        return ""  # every row fails alike: not a row's fault (e.g. a missing column)
    cells = [c for c, v in df.iloc[row].items() if isinstance(v, str) and (f"'{v}'" in whole or f'"{v}"' in whole)]
    cell = f" (column {cells[0]!r} holds {df.iloc[row][cells[0]]!r})" if cells else ""
    return f"the first row it fails on: row {row + 2}{cell}"


def read_catalogue(comp: Competition, folder) -> pd.DataFrame:
    """A retrieval competition's catalogue (its file beside the competition's files, or in another
    Kaggle dataset: join_path): columns id and text, ids as strings, in the file's order; one line
    naming the file on a missing column, a repeated id or a blank text. Read once while the file
    is unchanged (a run's folds and checks all ask for it)."""
    file, id_col, text_col = comp.catalogue
    path = catalogue_path(comp, folder)
    try:
        stat = path.stat()
        key = (str(path), stat.st_mtime_ns, stat.st_size)
    except OSError:
        key = (str(path), None, None)  # load_csv says what is missing
    return _catalogue(key, id_col, text_col, comp.answer_k).copy()


def catalogue_path(comp: Competition, folder) -> Path:
    """Where a retrieval competition's catalogue is for the competition's files in `folder`."""
    return join_path(Path(folder), comp.catalogue[0])


@functools.lru_cache(maxsize=4)
def _catalogue(key: tuple, id_col: str, text_col: str, answer_k: int) -> pd.DataFrame:
    path = Path(key[0])
    table = load_csv(path, id_col, (text_col,))
    for c in (id_col, text_col):
        if c not in table.columns:
            raise DataError(f"{path.name}: the catalogue has no column {c!r}; found: "
                            f"{', '.join(map(str, table.columns))}")
    ids, texts = table[id_col].map(item_id), table[text_col]
    dup = ids.duplicated().to_numpy()
    if dup.any():
        raise DataError(f"{path.name}: the catalogue's id {ids[dup].iloc[0]!r} is on two rows ({id_col!r}): one row "
                        "per item")
    blank = (texts.isna() | (texts.astype(str).str.strip() == "")).to_numpy()
    if blank.any():
        raise DataError(f"{path.name}: column {text_col!r} is blank for {int(blank.sum())} item(s), e.g. id "
                        f"{ids[blank].iloc[0]!r}: every item needs a text")
    if answer_k > len(table):
        raise DataError(f"{path.name}: the catalogue holds {len(table)} items, fewer than the answer_k "
                        f"{answer_k} answers a row lists")
    return pd.DataFrame({"id": ids.to_numpy(), "text": texts.astype(str).to_numpy()})


def check_labels(comp: Competition, df: pd.DataFrame, name: str, folder=None) -> None:
    """A training file's labels against the description, as its objective says they must be
    (utils.objective's check_labels: one line naming the file, the column and a row); a
    retriever's true items against the catalogue in `folder`."""
    items = set(read_catalogue(comp, folder)["id"]) if comp.catalogue and folder is not None else None
    objective_of(comp).check_labels(comp, df, name, items)


def competition_folds(comp: Competition, df: pd.DataFrame, n_folds: int = 5, seed: int = 42) -> np.ndarray:
    """utils.data.make_folds as the competition's description makes them: grouped by its column
    (folds "group"), stratified on its label (a classifier) or on its binned targets; a retriever's
    not stratified (its labels are thousands of catalogue ids, most on one row). Training, the
    EDA's baselines and the benchmarks share these folds."""
    group = comp.group_col if comp.folds == "group" else ""
    obj = objective_of(comp)
    if comp.stratify_col:  # stratified on a column of its own (Tweet's sentiment), as on a class label
        return make_folds(df, n_folds, seed, (comp.stratify_col,), True, group)
    return make_folds(df, n_folds, seed, comp.target_cols, obj.labelled, group, stratify=obj.stratified)
