"""Every option of every CLI says what it does and shows its default (argparse's own help, from
the one place each default lives: the dataclass field or the add_argument call)."""

import argparse
import importlib

import pytest

# versions: imports every CLI, and with it transformers, accelerate and peft, for its options
pytestmark = pytest.mark.versions

CLIS = ["train", "pretrain", "predict", "ensemble", "pseudo", "competition", "infer", "kaggle", "demo", "runs", "tune",
        "rerank", "models"]


def parsers_of(module: str, monkeypatch) -> list:
    """The parser `python -m utils.MODULE` builds, and its subcommands' parsers."""
    grabbed = []

    def grab(self, *a, **k):
        grabbed.append(self)
        raise SystemExit(0)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", grab)
    mod = importlib.import_module(f"utils.{module}")
    with pytest.raises(SystemExit):
        mod.main([])
    p = grabbed[0]
    subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    return [p, *(c for s in subs for c in s.choices.values())]


@pytest.mark.parametrize("module", CLIS)
def test_every_option_of_every_cli_has_help_and_its_default(module, monkeypatch):
    for p in parsers_of(module, monkeypatch):
        text = " ".join(p.format_help().split())
        for a in p._actions:
            if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            name = a.option_strings[-1] if a.option_strings else a.dest
            assert a.help, f"{p.prog} {name} has no help"
            shown = a.default not in ("", (), [], None, False)
            if shown:
                default = " ".join(map(str, a.default)) if isinstance(a.default, (list, tuple)) else str(a.default)
                assert f"(default: {default.split()[0]}" in text or f"(default: {a.default})" in text, (p.prog, name)


@pytest.mark.parametrize("module", CLIS)
def test_a_cli_describes_itself_in_whole_sentences(module, monkeypatch):
    """The description under `usage:` is the module's first paragraph, not a first line cut
    mid-sentence."""
    p = parsers_of(module, monkeypatch)[0]
    assert p.description and p.description.rstrip()[-1] in ".:)", (module, p.description)
