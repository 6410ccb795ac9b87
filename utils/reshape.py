"""Reshapes: a competition's wide table into the rows a model reads, before anything else reads it.

Eedi's train.csv has one row per question with four answers side by side; a model's row is one
wrong answer (a distractor), and the submission names it `QuestionId_Answer`. A description says
`"reshape": "distractors"` (a built-in of RESHAPES), or names a function of its own with
`reshape_file`, a Python file beside the description (as a metric file is), whose source the
description then carries to the Kaggle kernel:

    import pandas as pd

    def reshape(df: pd.DataFrame, split: str) -> pd.DataFrame:   # split: "train" or "test"
        ...   # one row per model row, with the description's id, text and target columns

Light: pandas only.
"""

from __future__ import annotations

from typing import Callable

import pandas as pd

from .data import DataError
from .metrics import run_source

LETTERS = ("A", "B", "C", "D")


def distractors(df: pd.DataFrame, split: str) -> pd.DataFrame:
    """One row per wrong answer of a multiple-choice question (Eedi): reads QuestionId,
    CorrectAnswer, Answer{X}Text and, in training, Misconception{X}Id for X in A-D; writes
    QuestionId_Answer (`1869_B`), Answer (the letter), AnswerText, CorrectAnswerText and
    MisconceptionId, beside the question's own columns. Training keeps the tagged distractors only
    (an untagged one has no true item to learn); a test keeps every distractor (each is a row of
    the submission)."""
    need = ["QuestionId", "CorrectAnswer"] + [f"Answer{x}Text" for x in LETTERS]
    if split == "train":
        need += [f"Misconception{x}Id" for x in LETTERS]
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise DataError(f"reshape 'distractors' needs column {missing[0]!r} (one row per question with "
                        f"Answer[A-D]Text{' and Misconception[A-D]Id' if split == 'train' else ''}); "
                        f"found: {', '.join(map(str, df.columns))}")
    bad = ~df["CorrectAnswer"].astype(str).isin(LETTERS)
    if bad.any():
        raise DataError(f"reshape 'distractors': column 'CorrectAnswer' holds {df['CorrectAnswer'][bad].iloc[0]!r}, "
                        f"not one of {', '.join(LETTERS)}, at QuestionId {df['QuestionId'][bad].iloc[0]!r}")
    wide = [f"Answer{x}Text" for x in LETTERS] + [f"Misconception{x}Id" for x in LETTERS]
    keep = [c for c in df.columns if c not in wide]
    answers = df[[f"Answer{x}Text" for x in LETTERS]].to_numpy()
    correct = answers[range(len(df)), df["CorrectAnswer"].astype(str).map(LETTERS.index).to_numpy()]
    rows = []
    for x in LETTERS:
        part = df[keep].copy()
        part["Answer"] = x
        part["AnswerText"] = df[f"Answer{x}Text"]
        part["CorrectAnswerText"] = correct
        if f"Misconception{x}Id" in df.columns:
            part["MisconceptionId"] = df[f"Misconception{x}Id"]
        rows.append(part[df["CorrectAnswer"].astype(str) != x])
    out = pd.concat(rows).sort_values(["QuestionId", "Answer"], kind="stable")
    out.insert(0, "QuestionId_Answer", out["QuestionId"].astype(str) + "_" + out["Answer"])
    if split == "train":
        out = out[out["MisconceptionId"].notna()]
        out["MisconceptionId"] = out["MisconceptionId"].astype(float).astype(int).astype(str)
    return out.reset_index(drop=True)


RESHAPES: dict[str, Callable] = {"distractors": distractors}
BUILTIN_RESHAPES = tuple(RESHAPES)


def register_code(code: str, name: str, source: str = "reshape_file") -> Callable:
    """Run a reshape file's source and register its `reshape(df, split)` function as `name` (the
    description's field), where read_split finds it; one line naming the file on any error."""
    if name in BUILTIN_RESHAPES:
        raise ValueError(f"{source}: {name!r} is a built-in reshape; give yours another name")
    fn = run_source(code, source, f"competition_reshape_{name}").get("reshape")
    if not callable(fn):
        raise ValueError(f"{source} defines no function reshape(df, split)")
    RESHAPES[name] = fn
    return fn


def apply(name: str, df: pd.DataFrame, split: str, source: str) -> pd.DataFrame:
    """The rows reshape `name` makes of the table read from `source`; one line naming both when it
    fails or returns no table."""
    if name not in RESHAPES:
        raise DataError(f"{source}: unknown reshape {name!r}; built-in: {', '.join(BUILTIN_RESHAPES)} (one of your "
                        "own: reshape_file)")
    try:
        out = RESHAPES[name](df.copy(), split)
    except DataError as e:
        raise DataError(f"{source}: {e}") from None
    except Exception as e:  # noqa: BLE001 (a user's reshape, named)
        raise DataError(f"{source}: reshape {name!r} fails: {type(e).__name__}: {e}") from None
    if not isinstance(out, pd.DataFrame) or out.empty:
        raise DataError(f"{source}: reshape {name!r} returned {type(out).__name__}"
                        f"{' with no rows' if isinstance(out, pd.DataFrame) else ''}: a table of model rows")
    return out
