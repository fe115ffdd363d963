"""The plugin manager: discovery, identity, policy, pinning, and the registries hooks fill.

Plugins are found in the ``torcia`` entry-point group. They are loaded once, the first time
any registry is needed, and each registration hook is called once to fill a plain table
(``hooks register, tables dispatch``). Every failure of a plugin is contained: a plugin that
fails to import, fails pluggy's validation (now or when a part adds its hook
specifications later), implements a hook no part defines, raises in a hook, or calls back
into torcia from a registration hook is reported by name with a :class:`PluginWarning`,
skipped, and what it had registered is rolled back; the others keep working.

Identity: a plugin is its distribution's normalised name (PEP 503: ``Torcia_Evil`` is
``torcia-evil``) plus its entry-point name, ``distribution:entry-point``. torcia's own parts
are the distributions of :data:`OWN` installed in the same place as torcia-core (the same
``site-packages``, editable or not): metadata alone (a ``Name: torcia-nn`` line) does not
make a distribution one of torcia's parts; a lock file pins them by content as well.

Policy, from (in order) the system config (``$TORCIA_SYSTEM_CONFIG`` or
``/etc/torcia/config.toml``), the user config (``$TORCIA_CONFIG`` or
``~/.config/torcia/config.toml``) and the environment (``TORCIA_PLUGINS`` allow,
``TORCIA_DISABLE_PLUGINS`` block, ``TORCIA_STRICT_PLUGINS=1``, ``TORCIA_PLUGIN_LOCK``)::

      [plugins]
      allow = ["torcia-cpu", "lion-dist:lion"]   # distributions, or distribution:entry-point
      block = ["evil-dist"]                      # also bare entry-point names
      strict = true          # a failed or refused plugin is an error, not a warning
      lock = "/etc/torcia/plugins.lock"          # see ``torcia plugins lock``
      locked = true          # system config only: the others may narrow, never widen

Each allowlist narrows (the allowed set is the intersection of every allowlist given);
blocklists add up and win; ``strict`` once on stays on. With ``locked = true`` in the system
config, the user config and the environment cannot name another lock file or config. A
config mistake (unknown section or key, a wrong type, ``TORCIA_CONFIG`` naming a missing
file) is an error naming the file and line, never a silently ignored setting.

Pinning: ``torcia plugins lock`` writes the lock file (each plugin's distribution, version,
entry points and the sha256 of its installed files, taken from the distribution's RECORD and
checked against the files). With a lock in force, a plugin whose distribution is not in it,
whose version differs, or whose files differ is refused before its code is imported.

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

import base64
import dataclasses
import difflib
import hashlib
import inspect
import json
import os
import re
import threading
import warnings
from pathlib import Path

import pluggy

from torcia import hookspecs

hookimpl = pluggy.HookimplMarker("torcia")

ENTRY_POINT_GROUP = "torcia"
#: The version of torcia-core's hook API (its hook specifications and the registries they
#: receive), apart from the distribution's version. 0.2 added ``torcia_register_ops``,
#: ``KernelRegistry.add(..., setup=)`` and :mod:`torcia.library`; 0.3 made the object
#: ``torcia_autograd_engine`` returns a :class:`torcia.library.AutogradMode`.
HOOK_API_VERSION = "0.3"
#: Distributions that make up torcia itself; their plugins pass any allowlist.
PARTS = frozenset(
    "torcia-" + p
    for p in ("core", "autograd", "nn", "optim", "data", "distributed", "vision", "text",
              "distributions", "compiler")
)
#: Every distribution of the torcia project (the parts and the project's own plugins):
#: recognised as torcia's own when installed next to torcia-core.
OWN = PARTS | {"torcia-cpu", "torcia-cuda", "torcia-mpi", "torcia-onnx"}
SYSTEM_CONFIG = Path("/etc/torcia/config.toml")
LOCK_FORMAT = 1


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


class PluginError(RuntimeError):
    """In strict mode: a plugin failed or was refused.

    Examples
    --------
    >>> from torcia import plugins
    >>> issubclass(plugins.PluginError, RuntimeError)
    True
    """


class PluginConfigError(RuntimeError):
    """The plugin configuration is wrong: it names the file and line.

    Examples
    --------
    >>> from torcia import plugins
    >>> issubclass(plugins.PluginConfigError, RuntimeError)
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

    @property
    def ident(self) -> str:
        return f"{self.distribution}:{self.name}"


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


def normalize(name: str) -> str:
    """A distribution name as PEP 503 compares them: ``Torcia_Evil`` -> ``torcia-evil``.

    Examples
    --------
    >>> import torcia
    >>> torcia.plugins.normalize("Torcia_Focal.Loss")
    'torcia-focal-loss'
    """
    return re.sub(r"[-_.]+", "-", name).lower()


# ---------------------------------------------------------------------------------------
# Configuration and policy
# ---------------------------------------------------------------------------------------

_KEYS = {"allow": list, "block": list, "strict": bool, "lock": str, "locked": bool}


def _split(value: str | None) -> set[str]:
    return {v.strip() for v in (value or "").split(",") if v.strip()}


def _user_config_path() -> tuple[Path, bool]:
    """The user config and whether it was named explicitly (then it must exist)."""
    env = os.environ.get("TORCIA_CONFIG")
    if env:
        return Path(env), True
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "torcia" / "config.toml", False


def _system_config_path() -> tuple[Path, bool]:
    env = os.environ.get("TORCIA_SYSTEM_CONFIG")
    return (Path(env), True) if env else (SYSTEM_CONFIG, False)


def _line_of(text: str, pattern: str) -> int:
    for number, line in enumerate(text.splitlines(), 1):
        if re.match(pattern, line):
            return number
    return 0


def _read_config(path: Path, required: bool, system: bool) -> dict:
    """The ``[plugins]`` table of a config file, validated; {} when an implicit file is
    absent."""
    if not path.is_file():
        if required:
            raise PluginConfigError(f"torcia config file {path} does not exist")
        return {}
    import tomllib

    try:
        text = path.read_text()
        data = tomllib.loads(text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PluginConfigError(f"torcia config file {path} cannot be read: {exc}") from exc
    for section in data:
        if section != "plugins":
            line = _line_of(text, rf"\s*\[+\s*{re.escape(section)}\b")
            raise PluginConfigError(
                f"{path}:{line}: unknown section [{section}] (torcia reads [plugins] only)")
    table = data.get("plugins", {})
    if not isinstance(table, dict):
        line = _line_of(text, r"\s*plugins\s*=")
        raise PluginConfigError(f"{path}:{line}: plugins must be a table ([plugins])")
    for key, value in table.items():
        line = _line_of(text, rf"\s*{re.escape(key)}\s*=")
        if key not in _KEYS or (key == "locked" and not system):
            known = ", ".join(k for k in _KEYS if system or k != "locked")
            hint = difflib.get_close_matches(key, list(_KEYS), n=1)
            raise PluginConfigError(
                f"{path}:{line}: unknown key {key!r} in [plugins]"
                + (f" (did you mean {hint[0]!r}?)" if hint else "") + f"; known: {known}")
        kind = _KEYS[key]
        if not isinstance(value, kind) or (
                kind is list and not all(isinstance(v, str) for v in value)):
            want = "a list of strings" if kind is list else kind.__name__
            raise PluginConfigError(f"{path}:{line}: {key} must be {want}, got "
                                    f"{type(value).__name__} {value!r}")
    return table


class Policy:
    """The plugin policy in force: allowlists, blocklist, strict mode and lock file, each
    entry with where it came from.

    Examples
    --------
    >>> import torcia
    >>> from torcia import plugins
    >>> policy = plugins.Policy()
    >>> policy.strict, policy.block
    (None, {})
    """

    def __init__(self):
        self.allow: dict[str, str] = {}
        self.block: dict[str, str] = {}
        self.allowlists: list[tuple[str, set[str]]] = []  # (source, entries): each narrows
        self.strict: str | None = None
        self.lock: tuple[Path, str] | None = None
        self.locked_by: str | None = None
        system_path, required = _system_config_path()
        system = _read_config(system_path, required, system=True)
        if system.get("locked"):
            self.locked_by = f"system config {system_path}"
        self._apply(system, f"system config {system_path}", system_path)
        user_path, required = _user_config_path()
        if self.locked_by and os.environ.get("TORCIA_CONFIG"):
            raise PluginConfigError(f"TORCIA_CONFIG is set, but the plugin policy is locked "
                                    f"by the {self.locked_by}")
        self._apply(_read_config(user_path, required, system=False), f"config file {user_path}",
                    user_path)
        env_allow = _split(os.environ.get("TORCIA_PLUGINS"))
        if env_allow:
            self._allow(env_allow, "TORCIA_PLUGINS")
        for name in _split(os.environ.get("TORCIA_DISABLE_PLUGINS")):
            self._block(name, "TORCIA_DISABLE_PLUGINS")
        if os.environ.get("TORCIA_STRICT_PLUGINS", "") not in ("", "0"):
            self.strict = self.strict or "TORCIA_STRICT_PLUGINS"
        env_lock = os.environ.get("TORCIA_PLUGIN_LOCK")
        if env_lock:
            self._set_lock(env_lock, "TORCIA_PLUGIN_LOCK", Path.cwd())

    def _allow(self, names, source):
        entries = {_ident(n) for n in names}
        self.allowlists.append((source, entries))
        for name in entries:
            self.allow.setdefault(name, source)

    def _block(self, name, source):
        # a bare name blocks the distribution of that (normalised) name and the entry
        # points of that exact name
        self.block.setdefault(_ident(name), source)
        if ":" not in name:
            self.block.setdefault(name.strip(), source)

    def _set_lock(self, value, source, base):
        if self.locked_by and source != self.locked_by:
            if self.lock is None or Path(value) != self.lock[0]:
                raise PluginConfigError(f"{source} names the plugin lock {value}, but the "
                                        f"plugin policy is locked by the {self.locked_by}")
        path = Path(value)
        self.lock = (path if path.is_absolute() else base.parent / path, source)

    def _apply(self, table, source, path):
        if "allow" in table:
            self._allow(table["allow"], source)
        for name in table.get("block", []):
            self._block(name, source)
        if table.get("strict"):
            self.strict = self.strict or source
        if "lock" in table:
            self._set_lock(table["lock"], source, path)

    def verdict(self, name: str, dist: str, own: bool = False) -> str | None:
        """Return why the plugin is blocked, or None when it may load."""
        dist = normalize(dist)
        for key in (f"{dist}:{name}", dist, name):
            if key in self.block:
                return f"blocked by {self.block[key]}"
        if own and dist in PARTS:
            return None
        for source, entries in self.allowlists:
            if dist not in entries and f"{dist}:{name}" not in entries:
                return f"not in the allowlist ({source})"
        return None


def _ident(entry: str) -> str:
    """An allow/block entry in normal form: ``Dist_Name:ep`` -> ``dist-name:ep``."""
    dist, sep, name = entry.strip().partition(":")
    return normalize(dist) + (sep + name.strip() if sep else "")


# ---------------------------------------------------------------------------------------
# Identity and pinning
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


def is_own(dist) -> bool:
    """Whether ``dist`` is one of torcia's own distributions: one of :data:`OWN` by name,
    installed in the same place as torcia-core."""
    if dist is None or normalize(dist.metadata["Name"] or "") not in OWN:
        return False
    if _state.core_base is None:
        core = _core_dist()
        _state.core_base = (_base(core) if core is not None else None) or False
    return bool(_state.core_base) and _state.core_base == _base(dist)


def _b64_sha256(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(
        b"=").decode()


def _editable_root(dist) -> Path | None:
    """The source directory of an editable install (PEP 610's direct_url.json)."""
    text = dist.read_text("direct_url.json")
    if not text:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not doc.get("dir_info", {}).get("editable"):
        return None
    url = doc.get("url", "")
    return Path(url[len("file://"):]) if url.startswith("file://") else None


def installed_files(dist) -> dict[str, str]:
    """``relative path -> "sha256=..."`` of a distribution's installed files: those its RECORD
    hashes (each checked against the file), and for an editable install every source file
    under its source directory's ``src``. Console scripts (outside ``site-packages``) are
    left out.

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
        digest = _b64_sha256(Path(dist.locate_file(entry)).read_bytes())
        if digest != f"sha256={entry.hash.value}":
            raise PluginError(f"{dist.metadata['Name']}: {entry} differs from its RECORD hash")
        files[str(entry)] = digest
    root = _editable_root(dist)
    if root is not None:
        src = root / "src" if (root / "src").is_dir() else root
        for path in sorted(src.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and not path.name.endswith(
                    ".pyc") and ".egg-info" not in str(path):
                files[f"{{source}}/{path.relative_to(src)}"] = _b64_sha256(path.read_bytes())
    return files


def _file_path(dist, key: str) -> Path:
    if key.startswith("{source}/"):
        root = _editable_root(dist)
        src = root / "src" if (root / "src").is_dir() else root
        return src / key[len("{source}/"):]
    return Path(dist.locate_file(key))


def _lock_check(entry: dict | None, dist, version: str) -> str | None:
    """Why a distribution does not match its lock entry, or None."""
    if entry is None:
        return "not in the lock file (unpinned)"
    if entry["version"] != version:
        return f"version {version} differs from the locked {entry['version']}"
    for key, digest in entry["files"].items():
        path = _file_path(dist, key)
        try:
            data = path.read_bytes()
        except OSError:
            return f"{key} is missing"
        if _b64_sha256(data) != digest:
            return f"{key} was modified after locking"
    record = {str(f) for f in dist.files or ()
              if f.hash and f.hash.mode == "sha256" and f.parts[0] != ".."}
    extra = sorted(record - set(entry["files"]))
    if extra:
        return f"{extra[0]} was added after locking"
    return None


def read_lock(path: Path) -> dict:
    """The lock file as ``normalised distribution -> entry``."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise PluginConfigError(f"plugin lock {path} cannot be read: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != LOCK_FORMAT:
        raise PluginConfigError(f"plugin lock {path}: not a torcia lock file of format "
                                f"{LOCK_FORMAT}")
    return {normalize(d["distribution"]): d for d in doc["distributions"]}


def write_lock(path: Path) -> dict:
    """Write a lock of every plugin that loads under the current policy (torcia's own parts
    included) and return it; refuses when a file differs from its RECORD."""
    import importlib.metadata

    policy = Policy()
    dists = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.dist is None:
            continue
        name = normalize(ep.dist.metadata["Name"])
        if policy.verdict(ep.name, name, is_own(ep.dist)):
            continue
        entry = dists.setdefault(name, {
            "distribution": name, "version": ep.dist.version, "entry_points": {},
            "files": installed_files(ep.dist)})
        entry["entry_points"][ep.name] = ep.value
    core = _core_dist()
    if core is not None:
        # the host itself: its files are checked too (they are imported before any lock
        # is read, so a difference is an error rather than a refusal)
        dists.setdefault("torcia-core", {
            "distribution": "torcia-core", "version": core.version, "entry_points": {},
            "files": installed_files(core)})
    doc = {"format": LOCK_FORMAT, "distributions": sorted(dists.values(),
                                                          key=lambda d: d["distribution"])}
    Path(path).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
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
        self.core_base = None  # where torcia-core is installed (False: nowhere known)
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
    registered, and report it."""
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
    if policy is not None and policy.strict:
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


def _discover(pm, policy) -> None:
    import importlib.metadata

    lock = read_lock(policy.lock[0]) if policy.lock is not None else None
    core = _core_dist()
    if lock is not None and core is not None and "torcia-core" in lock:
        reason = _lock_check(lock["torcia-core"], core, core.version)
        if reason:
            raise PluginError(f"plugin lock {policy.lock[0]}: torcia-core: {reason}")
    seen: dict[str, PluginInfo] = {}
    # torcia's own first: a third-party plugin taking one of their names (found first on
    # an earlier sys.path entry) is the one refused
    found = [(ep, is_own(ep.dist)) for ep in importlib.metadata.entry_points(
        group=ENTRY_POINT_GROUP)]
    found.sort(key=lambda pair: not pair[1])
    _warn_entry_point_allowlist(policy, found)
    for ep, own in found:
        dist = normalize(ep.dist.metadata["Name"]) if ep.dist else "unknown"
        version = ep.dist.version if ep.dist else "unknown"
        info = PluginInfo(ep.name, dist, version, "loaded", module=ep.value, own=own)
        if ep.name in _state.infos or ep.name in seen:
            first = _state.infos.get(ep.name) or seen[ep.name]
            info.name = f"{dist}:{ep.name}"
            _state.infos[info.name] = info
            _fail(info, f"plugin name {ep.name!r} is also used by {first.distribution}; "
                        "the first one found is kept", "refused")
            continue
        seen[ep.name] = info
        reason = policy.verdict(ep.name, dist, info.own)
        if reason:
            info.status, info.reason = "blocked", reason
            _state.infos[ep.name] = info
            continue
        if lock is not None:
            reason = _lock_check(lock.get(dist), ep.dist, version) if ep.dist else "no metadata"
            if reason is None and lock[dist]["entry_points"].get(ep.name) != ep.value:
                reason = f"entry point {ep.name} = {ep.value} is not the locked one"
            if reason:
                _state.infos[ep.name] = info
                _fail(info, f"plugin lock {policy.lock[0]}: {reason}", "refused")
                continue
        try:
            plugin = ep.load()
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - sys.exit() at import too
            _state.infos[ep.name] = info
            _fail(info, f"{type(exc).__name__}: {exc}")
            continue
        info.file = getattr(plugin, "__file__", "") or _module_file(ep.module)
        if info.file:
            info.sha256 = hashlib.sha256(Path(info.file).read_bytes()).hexdigest()
        _register(pm, info, plugin)


def _warn_entry_point_allowlist(policy, found) -> None:
    """An allowlist entry that names an entry point rather than a distribution admits
    nothing (any distribution could choose that name): say which distribution to name."""
    dists = {normalize(ep.dist.metadata["Name"]) for ep, _ in found if ep.dist}
    for source, entries in policy.allowlists:
        for entry in sorted(entries - dists):
            owners = sorted({normalize(ep.dist.metadata["Name"]) for ep, _ in found
                             if ep.dist and ep.name == entry})
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
        policy = Policy()
        _state.policy = policy
        pm = pluggy.PluginManager("torcia")
        _state.local.building = pm
        try:
            for module in _state.spec_modules:
                pm.add_hookspecs(module)
            for name, plugin in _state.builtins:
                _register(pm, _builtin_info(name, plugin), plugin)
            specs_added = list(_state.spec_modules)
            _discover(pm, policy)
            # a part imported by loading its plugin (torcia.optim) added its specs meanwhile
            for module in _state.spec_modules:
                if module not in specs_added:
                    _add_specs(pm, module)
            _check_hook_names(pm)
        finally:
            _state.local.building = None
        _state.pm = pm
        return pm


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
    can say what each plugin provides; a plugin that raises is skipped and what it
    registered is rolled back.
    """
    pm = manager()
    hook = getattr(pm.hook, hook_name)
    registry = kwargs.get("registry")
    impls = list(reversed(hook.get_hookimpls()))
    own = [i for i in impls if _is_own_plugin(i.plugin_name)]
    impls = own + [i for i in impls if i not in own]
    for impl in impls:
        if pm.get_plugin(impl.plugin_name) is None:
            continue  # failed in an earlier hook of this loop
        if registry is not None:
            registry.current_plugin = impl.plugin_name
        previous = current_hook()
        _state.local.hook = (impl.plugin_name, hook_name)
        try:
            impl.function(**kwargs)
        except Exception as exc:  # noqa: BLE001
            _state.local.hook = previous
            info = _state.infos.get(impl.plugin_name)
            reason = f"raised in {hook_name}: {type(exc).__name__}: {exc}"
            if info is not None:
                _fail(info, reason)
            else:
                pm.unregister(name=impl.plugin_name)
                warnings.warn(f"torcia plugin {impl.plugin_name!r} {reason}", PluginWarning,
                              stacklevel=2)
        finally:
            _state.local.hook = previous
    if registry is not None:
        registry.current_plugin = None


def _is_own_plugin(name: str) -> bool:
    info = _state.infos.get(name)
    return info is not None and info.own


def _reset() -> None:
    """Forget every plugin and registry (tests use it after changing the policy)."""
    with _state.lock:
        _state.pm = None
        _state.policy = None
        _state.core_base = None
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


def missing_message(kind: str, name: str, known) -> str:
    """An error message for a missing registry entry that mentions blocked plugins."""
    msg = f"no {kind} named {name!r}; known: {', '.join(map(str, known)) or 'none'}"
    blocked = blocked_plugins()
    for info in blocked:
        if name.lower() in (info.name.lower(), info.distribution.lower()) or (
            name.lower() in info.distribution.lower()
        ):
            which = info.reason if info.status == "blocked" else \
                f"refused ({info.reason})"
            return (
                f"{kind} {name!r} is provided by plugin {info.name!r} ({info.distribution}), "
                f"which is {which}"
            )
    if blocked:
        names = ", ".join(f"{i.name} ({i.reason})" for i in blocked)
        msg += f". Blocked plugins that may provide it: {names}"
    return msg
