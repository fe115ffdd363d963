"""Command line: ``python -m torcia plugins`` (also installed as the ``torcia`` script).

``plugins`` lists every plugin found in the ``torcia`` entry-point group, torcia's own parts
included: its distribution and version, the hooks it implements, whether it is loaded,
blocked, refused or failed (and why), and what it registered, grouped by kind and device.
``--json`` prints the same as one JSON document for scripts and audits (with each plugin's
module, file and the file's sha256). ``--check`` exits with status 1 when any plugin failed
or was refused, or when no plugin lock is in force (everything is then unpinned).

``plugins lock [PATH]`` writes a lock file of the plugins the policy lets load (see
:mod:`torcia.plugins`); with ``lock = PATH`` in the config (or ``TORCIA_PLUGIN_LOCK``), a
plugin that differs from it is refused before its code is imported.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.metadata
import json
import sys
import warnings

import torcia
from torcia import plugins

#: How many names of one group the text listing shows before eliding (``-v`` shows all).
_SHOWN = 8


def _groups(provides: list[str]) -> dict[str, list[str]]:
    """Group ``"kind:name"`` entries by kind; kernels (``"kernel:op@device"``) by device."""
    groups: dict[str, list[str]] = {}
    for entry in provides:
        kind, _, name = entry.partition(":")
        if kind == "kernel":
            op, _, dev = name.rpartition("@")
            kind, name = f"kernels on {dev}", op
        groups.setdefault(kind, []).append(name)
    return {kind: sorted(names) for kind, names in sorted(groups.items())}


def _policy_lines(policy: plugins.Policy) -> list[str]:
    lines = []
    for label, table in (("allowlist", policy.allow), ("blocklist", policy.block)):
        if table:
            entries = ", ".join(f"{name} ({source})" for name, source in sorted(table.items()))
            lines.append(f"{label}: {entries}")
    lines = lines or ["no allowlist or blocklist in force"]
    if policy.lock is not None:
        lines.append(f"plugin lock: {policy.lock[0]} ({policy.lock[1]})")
    if policy.strict:
        lines.append(f"strict mode ({policy.strict})")
    if policy.locked_by:
        lines.append(f"policy locked by the {policy.locked_by}")
    return lines


def _devices() -> dict[str, dict[str, list[str]]]:
    """Per device type, the ops it runs with a kernel of its own (``native``), through
    the fallback it declares (``fallback``), through their default decomposition
    (``decomposed``), and those it cannot run (``missing``): see
    :func:`torcia.library.device_ops`."""
    from torcia import library
    from torcia.backend import backends

    out = {}
    for name in sorted(backends.build()):
        ops = library.device_ops(name)
        out[name] = {kind: sorted(op for op, how in ops.items() if how == kind)
                     for kind in ("native", "fallback", "decomposed", "missing")}
    return out


def _print_text(infos, policy, verbose: bool) -> None:
    print(f"torcia {torcia.__version__}: {len(infos)} plugin(s) found")
    for line in _policy_lines(policy):
        print(f"  {line}")
    for info in infos:
        status = info.status + (f": {info.reason}" if info.reason else "")
        print(f"\n{info.name}  [{info.distribution} {info.version}]  {status}")
        if info.hooks:
            print(f"  hooks: {', '.join(info.hooks)}")
        for note in info.notes:
            print(f"  note: {note}")
        for kind, names in _groups(info.provides).items():
            shown = names if verbose or len(names) <= _SHOWN else names[:_SHOWN] + ["..."]
            print(f"  {kind} ({len(names)}): {', '.join(shown)}")
    from torcia import library

    print(f"\ndevices ({len(library.primitives())} primitive ops; the others decompose "
          "into them):")
    from torcia.backend import get_backend

    for name, ops in _devices().items():
        print(f"  {name} (fallback: {get_backend(name).fallback})")
        for kind, names in ops.items():
            shown = names if verbose or len(names) <= _SHOWN else names[:_SHOWN] + ["..."]
            print(f"    {kind} ({len(names)}): {', '.join(shown)}")


def _print_json(infos, policy) -> None:
    doc = {
        "torcia": torcia.__version__,
        "policy": {"allow": policy.allow, "block": policy.block,
                   "lock": str(policy.lock[0]) if policy.lock else None,
                   "strict": bool(policy.strict), "locked_by": policy.locked_by},
        "plugins": [
            dataclasses.asdict(info) | {"provides_by_kind": _groups(info.provides)}
            for info in infos
        ],
        "devices": _devices(),
    }
    json.dump(doc, sys.stdout, indent=2)
    print()


def _import_packages(infos) -> None:
    """Import the package of each loaded plugin's entry point (``torcia.vision`` for
    ``torcia.vision._plugin``): a part may create its registries there rather than in the
    module the entry point loads, and only a registry that exists can list what it holds."""
    loaded = {info.name for info in infos if info.status == "loaded"}
    for ep in importlib.metadata.entry_points(group=plugins.ENTRY_POINT_GROUP):
        package = ep.module.rpartition(".")[0] or ep.module
        if ep.name in loaded and package != "torcia":
            try:
                importlib.import_module(package)
            except Exception as exc:  # noqa: BLE001 - the listing goes on without it
                print(f"torcia: importing {package} failed, so what plugin {ep.name!r} "
                      f"registers there is not listed: {type(exc).__name__}: {exc}",
                      file=sys.stderr)


def _plugins_command(args) -> int:
    if args.action == "lock":
        return _lock_command(args)
    # A plugin that fails warns as it loads; the listing reports the same failure with its
    # reason, so the warning would only say it twice.
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", plugins.PluginWarning)
            _import_packages(plugins.plugin_infos())
            # every installed part has added its hook specifications by now
            plugins.check_unknown_hooks()
            infos = plugins.plugin_infos()
    except (plugins.PluginConfigError, plugins.PluginError) as exc:
        print(f"torcia: {exc}", file=sys.stderr)
        return 1
    policy = plugins.Policy()
    if args.json:
        _print_json(infos, policy)
    else:
        _print_text(infos, policy, args.verbose)
    if args.check:
        return _check(infos, policy)
    return 0


def _check(infos, policy) -> int:
    problems = [f"{i.ident}: {i.status}: {i.reason}" for i in infos
                if i.status in ("failed", "refused")]
    if policy.lock is None:
        problems.append("no plugin lock in force: every plugin is unpinned (write one with "
                        "'torcia plugins lock PATH' and name it as lock = PATH in the config)")
    for line in problems:
        print(f"torcia plugins --check: {line}", file=sys.stderr)
    return 1 if problems else 0


def _lock_command(args) -> int:
    try:
        doc = plugins.write_lock(args.path)
    except (plugins.PluginConfigError, plugins.PluginError, OSError) as exc:
        print(f"torcia: cannot write the plugin lock: {exc}", file=sys.stderr)
        return 1
    count = sum(len(d["files"]) for d in doc["distributions"])
    print(f"wrote {args.path}: {len(doc['distributions'])} distribution(s), {count} file(s)")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="torcia", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"torcia {torcia.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    listing = sub.add_parser(
        "plugins", help="list every plugin found, its status and what it provides"
    )
    listing.add_argument("--json", action="store_true", help="print one JSON document")
    listing.add_argument(
        "-v", "--verbose", action="store_true", help="list every name a plugin provides"
    )
    listing.add_argument("--check", action="store_true",
                         help="exit with status 1 when a plugin failed, was refused or is "
                              "unpinned")
    listing.add_argument("action", nargs="?", choices=["lock"],
                         help="lock: write a lock file of the plugins that load")
    listing.add_argument("path", nargs="?", default="torcia-plugins.lock",
                         help="the lock file to write (default: torcia-plugins.lock)")
    listing.set_defaults(run=_plugins_command)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m torcia`` and of the ``torcia`` console script."""
    args = _parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
