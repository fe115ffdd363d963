"""What registered plugins provide: the name tables registration hooks fill
(:class:`Registry`, the hook ``torcia_register_names``), and the calling of each hook over
the plugins into its table (:func:`call_each`), one plugin at a time, with a registration
hook that calls back into torcia caught (:func:`check_reentry`)."""

from __future__ import annotations

import threading
import warnings

from torcia.plugins import _manager
from torcia.plugins._identity import install_hint
from torcia.plugins._manager import PluginReentryError, PluginWarning, state

_MISSING = object()


def current_hook() -> tuple[str, str] | None:
    """``(plugin, hook)`` while a registration hook runs on this thread, else None."""
    return getattr(state.local, "hook", None)


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
    tables = getattr(state.local, "tables", None)
    if tables is None:
        tables = state.local.tables = set()
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
    pm = _manager.manager()
    hook = getattr(pm.hook, hook_name)
    registry = kwargs.get("registry")
    impls = list(reversed(hook.get_hookimpls()))
    own = [i for i in impls if _is_own_plugin(i.plugin_name)]
    impls = own + [i for i in impls if i not in own]
    checked = False
    for impl in impls:
        if pm.get_plugin(impl.plugin_name) is None:
            continue  # failed in an earlier hook of this loop
        info = state.infos.get(impl.plugin_name)
        third_party = impl not in own
        if third_party and not checked:
            _manager.integrity()  # what torcia's own hooks did is torcia's
            checked = True
        entries = dict(registry._entries or {}) if third_party and isinstance(
            registry, Registry) else None
        if registry is not None:
            registry.current_plugin = impl.plugin_name
        previous = current_hook()
        state.local.hook = (impl.plugin_name, hook_name)
        before = set(threading.enumerate())
        try:
            impl.function(**kwargs)
        except Exception as exc:  # noqa: BLE001
            state.local.hook = previous
            reason = f"raised in {hook_name}: {type(exc).__name__}: {exc}"
            if info is not None:
                _manager.fail(info, reason)
            else:
                pm.unregister(name=impl.plugin_name)
                warnings.warn(f"torcia plugin {impl.plugin_name!r} {reason}", PluginWarning,
                              stacklevel=2)
        finally:
            state.local.hook = previous
        if info is not None:
            info.threads += _manager.new_threads(before)
            if third_party and info.status == "loaded":
                _manager.check_integrity(info, registry, entries)
    if registry is not None:
        registry.current_plugin = None


def _is_own_plugin(name: str) -> bool:
    info = state.infos.get(name)
    return info is not None and info.own


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
        state.registries[f"{hook_name}:{kind}"] = self

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
            held, new = state.infos.get(holder or ""), state.infos.get(plugin)
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
        info = state.infos.get(plugin)
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
            with state.lock:
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
    for info in state.infos.values():
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
    _manager.manager()
    absent = [i for i in state.infos.values() if i.status in ("blocked", "refused", "failed")]
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
