"""Competition CSVs (validated) and folds; light (pandas, scikit-learn: no torch). A leaf: it
imports nothing of the kit, so every module may raise its DataError.

A competition's own tables (joins, its labels checked, its folds) are in utils.tables; tokenized
datasets, dynamic padding and batch orders in utils.batching."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import KFold, StratifiedKFold

REFERENCE_ID = "436ce79fe"  # CommonLit's reference excerpt: target 0, standard_error 0


class DataError(ValueError):
    """Bad input data; the message names the file, the column and the first offending rows."""


def label_text(value) -> str:
    """A label as text, as a CSV writes it: 1 for 1.0, so that [0, 1] in a description and a
    column of 0.0/1.0 name the same classes."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)


def item_id(value) -> str:
    """A catalogue item's id as text: 583 for 583, 583.0 and "583.0" (ids written through floats,
    as pandas writes an integer column that had a missing cell); any other id is its own text."""
    text = label_text(value).strip()
    whole, dot, zeros = text.partition(".")
    if dot and whole.lstrip("+-").isdigit() and set(zeros) <= {"0"}:
        return whole
    return text


def _rows(df: pd.DataFrame, bad: np.ndarray, id_col: str | None, limit: int = 5) -> str:
    # Row numbers as a spreadsheet shows them: header is line 1, first data row is line 2.
    idx = np.flatnonzero(bad)[:limit]
    parts = []
    for i in idx:
        ident = f" (id {df[id_col].iloc[i]})" if id_col and id_col in df.columns else ""
        parts.append(f"row {i + 2}{ident}")
    more = f" and {int(bad.sum()) - len(idx)} more" if bad.sum() > limit else ""
    return ", ".join(parts) + more


def read_csv(
    path,
    text_col: str,
    target_cols: tuple = ("target",),
    id_col: str = "id",
    extra_cols: tuple = (),
    labels: bool = False,
    blank: str = "",
) -> pd.DataFrame:
    """Read and validate a competition CSV; `target_cols=()` for a test file.

    Checks: required columns, at least one row, non-empty text, numeric finite targets (unless
    `labels`: class labels, any value but missing),
    unique ids (`id_col=None`: a file without ids). Extra columns are kept. A UTF-8 BOM and CRLF
    line endings are read correctly.
    `blank` (prediction only): what becomes of a blank or missing text, e.g. "predicted as the
    training mean"; such texts are then kept as "" with a warning naming the rows and saying so,
    so one bad row of a hidden test set cannot fail a whole submission. Empty: they are an error.
    """
    path = Path(path)
    df = load_csv(path, id_col, (text_col,))
    return check_frame(df, path.name, (text_col,), target_cols, id_col, extra_cols, labels, blank)


def load_csv(path, id_col: str | None = "id", text_cols=()) -> pd.DataFrame:
    """A CSV read as the kit reads one (ids as strings, a BOM skipped); one line on failure. Texts
    stay texts: a cell reading None, NA or null (words pandas reads as missing) keeps its word in
    `text_cols` (read as written, never as numbers) and in every other column that holds text (an
    id, a label: MAP 2025's "NA" misconception); an empty cell is missing everywhere, and a numeric
    column keeps pandas' missing values."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    read = lambda **kw: pd.read_csv(path, encoding="utf-8-sig", **kw)  # noqa: E731
    try:
        df = read(dtype={id_col: str} if id_col else None)
        numeric = pd.api.types.is_numeric_dtype
        # read again only where the first read may have changed a text: a text column parsed as
        # numbers, or a column of text with cells read as missing (a column of text without any
        # is already as written)
        words = [j for j, (c, col) in enumerate(df.items())
                 if (c in text_cols and numeric(col)) or not numeric(col) and col.isna().any()]
        if words:  # those columns again, as written: a missing-value word read as missing is put back
            raw = read(dtype=str, keep_default_na=False, usecols=words)  # in the file's order, as `words`
            for k, j in enumerate(words):
                df.isetitem(j, raw.iloc[:, k].mask(raw.iloc[:, k] == ""))
        return df
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as e:
        raise DataError(f"{path}: cannot be read as a UTF-8 CSV ({e})") from None


def check_frame(
    df: pd.DataFrame,
    name: str,
    text_cols: tuple,
    target_cols: tuple = ("target",),
    id_col: str | None = "id",
    extra_cols: tuple = (),
    labels: bool = False,
    blank: str = "",
    target_range: tuple = (),
) -> pd.DataFrame:
    """read_csv's checks on a frame read from the file `name` (messages name it). Several text
    columns: a row is blank when all of them are; missing values become "". `target_range`
    (low, high): regression targets outside it are bad input."""
    required = [c for c in (id_col, *text_cols, *target_cols, *extra_cols) if c]
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise DataError(
            f"{name} is missing column {', '.join(repr(c) for c in missing)}; "
            f"found: {', '.join(map(str, df.columns))}"
        )
    if len(df) == 0:
        raise DataError(f"{name} has no data rows")
    ids = df[id_col] if id_col else pd.Series([], dtype=str)  # id_col None: a corpus without ids
    bad = ids.isna().to_numpy() | (ids.astype(str).str.strip() == "").to_numpy()
    if bad.any():
        raise DataError(f"{name}: column {id_col!r} is empty at {_rows(df, bad, None)}")
    dup = ids.duplicated(keep=False).to_numpy()
    if dup.any():
        raise DataError(f"{name}: column {id_col!r} has duplicate ids at {_rows(df, dup, id_col)}")
    empty = {c: df[c].isna().to_numpy() | (df[c].astype(str).str.strip() == "").to_numpy() for c in text_cols}
    bad = np.logical_and.reduce(list(empty.values()))
    what = (f"column {text_cols[0]!r} is empty" if len(text_cols) == 1
            else f"columns {', '.join(map(repr, text_cols))} are all empty")
    if bad.any() and not blank:
        raise DataError(f"{name}: {what} at {_rows(df, bad, id_col)}")
    if bad.any():
        print(f"warning: {name}: {what} at {_rows(df, bad, id_col)}; {blank}", file=sys.stderr, flush=True)
    for c in text_cols:
        df[c] = df[c].where(~empty[c], "").astype(str)
    for col in target_cols:
        if labels:
            bad = df[col].isna().to_numpy()
            if bad.any():
                raise DataError(f"{name}: column {col!r} has no label at {_rows(df, bad, id_col)}")
            continue
        values = pd.to_numeric(df[col], errors="coerce")
        bad = ~np.isfinite(values.to_numpy(dtype=float))
        if bad.any():
            raise DataError(f"{name}: column {col!r} is not a finite number at {_rows(df, bad, id_col)}")
        if target_range:
            lo, hi = target_range
            bad = ((values < lo) | (values > hi)).to_numpy()
            if bad.any():
                raise DataError(f"{name}: column {col!r} is outside the declared target_range "
                                f"[{lo:g}, {hi:g}] at {_rows(df, bad, id_col)}")
        df[col] = values.astype(float)
    return df.reset_index(drop=True)


def make_folds(
    df: pd.DataFrame, n_folds: int = 5, seed: int = 42, target_cols=("target",), classes: bool = False,
    group_col: str = "",
    stratify: bool = True,
) -> np.ndarray:
    """0-based fold per row, stratified on the binned target (on the label when `classes`; not at
    all without `stratify`: a retriever's thousands of item ids);
    with `group_col`, rows sharing its value stay in one fold (a test set of unseen prompts:
    only grouped folds score the model on prompts it never saw), still stratified where it can.

    Depends only on the data and `seed`, so runs with different training seeds share folds.
    """
    if n_folds < 2:
        raise ValueError(f"need at least 2 folds, got {n_folds}")
    if len(df) < n_folds:
        raise DataError(f"{len(df)} rows cannot be split into {n_folds} folds")
    if not stratify:
        strata = np.zeros(len(df), dtype=int)
    elif classes:
        strata = df[target_cols[0]].astype(str).to_numpy()
    else:
        y = df[list(target_cols)].to_numpy(dtype=float).mean(axis=1)
        # Quantile bins with at least n_folds rows each (Sturges' count, capped by the data).
        n_bins = max(1, min(int(1 + math.log2(len(df))), len(df) // n_folds))
        strata = pd.qcut(y, q=n_bins, labels=False, duplicates="drop")
    folds = np.full(len(df), -1, dtype=int)
    counts = pd.Series(strata).value_counts()
    if group_col:
        from sklearn.model_selection import StratifiedGroupKFold

        groups = df[group_col].astype(str).to_numpy()
        n_groups = len(set(groups))
        if n_groups < n_folds:
            raise DataError(f"column {group_col!r} has {n_groups} groups: grouped folds need at least "
                            f"--folds {n_folds} of them (use --folds {max(2, n_groups)} or fewer)")
        splitter = StratifiedGroupKFold(n_splits=n_folds, shuffle=True, random_state=seed)
        splits = splitter.split(np.zeros(len(df)), np.asarray(strata).astype(str), groups)
    elif counts.min() >= n_folds:
        splitter = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=seed)
        splits = splitter.split(np.zeros(len(df)), strata)
    else:  # a class too rare to stratify: plain shuffled folds
        splits = KFold(n_splits=n_folds, shuffle=True, random_state=seed).split(np.zeros(len(df)))
    for k, (_, valid) in enumerate(splits):
        folds[valid] = k
    return folds


def read_folds(path, ids: pd.Series, n_folds: int | None = None) -> np.ndarray:
    """Fold per row of `ids` from a folds.csv (`id,fold`): every id there exactly once, folds whole
    numbers; with `n_folds`, every fold 0..n_folds-1 holding some of `ids` and no other fold.
    Checked before any training: a fold left empty would fail only after the others trained."""
    path = Path(path)
    f = read_csv(path, text_col="fold", target_cols=(), id_col="id")
    fold = pd.to_numeric(f["fold"], errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(fold) | (fold < 0) | (fold != np.round(fold))
    if bad.any():
        raise DataError(f"{path.name}: column 'fold' is not a fold number (0, 1, ...) at {_rows(f, bad, 'id')}")
    mapping = dict(zip(f["id"].astype(str), fold.astype(int)))
    missing = ~ids.astype(str).isin(mapping).to_numpy()
    if missing.any():
        first = ", ".join(ids[missing].astype(str).head(5))
        raise DataError(f"{path.name} has no fold for {int(missing.sum())} training ids, e.g. {first}")
    folds = ids.astype(str).map(mapping).to_numpy(dtype=int)
    if n_folds is not None:
        found = sorted(set(folds.tolist()))
        if found != list(range(n_folds)):
            raise DataError(f"{path.name}: the training rows fall in folds {', '.join(map(str, found))}, "
                            f"but --folds {n_folds} needs each of folds 0..{n_folds - 1} and no other")
    return folds


def folds_fingerprint(ids, folds) -> str:
    """A fingerprint of an id -> fold assignment (order-free): pseudo-labels record the folds
    they were made with, and training refuses them for other folds."""
    import hashlib

    lines = sorted(f"{i},{int(k)}" for i, k in zip(pd.Series(ids).astype(str), folds))
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def pseudo_info_path(pseudo_csv) -> Path:
    """The JSON beside a pseudo-label CSV that records how it was made (folds, runs, filters)."""
    return Path(pseudo_csv).with_suffix(".json")


def number_cells(raw: pd.Series, where: str, rows: pd.DataFrame | None = None) -> pd.Series:
    """A pseudo-label file's column of numbers as floats, NaN for an empty cell; a cell that is not
    a finite number refused in one line naming `where` and its rows (`rows`, the file's rows: not
    needed for numbers, read_pseudo's `read_cells` takes them)."""
    values = pd.to_numeric(raw, errors="coerce").astype(float)
    bad = ~np.isfinite(values.to_numpy()) & raw.notna().to_numpy()
    if bad.any():
        raise DataError(f"{where} is not a finite number at {_rows(raw.to_frame(), bad, None)}")
    return values


def read_pseudo(path, text_col, fingerprint: str, folds, outputs=("target",),
                id_col: str = "id", read_cells=number_cells, rows: str = "texts") -> tuple[pd.DataFrame, bool]:
    """Pseudo-labelled rows and whether they carry one label per fold and output (`O_fold{k}`,
    made by models that never saw fold k's validation rows) or only `O` (then the CV is
    optimistic). `outputs`: the run's targets, or prob_<label> per class; `text_col`: a column,
    or the competition's text columns.

    `folds`: the folds to be trained, each needing its columns when there are fold columns.
    Refuses NaN labels, probabilities outside [0, 1] (e.g. a class the run does not know), and
    fold columns made with other folds than `fingerprint`'s. An empty fold cell is a text left out
    of that fold by utils.pseudo's --max-std (allowed only when the .json twin says the filter
    ran); training drops it from that fold. `read_cells(column, where, rows)`: how a fold column's cells
    are read, NaN for an empty one (numbers; a span task's character scores: Outputs.read_signal).
    `rows`: what the file must label, "texts" (other texts) or "training" (the training rows:
    read_teacher), as its .json twin says.
    """
    import json

    path = Path(path)
    text_cols = (text_col,) if isinstance(text_col, str) else tuple(text_col)
    head = pd.read_csv(path, nrows=0, encoding="utf-8-sig") if path.is_file() else None
    if head is None:
        raise DataError(f"{path}: file not found")
    per_fold = any(str(c).startswith(f"{outputs[0]}_fold") for c in head.columns)
    if not per_fold:
        missing = [o for o in outputs if o not in head.columns]
        unknown = [c for c in head.columns if str(c).startswith("prob_") and c not in outputs]
        if missing or unknown:
            what = "no " + ", ".join(missing) if missing else "columns " + ", ".join(unknown)
            raise DataError(f"{path.name} has {what}"
                            f": this run's outputs are {', '.join(outputs)}")
        df = check_frame(load_csv(path, id_col, text_cols), path.name, text_cols, tuple(outputs), id_col)
        _check_probabilities(df, path.name, [o for o in outputs if o.startswith("prob_")], id_col)
        return df, False
    unknown = sorted({str(c).rsplit("_fold", 1)[0] for c in head.columns if "_fold" in str(c)
                      and not str(c).rsplit("_fold", 1)[0].endswith("_std")} - set(outputs))
    if unknown:
        raise DataError(f"{path.name} has labels for {', '.join(unknown)}, which this run does not "
                        f"predict (its outputs: {', '.join(outputs)}): pseudo-labels come from teachers "
                        "of the same competition and targets")
    fold_cols = tuple(f"{o}_fold{k}" for k in folds for o in outputs)
    missing = [c for c in fold_cols if c not in head.columns]
    if missing:
        raise DataError(f"{path.name} has no {', '.join(missing)}: it was made by runs without "
                        "those folds finished; train only the folds it has (--only-folds)")
    info_path = pseudo_info_path(path)
    if not info_path.is_file():
        raise DataError(f"{path.name} has target_fold columns but no {info_path.name} saying "
                        "which folds made them (python -m utils.pseudo writes both)")
    info = json.loads(info_path.read_text())
    if info.get("rows", "texts") != rows:
        raise DataError(f"{path.name} holds a teacher's predictions of the training rows (utils.pseudo "
                        "--training-rows): a student mixes them into its targets with --distil-csv; --pseudo-csv "
                        "takes pseudo-labels of other texts (utils.pseudo --texts)")
    if info.get("folds_fingerprint") != fingerprint:
        raise DataError(f"{path.name} was made with other folds ({info.get('folds_fingerprint')}) "
                        f"than this run's ({fingerprint}): its fold columns would leak validation "
                        "rows; make it from runs trained on this run's folds (same --fold-seed or "
                        "--folds-csv)")
    df = check_frame(load_csv(path, id_col, text_cols), path.name, text_cols, (), id_col)
    filtered = info.get("max_std") is not None or info.get("rows") == "training"  # (a fold's own rows: empty)
    for col in fold_cols:
        df[col] = read_cells(df[col], f"{path.name}: column {col!r}", df)
        if not filtered and df[col].isna().any():  # (an empty cell: a text a filter left out)
            raise DataError(f"{path.name}: column {col!r} is empty at {_rows(df, df[col].isna().to_numpy(), id_col)}")
    _check_probabilities(df, path.name, [c for c in fold_cols if c.startswith("prob_")], id_col)
    return df, True


def read_teacher(path, ids: pd.Series, folds: np.ndarray, fingerprint: str, todo, outputs=("target",),
                 id_col: str = "id", text_cols=("excerpt",), read_cells=number_cells,
                 texts: pd.DataFrame | None = None) -> pd.DataFrame:
    """A teacher's predictions of the training rows (utils.pseudo --training-rows), as columns
    O_fold{k} aligned with `ids` (the training rows, in order): what fold k's student mixes into
    the targets of the rows it trains on (those of the other folds). Refused in one line: a file
    made for other texts (pseudo-labels), with other folds (its fold-k models saw fold k's rows),
    without a fold to train, missing a training row of a fold, or (`texts`: the training rows'
    text columns, aligned with `ids`) holding another text for a row."""
    import json

    path = Path(path)
    info_path = pseudo_info_path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    info = json.loads(info_path.read_text()) if info_path.is_file() else {}
    if info.get("rows") != "training":
        raise DataError(f"{path.name}: not a teacher's predictions of the training rows ({info_path.name} "
                        f"{'does not say rows: training' if info else 'is missing'}): make one with python -m "
                        "utils.pseudo --training-rows (texts of other rows go to --pseudo-csv)")
    df, per_fold = read_pseudo(path, text_cols, fingerprint, todo, outputs, id_col, read_cells, "training")
    if not per_fold:  # (read_pseudo refuses other folds and missing fold columns)
        raise DataError(f"{path.name} has no O_fold{{k}} columns: a student needs each fold's own teacher")
    table = df.set_index(df[id_col].astype(str))
    ids = ids.astype(str)
    needed = np.zeros(len(ids), dtype=bool)  # the rows some fold to train trains on: a teacher of fold 0 alone
    for k in todo:  # predicts no row of fold 0, which no other fold's student is here to train on
        needed |= np.asarray(folds) != k
    present = ids.isin(table.index).to_numpy()
    missing = needed & ~present
    if missing.any():
        raise DataError(f"{path.name} has no prediction for {int(missing.sum())} training rows (e.g. id "
                        f"{ids[missing].iloc[0]!r}): the teachers were trained on other rows")
    table = table.reindex(ids)
    for col in text_cols if texts is not None else ():
        theirs = table[col].fillna("").astype(str).to_numpy()
        ours = texts[col].fillna("").astype(str).to_numpy()
        if (present & (theirs != ours)).any():
            i = int(np.flatnonzero(present & (theirs != ours))[0])
            raise DataError(f"{path.name}: column {col!r} of id {ids.iloc[i]!r} is not the training file's text: the "
                            "teacher's predictions were made of another version of the training file")
    cols = [f"{o}_fold{k}" for k in todo for o in outputs]
    out = table[cols].reset_index(drop=True)
    for k in todo:
        need = (np.asarray(folds) != k)
        for o in outputs:
            bad = need & out[f"{o}_fold{k}"].isna().to_numpy()  # (read_pseudo refused what is not finite)
            if bad.any():
                raise DataError(f"{path.name}: column '{o}_fold{k}' is empty at a row fold {k}'s student trains on "
                                f"(id {ids[bad].iloc[0]!r})")
    return out


def _check_probabilities(df: pd.DataFrame, name: str, cols, id_col: str) -> None:
    """Class probabilities are numbers in [0, 1]; an empty cell (a text left out) passes."""
    for col in cols:
        values = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float)
        bad = (values < 0) | (values > 1) | (np.isnan(values) & df[col].notna().to_numpy())
        if bad.any():
            raise DataError(f"{name}: column {col!r} is not a probability in [0, 1] at {_rows(df, bad, id_col)}")
