"""Build step of the bevviz package: ship the embedded samples and the app inside the wheel.

Everything else is in pyproject.toml. Two folders live outside the Python packages in the
repository and must travel with an installed package:

* ``sample_data/`` -> ``bevviz/sample_data/`` (found with importlib.resources by
  :mod:`bevviz.session.embedded`): the whole folder is copied, so a new subfolder travels
  without a change here;
* ``app.py``, ``pages/`` and ``.streamlit/config.toml`` -> ``appkit/streamlit_app/`` (found
  by ``bevviz app``, :func:`bevviz.cli.app_script`).

An editable install (``pip install -e .``) copies nothing: the checkout's folders are used
where they are.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
#: (source in the repository, destination inside the build, glob of the files to copy)
SHIPPED = (
    ("sample_data", "bevviz/sample_data", "**/*"),
    ("pages", "appkit/streamlit_app/pages", "*.py"),
    (".", "appkit/streamlit_app", "app.py"),
    (".streamlit", "appkit/streamlit_app/.streamlit", "config.toml"),
)


class BuildWithData(build_py):
    """``build_py`` that also copies :data:`SHIPPED` into the build."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for src, dst, pattern in SHIPPED:
            root = HERE / src
            for path in sorted(root.glob(pattern)):
                if path.is_file() and "__pycache__" not in path.parts:
                    target = Path(self.build_lib) / dst / path.relative_to(root)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, target)


setup(cmdclass={"build_py": BuildWithData})
