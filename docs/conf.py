"""Sphinx configuration of torcia's documentation.

``tox -e docs`` and CI build it with ``-n -W``: every warning, an unresolved cross-reference
included, is an error. Before the build, the API reference is generated from the installed
parts' public names (``apigen.py``).
"""

import importlib.metadata
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import apigen  # noqa: E402

project = "torcia"
author = "the torcia developers"
copyright = "the torcia developers"
try:
    release = importlib.metadata.version("torcia-core")
except importlib.metadata.PackageNotFoundError:
    release = "unknown"
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]

# The API pages import the installed parts; plugins' optional third-party modules (CuPy,
# MPI) are stood in for, so that the site builds on a machine without them.
autodoc_mock_imports = ["cupy", "mpi4py"]
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
napoleon_numpy_docstring = True
napoleon_google_docstring = False
# an Attributes section becomes fields of the class, not entries that :undoc-members: repeats
napoleon_use_ivar = True

apigen.write(HERE / "api")

exclude_patterns = ["_build"]
html_theme = "furo"
html_title = f"torcia {release}"
html_static_path = []
