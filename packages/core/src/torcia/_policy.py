"""The plugin policy and the lock guard: the first thing ``import torcia`` runs.

The policy has one root, the **system config**: ``<sys.prefix>/etc/torcia/config.toml``
(the installation's own, written by whoever installs the environment) and
``/etc/torcia/config.toml`` (the machine's). Both are read when present; the environment
cannot replace or widen them. Another config named by ``TORCIA_SYSTEM_CONFIG``, the user
config and the environment variables only narrow what the root allows; with
``locked = true`` in the root they may not name a config or a lock at all.

When the policy names a plugin lock, :class:`LockGuard` goes first on ``sys.meta_path``
before any other module of torcia is imported: each module of a locked distribution (and
``torcia`` itself) is checked against the lock before it runs. Its file must be the locked
file (a copy found earlier on ``sys.path`` is refused), its source must have the locked
sha256, and the code that runs is compiled from that checked source, or read from byte code
whose sha256 the lock pinned: a ``__pycache__`` file written later is never executed.

This module imports nothing beyond the standard library, and without a config file and a
lock it costs a few ``stat`` calls: it runs at every ``import torcia``. It and
``torcia/__init__.py`` are the two modules that run before the guard exists;
``torcia plugins --check`` checks their byte code against their source.
"""

from __future__ import annotations

import os
import re
import sys
from importlib.machinery import EXTENSION_SUFFIXES, SourceFileLoader
from pathlib import Path

#: Distributions that make up torcia itself; their plugins pass any allowlist.
PARTS = frozenset(
    "torcia-" + p
    for p in ("core", "autograd", "nn", "optim", "data", "distributed", "vision", "text",
              "distributions", "compiler", "jit")
)
#: Every distribution of the torcia project (the parts and the project's own plugins):
#: recognised as torcia's own when installed next to torcia-core (see
#: :func:`torcia.plugins.is_own`).
OWN = PARTS | {"torcia-cpu", "torcia-cuda", "torcia-mpi", "torcia-onnx"}
#: The system config files, the policy's root (see the module's docstring).
SYSTEM_CONFIGS = (Path(sys.prefix) / "etc" / "torcia" / "config.toml",
                  Path("/etc/torcia/config.toml"))
#: The version of the lock file's format: 2 added each distribution's location, the byte
#: code pinned for its modules and the start-up files (``.pth``, ``sitecustomize``).
LOCK_FORMAT = 2


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


class PluginLockError(PluginError, ImportError):
    """A module or a plugin is not what the plugin lock in force pins: modified, found
    somewhere else than its locked file, or not locked at all. Raised before its code
    runs; an :class:`ImportError` too, so that ``import`` reports it as its own failure.

    Examples
    --------
    >>> from torcia import plugins
    >>> issubclass(plugins.PluginLockError, ImportError)
    True
    """


def normalize(name: str) -> str:
    """A distribution name as PEP 503 compares them: ``Torcia_Evil`` -> ``torcia-evil``.

    Examples
    --------
    >>> import torcia
    >>> torcia.plugins.normalize("Torcia_Focal.Loss")
    'torcia-focal-loss'
    """
    return re.sub(r"[-_.]+", "-", name).lower()


def sha256(data: bytes) -> str:
    """``"sha256=..."`` in the urlsafe base64 form of a wheel's RECORD."""
    import base64
    import hashlib

    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(
        b"=").decode()


# ---------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------

_KEYS = {"allow": list, "block": list, "strict": bool, "lock": str, "locked": bool}


def _split(value: str | None) -> set[str]:
    return {v.strip() for v in (value or "").split(",") if v.strip()}


def _ident(entry: str) -> str:
    """An allow/block entry in normal form: ``Dist_Name:ep`` -> ``dist-name:ep``."""
    dist, sep, name = entry.strip().partition(":")
    return normalize(dist) + (sep + name.strip() if sep else "")


def _line_of(text: str, pattern: str) -> int:
    for number, line in enumerate(text.splitlines(), 1):
        if re.match(pattern, line):
            return number
    return 0


def _read_config(path: Path, required: bool, system: bool) -> tuple[dict, dict[str, int]]:
    """The ``[plugins]`` table of a config file, validated, and the line of each key;
    ``({}, {})`` when an implicit file is absent."""
    if not path.is_file():
        if required:
            raise PluginConfigError(f"torcia config file {path} does not exist")
        return {}, {}
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
    lines = {}
    for key, value in table.items():
        line = lines[key] = _line_of(text, rf"\s*{re.escape(key)}\s*=")
        if key not in _KEYS or (key == "locked" and not system):
            import difflib

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
    return table, lines


def _user_config_path() -> tuple[Path, bool]:
    """The user config and whether it was named explicitly (then it must exist)."""
    env = os.environ.get("TORCIA_CONFIG")
    if env:
        return Path(env), True
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "torcia" / "config.toml", False


def _same_file(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


class Policy:
    """The plugin policy in force: allowlists, blocklist, strict mode and lock file, each
    entry with where it came from (a file and line, or an environment variable).

    Examples
    --------
    >>> import torcia
    >>> from torcia import plugins
    >>> policy = plugins.Policy()  # read from the environment and the config files
    >>> sorted(vars(policy))
    ['allow', 'allowlists', 'block', 'lock', 'locked_by', 'roots', 'strict']
    """

    def __init__(self):
        self.allow: dict[str, str] = {}
        self.block: dict[str, str] = {}
        self.allowlists: list[tuple[str, set[str]]] = []  # (source, entries): each narrows
        self.strict: str | None = None
        self.lock: tuple[Path, str] | None = None
        self.locked_by: str | None = None
        #: the system config files that were read (the root)
        self.roots: list[Path] = []
        locked = []
        for path in dict.fromkeys(SYSTEM_CONFIGS):
            table, lines = _read_config(path, required=False, system=True)
            if path.is_file():
                self.roots.append(path)
            where = f"system config {path}"
            self._apply(table, lines, where, path, root=True)
            if table.get("locked"):
                locked.append(f"{where}:{lines['locked']}")
        self.locked_by = locked[0] if locked else None
        named = os.environ.get("TORCIA_SYSTEM_CONFIG")
        if named and not any(_same_file(named, root) for root in self.roots):
            # another config, read as the root is: it narrows, never replaces
            self._refuse_when_locked("TORCIA_SYSTEM_CONFIG")
            table, lines = _read_config(Path(named), required=True, system=True)
            where = f"config file {named}"
            self._apply(table, lines, where, Path(named), root=True)
            if table.get("locked"):
                self.locked_by = f"{where}:{lines['locked']}"
        user_path, required = _user_config_path()
        if required:
            self._refuse_when_locked("TORCIA_CONFIG")
        table, lines = _read_config(user_path, required, system=False)
        self._apply(table, lines, f"config file {user_path}", user_path)
        env_allow = _split(os.environ.get("TORCIA_PLUGINS"))
        if env_allow:
            self._allow(env_allow, "TORCIA_PLUGINS")
        for name in _split(os.environ.get("TORCIA_DISABLE_PLUGINS")):
            self._block(name, "TORCIA_DISABLE_PLUGINS")
        if os.environ.get("TORCIA_STRICT_PLUGINS", "") not in ("", "0"):
            self.strict = self.strict or "TORCIA_STRICT_PLUGINS"
        env_lock = os.environ.get("TORCIA_PLUGIN_LOCK")
        if env_lock:
            self._set_lock(env_lock, "TORCIA_PLUGIN_LOCK", Path.cwd(), root=False)

    def _refuse_when_locked(self, variable: str) -> None:
        if self.locked_by:
            raise PluginConfigError(f"{variable} is set, but the plugin policy is locked by "
                                    f"the {self.locked_by}")

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

    def _set_lock(self, value, source, base: Path, root: bool):
        path = Path(value)
        path = path if path.is_absolute() else base / path
        if self.locked_by and not root and (self.lock is None or path != self.lock[0]):
            raise PluginConfigError(f"{source} names the plugin lock {value}, but the "
                                    f"plugin policy is locked by the {self.locked_by}")
        if self.lock is not None and not _same_file(path, self.lock[0]):
            raise PluginConfigError(f"{source} names the plugin lock {path}, but "
                                    f"{self.lock[1]} names {self.lock[0]}: the lock in force "
                                    "cannot be replaced")
        if self.lock is None:
            self.lock = (path, source)

    def _apply(self, table, lines, where, path, root=False):
        def source(key):
            return f"{where}:{lines[key]}"

        if "allow" in table:
            self._allow(table["allow"], source("allow"))
        for name in table.get("block", []):
            self._block(name, source("block"))
        if table.get("strict"):
            self.strict = self.strict or source("strict")
        if "lock" in table:
            self._set_lock(table["lock"], source("lock"), path.parent, root=root)

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


# ---------------------------------------------------------------------------------------
# The lock file
# ---------------------------------------------------------------------------------------


def expand(path: str) -> Path:
    """A path of the lock file: ``{prefix}`` stands for ``sys.prefix``, so that a lock
    follows its environment when that is moved."""
    return Path(path.replace("{prefix}", sys.prefix))


def contract(path: Path) -> str:
    """The inverse of :func:`expand`."""
    text = str(path)
    prefix = os.path.realpath(sys.prefix)
    if text == prefix or text.startswith(prefix + os.sep):
        return "{prefix}" + text[len(prefix):]
    return text


def pyc_path(source: str) -> str:
    """Where Python keeps the byte code of ``source`` (beside it, whatever
    ``sys.pycache_prefix`` says: the lock pins that file)."""
    head, tail = os.path.split(source)
    opt = f".opt-{sys.flags.optimize}" if sys.flags.optimize else ""
    return os.path.join(head, "__pycache__",
                        f"{tail.rpartition('.')[0]}.{sys.implementation.cache_tag}{opt}.pyc")


def module_name(relative: str) -> str | None:
    """The module a file of a distribution holds, or None for a file that is not a module.

    Examples
    --------
    >>> from torcia import plugins
    >>> plugins.module_name("torcia/nn/__init__.py"), plugins.module_name("x-1.0.dist-info/RECORD")
    ('torcia.nn', None)
    """
    parts = relative.split("/")
    *packages, filename = parts
    if filename.endswith(".py"):
        stem = filename[:-3]
    else:
        suffix = next((s for s in EXTENSION_SUFFIXES if filename.endswith(s)), None)
        if suffix is None:
            return None
        stem = filename[:-len(suffix)]
    if not all(p.isidentifier() for p in packages) or not stem.isidentifier():
        return None
    return ".".join(packages + ([] if stem == "__init__" else [stem])) or None


class Lock:
    """A lock file, read: its distributions by normalised name and its start-up files, with
    an index from each locked file to its distribution and hash (see :class:`LockGuard`).

    Examples
    --------
    A lock pins files by path, and says which module each file holds:

    >>> from torcia import plugins
    >>> plugins.module_name("torcia/nn/functional.py")
    'torcia.nn.functional'
    """

    def __init__(self, path: Path):
        import json

        self.path = Path(path)
        try:
            doc = json.loads(self.path.read_text())
        except (OSError, ValueError) as exc:
            raise PluginConfigError(f"plugin lock {path} cannot be read: {exc}") from exc
        if not isinstance(doc, dict) or doc.get("format") != LOCK_FORMAT:
            raise PluginConfigError(
                f"plugin lock {path}: not a torcia lock file of format {LOCK_FORMAT}"
                + (" (written by an earlier torcia: write it again with 'torcia plugins "
                   "lock')" if isinstance(doc, dict) and "format" in doc else ""))
        self.dists: dict[str, dict] = {normalize(d["distribution"]): d
                                       for d in doc["distributions"]}
        self.startup: dict[str, str] = {str(expand(p)): digest
                                        for p, digest in doc.get("startup", {}).items()}
        #: realpath of each locked file -> (distribution, key, sha256)
        self.files: dict[str, tuple[str, str, str]] = {}
        #: module name -> realpath of its locked file
        self.modules: dict[str, str] = {}
        #: realpath of a locked source file -> the sha256 of its pinned byte code
        self.bytecode: dict[str, str] = {}
        for name, entry in self.dists.items():
            base = os.path.realpath(expand(entry["location"]))
            source = os.path.realpath(expand(entry["source"])) if entry.get("source") else None
            pins = entry.get("bytecode", {})
            for key, digest in entry["files"].items():
                relative, root = (key[len("{source}/"):], source) \
                    if key.startswith("{source}/") else (key, base)
                if root is None:
                    continue
                path = os.path.join(root, relative)
                self.files[path] = (name, key, digest)
                module = module_name(relative)
                if module is not None:
                    self.modules[module] = path
                if key in pins:
                    self.bytecode[path] = pins[key]
        self.tops = {m.partition(".")[0] for m in self.modules}

    def check_module(self, name: str, origin: str) -> bytes:
        """The bytes of module ``name``'s file at ``origin`` when they are the locked ones;
        else :class:`PluginLockError` saying how they differ."""
        real = os.path.realpath(origin)
        expected = self.modules.get(name)
        if expected is not None and expected != real:
            raise PluginLockError(
                f"{name} is imported from {origin}, not from its locked file {expected} "
                f"(plugin lock {self.path}): a module found earlier on sys.path shadows it")
        found = self.files.get(real)
        if found is None:
            raise PluginLockError(f"{name} ({origin}) is not in the plugin lock {self.path}: "
                                  "no locked distribution installed it")
        dist, key, digest = found
        try:
            with open(real, "rb") as f:
                data = f.read()
        except OSError as exc:
            raise PluginLockError(f"plugin lock {self.path}: {dist}: {key} cannot be read: "
                                  f"{exc}") from None
        if sha256(data) != digest:
            raise PluginLockError(f"plugin lock {self.path}: {dist}: {key} was modified after "
                                  "locking")
        return data


# ---------------------------------------------------------------------------------------
# The guard
# ---------------------------------------------------------------------------------------


class _CheckedLoader(SourceFileLoader):
    """Runs the source that :meth:`Lock.check_module` read and checked, or the byte code the
    lock pinned for it; never other byte code, and it writes none."""

    def __init__(self, fullname, path, data: bytes, pinned: str | None):
        super().__init__(fullname, path)
        self._data = data
        self._pinned = pinned

    def get_code(self, fullname):
        if self._pinned is not None:
            import marshal
            from importlib.util import MAGIC_NUMBER

            try:
                with open(pyc_path(self.path), "rb") as f:
                    blob = f.read()
            except OSError:
                blob = b""
            if blob[:4] == MAGIC_NUMBER and sha256(blob) == self._pinned:
                return marshal.loads(memoryview(blob)[16:])
        return self.source_to_code(self._data, self.path)

    def get_source(self, fullname):
        from importlib.util import decode_source

        return decode_source(self._data)


class LockGuard:
    """The meta-path finder of a locked deployment: every module of a locked distribution
    (``torcia`` and its parts included) is checked against the lock before it runs (see
    the module's docstring). The other modules are left to the finders after it.

    Examples
    --------
    >>> from torcia import plugins
    >>> plugins.guard() is None  # no lock in force here
    True
    """

    def __init__(self, lock: Lock):
        self.lock = lock

    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] not in self.lock.tops:
            return None
        spec = None
        for finder in list(sys.meta_path):
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        if spec is None or not spec.has_location or spec.origin is None:
            return spec  # not there, an alias or a namespace package: no code of its own
        data = self.lock.check_module(fullname, spec.origin)
        if spec.origin.endswith(".py"):
            spec.loader = _CheckedLoader(fullname, spec.origin, data,
                                         self.lock.bytecode.get(os.path.realpath(spec.origin)))
        return spec

    def check_imported(self) -> None:
        """Check the modules of locked distributions imported before the guard was."""
        for name, module in list(sys.modules.items()):
            origin = getattr(module, "__file__", None)
            if origin and name.partition(".")[0] in self.lock.tops:
                self.lock.check_module(name, origin)


_guard: list[LockGuard] = []


def guard() -> LockGuard | None:
    """The :class:`LockGuard` in force, or None.

    Examples
    --------
    >>> from torcia import plugins
    >>> plugins.guard() is None  # no plugin lock in force here
    True
    """
    return _guard[0] if _guard else None


def install_guard(lock_path: Path) -> LockGuard:
    """Put the guard of ``lock_path`` first on ``sys.meta_path`` (once) and check what was
    imported before it."""
    current = guard()
    if current is not None and _same_file(current.lock.path, lock_path):
        return current
    remove_guard()
    new = LockGuard(Lock(lock_path))
    sys.meta_path.insert(0, new)
    _guard.append(new)
    try:
        new.check_imported()
    except PluginLockError:
        remove_guard()
        raise
    return new


def remove_guard() -> None:
    while _guard:
        old = _guard.pop()
        if old in sys.meta_path:
            sys.meta_path.remove(old)


def at_import() -> None:
    """Read the policy as ``import torcia`` starts, and put the guard in place when it
    names a lock. A config that cannot be read stops the import where a system config
    exists (the deployment's root is broken: nothing should run unchecked); otherwise the
    error waits for plugin discovery, which reports it."""
    try:
        policy = Policy()
    except PluginConfigError:
        if any(p.is_file() for p in SYSTEM_CONFIGS):
            raise
        return
    if policy.lock is not None:
        install_guard(policy.lock[0])


for _cls in (PluginError, PluginConfigError, PluginLockError, Policy, Lock, LockGuard):
    _cls.__module__ = "torcia.plugins"
normalize.__module__ = "torcia.plugins"
