"""The plugin manager: discovery, loading, and containing each plugin's failure.

:func:`manager` builds pluggy's :class:`pluggy.PluginManager` once, under the policy in force
(:class:`~torcia.plugins.Policy`): torcia's own plugins first, then each entry point of the
``torcia`` group that the policy allows and the lock (:mod:`torcia.plugins._pinning`) admits.
A plugin that fails in any way is marked, taken out and reported by :func:`fail`; one that
changes torcia's own callables while it loads is put right by the integrity check.
"""

from __future__ import annotations

import inspect
import sys
import threading
import warnings
from pathlib import Path

import pluggy

from torcia import _policy, hookspecs
from torcia._policy import Lock, PluginError, PluginLockError, Policy, guard
from torcia.plugins import _identity, _pinning
from torcia.plugins._identity import PluginInfo
from torcia.plugins._pinning import Problem

hookimpl = pluggy.HookimplMarker("torcia")

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


# ---------------------------------------------------------------------------------------
# The manager
# ---------------------------------------------------------------------------------------


class State:
    """What discovery found and built, shared by the manager and the registries (core's
    other modules reach it as ``torcia.plugins._state``)."""

    def __init__(self):
        self.lock = threading.RLock()
        self.pm: pluggy.PluginManager | None = None
        self.infos: dict[str, PluginInfo] = {}
        self.spec_modules: list = [hookspecs]
        self.builtins: list[tuple[str, object]] = []
        self.registries: dict[str, object] = {}
        self.policy: Policy | None = None
        self.lock_file: Lock | None = None  # the lock discovery checked plugins against
        self.integrity: _Integrity | None = None
        self.writing_lock = False  # ``write_lock`` loads plugins with the lock left aside
        self.discovery_guard = False  # whether discovery (not ``import torcia``) put the
        #                               lock guard in place
        self.report_only = False  # ``torcia plugins --check``: strict mode reports
        self.local = threading.local()  # .hook: (plugin, hook name) while a hook runs


state = State()


def add_hookspecs(module) -> None:
    """Add a package's hook specifications (call it when that package is imported).

    Third-party plugins that implement one of the new hooks with parameters the
    specification does not have are reported and skipped; the others are untouched.

    Example: torcia-nn calls ``torcia.plugins.add_hookspecs(torcia.nn.hookspecs)``.
    """
    with state.lock:
        if module in state.spec_modules:
            return
        state.spec_modules.append(module)
        if state.pm is not None:
            _add_specs(state.pm, module)
            _check_hook_names(state.pm)


def register_builtin(name: str, plugin) -> None:
    """Register a plugin that ships inside core itself (like pytest's default plugins)."""
    with state.lock:
        state.builtins.append((name, plugin))
        if state.pm is not None:
            _register(state.pm, _identity.builtin_info(name, plugin), plugin)


def _specs(module) -> dict[str, list[str]]:
    """Hook name -> parameter names of the specifications in ``module``."""
    out = {}
    for name, fn in vars(module).items():
        if name.startswith("torcia_") and callable(fn) and hasattr(fn, "torcia_spec"):
            out[name] = list(inspect.signature(fn).parameters)
    return out


def fail(info: PluginInfo, reason: str, status: str = "failed") -> None:
    """Mark a plugin failed (or refused), take it out of the manager, roll back what it
    registered, and report it. In strict mode, forget everything first: the next attempt
    starts from nothing and meets the same refusal."""
    info.status, info.reason = status, reason
    pm = state.pm if state.pm is not None else getattr(state.local, "building", None)
    if pm is not None and pm.get_plugin(info.name) is not None:
        pm.unregister(name=info.name)
    for registry in list(state.registries.values()):
        rollback = getattr(registry, "rollback", None)
        if rollback is not None:
            rollback(info.name)
    info.provides.clear()
    what = "was refused" if status == "refused" else "was skipped"
    message = f"torcia plugin {info.name!r} ({info.distribution} {info.version}) {what}: {reason}"
    policy = state.policy
    if policy is not None and policy.strict and not state.report_only:
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
                info = state.infos.get(impl.plugin_name)
                reason = (f"{hook_name} takes {', '.join(impl.argnames)}, but its "
                          f"specification has {', '.join(params) or 'no parameters'}")
                if info is not None:
                    fail(info, reason)
                else:
                    pm.unregister(name=impl.plugin_name)
    pm.add_hookspecs(module)


def _check_hook_names(pm) -> None:
    """Fail a plugin implementing a hook that is close to a known hook but is none
    (``torcia_register_loss``): a typo would otherwise be ignored for good."""
    known = set()
    for module in state.spec_modules:
        known.update(_specs(module))
    for info in list(state.infos.values()):
        if info.status != "loaded":
            continue
        for hook in info.hooks:
            if hook in known:
                continue
            # close enough to be a typo, not another part's hook (0.95: a missing or
            # extra letter, as torcia_register_loss for torcia_register_losses)
            import difflib  # for a hook no part defines: not a cost of import torcia

            close = difflib.get_close_matches(hook, sorted(known), n=1, cutoff=0.95)
            if close:
                fail(info, f"implements {hook}, which no part defines (did you mean "
                            f"{close[0]}?)")
                break


def check_unknown_hooks() -> list[PluginInfo]:
    """Fail every loaded plugin implementing a hook no installed part defines; call it
    once every part is imported (the listing and ``--check`` do). Returns those failed."""
    manager()
    known = set()
    for module in state.spec_modules:
        known.update(_specs(module))
    failed = []
    for info in list(state.infos.values()):
        unknown = [h for h in info.hooks if h not in known]
        if info.status == "loaded" and unknown:
            import difflib  # as above

            close = difflib.get_close_matches(unknown[0], sorted(known), n=1)
            fail(info, f"implements {unknown[0]}, which no installed part defines"
                  + (f" (did you mean {close[0]}?)" if close else ""))
            failed.append(info)
    return failed


def _register(pm, info: PluginInfo, plugin) -> None:
    state.infos[info.name] = info
    try:
        pm.register(plugin, name=info.name)
    except Exception as exc:  # noqa: BLE001 - any failure of a plugin must be contained
        fail(info, f"{type(exc).__name__}: {exc}")
    else:
        info.hooks = sorted(h.name for h in pm.get_hookcallers(plugin) or [])


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


def integrity() -> _Integrity:
    if state.integrity is None:
        state.integrity = _Integrity()
    state.integrity.extend()
    return state.integrity


def check_integrity(info: PluginInfo, registry=None, entries=None) -> None:
    """Fail ``info``'s plugin when it changed torcia's own callables, or entries of
    ``registry`` that other plugins registered (``entries``: the table before its hook)."""
    changed = state.integrity.changes() if state.integrity is not None else []
    if entries is not None:
        table = registry._entries or {}
        for name, obj in entries.items():
            if table.get(name, _MISSING) is not obj:
                table[name] = obj
                changed.append(f"{registry.kind} {name!r}")
    if changed:
        info.changed = changed
        fail(info, f"changed torcia's own {_pinning.some(changed)} while it loaded "
                   "(put back)")


def new_threads(before: set) -> list[str]:
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
        name = _identity.dist_name(dist)
        shadow = first.setdefault(name, dist)
        shadow = None if shadow is dist else shadow
        for ep in dist.entry_points:
            if ep.group == _identity.ENTRY_POINT_GROUP:
                own = _identity.is_own(dist, shadow is not None)
                rows.append((ep, dist, name, shadow, own))
    # torcia's own first: a third-party plugin taking one of their names (found first on
    # an earlier sys.path entry) is the one refused
    rows.sort(key=lambda row: not row[4])
    return rows


def _refuse_duplicate(info: PluginInfo, reason: str) -> None:
    key, n = f"{info.distribution}:{info.entry_point}", 2
    while key in state.infos:
        key, n = f"{info.distribution}:{info.entry_point} ({n})", n + 1
    info.name = key
    state.infos[key] = info
    fail(info, reason, "refused")


def _discover(pm, policy, lock: Lock | None) -> None:
    import hashlib  # loads OpenSSL: with its first use, not with import torcia

    core = _identity.core_dist()
    if lock is not None and core is not None and "torcia-core" in lock.dists:
        reason = _pinning.lock_check(lock.dists["torcia-core"], core)
        if reason:
            raise PluginLockError(f"plugin lock {lock.path}: torcia-core: {reason}")
    rows = _candidates()
    _warn_entry_point_allowlist(policy, rows)
    for ep, dist, name, shadow, own in rows:
        where = str(_identity.dist_base(dist) or "")
        info = PluginInfo(ep.name, name, dist.version, "loaded", module=ep.value, own=own,
                          location=where, entry_point=ep.name)
        if shadow is not None:
            shadow_at = _identity.dist_base(shadow)
            _refuse_duplicate(info, f"{name} {dist.version} at {where} is shadowed by {name} "
                                    f"{shadow.version} at {shadow_at}, found first on "
                                    "sys.path (Python imports one distribution of a name)")
            continue
        if ep.name in state.infos:
            first = state.infos[ep.name]
            _refuse_duplicate(info, f"plugin name {ep.name!r} is also used by "
                                    f"{first.distribution}; the first one found is kept")
            continue
        reason = policy.verdict(ep.name, name, own)
        if reason:
            info.status, info.reason = "blocked", reason
            state.infos[ep.name] = info
            continue
        state.infos[ep.name] = info
        if lock is not None:
            reason = _pinning.lock_check(lock.dists.get(name), dist)
            if reason is None and lock.dists[name]["entry_points"].get(ep.name) != ep.value:
                reason = f"entry point {ep.name} = {ep.value} is not the locked one"
            if reason:
                fail(info, f"plugin lock {lock.path}: {reason}", "refused")
                continue
        if not own:
            integrity()  # torcia's own plugins are loaded: what they defined is torcia's
        before = set(threading.enumerate())
        try:
            plugin = ep.load()
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - sys.exit() at import too
            info.threads = new_threads(before)
            fail(info, f"{type(exc).__name__}: {exc}")
            continue
        info.threads = new_threads(before)
        info.file = getattr(plugin, "__file__", "") or _identity.module_file(ep.module)
        if info.file:
            info.sha256 = hashlib.sha256(Path(info.file).read_bytes()).hexdigest()
        _register(pm, info, plugin)
        if not own and info.status == "loaded":
            check_integrity(info)


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
    pm = state.pm
    if pm is not None:
        return pm
    with state.lock:
        if state.pm is not None:
            return state.pm
        if getattr(state.local, "building", None) is not None:
            raise PluginReentryError("a torcia plugin called into torcia while its module "
                                     "was being imported by plugin discovery")
        pm = pluggy.PluginManager("torcia")
        state.local.building = pm
        try:
            policy = state.policy = Policy()
            state.lock_file = _guard_for(policy)
            for module in state.spec_modules:
                pm.add_hookspecs(module)
            for name, plugin in state.builtins:
                _register(pm, _identity.builtin_info(name, plugin), plugin)
            specs_added = list(state.spec_modules)
            _discover(pm, policy, state.lock_file)
            # a part imported by loading its plugin (torcia.optim) added its specs meanwhile
            for module in state.spec_modules:
                if module not in specs_added:
                    _add_specs(pm, module)
            _check_hook_names(pm)
            if policy.strict and state.lock_file is not None and not state.report_only:
                _check_strictly(policy, state.lock_file)
        except BaseException:
            reset()  # a refusal leaves nothing behind that would change the next attempt
            raise
        finally:
            state.local.building = None
        state.pm = pm
        return pm


def _guard_for(policy: Policy) -> Lock | None:
    """The lock discovery checks plugins against, its guard in place (``import torcia``
    put it there already unless the policy changed since)."""
    if policy.lock is None or state.writing_lock:
        if state.discovery_guard:
            _policy.remove_guard()
            state.discovery_guard = False
        return None
    had = guard()
    lock_guard = _policy.install_guard(policy.lock[0])
    state.discovery_guard = state.discovery_guard or lock_guard is not had
    return lock_guard.lock


def _check_strictly(policy: Policy, lock: Lock) -> None:
    """In strict mode, at start-up: a locked plugin that is missing, blocked or shadowed, or
    a start-up file the lock does not pin, is an error."""
    found = (_pinning.lock_problems(list(state.infos.values()), lock)
             + _pinning.startup_problems(lock))
    if found:
        raise PluginError(
            f"the deployment differs from the plugin lock {lock.path} (strict mode, set by "
            f"{policy.strict}): " + "; ".join(f"{p.subject}: {p.message}" for p in found))


def write_lock(path: Path) -> dict:
    """Load the plugins the policy allows (the lock in force left aside), write the lock of
    those that load to ``path`` and return it (see :func:`lock_document`)."""
    with state.lock:
        reset()
        state.writing_lock = True
        try:
            doc = _pinning.lock_document(plugin_infos())
        finally:
            state.writing_lock = False
            reset()
    import json  # as difflib above: not a cost of import torcia

    path = Path(path)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    temporary.replace(path)
    return doc


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
    return _pinning.deployment_problems(plugin_infos() if infos is None else infos,
                                        state.lock_file)


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
    for registry in list(state.registries.values()):
        registry.build()
    return sorted(state.infos.values(), key=lambda i: (i.distribution, i.name))


def blocked_plugins() -> list[PluginInfo]:
    manager()
    return [i for i in state.infos.values() if i.status in ("blocked", "refused")]


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
    with state.lock:
        state.pm = None
        state.policy = None
        state.lock_file = None
        _identity.core_base.cache_clear()
        state.integrity = None
        state.infos.clear()
        for registry in state.registries.values():
            registry.reset()
