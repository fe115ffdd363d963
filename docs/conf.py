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
import diagrams  # noqa: E402

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
    "sphinx_gallery.gen_gallery",
]

# The tutorials are scripts (tutorials_src/plot_*.py) that the build runs; an error in one
# fails the build, and their matplotlib figures become the pages' pictures.
sphinx_gallery_conf = {
    "examples_dirs": "tutorials_src",
    "gallery_dirs": "tutorials",
    "filename_pattern": r"/plot_",
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "image_scrapers": ("matplotlib",),
    "download_all_examples": False,
    "show_signature": False,
    "matplotlib_animations": False,
}

# The API pages import the installed parts; plugins' optional third-party modules (CuPy,
# MPI) are stood in for, so that the site builds on a machine without them.
autodoc_mock_imports = ["cupy", "mpi4py"]
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
napoleon_numpy_docstring = True
napoleon_google_docstring = False
# "int, optional", "float, default 0.9": keywords and values in a type are not classes
napoleon_preprocess_types = True
# an Attributes section becomes fields of the class, not entries that :undoc-members: repeats
napoleon_use_ivar = True

apigen.write(HERE / "api")

# Counts the pages state are the code's, as ``python -m torcia plugins`` prints them
from torcia import library  # noqa: E402

rst_epilog = f"""
.. |primitives| replace:: {len(library.primitives())}
"""
# drawn with matplotlib from the installed parts: CI has no graphviz `dot`
diagrams.write(HERE / "_static" / "diagrams")

exclude_patterns = ["_build"]
html_theme = "furo"
html_title = f"torcia {release}"
html_static_path = ["_static"]

# -n: every cross-reference must resolve. intersphinx cannot fetch inventories here (no
# network), so names of Python's standard library and of third-party libraries are ignored
# by pattern rather than linked; so are private base classes (show-inheritance names them)
# and the free text of numpy-style type fields ("binary file object", "(0.9, 0.999)").
nitpicky = True
_THIRD_PARTY = (
    r"(PluginManager|numpy|np|os|io|sys|pathlib|pickle|PIL|pluggy|enum|datetime|collections|argparse|cupy|"
    r"mpi4py|typing|multiprocessing|pkgutil|concurrent|threading|socket|types|abc|contextlib|"
    r"dataclasses|functools|ml_dtypes|safetensors|onnx|onnxruntime|zipfile|hashlib|struct|"
    r"tensorboard)"
    r"(\..+)?"
)
_PLAIN_WORDS = (
    r"(callables?|iterable|sequence|sized|module|path|Path|True|False|None|int|float|str|bool|"
    r"bytes|dict|list|tuple|set|object|type|array_like|array-like|scalar|number|any|Any|"
    r"generator|ignored|Tensors|function|mapping|file-like|slice|range|Ellipsis|complex)"
)
nitpick_ignore_regex = [
    (r"py:.*", _THIRD_PARTY),
    (r"py:.*", _PLAIN_WORDS),
    (r"py:.*", r"(.+\.)?_\w+(\..+)?"),
    (r"py:class", r".*[ ()\[\],'*:=].*"),
]


def _resolve_by_suffix(app, env, node, contnode):
    """Resolve a short reference (``load``, ``Tensor``) that Sphinx's exact lookup missed.

    Docstrings name objects as their module sees them; the reference documents each object
    once, under its shortest public path, so ``load`` in torcia.serialization's docstrings
    is documented as ``torcia.load``. Among the objects whose path ends with the name, the
    one sharing the longest prefix with the referring module wins.
    """
    if node.get("refdomain") != "py":
        return None
    from sphinx.util.nodes import make_refnode

    domain = env.get_domain("py")
    target = node["reftarget"].lstrip(".~")
    if target in _PYTHON_TYPES:
        return None
    module = node.get("py:module") or ""
    matches = domain.find_obj(env, module, node.get("py:class"), target, node["reftype"], 1)
    # a callable instance (torcia.distributions.biject_to) is documented as a function but
    # named with :data:; any kind of object will do
    matches = matches or domain.find_obj(env, module, node.get("py:class"), target, None, 1)
    if not matches:
        return None

    def shared(name):
        common = 0
        for a, b in zip(name.split("."), module.split("."), strict=False):
            if a != b:
                break
            common += 1
        return common

    name, obj = max(matches, key=lambda m: (shared(m[0]), -len(m[0])))
    return make_refnode(app.builder, node["refdoc"], obj.docname, obj.node_id, contnode, name)


def _python_types_exactly(app, doctree):
    """``type`` and ``object`` in a signature or a type field are Python's: Sphinx looks
    them up by suffix there, finds ``torcia.device.type`` and ``torcia.jit.Attribute.type``
    and warns that the reference is ambiguous; looked up exactly, they stay plain words."""
    from sphinx.addnodes import pending_xref

    for node in doctree.findall(pending_xref):
        if node.get("refdomain") == "py" and node.get("reftarget") in _PYTHON_TYPES:
            node.attributes.pop("refspecific", None)


_PYTHON_TYPES = ("type", "object")


#: Pages whose ``>>>`` examples the build itself runs, as the tutorials run: the worked
#: example of adding an op must work wherever the site is built, not only under pytest.
_RUN_AT_BUILD = ("architecture.rst",)


def _run_page_examples(app):
    import doctest

    for page in _RUN_AT_BUILD:
        result = doctest.testfile(str(HERE / page), module_relative=False,
                                  optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        if result.failed:
            raise RuntimeError(f"{result.failed} example(s) of docs/{page} failed; see above")


def setup(app):
    app.connect("builder-inited", _run_page_examples)
    app.connect("doctree-read", _python_types_exactly)
    app.connect("missing-reference", _resolve_by_suffix)
