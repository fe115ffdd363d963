"""Sphinx configuration of torcia's documentation (``tox -e docs`` builds it with -W)."""

import importlib.metadata

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
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
napoleon_numpy_docstring = True
napoleon_google_docstring = False

exclude_patterns = ["_build"]
html_theme = "alabaster"
html_static_path = []
