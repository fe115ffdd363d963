"""The plugin manager: discovery, allow/block control, and the registries hooks fill.

Plugins are found in the ``torcia`` entry-point group. They are loaded once, the first time
any registry is needed, and each registration hook is called once to fill a plain table
(``hooks register, tables dispatch``). A plugin that fails to import, or whose hook raises,
is reported by name with a :class:`PluginWarning` and the others keep working.

Control for vetted deployments:

- ``TORCIA_PLUGINS``: comma-separated allowlist of plugin (entry-point) or distribution
  names. When set, third-party plugins not on it are blocked; torcia's own parts are always
  allowed unless blocked explicitly.
- ``TORCIA_DISABLE_PLUGINS``: comma-separated blocklist; always wins.
- a TOML config file, ``$TORCIA_CONFIG`` or ``~/.config/torcia/config.toml``::

      [plugins]
      allow = ["torcia-cpu"]
      block = ["lion"]

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
import os
import threading
import warnings
from pathlib import Path

import pluggy

from torcia import hookspecs

hookimpl = pluggy.HookimplMarker("torcia")

ENTRY_POINT_GROUP = "torcia"
#: Distributions that make up torcia itself; their plugins pass any allowlist.
PARTS = frozenset(
    "torcia-" + p
    for p in ("core", "autograd", "nn", "optim", "data", "distributed", "vision", "text")
)


class PluginWarning(UserWarning):
    """A plugin failed to load or to run one of its hooks; it was skipped."""


class PluginBlockedError(RuntimeError):
    """A feature provided by a blocked plugin was asked for."""


@dataclasses.dataclass
class PluginInfo:
    """What ``python -m torcia plugins`` reports about one plugin."""

    name: str
    distribution: str
    version: str
    status: str  # "loaded", "blocked" or "failed"
    reason: str = ""
    hooks: list[str] = dataclasses.field(default_factory=list)
    provides: list[str] = dataclasses.field(default_factory=list)


# ---------------------------------------------------------------------------------------
# Allow/block policy
# ---------------------------------------------------------------------------------------


def _split(value: str | None) -> set[str]:
    return {v.strip() for v in (value or "").split(",") if v.strip()}


def _config_path() -> Path:
    env = os.environ.get("TORCIA_CONFIG")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "torcia" / "config.toml"


class Policy:
    """The allowlist and blocklist in force, with where each entry came from."""

    def __init__(self):
        self.allow: dict[str, str] = {}
        self.block: dict[str, str] = {}
        path = _config_path()
        if path.is_file():
            import tomllib

            try:
                data = tomllib.loads(path.read_text())
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise RuntimeError(f"torcia config file {path} cannot be read: {exc}") from exc
            section = data.get("plugins", {})
            for name in section.get("allow", []):
                self.allow[name] = f"config file {path}"
            for name in section.get("block", []):
                self.block[name] = f"config file {path}"
        for name in _split(os.environ.get("TORCIA_PLUGINS")):
            self.allow[name] = "TORCIA_PLUGINS"
        for name in _split(os.environ.get("TORCIA_DISABLE_PLUGINS")):
            self.block[name] = "TORCIA_DISABLE_PLUGINS"

    def verdict(self, name: str, dist: str) -> str | None:
        """Return why the plugin is blocked, or None when it may load."""
        for key in (name, dist):
            if key in self.block:
                return f"blocked by {self.block[key]}"
        if self.allow and dist not in PARTS and name not in self.allow and dist not in self.allow:
            sources = ", ".join(sorted(set(self.allow.values())))
            return f"not in the allowlist ({sources})"
        return None


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
        self.registries: dict[str, Registry] = {}


_state = _State()


def add_hookspecs(module) -> None:
    """Add a package's hook specifications (call it when that package is imported).

    Example: torcia-nn calls ``torcia.plugins.add_hookspecs(torcia.nn.hookspecs)``.
    """
    with _state.lock:
        if module in _state.spec_modules:
            return
        _state.spec_modules.append(module)
        if _state.pm is not None:
            _state.pm.add_hookspecs(module)


def register_builtin(name: str, plugin) -> None:
    """Register a plugin that ships inside core itself (like pytest's default plugins)."""
    with _state.lock:
        _state.builtins.append((name, plugin))
        if _state.pm is not None:
            _register(_state.pm, name, plugin, "torcia-core", _core_version())


def _core_version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("torcia-core")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _register(pm, name, plugin, dist, version) -> None:
    info = PluginInfo(name, dist, version, "loaded")
    try:
        pm.register(plugin, name=name)
    except Exception as exc:  # noqa: BLE001 - any failure of a plugin must be contained
        info.status, info.reason = "failed", f"{type(exc).__name__}: {exc}"
        warnings.warn(
            f"torcia plugin {name!r} ({dist}) could not be registered: {info.reason}",
            PluginWarning,
            stacklevel=3,
        )
    else:
        info.hooks = sorted(h.name for h in pm.get_hookcallers(plugin) or [])
    _state.infos[name] = info


def manager() -> pluggy.PluginManager:
    """Return the plugin manager, discovering and loading plugins on the first call."""
    pm = _state.pm
    if pm is not None:
        return pm
    with _state.lock:
        if _state.pm is not None:
            return _state.pm
        # imported here, not at the top: ``import torcia`` discovers nothing and stays fast
        import importlib.metadata

        pm = pluggy.PluginManager("torcia")
        for module in _state.spec_modules:
            pm.add_hookspecs(module)
        for name, plugin in _state.builtins:
            _register(pm, name, plugin, "torcia-core", _core_version())
        specs_added = list(_state.spec_modules)
        policy = Policy()
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            dist = ep.dist.name if ep.dist else "unknown"
            version = ep.dist.version if ep.dist else "unknown"
            if ep.name in _state.infos:
                continue
            reason = policy.verdict(ep.name, dist)
            if reason:
                _state.infos[ep.name] = PluginInfo(ep.name, dist, version, "blocked", reason)
                continue
            try:
                plugin = ep.load()
            except Exception as exc:  # noqa: BLE001
                msg = f"{type(exc).__name__}: {exc}"
                _state.infos[ep.name] = PluginInfo(ep.name, dist, version, "failed", msg)
                warnings.warn(
                    f"torcia plugin {ep.name!r} ({dist} {version}) failed to load and was "
                    f"skipped: {msg}",
                    PluginWarning,
                    stacklevel=2,
                )
                continue
            _register(pm, ep.name, plugin, dist, version)
        # a part imported by loading its plugin (torcia.optim) added its specs meanwhile
        for module in _state.spec_modules:
            if module not in specs_added:
                pm.add_hookspecs(module)
        _state.pm = pm
        return pm


def plugin_infos() -> list[PluginInfo]:
    """Every plugin found, loaded or not, after building every known registry."""
    manager()
    for registry in list(_state.registries.values()):
        registry.build()
    return sorted(_state.infos.values(), key=lambda i: (i.distribution, i.name))


def blocked_plugins() -> list[PluginInfo]:
    manager()
    return [i for i in _state.infos.values() if i.status == "blocked"]


def call_each(hook_name: str, **kwargs) -> None:
    """Call every implementation of a registration hook, containing each plugin's failure.

    The registry's ``current_plugin`` names the plugin while its implementation runs, so
    that the listing can say what each plugin provides.
    """
    pm = manager()
    hook = getattr(pm.hook, hook_name)
    registry = kwargs.get("registry")
    for impl in reversed(hook.get_hookimpls()):
        if registry is not None:
            registry.current_plugin = impl.plugin_name
        try:
            impl.function(**kwargs)
        except Exception as exc:  # noqa: BLE001
            info = _state.infos.get(impl.plugin_name)
            if info is not None:
                info.status, info.reason = "failed", f"{hook_name}: {type(exc).__name__}: {exc}"
            warnings.warn(
                f"torcia plugin {impl.plugin_name!r} raised in {hook_name} and was skipped: "
                f"{type(exc).__name__}: {exc}",
                PluginWarning,
                stacklevel=2,
            )
    if registry is not None:
        registry.current_plugin = None


def _reset() -> None:
    """Forget every plugin and registry (tests use it after changing the policy)."""
    with _state.lock:
        _state.pm = None
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
        """Add ``obj`` under ``name`` (a later plugin may not silently replace an entry)."""
        assert self._entries is not None, "add() is only valid inside the registration hook"
        if name in self._entries and self._providers.get(name) != self.current_plugin:
            raise ValueError(
                f"{self.kind} {name!r} is already registered by plugin "
                f"{self._providers.get(name)!r}"
            )
        self._entries[name] = obj
        plugin = self.current_plugin or "?"
        self._providers[name] = plugin
        info = _state.infos.get(plugin)
        if info is not None:
            info.provides.append(f"{self.kind}:{name}")

    def build(self) -> dict:
        if self._entries is None:
            with _state.lock:
                if self._entries is None:
                    self._entries = {}
                    call_each(self.hook_name, registry=self)
        return self._entries

    def names(self) -> list[str]:
        return sorted(self.build())

    def provider(self, name: str) -> str | None:
        self.build()
        return self._providers.get(name)

    def get(self, name: str):
        entries = self.build()
        try:
            return entries[name]
        except KeyError:
            raise KeyError(missing_message(self.kind, name, sorted(entries))) from None

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
            return (
                f"{kind} {name!r} is provided by plugin {info.name!r} ({info.distribution}), "
                f"which is {info.reason}"
            )
    if blocked:
        names = ", ".join(f"{i.name} ({i.reason})" for i in blocked)
        msg += f". Blocked plugins that may provide it: {names}"
    return msg
