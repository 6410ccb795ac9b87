"""What every CLI of the kit shares (light: no torch): the help formatter and one-line errors."""

from __future__ import annotations

import argparse
import sys


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Each option's help with its default, except an empty one (the help says what empty means)."""

    def _split_lines(self, text, width):
        # Never break inside a hyphenated word (a slug, a default such as kaggle-text-kit 0.1.0).
        import textwrap

        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)

    def _fill_text(self, text, width, indent):
        import textwrap

        return textwrap.fill(" ".join(text.split()), width, initial_indent=indent, subsequent_indent=indent,
                             break_on_hyphens=False)

    def _get_help_string(self, action):
        if action.default in ("", (), [], None, False) or action.help is argparse.SUPPRESS:
            return action.help
        return super()._get_help_string(action)


def first_paragraph(doc: str) -> str:
    """A module docstring's first paragraph as one line: a CLI's description, whole sentences
    (its first line alone may stop mid-sentence)."""
    return " ".join(doc.strip().split("\n\n")[0].split())


def cli_error(e: Exception) -> int:
    """A user's error as the kit's CLIs print it: one line on stderr; the exit code, 2."""
    print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
    return 2


def show_progress(enabled: bool) -> bool:
    """tqdm bars only where they redraw in place (a terminal, a notebook): in a log file or a
    Kaggle batch run's saved output every redraw would be a line, and the kit's own lines (one
    per validation, one per run predicted) already say where the work is."""
    return enabled and (sys.stderr.isatty() or "ipykernel" in sys.modules)


_SAID: set = set()


def say_once(line: str) -> None:
    """A warning on stderr, once per process: a run's folds each read the same rows, and say so once."""
    if line not in _SAID:
        _SAID.add(line)
        print(line, file=sys.stderr, flush=True)
