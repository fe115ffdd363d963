"""Pinning: the lock file of a vetted deployment (what ``torcia plugins lock`` writes), and
what makes an environment differ from it (what ``torcia plugins --check`` reports).

The policy that reads a lock and the guard that checks each module against it as it is
imported are in :mod:`torcia._policy`, which runs first at ``import torcia``; the manager
writes the lock and checks discovery against it with the functions here.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

from torcia import _policy
from torcia._policy import LOCK_FORMAT, Lock, PluginError, PluginLockError
from torcia.plugins import _identity
from torcia.plugins._identity import PluginInfo


def installed_files(dist) -> dict[str, str]:
    """``relative path -> "sha256=..."`` of a distribution's installed files: those its RECORD
    hashes (each checked against the file), and for an editable install every source file
    under its source directory (as ``{source}/...``). Console scripts (outside
    ``site-packages``) are left out.

    Raises
    ------
    PluginError
        A file differs from its RECORD hash.
    """
    files = {}
    for entry in dist.files or ():
        if not entry.hash or entry.hash.mode != "sha256" or entry.parts[0] == "..":
            # RECORD itself, byte code written after installation, and console scripts
            # outside site-packages (rewritten when an environment is relocated; torcia
            # imports nothing from there)
            continue
        digest = _policy.sha256(Path(dist.locate_file(entry)).read_bytes())
        if digest != f"sha256={entry.hash.value}":
            raise PluginError(f"{dist.metadata['Name']}: {entry} differs from its RECORD hash")
        files[str(entry)] = digest
    src = _identity.editable_root(dist)
    if src is not None:
        for path in sorted(src.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and not path.name.endswith(
                    ".pyc") and ".egg-info" not in str(path):
                files[f"{{source}}/{path.relative_to(src)}"] = _policy.sha256(path.read_bytes())
    return files


def _bytecode_matches(pyc: bytes, source: bytes, path: str) -> bool:
    """Whether byte code is what Python compiles from ``source`` (code objects compare
    their instructions, constants, names and line tables, not their file names)."""
    import marshal
    from importlib.util import MAGIC_NUMBER

    if pyc[:4] != MAGIC_NUMBER:
        return False
    try:
        code = marshal.loads(memoryview(pyc)[16:])
        return code == compile(source, path, "exec", dont_inherit=True)
    except (ValueError, EOFError, TypeError, SyntaxError):
        return False


def _pinned_bytecode(files: dict[str, Path]) -> dict[str, str]:
    """``key -> sha256`` of the byte code beside each source file that compiles from it."""
    pins = {}
    for key, source in files.items():
        if not key.endswith(".py"):
            continue
        try:
            pyc = Path(_policy.pyc_path(str(source))).read_bytes()
            data = source.read_bytes()
        except OSError:
            continue
        if _bytecode_matches(pyc, data, str(source)):
            pins[key] = _policy.sha256(pyc)
    return pins


def startup_files() -> dict[str, str]:
    """``path -> sha256`` of what runs at every interpreter start before torcia can check
    anything: the ``.pth`` files of the site folders, ``sitecustomize`` and
    ``usercustomize``.

    Examples
    --------
    >>> from torcia import plugins
    >>> all(p.endswith((".pth", ".py")) for p in plugins.startup_files())
    True
    """
    import importlib.util
    import site

    folders = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        folders.append(site.getusersitepackages())
    found = {}
    for folder in dict.fromkeys(folders):
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            if name.endswith(".pth"):
                found[os.path.join(folder, name)] = None
    for name in ("sitecustomize", "usercustomize"):
        module = sys.modules.get(name)
        origin = getattr(module, "__file__", None)
        if origin is None:
            try:
                spec = importlib.util.find_spec(name)
            except (ImportError, ValueError):
                spec = None
            origin = spec.origin if spec is not None and spec.has_location else None
        if origin:
            found[origin] = None
    out = {}
    for path in found:
        try:
            out[path] = _policy.sha256(Path(path).read_bytes())
        except OSError:
            out[path] = "unreadable"
    return out


def file_path(dist, key: str) -> Path:
    if key.startswith("{source}/"):
        return _identity.editable_root(dist) / key[len("{source}/"):]
    return Path(dist.locate_file(key))


def lock_check(entry: dict | None, dist) -> str | None:
    """Why a distribution does not match its lock entry, or None."""
    if entry is None:
        return "not in the lock file (unpinned)"
    if entry["version"] != dist.version:
        return f"version {dist.version} differs from the locked {entry['version']}"
    here, locked = _identity.dist_base(dist), _policy.expand(entry["location"])
    if here is None or os.path.realpath(here) != os.path.realpath(locked):
        return f"installed at {here}, not at its locked location {locked}"
    for key, digest in entry["files"].items():
        path = file_path(dist, key)
        try:
            data = path.read_bytes()
        except OSError:
            return f"{key} is missing"
        if _policy.sha256(data) != digest:
            return f"{key} was modified after locking"
    record = {str(f) for f in dist.files or ()
              if f.hash and f.hash.mode == "sha256" and f.parts[0] != ".."}
    extra = sorted(record - set(entry["files"]))
    if extra:
        return f"{extra[0]} was added after locking"
    return None


def read_lock(path: Path) -> Lock:
    """The lock file at ``path``: its distributions (``lock.dists``, by normalised name),
    start-up files and the index of its files by path."""
    return Lock(path)


def lock_document(infos: list[PluginInfo]) -> dict:
    """The lock of the plugins ``infos`` lists as loaded (torcia-core included): refuses,
    with a :class:`PluginError` naming them, when a plugin failed or was refused, or
    changed torcia while it loaded."""
    bad = [i for i in infos if i.status in ("failed", "refused") or i.changed]
    if bad:
        raise PluginError("plugins that do not load cannot be locked: " + "; ".join(
            f"{i.ident}: {i.status}: {i.reason}" for i in bad))
    import importlib.metadata

    wanted: dict[tuple[str, str], dict[str, str]] = {}
    for info in infos:
        if info.status == "loaded" and info.location and info.distribution != "torcia-core":
            key = (info.distribution, os.path.realpath(info.location))
            wanted.setdefault(key, {})[info.entry_point or info.name] = info.module
    core = _identity.core_dist()
    if core is not None:
        # the host itself: its modules are checked as they are imported, like the others
        wanted.setdefault(("torcia-core", os.path.realpath(_identity.dist_base(core))), {})
    entries = []
    for dist in importlib.metadata.distributions():
        base = _identity.dist_base(dist)
        key = (_identity.dist_name(dist), os.path.realpath(base) if base is not None else "")
        if key not in wanted:
            continue
        files = installed_files(dist)
        src = _identity.editable_root(dist)
        entries.append({
            "distribution": key[0], "version": dist.version, "entry_points": wanted.pop(key),
            "location": _policy.contract(Path(key[1])),
            "source": _policy.contract(src.resolve()) if src is not None else None,
            "files": files,
            "bytecode": _pinned_bytecode({k: file_path(dist, k) for k in files})})
    startup = {_policy.contract(Path(p)): digest for p, digest in startup_files().items()}
    return {"format": LOCK_FORMAT, "python": sys.implementation.cache_tag,
            "distributions": sorted(entries, key=lambda d: d["distribution"]),
            "startup": startup}


# ---------------------------------------------------------------------------------------
# The deployment check (torcia plugins --check)
# ---------------------------------------------------------------------------------------


@dataclasses.dataclass
class Problem:
    """One thing :func:`check_deployment` found: its ``kind`` (a key of
    :data:`CHECK_STATUS`), what it is about (``subject``: a plugin, a file, a module) and
    why.

    Examples
    --------
    >>> from torcia import plugins
    >>> plugins.Problem("unpinned", "", "no plugin lock in force").kind
    'unpinned'
    """

    kind: str
    subject: str
    message: str


#: The exit status of ``torcia plugins --check`` is the sum of the values of the kinds of
#: problem it found (2 is argparse's, for a wrong command line).
CHECK_STATUS = {
    "plugin": 1,  # a plugin failed or was refused
    "unpinned": 4,  # no lock in force
    "lock": 8,  # a locked plugin missing, blocked or shadowed; a module or byte code that
    #             is not the locked one
    "environment": 16,  # a start-up file (.pth, sitecustomize) the lock does not pin
    "integrity": 32,  # a plugin changed torcia's own callables, or left threads running
    "discovery": 64,  # discovery did not finish in time, or crashed
}


def lock_problems(infos: list[PluginInfo], lock: Lock) -> list[Problem]:
    """Each locked plugin that did not load: missing, blocked, refused, failed, shadowed."""
    by_ident: dict[str, list[PluginInfo]] = {}
    for info in infos:
        by_ident.setdefault(info.ident, []).append(info)
    found = []
    for name, entry in sorted(lock.dists.items()):
        for ep in sorted(entry["entry_points"]):
            ident = f"{name}:{ep}"
            rows = by_ident.get(ident, [])
            if any(i.status == "loaded" for i in rows):
                continue
            if rows:
                why = "; ".join(f"{i.status}: {i.reason}" for i in rows)
                found.append(Problem("lock", ident, f"the locked plugin is not loaded ({why})"))
            else:
                found.append(Problem("lock", ident, f"the locked plugin is missing: no "
                                                    f"installed {name} has entry point {ep}"))
    return found


def module_problems(lock: Lock) -> list[Problem]:
    """Each imported module of a locked distribution that is not its locked file."""
    found = []
    for name, module in sorted(sys.modules.items()):
        origin = getattr(module, "__file__", None)
        if origin and name.partition(".")[0] in lock.tops:
            try:
                lock.check_module(name, origin)
            except PluginLockError as exc:
                found.append(Problem("lock", name, str(exc)))
    return found


def bytecode_problems(lock: Lock) -> list[Problem]:
    """Byte code of a locked module that is neither the pinned one nor compiled from its
    source: it was replaced after locking."""
    import importlib.util

    early = {os.path.realpath(m.__file__) for m in list(sys.modules.values())
             if getattr(m, "__file__", None) and not isinstance(
                 getattr(getattr(m, "__spec__", None), "loader", None), _policy._CheckedLoader)}
    found = []
    for path, (_, key, _) in sorted(lock.files.items()):
        if not path.endswith(".py"):
            continue
        pinned = lock.bytecode.get(path)
        for pyc in dict.fromkeys([_policy.pyc_path(path), importlib.util.cache_from_source(path)]):
            try:
                blob = Path(pyc).read_bytes()
            except OSError:
                continue
            if pinned is not None and _policy.sha256(blob) == pinned:
                continue
            try:
                source = Path(path).read_bytes()
            except OSError:
                continue
            if not _bytecode_matches(blob, source, path):
                when = ("it runs at every start, before torcia can check anything"
                        if path in early else "the lock guard never runs it, but it was "
                                              "replaced after locking")
                found.append(Problem("lock", key, f"the byte code {pyc} differs from what "
                                                  f"{key} compiles to: {when}"))
    return found


def startup_problems(lock: Lock) -> list[Problem]:
    found = []
    for path, digest in startup_files().items():
        locked = lock.startup.get(path)
        if locked != digest:
            state = "was not there when the lock was written" if locked is None else \
                "changed after locking"
            found.append(Problem("environment", path, f"{state}; it runs at every "
                                                      "interpreter start"))
    return found


def deployment_problems(infos: list[PluginInfo], lock: Lock | None) -> list[Problem]:
    """What :func:`torcia.plugins.check_deployment` finds, given the plugins discovery found
    and the lock in force (None where there is none)."""
    found = []
    for info in infos:
        if info.status in ("failed", "refused"):
            found.append(Problem("plugin", info.ident, f"{info.status}: {info.reason}"))
        if info.changed:
            found.append(Problem("integrity", info.ident, "changed torcia's own "
                                 f"{some(info.changed)} while it loaded (put back)"))
        if info.threads:
            found.append(Problem("integrity", info.ident, "left thread(s) running: "
                                 f"{', '.join(info.threads)} (not daemon threads: the "
                                 "interpreter cannot exit until they end)"))
    if lock is None:
        found.append(Problem("unpinned", "", "no plugin lock in force: every plugin is "
                                             "unpinned (write one with 'torcia plugins lock "
                                             "PATH' and name it in the system config)"))
        return found
    return (found + lock_problems(infos, lock) + module_problems(lock)
            + bytecode_problems(lock) + startup_problems(lock))


def some(names: list[str], shown: int = 8) -> str:
    """The first ``shown`` of ``names``, and how many more there are."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")
