"""flowsim.__version__: pyproject.toml is the one place the version is written."""

import tomllib
from pathlib import Path

import flowsim
from flowsim._version import UNKNOWN, find_version

REPO = Path(__file__).resolve().parents[1]


def _package(root: Path) -> Path:
    package = root / "flowsim"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    return package


def _install_metadata(site: Path, version: str) -> None:
    info = site / f"flowsim-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: flowsim\nVersion: {version}\n")


def test_version_is_pyprojects():
    with open(REPO / "pyproject.toml", "rb") as f:
        assert flowsim.__version__ == tomllib.load(f)["project"]["version"]


def test_a_checkout_reads_its_pyproject(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "flowsim"\nversion = "7.7.dev1"\n')
    assert find_version(_package(tmp_path)) == "7.7.dev1"


def test_an_install_reads_its_own_metadata(tmp_path, monkeypatch):
    site = tmp_path / "site"
    package = _package(site)
    _install_metadata(site, "9.9")
    monkeypatch.syspath_prepend(str(site))
    assert find_version(package) == "9.9"


def test_another_copys_metadata_is_not_taken(tmp_path, monkeypatch):
    # A package dir copied out of an install (or a checkout without pyproject.toml) must not
    # report the version of whichever flowsim is installed.
    site = tmp_path / "site"
    _package(site)
    _install_metadata(site, "9.8")
    monkeypatch.syspath_prepend(str(site))
    assert find_version(_package(tmp_path / "copy")) == UNKNOWN


def test_another_projects_pyproject_is_not_taken(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "vendoring-app"\nversion = "3.0"\n')
    assert find_version(_package(tmp_path)) == UNKNOWN


def test_a_broken_pyproject_gives_unknown_not_an_import_error(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project\n")
    assert find_version(_package(tmp_path)) == UNKNOWN
