"""What every bench script records beside its figures: the command line that made them."""

import sys
from pathlib import Path

# Flags whose value is a path of the machine that ran the command: recorded by what they name.
MACHINE_PATHS = {"--data": "DIR", "--extra-data": "DIR", "--train-csv": "CSV"}


def command() -> str:
    """The running bench script's command line, as `python bench/<script> ...`, with the data folder
    recorded as DIR (--data, --extra-data) and a --train-csv file as CSV (paths of the machine that ran it;
    a flag's further values too, where they are paths: `--extra-data A B`)."""
    args, flag = [], None  # flag: the path flag whose values are being read
    for a in sys.argv[1:]:
        name, eq, _ = a.partition("=")
        if a.startswith("-"):
            flag = name if name in MACHINE_PATHS and not eq else None
            a = f"{name}={MACHINE_PATHS[name]}" if eq and name in MACHINE_PATHS else a
        elif flag and (args[-1] == flag or "/" in a):
            a = MACHINE_PATHS[flag]
        else:
            flag = None
        args.append(a)
    return " ".join(["python", f"bench/{Path(sys.argv[0]).name}", *args])


def replace_or_append(rows: list, value: dict, keys) -> None:
    """A re-run arm replaces its old figures where they stood, so a results table keeps its order; a new
    arm goes last. An arm is known by the values at `keys` (field names), or by `keys(row)` when a function."""
    ident = keys if callable(keys) else (lambda r: tuple(r.get(k) for k in keys))
    same = [ident(r) == ident(value) for r in rows]
    at = same.index(True) if any(same) else len(rows)
    rows[at:at + 1] = [value]


def backbone_name(model: str) -> str:
    """A backbone as a results table names it: an offline one's short id (utils.models), else its folder's name."""
    from utils.models import known

    return known(model).short if known(model) else Path(model).name
