"""Who a plugin is: its distribution's normalised name, its entry point, version, location
and files, and whether the distribution is one of torcia's own parts (:func:`is_own`)."""

from __future__ import annotations

import dataclasses
import functools
import sys
from pathlib import Path

from torcia import _policy
from torcia._policy import OWN, normalize

ENTRY_POINT_GROUP = "torcia"


@dataclasses.dataclass
class PluginInfo:
    """What ``python -m torcia plugins`` reports about one plugin.

    ``location`` is the folder of its distribution's ``.dist-info``; ``changed`` names the
    callables of torcia it changed while it loaded (they were put back), ``threads`` the
    threads it left running.

    Examples
    --------
    >>> import torcia
    >>> from torcia import plugins
    >>> info = next(i for i in plugins.plugin_infos() if i.name == "core")
    >>> isinstance(info, plugins.PluginInfo), info.distribution, info.status
    (True, 'torcia-core', 'loaded')
    """

    name: str
    distribution: str
    version: str
    status: str  # "loaded", "blocked", "refused" or "failed"
    reason: str = ""
    hooks: list[str] = dataclasses.field(default_factory=list)
    provides: list[str] = dataclasses.field(default_factory=list)
    module: str = ""
    file: str = ""
    sha256: str = ""
    own: bool = False
    notes: list[str] = dataclasses.field(default_factory=list)
    location: str = ""
    changed: list[str] = dataclasses.field(default_factory=list)
    threads: list[str] = dataclasses.field(default_factory=list)
    entry_point: str = ""  # the entry point's name (``name`` may carry the distribution)

    @property
    def ident(self) -> str:
        return f"{self.distribution}:{self.entry_point or self.name}"


def install_hint(dist: str) -> str:
    """How to install torcia distribution ``dist`` until the parts are published.

    Examples
    --------
    >>> from torcia import plugins
    >>> hint = plugins.install_hint("torcia-optim")
    >>> "--find-links WHEELHOUSE torcia-optim" in hint, "install_parts.py optim" in hint
    (True, True)
    """
    short = dist[len("torcia-"):] if dist.startswith("torcia-") else dist
    return (f"install {dist} from a wheelhouse of the parts (pip install --no-index "
            f"--find-links WHEELHOUSE {dist}, the wheelhouse built with "
            f"tools/build_wheels.py) or from a source checkout (python tools/install_parts.py "
            f"{short}); torcia's parts are not published on PyPI, where a package of that "
            "name would not be torcia's")


def core_dist():
    import importlib.metadata

    try:
        return importlib.metadata.distribution("torcia-core")
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.cache
def core_base() -> Path | None:
    """Where torcia-core is installed (None: nowhere known), found once per discovery
    (:func:`torcia.plugins.reset` forgets it)."""
    core = core_dist()
    return dist_base(core) if core is not None else None


def dist_base(dist) -> Path | None:
    try:
        return Path(dist.locate_file("")).resolve()
    except (OSError, TypeError, NotImplementedError):
        return None


def dist_name(dist) -> str:
    # the folder's name, as importlib.metadata compares them, saves reading METADATA
    return normalize(getattr(dist, "_normalized_name", None) or dist.metadata["Name"] or "")


def editable_root(dist) -> Path | None:
    """The source directory of an editable install (PEP 610's direct_url.json): its
    ``src`` folder where it has one."""
    text = dist.read_text("direct_url.json")
    if not text:
        return None
    import json  # with plugin discovery, which reads it: not a cost of import torcia

    try:
        doc = json.loads(text)
    except ValueError:
        return None
    url = doc.get("url", "")
    if not doc.get("dir_info", {}).get("editable") or not url.startswith("file://"):
        return None
    root = Path(url[len("file://"):])
    return root / "src" if (root / "src").is_dir() else root


def _own_package(name: str, module: str) -> bool:
    """Whether ``module`` is in the package a distribution of :data:`OWN` installs:
    ``torcia.nn`` for torcia-nn, ``torcia_cpu`` for torcia-cpu."""
    short = name[len("torcia-"):]
    top = f"torcia_{short.replace('-', '_')}"
    return module.split(".")[0] == top or (module + ".").startswith(f"torcia.{short}.")


def _vouched(dist, module: str) -> bool:
    """Whether ``module`` is a file ``dist`` installed: listed in its RECORD with the
    file's hash (pip wrote it), or in an editable install, under its source folder."""
    rel = module.replace(".", "/")
    candidates = {f"{rel}.py", f"{rel}/__init__.py"}
    root = editable_root(dist)
    if root is not None:
        return any((root / c).is_file() for c in candidates)
    for entry in dist.files or ():
        if str(entry) in candidates and entry.hash and entry.hash.mode == "sha256":
            try:
                data = Path(dist.locate_file(entry)).read_bytes()
            except OSError:
                return False
            return _policy.sha256(data) == f"sha256={entry.hash.value}"
    return False


def is_own(dist, shadowed: bool = False) -> bool:
    """Whether ``dist`` is one of torcia's own distributions: one of :data:`OWN` by name,
    its ``.dist-info`` in the folder of torcia-core's, the only distribution of its name
    that Python uses (not ``shadowed``), and each of its ``torcia`` entry points loading a
    module of the part's own package that its RECORD lists with the file's hash (or, in an
    editable install, that lies under its source folder). A squatted name installed from
    elsewhere, or one whose entry point loads a module of its own, is not torcia's.

    Examples
    --------
    >>> import importlib.metadata
    >>> from torcia import plugins
    >>> plugins.is_own(importlib.metadata.distribution("torcia-core"))
    True
    """
    if dist is None or shadowed:
        return False
    name = dist_name(dist)
    if name not in OWN:
        return False
    here = core_base()
    if here is None or here != dist_base(dist):
        return False
    return all(_own_package(name, ep.module) and _vouched(dist, ep.module)
               for ep in dist.entry_points if ep.group == ENTRY_POINT_GROUP)


def builtin_info(name, plugin) -> PluginInfo:
    import hashlib  # loads OpenSSL: with its first use, not with import torcia

    module = getattr(plugin, "__module__", None) or getattr(plugin, "__name__", "")
    path = getattr(sys.modules.get(module), "__file__", None) or ""
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else ""
    return PluginInfo(name, "torcia-core", core_version(), "loaded", module=module,
                      file=path, sha256=digest, own=True)


def core_version() -> str:
    core = core_dist()
    return core.version if core is not None else "unknown"


def module_file(module: str) -> str:
    import importlib.util

    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return ""
    return spec.origin if spec is not None and spec.origin else ""
