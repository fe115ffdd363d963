"""The plugin manager: discovery, identity, policy, pinning, and the registries hooks fill.

Plugins are found in the ``torcia`` entry-point group. They are loaded once, the first time
any registry is needed, and each registration hook is called once to fill a plain table
(``hooks register, tables dispatch``). Every failure of a plugin is contained: a plugin that
fails to import, fails pluggy's validation (now or when a part adds its hook
specifications later), implements a hook no part defines, raises in a hook, calls back
into torcia from a registration hook, or changes one of torcia's own public callables
(``torcia.manual_seed``, ``Tensor.__add__``, ``torcia.nn.functional.mse_loss``...) is
reported by name with a :class:`PluginWarning`, skipped, and what it had registered (or
changed) is rolled back; the others keep working. In strict mode each of these is a
:class:`PluginError` naming the plugin, and discovery is transactional: after a refusal
the next attempt starts from nothing and meets the same refusal.

Identity: a plugin is its distribution's normalised name (PEP 503: ``Torcia_Evil`` is
``torcia-evil``) plus its entry-point name, ``distribution:entry-point``. Two distributions
of one name on ``sys.path`` (Python imports the first one's modules) are both listed, the
later one refused as shadowed. torcia's own parts are recognised by what cannot be copied
without the vetted files (:func:`is_own`): a name of :data:`OWN`, a ``.dist-info`` next to
torcia-core's, an entry point into the part's own package whose file the distribution's
RECORD lists with the file's hash; metadata alone (a ``Name: torcia-nn`` line) does not make
a distribution one of torcia's parts.

Policy (see :class:`Policy`): the system config (``<sys.prefix>/etc/torcia/config.toml``
and ``/etc/torcia/config.toml``) is the root; the user config (``$TORCIA_CONFIG`` or
``~/.config/torcia/config.toml``), another config named by ``TORCIA_SYSTEM_CONFIG`` and the
environment (``TORCIA_PLUGINS`` allow, ``TORCIA_DISABLE_PLUGINS`` block,
``TORCIA_STRICT_PLUGINS=1``, ``TORCIA_PLUGIN_LOCK``) only narrow it::

      [plugins]
      allow = ["torcia-cpu", "lion-dist"]        # distributions, or distribution:entry-point
      block = ["evil-dist"]                      # also bare entry-point names
      strict = true          # a failed or refused plugin is an error, not a warning
      lock = "plugins.lock"  # see ``torcia plugins lock``; relative to the config's folder
      locked = true          # system config only: the others may narrow, never name files

Each allowlist narrows (the allowed set is the intersection of every allowlist given);
blocklists add up and win; ``strict`` once on stays on; a lock once named cannot be
replaced. A config mistake (unknown section or key, a wrong type, ``TORCIA_CONFIG`` naming
a missing file) is an error naming the file and line, never a silently ignored setting,
and so is every refusal (``blocked by config file /etc/torcia/config.toml:3``).

Pinning: ``torcia plugins lock`` loads the plugins the policy allows and writes the lock
file: each distribution's version, location, entry points and the sha256 of its installed
files (from its RECORD, checked against the files), the byte code of its modules, and the
start-up files of the environment (``.pth``, ``sitecustomize``). It refuses to lock a
plugin that fails. With a lock in force, the lock guard (:class:`LockGuard`) checks each
module of a locked distribution when it is imported, before it runs, and a plugin whose
distribution is not in the lock, whose version or location differs, or whose files differ
is refused before its code is imported. ``torcia plugins --check`` (and strict mode at
start-up) also fails on a locked plugin that is missing, blocked or shadowed, and on an
unlocked start-up file (:func:`check_deployment`).

Example of a whole plugin distribution (its ``pyproject.toml`` names the module)::

    [project.entry-points.torcia]
    fastrelu = "fastrelu"

    # fastrelu.py
    import torcia

    @torcia.hookimpl
    def torcia_register_kernels(registry):
        registry.add("relu", "cpu", lambda a: a.clip(0), priority=5)
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import inspect
import json
import os
import sys
import threading
import warnings
from pathlib import Path

import pluggy

from torcia import _policy, hookspecs

# PARTS, SYSTEM_CONFIGS, LockGuard, PluginConfigError and module_name are re-exported:
# they are part of this module's API
from torcia._policy import (  # noqa: F401
    LOCK_FORMAT,
    OWN,
    PARTS,
    SYSTEM_CONFIGS,
    Lock,
    LockGuard,
    PluginConfigError,
    PluginError,
    PluginLockError,
    Policy,
    guard,
    module_name,
    normalize,
)

hookimpl = pluggy.HookimplMarker("torcia")

ENTRY_POINT_GROUP = "torcia"
#: The version of torcia-core's hook API (its hook specifications and the registries they
#: receive), apart from the distribution's version. 0.2 added ``torcia_register_ops``,
#: ``KernelRegistry.add(..., setup=)`` and :mod:`torcia.library`; 0.3 made the object
#: ``torcia_autograd_engine`` returns a :class:`torcia.library.AutogradMode`; 0.4 added
#: ``torcia_register_names`` (:func:`lent`).
HOOK_API_VERSION = "0.4"


class PluginWarning(UserWarning):
    """A plugin failed to load or to run one of its hooks; it was skipped.

    Examples
    --------
    >>> from torcia import plugins
    >>> issubclass(plugins.PluginWarning, UserWarning)
    True
    """


class PluginBlockedError(RuntimeError):
    """A feature provided by a blocked plugin was asked for.

    Examples
    --------
    >>> from torcia import plugins
    >>> issubclass(plugins.PluginBlockedError, RuntimeError)
    True
    """


class PluginReentryError(RuntimeError):
    """A registration hook called into torcia while torcia was building its tables.

    Examples
    --------
    >>> from torcia import plugins
    >>> issubclass(plugins.PluginReentryError, RuntimeError)
    True
    """


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


# ---------------------------------------------------------------------------------------
# Identity
# ---------------------------------------------------------------------------------------


def _core_dist():
    import importlib.metadata

    try:
        return importlib.metadata.distribution("torcia-core")
    except importlib.metadata.PackageNotFoundError:
        return None


def _base(dist) -> Path | None:
    try:
        return Path(dist.locate_file("")).resolve()
    except (OSError, TypeError, NotImplementedError):
        return None


def _dist_name(dist) -> str:
    # the folder's name, as importlib.metadata compares them, saves reading METADATA
    return normalize(getattr(dist, "_normalized_name", None) or dist.metadata["Name"] or "")


def _editable_root(dist) -> Path | None:
    """The source directory of an editable install (PEP 610's direct_url.json): its
    ``src`` folder where it has one."""
    text = dist.read_text("direct_url.json")
    if not text:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    url = doc.get("url", "")
    if not doc.get("dir_info", {}).get("editable") or not url.startswith("file://"):
        return None
    root = Path(url[len("file://"):])
    return root / "src" if (root / "src").is_dir() else root


def _own_package(dist_name: str, module: str) -> bool:
    """Whether ``module`` is in the package a distribution of :data:`OWN` installs:
    ``torcia.nn`` for torcia-nn, ``torcia_cpu`` for torcia-cpu."""
    short = dist_name[len("torcia-"):]
    top = f"torcia_{short.replace('-', '_')}"
    return module.split(".")[0] == top or (module + ".").startswith(f"torcia.{short}.")


def _vouched(dist, module: str) -> bool:
    """Whether ``module`` is a file ``dist`` installed: listed in its RECORD with the
    file's hash (pip wrote it), or in an editable install, under its source folder."""
    rel = module.replace(".", "/")
    candidates = {f"{rel}.py", f"{rel}/__init__.py"}
    root = _editable_root(dist)
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
    name = _dist_name(dist)
    if name not in OWN:
        return False
    if _state.core_base is None:
        core = _core_dist()
        _state.core_base = (_base(core) if core is not None else None) or False
    if not _state.core_base or _state.core_base != _base(dist):
        return False
    return all(_own_package(name, ep.module) and _vouched(dist, ep.module)
               for ep in dist.entry_points if ep.group == ENTRY_POINT_GROUP)


# ---------------------------------------------------------------------------------------
# Pinning
# ---------------------------------------------------------------------------------------


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
    src = _editable_root(dist)
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


def _file_path(dist, key: str) -> Path:
    if key.startswith("{source}/"):
        return _editable_root(dist) / key[len("{source}/"):]
    return Path(dist.locate_file(key))


def _lock_check(entry: dict | None, dist) -> str | None:
    """Why a distribution does not match its lock entry, or None."""
    if entry is None:
        return "not in the lock file (unpinned)"
    if entry["version"] != dist.version:
        return f"version {dist.version} differs from the locked {entry['version']}"
    here, locked = _base(dist), _policy.expand(entry["location"])
    if here is None or os.path.realpath(here) != os.path.realpath(locked):
        return f"installed at {here}, not at its locked location {locked}"
    for key, digest in entry["files"].items():
        path = _file_path(dist, key)
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
    core = _core_dist()
    if core is not None:
        # the host itself: its modules are checked as they are imported, like the others
        wanted.setdefault(("torcia-core", os.path.realpath(_base(core))), {})
    entries = []
    for dist in importlib.metadata.distributions():
        base = _base(dist)
        key = (_dist_name(dist), os.path.realpath(base) if base is not None else "")
        if key not in wanted:
            continue
        files = installed_files(dist)
        src = _editable_root(dist)
        entries.append({
            "distribution": key[0], "version": dist.version, "entry_points": wanted.pop(key),
            "location": _policy.contract(Path(key[1])),
            "source": _policy.contract(src.resolve()) if src is not None else None,
            "files": files,
            "bytecode": _pinned_bytecode({k: _file_path(dist, k) for k in files})})
    startup = {_policy.contract(Path(p)): digest for p, digest in startup_files().items()}
    return {"format": LOCK_FORMAT, "python": sys.implementation.cache_tag,
            "distributions": sorted(entries, key=lambda d: d["distribution"]),
            "startup": startup}


def write_lock(path: Path) -> dict:
    """Load the plugins the policy allows (the lock in force left aside), write the lock of
    those that load to ``path`` and return it (see :func:`lock_document`)."""
    with _state.lock:
        reset()
        _state.writing_lock = True
        try:
            doc = lock_document(plugin_infos())
        finally:
            _state.writing_lock = False
            reset()
    path = Path(path)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    temporary.replace(path)
    return doc


# ---------------------------------------------------------------------------------------
# The manager
# ---------------------------------------------------------------------------------------


class _State:
    def __init__(self):
        self.lock = threading.RLock()
        self.pm: pluggy.PluginManager | None = None
        self.infos: dict[str, PluginInfo] = {}
        self.spec_modules: list = [hookspecs]
        self.builtins: list[tuple[str, object]] = []
        self.registries: dict[str, object] = {}
        self.policy: Policy | None = None
        self.lock_file: Lock | None = None  # the lock discovery checked plugins against
        self.core_base = None  # where torcia-core is installed (False: nowhere known)
        self.integrity: _Integrity | None = None
        self.writing_lock = False  # ``write_lock`` loads plugins with the lock left aside
        self.discovery_guard = False  # whether discovery (not ``import torcia``) put the
        #                               lock guard in place
        self.report_only = False  # ``torcia plugins --check``: strict mode reports
        self.local = threading.local()  # .hook: (plugin, hook name) while a hook runs


_state = _State()


def add_hookspecs(module) -> None:
    """Add a package's hook specifications (call it when that package is imported).

    Third-party plugins that implement one of the new hooks with parameters the
    specification does not have are reported and skipped; the others are untouched.

    Example: torcia-nn calls ``torcia.plugins.add_hookspecs(torcia.nn.hookspecs)``.
    """
    with _state.lock:
        if module in _state.spec_modules:
            return
        _state.spec_modules.append(module)
        if _state.pm is not None:
            _add_specs(_state.pm, module)
            _check_hook_names(_state.pm)


def register_builtin(name: str, plugin) -> None:
    """Register a plugin that ships inside core itself (like pytest's default plugins)."""
    with _state.lock:
        _state.builtins.append((name, plugin))
        if _state.pm is not None:
            _register(_state.pm, _builtin_info(name, plugin), plugin)


def _builtin_info(name, plugin) -> PluginInfo:
    import sys

    module = getattr(plugin, "__module__", None) or getattr(plugin, "__name__", "")
    path = getattr(sys.modules.get(module), "__file__", None) or ""
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else ""
    return PluginInfo(name, "torcia-core", _core_version(), "loaded", module=module,
                      file=path, sha256=digest, own=True)


def _core_version() -> str:
    core = _core_dist()
    return core.version if core is not None else "unknown"


def _specs(module) -> dict[str, list[str]]:
    """Hook name -> parameter names of the specifications in ``module``."""
    out = {}
    for name, fn in vars(module).items():
        if name.startswith("torcia_") and callable(fn) and hasattr(fn, "torcia_spec"):
            out[name] = list(inspect.signature(fn).parameters)
    return out




def _fail(info: PluginInfo, reason: str, status: str = "failed") -> None:
    """Mark a plugin failed (or refused), take it out of the manager, roll back what it
    registered, and report it. In strict mode, forget everything first: the next attempt
    starts from nothing and meets the same refusal."""
    info.status, info.reason = status, reason
    pm = _state.pm if _state.pm is not None else getattr(_state.local, "building", None)
    if pm is not None and pm.get_plugin(info.name) is not None:
        pm.unregister(name=info.name)
    for registry in list(_state.registries.values()):
        rollback = getattr(registry, "rollback", None)
        if rollback is not None:
            rollback(info.name)
    info.provides.clear()
    what = "was refused" if status == "refused" else "was skipped"
    message = f"torcia plugin {info.name!r} ({info.distribution} {info.version}) {what}: {reason}"
    policy = _state.policy
    if policy is not None and policy.strict and not _state.report_only:
        reset()
        raise PluginError(f"{message} (strict mode, set by {policy.strict})")
    warnings.warn(message, PluginWarning, stacklevel=3)


def _add_specs(pm, module) -> None:
    """Add hook specifications, first taking out each plugin whose implementation the new
    specifications refuse (pluggy would raise for all of them at once)."""
    for hook_name, params in _specs(module).items():
        caller = getattr(pm.hook, hook_name, None)
        if caller is None:
            continue
        for impl in list(caller.get_hookimpls()):
            unknown = [a for a in impl.argnames if a not in params]
            if unknown:
                info = _state.infos.get(impl.plugin_name)
                reason = (f"{hook_name} takes {', '.join(impl.argnames)}, but its "
                          f"specification has {', '.join(params) or 'no parameters'}")
                if info is not None:
                    _fail(info, reason)
                else:
                    pm.unregister(name=impl.plugin_name)
    pm.add_hookspecs(module)


def _check_hook_names(pm) -> None:
    """Fail a plugin implementing a hook that is close to a known hook but is none
    (``torcia_register_loss``): a typo would otherwise be ignored for good."""
    known = set()
    for module in _state.spec_modules:
        known.update(_specs(module))
    for info in list(_state.infos.values()):
        if info.status != "loaded":
            continue
        for hook in info.hooks:
            if hook in known:
                continue
            # close enough to be a typo, not another part's hook (0.95: a missing or
            # extra letter, as torcia_register_loss for torcia_register_losses)
            close = difflib.get_close_matches(hook, sorted(known), n=1, cutoff=0.95)
            if close:
                _fail(info, f"implements {hook}, which no part defines (did you mean "
                            f"{close[0]}?)")
                break


def check_unknown_hooks() -> list[PluginInfo]:
    """Fail every loaded plugin implementing a hook no installed part defines; call it
    once every part is imported (the listing and ``--check`` do). Returns those failed."""
    manager()
    known = set()
    for module in _state.spec_modules:
        known.update(_specs(module))
    failed = []
    for info in list(_state.infos.values()):
        unknown = [h for h in info.hooks if h not in known]
        if info.status == "loaded" and unknown:
            close = difflib.get_close_matches(unknown[0], sorted(known), n=1)
            _fail(info, f"implements {unknown[0]}, which no installed part defines"
                  + (f" (did you mean {close[0]}?)" if close else ""))
            failed.append(info)
    return failed


def _register(pm, info: PluginInfo, plugin) -> None:
    _state.infos[info.name] = info
    try:
        pm.register(plugin, name=info.name)
    except Exception as exc:  # noqa: BLE001 - any failure of a plugin must be contained
        _fail(info, f"{type(exc).__name__}: {exc}")
    else:
        info.hooks = sorted(h.name for h in pm.get_hookcallers(plugin) or [])


def _module_file(module: str) -> str:
    import importlib.util

    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return ""
    return spec.origin if spec is not None and spec.origin else ""




# ---------------------------------------------------------------------------------------
# Integrity: what a third-party plugin must leave as torcia defined it
# ---------------------------------------------------------------------------------------

_MISSING = object()


def _defined_by_torcia(value) -> bool:
    """Whether ``value`` was written in one of torcia's modules (a part imported meanwhile
    may bind names of its own, ``torcia.overrides`` wraps functions): its code lives in the
    file of a module of torcia."""
    fn = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
    code = getattr(fn, "__code__", None)
    if code is None:
        module = getattr(fn, "__module__", None)
        return isinstance(value, type) and isinstance(module, str) and (
            module == "torcia" or module.startswith("torcia."))
    return code.co_filename in {getattr(m, "__file__", None) for n, m in list(sys.modules.items())
                                if n == "torcia" or n.startswith("torcia.")}


class _Integrity:
    """torcia's own public callables as torcia defined them: the functions and classes of
    its public modules (``torcia``, ``torcia.random``, ``torcia.nn.functional``...) and the
    attributes of their classes (``Tensor.__add__``, ``Generator.manual_seed``, the
    losses' and optimizers' methods). Compared by identity after each third-party plugin
    loads and after each of its hooks: a few thousand dictionary lookups."""

    def __init__(self):
        self.items: list[list] = []  # [owner, name, value, label]
        self.modules: set[str] = set()
        self.classes: set[int] = set()

    def extend(self) -> None:
        """Take in the public modules of torcia imported since the last call."""
        for name in sorted(sys.modules):
            if (name in self.modules or not (name == "torcia" or name.startswith("torcia."))
                    or "._" in name):
                continue
            module = sys.modules[name]
            if module is None:
                continue
            self.modules.add(name)
            for key, value in list(vars(module).items()):
                if key.startswith("_") or not callable(value):
                    continue
                self.items.append([module, key, value, f"{name}.{key}"])
                if isinstance(value, type) and id(value) not in self.classes and \
                        value.__module__.startswith("torcia"):
                    self.classes.add(id(value))
                    for attr, member in list(vars(value).items()):
                        if callable(member) or isinstance(member, (property, staticmethod,
                                                                   classmethod)):
                            self.items.append([value, attr, member, f"{name}.{key}.{attr}"])

    def changes(self) -> list[str]:
        """Put back what was changed and say what; a change made by torcia's own code is
        taken in instead."""
        changed = []
        for item in self.items:
            owner, key, value, label = item
            current = owner.__dict__.get(key, _MISSING)
            if current is value:
                continue
            if current is not _MISSING and _defined_by_torcia(current):
                item[2] = current
                continue
            setattr(owner, key, value)
            changed.append(label)
        return changed


def _integrity() -> _Integrity:
    if _state.integrity is None:
        _state.integrity = _Integrity()
    _state.integrity.extend()
    return _state.integrity


def _check_integrity(info: PluginInfo, registry=None, entries=None) -> None:
    """Fail ``info``'s plugin when it changed torcia's own callables, or entries of
    ``registry`` that other plugins registered (``entries``: the table before its hook)."""
    changed = _state.integrity.changes() if _state.integrity is not None else []
    if entries is not None:
        table = registry._entries or {}
        for name, obj in entries.items():
            if table.get(name, _MISSING) is not obj:
                table[name] = obj
                changed.append(f"{registry.kind} {name!r}")
    if changed:
        info.changed = changed
        _fail(info, f"changed torcia's own {_some(changed)} while it loaded (put back)")


def _some(names: list[str], shown: int = 8) -> str:
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


def _new_threads(before: set) -> list[str]:
    return sorted(t.name for t in threading.enumerate()
                  if t not in before and t.is_alive() and not t.daemon)


# ---------------------------------------------------------------------------------------
# Discovery
# ---------------------------------------------------------------------------------------


def _candidates() -> list[tuple]:
    """``(entry point, distribution, name, shadow, own)`` for every ``torcia`` entry point
    of every distribution on ``sys.path``, torcia's own first; ``shadow`` is the
    distribution of the same name found earlier on ``sys.path`` (Python imports that one's
    modules), or None."""
    import importlib.metadata

    first: dict[str, object] = {}
    rows = []
    for dist in importlib.metadata.distributions():
        name = _dist_name(dist)
        shadow = first.setdefault(name, dist)
        shadow = None if shadow is dist else shadow
        for ep in dist.entry_points:
            if ep.group == ENTRY_POINT_GROUP:
                rows.append((ep, dist, name, shadow, is_own(dist, shadow is not None)))
    # torcia's own first: a third-party plugin taking one of their names (found first on
    # an earlier sys.path entry) is the one refused
    rows.sort(key=lambda row: not row[4])
    return rows


def _refuse_duplicate(info: PluginInfo, reason: str) -> None:
    key, n = f"{info.distribution}:{info.entry_point}", 2
    while key in _state.infos:
        key, n = f"{info.distribution}:{info.entry_point} ({n})", n + 1
    info.name = key
    _state.infos[key] = info
    _fail(info, reason, "refused")


def _discover(pm, policy, lock: Lock | None) -> None:
    core = _core_dist()
    if lock is not None and core is not None and "torcia-core" in lock.dists:
        reason = _lock_check(lock.dists["torcia-core"], core)
        if reason:
            raise PluginLockError(f"plugin lock {lock.path}: torcia-core: {reason}")
    rows = _candidates()
    _warn_entry_point_allowlist(policy, rows)
    for ep, dist, name, shadow, own in rows:
        where = str(_base(dist) or "")
        info = PluginInfo(ep.name, name, dist.version, "loaded", module=ep.value, own=own,
                          location=where, entry_point=ep.name)
        if shadow is not None:
            _refuse_duplicate(info, f"{name} {dist.version} at {where} is shadowed by {name} "
                                    f"{shadow.version} at {_base(shadow)}, found first on "
                                    "sys.path (Python imports one distribution of a name)")
            continue
        if ep.name in _state.infos:
            first = _state.infos[ep.name]
            _refuse_duplicate(info, f"plugin name {ep.name!r} is also used by "
                                    f"{first.distribution}; the first one found is kept")
            continue
        reason = policy.verdict(ep.name, name, own)
        if reason:
            info.status, info.reason = "blocked", reason
            _state.infos[ep.name] = info
            continue
        _state.infos[ep.name] = info
        if lock is not None:
            reason = _lock_check(lock.dists.get(name), dist)
            if reason is None and lock.dists[name]["entry_points"].get(ep.name) != ep.value:
                reason = f"entry point {ep.name} = {ep.value} is not the locked one"
            if reason:
                _fail(info, f"plugin lock {lock.path}: {reason}", "refused")
                continue
        if not own:
            _integrity()  # torcia's own plugins are loaded: what they defined is torcia's
        before = set(threading.enumerate())
        try:
            plugin = ep.load()
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - sys.exit() at import too
            info.threads = _new_threads(before)
            _fail(info, f"{type(exc).__name__}: {exc}")
            continue
        info.threads = _new_threads(before)
        info.file = getattr(plugin, "__file__", "") or _module_file(ep.module)
        if info.file:
            info.sha256 = hashlib.sha256(Path(info.file).read_bytes()).hexdigest()
        _register(pm, info, plugin)
        if not own and info.status == "loaded":
            _check_integrity(info)


def _warn_entry_point_allowlist(policy, rows) -> None:
    """An allowlist entry that names an entry point rather than a distribution admits
    nothing (any distribution could choose that name): say which distribution to name."""
    dists = {row[2] for row in rows}
    for source, entries in policy.allowlists:
        for entry in sorted(entries - dists):
            owners = sorted({row[2] for row in rows if row[0].name == entry})
            if owners and ":" not in entry:
                warnings.warn(f"allowlist entry {entry!r} ({source}) is an entry-point name; "
                              f"allowlists name distributions: {', '.join(owners)}",
                              PluginWarning, stacklevel=4)


def manager() -> pluggy.PluginManager:
    """Return the plugin manager, discovering and loading plugins on the first call.

    Examples
    --------
    >>> import torcia
    >>> from torcia import plugins
    >>> hasattr(plugins.manager().hook, "torcia_register_backends")
    True
    """
    pm = _state.pm
    if pm is not None:
        return pm
    with _state.lock:
        if _state.pm is not None:
            return _state.pm
        if getattr(_state.local, "building", None) is not None:
            raise PluginReentryError("a torcia plugin called into torcia while its module "
                                     "was being imported by plugin discovery")
        pm = pluggy.PluginManager("torcia")
        _state.local.building = pm
        try:
            policy = _state.policy = Policy()
            _state.lock_file = _guard_for(policy)
            for module in _state.spec_modules:
                pm.add_hookspecs(module)
            for name, plugin in _state.builtins:
                _register(pm, _builtin_info(name, plugin), plugin)
            specs_added = list(_state.spec_modules)
            _discover(pm, policy, _state.lock_file)
            # a part imported by loading its plugin (torcia.optim) added its specs meanwhile
            for module in _state.spec_modules:
                if module not in specs_added:
                    _add_specs(pm, module)
            _check_hook_names(pm)
            if policy.strict and _state.lock_file is not None and not _state.report_only:
                _check_strictly(policy, _state.lock_file)
        except BaseException:
            reset()  # a refusal leaves nothing behind that would change the next attempt
            raise
        finally:
            _state.local.building = None
        _state.pm = pm
        return pm


def _guard_for(policy: Policy) -> Lock | None:
    """The lock discovery checks plugins against, its guard in place (``import torcia``
    put it there already unless the policy changed since)."""
    if policy.lock is None or _state.writing_lock:
        if _state.discovery_guard:
            _policy.remove_guard()
            _state.discovery_guard = False
        return None
    had = guard()
    lock_guard = _policy.install_guard(policy.lock[0])
    _state.discovery_guard = _state.discovery_guard or lock_guard is not had
    return lock_guard.lock


def _check_strictly(policy: Policy, lock: Lock) -> None:
    """In strict mode, at start-up: a locked plugin that is missing, blocked or shadowed, or
    a start-up file the lock does not pin, is an error."""
    found = _lock_problems(list(_state.infos.values()), lock) + _startup_problems(lock)
    if found:
        raise PluginError(
            f"the deployment differs from the plugin lock {lock.path} (strict mode, set by "
            f"{policy.strict}): " + "; ".join(f"{p.subject}: {p.message}" for p in found))


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


def _lock_problems(infos: list[PluginInfo], lock: Lock) -> list[Problem]:
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


def _module_problems(lock: Lock) -> list[Problem]:
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


def _bytecode_problems(lock: Lock) -> list[Problem]:
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


def _startup_problems(lock: Lock) -> list[Problem]:
    found = []
    for path, digest in startup_files().items():
        locked = lock.startup.get(path)
        if locked != digest:
            state = "was not there when the lock was written" if locked is None else \
                "changed after locking"
            found.append(Problem("environment", path, f"{state}; it runs at every "
                                                      "interpreter start"))
    return found


def check_deployment(infos: list[PluginInfo] | None = None) -> list[Problem]:
    """Everything that makes this environment differ from a vetted deployment, after
    discovery: plugins that failed or were refused; plugins that changed torcia's own
    callables or left threads running; no lock in force; with a lock, each locked plugin
    that is missing, blocked or shadowed, each imported module of a locked distribution
    that is not its locked file, byte code that does not compile from its locked source,
    and each ``.pth`` file or ``sitecustomize`` the lock does not pin.
    ``torcia plugins --check`` runs it in a child process.

    Examples
    --------
    >>> import torcia
    >>> from torcia import plugins
    >>> [p.kind for p in plugins.check_deployment()]  # no lock in force here
    ['unpinned']
    """
    if infos is None:
        infos = plugin_infos()
    found = []
    for info in infos:
        if info.status in ("failed", "refused"):
            found.append(Problem("plugin", info.ident, f"{info.status}: {info.reason}"))
        if info.changed:
            found.append(Problem("integrity", info.ident, "changed torcia's own "
                                 f"{_some(info.changed)} while it loaded (put back)"))
        if info.threads:
            found.append(Problem("integrity", info.ident, "left thread(s) running: "
                                 f"{', '.join(info.threads)} (not daemon threads: the "
                                 "interpreter cannot exit until they end)"))
    lock = _state.lock_file
    if lock is None:
        found.append(Problem("unpinned", "", "no plugin lock in force: every plugin is "
                                             "unpinned (write one with 'torcia plugins lock "
                                             "PATH' and name it in the system config)"))
        return found
    return (found + _lock_problems(infos, lock) + _module_problems(lock)
            + _bytecode_problems(lock) + _startup_problems(lock))


def plugin_infos() -> list[PluginInfo]:
    """Every plugin found, loaded or not, after building every known registry.

    Examples
    --------
    >>> import torcia
    >>> from torcia import plugins
    >>> info = next(i for i in plugins.plugin_infos() if i.name == "core")
    >>> info.status, info.hooks
    ('loaded', ['torcia_register_backends', 'torcia_register_kernels'])
    """
    manager()
    for registry in list(_state.registries.values()):
        registry.build()
    return sorted(_state.infos.values(), key=lambda i: (i.distribution, i.name))


def blocked_plugins() -> list[PluginInfo]:
    manager()
    return [i for i in _state.infos.values() if i.status in ("blocked", "refused")]


def current_hook() -> tuple[str, str] | None:
    """``(plugin, hook)`` while a registration hook runs on this thread, else None."""
    return getattr(_state.local, "hook", None)


def check_reentry(what: str) -> None:
    """Raise :class:`PluginReentryError` when a registration hook running on this thread
    asks for ``what`` while ``what`` is being built: waiting for it would hang for ever,
    and building it again would recurse."""
    if what in _building():
        running = current_hook()
        who = f"plugin {running[0]!r}" if running else "a plugin"
        hook = f"its {running[1]} hook" if running else "a registration hook"
        raise PluginReentryError(
            f"{who} called into torcia, which needs {what}, from {hook}; registration "
            "hooks must only register")


def _building() -> set:
    tables = getattr(_state.local, "tables", None)
    if tables is None:
        tables = _state.local.tables = set()
    return tables


class building:
    """Marks ``what`` as being built on this thread (see :func:`check_reentry`)."""

    def __init__(self, what: str):
        self.what = what

    def __enter__(self):
        check_reentry(self.what)
        _building().add(self.what)
        return self

    def __exit__(self, *exc):
        _building().discard(self.what)
        return False




def call_each(hook_name: str, **kwargs) -> None:
    """Call every implementation of a registration hook, containing each plugin's failure.

    torcia's own parts run first, so that their names win a clash. The registry's
    ``current_plugin`` names the plugin while its implementation runs, so that the listing
    can say what each plugin provides; a plugin that raises, or changes torcia's own
    callables or what other plugins registered, is skipped and what it registered (or
    changed) is rolled back.
    """
    pm = manager()
    hook = getattr(pm.hook, hook_name)
    registry = kwargs.get("registry")
    impls = list(reversed(hook.get_hookimpls()))
    own = [i for i in impls if _is_own_plugin(i.plugin_name)]
    impls = own + [i for i in impls if i not in own]
    checked = False
    for impl in impls:
        if pm.get_plugin(impl.plugin_name) is None:
            continue  # failed in an earlier hook of this loop
        info = _state.infos.get(impl.plugin_name)
        third_party = impl not in own
        if third_party and not checked:
            _integrity()  # what torcia's own hooks did is torcia's
            checked = True
        entries = dict(registry._entries or {}) if third_party and isinstance(
            registry, Registry) else None
        if registry is not None:
            registry.current_plugin = impl.plugin_name
        previous = current_hook()
        _state.local.hook = (impl.plugin_name, hook_name)
        before = set(threading.enumerate())
        try:
            impl.function(**kwargs)
        except Exception as exc:  # noqa: BLE001
            _state.local.hook = previous
            reason = f"raised in {hook_name}: {type(exc).__name__}: {exc}"
            if info is not None:
                _fail(info, reason)
            else:
                pm.unregister(name=impl.plugin_name)
                warnings.warn(f"torcia plugin {impl.plugin_name!r} {reason}", PluginWarning,
                              stacklevel=2)
        finally:
            _state.local.hook = previous
        if info is not None:
            info.threads += _new_threads(before)
            if third_party and info.status == "loaded":
                _check_integrity(info, registry, entries)
    if registry is not None:
        registry.current_plugin = None


def _is_own_plugin(name: str) -> bool:
    info = _state.infos.get(name)
    return info is not None and info.own


def reset() -> None:
    """Forget every plugin and every table their hooks filled: the next use discovers the
    plugins again, under the policy then in force (a test that changed the policy, the
    environment or ``sys.path``).

    Examples
    --------
    >>> from torcia import plugins
    >>> plugins.reset()
    >>> any(i.name == "autograd" for i in plugins.plugin_infos())
    True
    """
    with _state.lock:
        _state.pm = None
        _state.policy = None
        _state.lock_file = None
        _state.core_base = None
        _state.integrity = None
        _state.infos.clear()
        for registry in _state.registries.values():
            registry.reset()


# ---------------------------------------------------------------------------------------
# Registries
# ---------------------------------------------------------------------------------------


class Registry:
    """A name -> object table filled once by one registration hook.

    ``kind`` is what the entries are ("loss", "optimizer"...), used in error messages.
    Packages create their registry at import time::

        losses = Registry("loss", "torcia_register_losses")
        losses.get("cross_entropy")
    """

    def __init__(self, kind: str, hook_name: str):
        self.kind = kind
        self.hook_name = hook_name
        self.current_plugin: str | None = None
        self._entries: dict[str, object] | None = None
        self._providers: dict[str, str] = {}
        _state.registries[f"{hook_name}:{kind}"] = self

    def reset(self) -> None:
        self._entries = None
        self._providers = {}

    def add(self, name: str, obj) -> None:
        """Add ``obj`` under ``name``. A name already registered by another plugin stays
        with it (torcia's own parts register first, so their names win); the clashing
        name alone is refused, with a warning naming both distributions."""
        if self._entries is None:
            raise RuntimeError("add() is only valid inside the registration hook")
        plugin = self.current_plugin or "?"
        if name in self._entries and self._providers.get(name) != plugin:
            holder = self._providers.get(name)
            held, new = _state.infos.get(holder or ""), _state.infos.get(plugin)
            warnings.warn(
                f"{self.kind} {name!r} of plugin {plugin!r} "
                f"({new.distribution if new else 'unknown'}) was refused: plugin {holder!r} "
                f"({held.distribution if held else 'unknown'}) registered it first",
                PluginWarning, stacklevel=2)
            if new is not None:
                new.notes.append(f"{self.kind} {name!r} refused: already registered by "
                                 f"{holder} ({held.distribution if held else 'unknown'})")
            return
        self._entries[name] = obj
        self._providers[name] = plugin
        info = _state.infos.get(plugin)
        if info is not None:
            # an entry that cannot run here (no GPU, no MPI library) says so in the listing
            why = getattr(obj, "unavailable_reason", None)
            info.provides.append(f"{self.kind}:{name}" + (f" (unavailable: {why})" if why
                                                           else ""))

    def rollback(self, plugin: str) -> None:
        """Forget what ``plugin`` registered (it failed)."""
        if self._entries is None:
            return
        for name, provider in list(self._providers.items()):
            if provider == plugin:
                del self._providers[name]
                self._entries.pop(name, None)

    def build(self) -> dict:
        if self._entries is None:
            with _state.lock:
                if self._entries is None:
                    with building(f"the {self.kind} table"):
                        self._entries = {}
                        try:
                            call_each(self.hook_name, registry=self)
                        except BaseException:
                            self._entries = None
                            raise
        return self._entries

    def names(self) -> list[str]:
        return sorted(self.build())

    def provider(self, name: str) -> str | None:
        self.build()
        return self._providers.get(name)

    def get(self, name):
        """The entry named ``name``; or, given a class, the entry that is that class or an
        instance of it (``optimizers.get(Adam)``)."""
        entries = self.build()
        if isinstance(name, type):
            for obj in entries.values():
                if obj is name or isinstance(obj, name):
                    return obj
            raise KeyError(f"no {self.kind} of class {name.__qualname__}; known: "
                           f"{', '.join(sorted(entries)) or 'none'}")
        try:
            return entries[name]
        except KeyError:
            raise KeyError(missing_message(self.kind, name, sorted(entries))) from None

    def name_of(self, obj) -> str:
        """The name ``obj`` (an entry, or the class of one) is registered under."""
        for name, entry in self.build().items():
            if entry is obj or (isinstance(obj, type) and isinstance(entry, obj)):
                return name
        raise KeyError(f"{obj!r} is not a registered {self.kind}")

    def __contains__(self, name) -> bool:
        return name in self.build()


_names = Registry("name", "torcia_register_names")


def lent(name: str, dist: str):
    """The object lent under the dotted ``name`` through ``torcia_register_names`` by the
    part ``dist`` (its distribution name), or a ModuleNotFoundError that says why it is
    not there: the distribution is not installed, or its plugin is blocked.

    Examples
    --------
    >>> from torcia import plugins
    >>> plugins.lent("torcia.nn.functional", "torcia-nn").relu.__name__
    'relu'
    """
    names = _names.build()
    found = names.get(name, _MISSING)
    if found is not _MISSING:
        return found
    for info in _state.infos.values():
        if info.distribution == dist and info.status in ("blocked", "refused", "failed"):
            raise ModuleNotFoundError(
                f"{name} is provided by plugin {info.name!r} ({dist}), which is "
                f"{info.status}: {info.reason}")
    raise ModuleNotFoundError(f"{name} is part of the {dist} distribution, which is not "
                              f"installed; {install_hint(dist)}")


def missing_message(kind: str, name: str, known) -> str:
    """An error message for a missing registry entry that mentions the plugins that may
    provide it: blocked, refused, or failed (with their error)."""
    msg = f"no {kind} named {name!r}; known: {', '.join(map(str, known)) or 'none'}"
    manager()
    absent = [i for i in _state.infos.values() if i.status in ("blocked", "refused", "failed")]
    for info in absent:
        if name.lower() in (info.name.lower(), info.distribution.lower()) or (
            name.lower() in info.distribution.lower()
        ):
            which = {"blocked": info.reason, "refused": f"refused ({info.reason})",
                     "failed": f"failed to load: {info.reason}"}[info.status]
            return (
                f"{kind} {name!r} is provided by plugin {info.name!r} ({info.distribution}), "
                f"which {'is ' if info.status != 'failed' else ''}{which}"
            )
    blocked = [i for i in absent if i.status != "failed"]
    if blocked:
        names = ", ".join(f"{i.name} ({i.reason})" for i in blocked)
        msg += f". Blocked plugins that may provide it: {names}"
    return msg
