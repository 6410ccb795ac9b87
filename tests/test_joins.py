"""Tables from other datasets: a join's file OWNER/DATASET/FILE names a table of another Kaggle
dataset (US Patent's top solutions joined the CPC codes' titles from xhlulu/cpc-codes). It is looked
up beside the competition's files, then in the dataset attached under either /kaggle/input layout,
then in data/DATASET/; else one line names every place looked and the download command. `build`
attaches the dataset to the kernels (tests/test_kaggle.py, tests/test_kaggle_cli.py)."""

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from utils import env
from utils.bundle import BundleError, join_datasets
from utils.competition import Competition
from utils.data import DataError
from utils.tables import read_split

TITLES = "xhlulu/cpc-codes/titles.csv"
PATENT = Competition(
    slug="us-patent-phrase-to-phrase-matching", text_cols=("anchor", "target", "title"),
    target_cols=("score",), metric="pearson", target_range=(0.0, 1.0),
    train_joins=((TITLES, "context"),), test_joins=((TITLES, "context"),),
)
LAYOUTS = {"old": "input/cpc-codes", "new": "input/datasets/xhlulu/cpc-codes"}


def titles(folder: Path, where: str) -> Path:
    """titles.csv (context -> title) in `folder`; each title says where it was put."""
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"context": ["A47", "F16"], "title": [f"furniture ({where})", f"engineering ({where})"]}).to_csv(
        folder / "titles.csv", index=False)
    return folder / "titles.csv"


@pytest.fixture()
def comp_dir(tmp_path, monkeypatch):
    """The competition's test.csv in its own folder; the kit's root and the Kaggle input point here."""
    folder = tmp_path / "us-patent-phrase-to-phrase-matching"
    folder.mkdir()
    pd.DataFrame({"id": ["a", "b", "c"], "anchor": ["abatement"] * 3, "target": ["noise", "pollution", "forest"],
                  "context": ["A47", "F16", "A47"]}).to_csv(folder / "test.csv", index=False)
    monkeypatch.setattr(env, "project_root", lambda: tmp_path / "root")
    monkeypatch.setenv("KAGGLE_INPUT_ROOT", str(tmp_path / "input"))
    monkeypatch.delenv("KAGGLE_KERNEL_RUN_TYPE", raising=False)
    return folder


def joined_from(comp_dir: Path) -> set:
    df = read_split(PATENT, comp_dir / "test.csv", "test")
    assert df["title"].str.startswith(("furniture", "engineering")).all()
    assert df.set_index("id").loc["b", "title"].startswith("engineering")  # joined by context
    return {t.split("(")[1].rstrip(")") for t in df["title"]}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_lookup_order_beside_then_attached_then_data(layout, comp_dir, tmp_path):
    titles(tmp_path / "root" / "data" / "cpc-codes", "data")
    assert joined_from(comp_dir) == {"data"}
    titles(tmp_path / LAYOUTS[layout], "attached")
    assert joined_from(comp_dir) == {"attached"}
    titles(comp_dir, "beside")  # a user who downloaded it beside the competition's files
    assert joined_from(comp_dir) == {"beside"}


def test_attached_in_a_folder_of_another_name_is_found_by_the_search(comp_dir, tmp_path):
    titles(tmp_path / "input" / "mounted" / "cpc-codes", "searched")
    assert joined_from(comp_dir) == {"searched"}


def test_not_found_is_one_line_with_every_place_and_the_download_command(comp_dir, tmp_path):
    with pytest.raises(DataError) as e:
        read_split(PATENT, comp_dir / "test.csv", "test")
    msg, inp, data = str(e.value), tmp_path / "input", tmp_path / "root" / "data" / "cpc-codes"
    assert "\n" not in msg and msg.startswith("titles.csv of Kaggle dataset xhlulu/cpc-codes not found")
    for place in (comp_dir / "titles.csv", inp / "cpc-codes" / "titles.csv",
                  inp / "datasets" / "xhlulu" / "cpc-codes" / "titles.csv", data / "titles.csv"):
        assert str(place) in msg
    assert f"`kaggle datasets download -d xhlulu/cpc-codes -p {data} --unzip`" in msg


def test_a_plain_file_stays_beside_the_competitions_files(comp_dir, tmp_path):
    plain = replace(PATENT, test_joins=(("titles.csv", "context"),))
    titles(tmp_path / "root" / "data" / "cpc-codes", "data")
    titles(tmp_path / LAYOUTS["new"], "attached")
    with pytest.raises(DataError, match=r"titles.csv: file not found \(joined onto test.csv by 'context'\)"):
        read_split(plain, comp_dir / "test.csv", "test")
    titles(comp_dir, "beside")
    assert set(read_split(plain, comp_dir / "test.csv", "test")["title"].str.split("(").str[1]) == {"beside)"}


@pytest.mark.parametrize("name,ref", [
    (TITLES, ("xhlulu", "cpc-codes", "titles.csv")),
    ("titles.csv", None),
    ("sub/titles.csv", None),  # a path beside the competition's files
    ("xhlulu//titles.csv", None),
])
def test_only_owner_dataset_file_names_another_dataset(name, ref):
    assert env.dataset_file_ref(name) == ref


def test_build_attaches_each_joined_dataset_once():
    comp = replace(PATENT, train_joins=((TITLES, "context"), ("prompts.csv", "prompt_id")),
                   test_joins=((TITLES, "context"), ("kit/other-table/x.csv", "anchor")))
    assert join_datasets(comp) == ["xhlulu/cpc-codes", "kit/other-table"]
    assert join_datasets(Competition(slug="x")) == []
    bad = replace(PATENT, test_joins=(("xhlulu/CPC Codes/titles.csv", "context"),))
    with pytest.raises(BundleError, match=r"joined table 'xhlulu/CPC Codes/titles.csv': dataset slug 'CPC Codes'"):
        join_datasets(bad)
