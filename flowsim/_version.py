"""The version of the flowsim being imported, read from the one place it is written:
``pyproject.toml``, or the metadata an install wrote from it."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

__all__ = ["UNKNOWN", "__version__", "find_version"]

#: The version of a flowsim that is neither installed nor a source checkout.
UNKNOWN = "unknown"


def find_version(package_dir: Path) -> str:
    """Version of the ``flowsim`` package whose files are in ``package_dir``.

    Rules, first match wins:

    1. A source checkout (``package_dir/../pyproject.toml`` names project ``flowsim``),
       imported through ``PYTHONPATH`` or an editable install: that file's version. An
       editable install's metadata is as old as its last ``pip install -e``, and the metadata
       found on ``sys.path`` may be another copy's.
    2. An installed package: the metadata of the distribution whose ``flowsim/__init__.py``
       is this one (:func:`importlib.metadata.version` alone would take whichever copy comes
       first on ``sys.path``).
    3. Otherwise :data:`UNKNOWN`: a guess would stamp traces with a version the code is not.
    """
    package_dir = Path(package_dir).resolve()
    try:
        project = tomllib.loads((package_dir.parent / "pyproject.toml").read_text("utf-8")).get("project", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        project = {}
    if isinstance(project, dict) and project.get("name") == "flowsim" and isinstance(project.get("version"), str):
        return project["version"]
    init = package_dir / "__init__.py"
    for dist in importlib.metadata.distributions(name="flowsim"):
        if Path(str(dist.locate_file("flowsim/__init__.py"))).resolve() == init:
            return dist.version
    return UNKNOWN


#: ``flowsim.__version__``.
__version__ = find_version(Path(__file__).parent)
