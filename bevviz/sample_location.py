"""Where the embedded samples' folder is: the one rule, for every layer that needs it.

The samples (``sample_data/`` of the repository) travel inside the installed package as
``bevviz/sample_data/`` (the wheel's build copies the whole folder; see setup.py). In a source
checkout (an editable install, or the repository on ``sys.path``) the package has no such
folder and the repository's ``sample_data/`` beside it is used. The use-case layer
(:mod:`bevviz.session.embedded`) names the samples; the evaluation of the Calibration Doctor
(:mod:`bevviz.lab.evaluate`) reads its default frame from here too.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["FOLDER", "locate"]

#: Folder name of the samples, inside the installed package and in the repository.
FOLDER = "sample_data"


def locate() -> Path:
    """``<package>/sample_data`` of an installed wheel, else ``sample_data`` beside the
    package (a source checkout). The folder may be missing (a trimmed copy): callers check
    what they need."""
    package = Path(str(resources.files("bevviz")))
    installed = package / FOLDER
    return installed if installed.is_dir() else package.parent / FOLDER
