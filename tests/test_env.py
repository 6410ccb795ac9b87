"""Where the kit finds the competition data: one order everywhere (CLI, demo, notebooks, tests,
benchmarks): explicit argument -> $COMMONLIT_DATA -> data/ at the project root -> Kaggle input."""

import pytest

from utils import env


@pytest.fixture()
def places(tmp_path, monkeypatch):
    """Four candidate folders, each with a test.csv; the kit's root and Kaggle input point here."""
    made = {}
    for name in ("explicit", "envvar", "root/data", "input/commonlitreadabilityprize"):
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "test.csv").write_text("id,excerpt\n")
        made[name] = tmp_path / name
    monkeypatch.setattr(env, "project_root", lambda: tmp_path / "root")
    monkeypatch.setenv("COMMONLIT_DATA", str(made["envvar"]))
    monkeypatch.setenv("KAGGLE_INPUT_ROOT", str(tmp_path / "input"))
    monkeypatch.delenv("KAGGLE_KERNEL_RUN_TYPE", raising=False)
    return made


def test_lookup_order(places, monkeypatch):
    assert env.competition_dir(str(places["explicit"])) == places["explicit"]
    assert env.competition_dir() == places["envvar"]
    monkeypatch.delenv("COMMONLIT_DATA")
    assert env.competition_dir() == places["root/data"]
    (places["root/data"] / "test.csv").unlink()
    assert env.competition_dir() == places["input/commonlitreadabilityprize"]
    (places["input/commonlitreadabilityprize"] / "test.csv").unlink()
    with pytest.raises(FileNotFoundError, match=r"make data.*data/README.md.*COMMONLIT_DATA"):
        env.competition_dir()


def test_a_wrong_place_named_explicitly_is_an_error_not_a_fallback(places, tmp_path):
    with pytest.raises(FileNotFoundError, match="data folder not found"):
        env.competition_dir(str(tmp_path / "nowhere"))
    with pytest.MonkeyPatch.context() as m:
        m.setenv("COMMONLIT_DATA", str(tmp_path / "nowhere"))
        with pytest.raises(FileNotFoundError, match="COMMONLIT_DATA=.*not found"):
            env.competition_dir()


def test_local_runs_land_at_the_project_root_from_any_folder(places, tmp_path, monkeypatch):
    monkeypatch.chdir(places["explicit"])  # e.g. a notebook runs in notebooks/
    assert env.runs_dir() == tmp_path / "root" / "runs"
    assert env.runs_dir("elsewhere") == env.Path("elsewhere")


def test_result_files_show_paths_relative_to_the_project(places, tmp_path):
    assert env.shown(tmp_path / "root" / "data" / "train.csv") == "data/train.csv"
    assert env.shown(tmp_path / "envvar" / "train.csv") == "train.csv"  # outside: the name only


def test_another_competition_is_looked_up_by_its_slug(places, tmp_path, monkeypatch):
    """data/<slug>/ (where `make data COMPETITION=slug` downloads), then the Kaggle input under its
    slug (both layouts); CommonLit's $COMMONLIT_DATA and data/ are not its data."""
    slug = "nlp-getting-started"
    with pytest.raises(FileNotFoundError, match=f"make data COMPETITION={slug}"):
        env.competition_dir(slug=slug)
    kaggle = tmp_path / "input" / "competitions" / slug
    kaggle.mkdir(parents=True)
    (kaggle / "test.csv").write_text("id,keyword,location,text\n")
    assert env.competition_dir(slug=slug) == kaggle
    local = tmp_path / "root" / "data" / slug
    local.mkdir(parents=True)
    (local / "train.csv").write_text("id,text,target\n")
    assert env.competition_dir(slug=slug) == local


def test_the_default_competition_is_the_kits_default():
    from utils.competition import DEFAULT

    assert env.COMPETITION == DEFAULT


@pytest.mark.versions
def test_versions_name_the_kit_its_libraries_and_python():
    import sys

    import torch

    from utils import __version__

    v = env.versions("accelerate")
    assert list(v) == ["kit", "torch", "transformers", "accelerate", "python"]
    assert v["kit"] == __version__ and v["torch"] == torch.__version__
    assert v["python"] == sys.version.split()[0] and list(env.versions())[-1] == "python"
