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

The code is in layers, each importing only those before it: the policy
(:mod:`torcia._policy`, which ``import torcia`` runs first: the configs, allow and block
lists, the lock file and its guard), identity (``_identity``: a plugin's distribution,
name, version, location and whether it is torcia's own), pinning (``_pinning``: writing a
lock, and how a deployment differs from one), the manager (``_manager``: pluggy's manager,
discovery, loading, failures and the integrity check) and the registries (``_registry``:
the tables registration hooks fill). This module is their public face.
"""

from __future__ import annotations

from torcia import _policy
from torcia._policy import (
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
from torcia.plugins._identity import ENTRY_POINT_GROUP, PluginInfo, install_hint, is_own
from torcia.plugins._manager import (
    HOOK_API_VERSION,
    PluginBlockedError,
    PluginReentryError,
    PluginWarning,
    add_hookspecs,
    blocked_plugins,
    check_deployment,
    check_unknown_hooks,
    hookimpl,
    manager,
    plugin_infos,
    register_builtin,
    reset,
    write_lock,
)
from torcia.plugins._manager import state as _state
from torcia.plugins._pinning import (
    CHECK_STATUS,
    Problem,
    installed_files,
    lock_document,
    read_lock,
    startup_files,
)
from torcia.plugins._registry import (
    Registry,
    building,
    call_each,
    check_reentry,
    current_hook,
    lent,
    missing_message,
)

# what this module defines is documented, pickled and named in tracebacks as
# ``torcia.plugins.<name>``, where it was defined before the split
for _obj in (PluginInfo, install_hint, is_own, PluginBlockedError, PluginReentryError,
             PluginWarning, add_hookspecs, blocked_plugins, check_deployment,
             check_unknown_hooks, manager, plugin_infos, register_builtin, reset, write_lock,
             Problem, installed_files, lock_document, read_lock, startup_files, Registry,
             building, call_each, check_reentry, current_hook, lent, missing_message):
    _obj.__module__ = __name__
del _obj
