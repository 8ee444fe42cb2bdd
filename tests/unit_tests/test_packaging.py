"""What `pip show` and a user see of the package: version, licence, metadata."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_version_is_the_installed_distribution_s() -> None:
    import langchain_ragbudget

    assert langchain_ragbudget.__version__ == metadata.version("langchain-ragbudget")
    assert "__version__" in dir(langchain_ragbudget)


def test_version_is_read_only_when_asked() -> None:
    """The import stays light: the metadata is read on first use of the name."""
    code = (
        "import langchain_ragbudget as p; "
        "print('__version__' in vars(p)); p.__version__; "
        "print('__version__' in vars(p))"
    )
    shown = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert shown == ["False", "True"]


def test_the_metadata_a_user_sees() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert {"Homepage", "Repository", "Issues", "Changelog"} <= set(project["urls"])
    assert "Typing :: Typed" in project["classifiers"] and project["keywords"]
    installed = metadata.metadata("langchain-ragbudget")
    assert installed["License-Expression"] == "MIT"
    assert installed.get_all("Classifier")
