"""Command line: ``python -m torcia plugins`` (also installed as the ``torcia`` script).

``plugins`` lists every plugin found in the ``torcia`` entry-point group, torcia's own parts
included: its distribution and version, the hooks it implements, whether it is loaded,
blocked, refused or failed (and why), and what it registered, grouped by kind and device.
``--json`` prints the same as one JSON document for scripts and audits (with each plugin's
module, file and the file's sha256).

``--check`` is the gate of a vetted deployment (see :func:`torcia.plugins.check_deployment`).
It runs discovery in a child process, given ``--timeout`` seconds (a plugin that hangs, or
leaves a thread running, cannot keep it from answering), and exits with the sum of the
values of the kinds of problem it found (:data:`torcia.plugins.CHECK_STATUS`): 1 a plugin
failed or was refused, 4 no lock is in force, 8 the deployment differs from the lock (a
locked plugin missing, blocked or shadowed, a module or byte code that is not the locked
one), 16 a start-up file the lock does not pin, 32 a plugin changed torcia or left threads
running, 64 discovery did not finish. Each problem is printed on stderr; with ``--json``
the document has a ``check`` entry: ``{"status": ..., "problems": [{"kind", "subject",
"message"}]}``.

``plugins lock [PATH]`` loads the plugins the policy lets load, in a child process too, and
writes the lock file of those that load; it refuses to lock a plugin that fails (see
:mod:`torcia.plugins`). With ``lock = PATH`` in the system config, the lock guard checks
every module of a locked distribution before it runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
import threading
import warnings

import torcia
from torcia import _oprecords, plugins
from torcia.backend import backends, get_backend

#: How many names of one group the text listing shows before eliding (``-v`` shows all).
_SHOWN = 8
#: The seconds ``--check`` and ``lock`` give discovery in their child process by default.
_TIMEOUT = 120.0


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


def _policy_lines(policy: dict) -> list[str]:
    lines = []
    for label, table in (("allowlist", policy["allow"]), ("blocklist", policy["block"])):
        if table:
            entries = ", ".join(f"{name} ({source})" for name, source in sorted(table.items()))
            lines.append(f"{label}: {entries}")
    lines = lines or ["no allowlist or blocklist in force"]
    if policy["lock"] is not None:
        lines.append(f"plugin lock: {policy['lock']} ({policy['lock_source']})")
    if policy["strict_source"]:
        lines.append(f"strict mode ({policy['strict_source']})")
    if policy["locked_by"]:
        lines.append(f"policy locked by the {policy['locked_by']}")
    return lines


def _devices() -> dict[str, dict[str, list[str]]]:
    """Per device type, the ops it runs with a kernel of its own (``native``), through
    the fallback it declares (``fallback``), through their default decomposition
    (``decomposed``), and those it cannot run (``missing``): see
    :func:`torcia.library.device_ops`."""
    out = {}
    for name in sorted(backends.build()):
        ops = _oprecords.device_ops(name)
        out[name] = {kind: sorted(op for op, how in ops.items() if how == kind)
                     for kind in ("native", "fallback", "decomposed", "missing")}
    return out


def _document(infos, policy: plugins.Policy) -> dict:
    """What the listing says, as one JSON-ready document."""
    devices = _devices()
    return {
        "torcia": torcia.__version__,
        "policy": {"allow": policy.allow, "block": policy.block,
                   "lock": str(policy.lock[0]) if policy.lock else None,
                   "lock_source": policy.lock[1] if policy.lock else None,
                   "strict": bool(policy.strict), "strict_source": policy.strict,
                   "locked_by": policy.locked_by},
        "plugins": [
            dataclasses.asdict(info) | {"provides_by_kind": _groups(info.provides)}
            for info in infos
        ],
        "devices": devices,
        "primitive_ops": len(_oprecords.primitives()),
        "fallbacks": {name: get_backend(name).fallback for name in devices},
    }


def _print_text(doc: dict, verbose: bool) -> None:
    print(f"torcia {doc['torcia']}: {len(doc['plugins'])} plugin(s) found")
    for line in _policy_lines(doc["policy"]):
        print(f"  {line}")
    for info in doc["plugins"]:
        status = info["status"] + (f": {info['reason']}" if info["reason"] else "")
        print(f"\n{info['name']}  [{info['distribution']} {info['version']}]  {status}")
        if info["hooks"]:
            print(f"  hooks: {', '.join(info['hooks'])}")
        for note in info["notes"]:
            print(f"  note: {note}")
        for kind, names in info["provides_by_kind"].items():
            shown = names if verbose or len(names) <= _SHOWN else names[:_SHOWN] + ["..."]
            print(f"  {kind} ({len(names)}): {', '.join(shown)}")
    print(f"\ndevices ({doc['primitive_ops']} primitive ops; the others decompose into "
          "them):")
    for name, ops in doc["devices"].items():
        print(f"  {name} (fallback: {doc['fallbacks'][name]})")
        for kind, names in ops.items():
            shown = names if verbose or len(names) <= _SHOWN else names[:_SHOWN] + ["..."]
            print(f"    {kind} ({len(names)}): {', '.join(shown)}")


def _import_packages(infos) -> None:
    """Import the package of each loaded plugin's entry point (``torcia.vision`` for
    ``torcia.vision._plugin``): a part may create its registries there rather than in the
    module the entry point loads, and only a registry that exists can list what it holds."""
    for info in infos:
        package = info.module.partition(":")[0].rpartition(".")[0]
        if info.status == "loaded" and package and package != "torcia":
            try:
                importlib.import_module(package)
            except Exception as exc:  # noqa: BLE001 - the listing goes on without it
                print(f"torcia: importing {package} failed, so what plugin {info.name!r} "
                      f"registers there is not listed: {type(exc).__name__}: {exc}",
                      file=sys.stderr)


def _in_process(args) -> tuple[dict, list[plugins.Problem]]:
    """Discovery, the listing's document and (with ``--check``) the problems found."""
    # A plugin that fails warns as it loads; the listing reports the same failure with its
    # reason, so the warning would only say it twice.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", plugins.PluginWarning)
        _import_packages(plugins.plugin_infos())
        # every installed part has added its hook specifications by now
        plugins.check_unknown_hooks()
        infos = plugins.plugin_infos()
    problems = plugins.check_deployment(infos) if args.check else []
    return _document(infos, plugins._state.policy or plugins.Policy()), problems


def _report(doc: dict, problems: list[plugins.Problem], args) -> int:
    status = sum(plugins.CHECK_STATUS[kind] for kind in {p.kind for p in problems})
    if args.check:
        doc["check"] = {"status": status, "problems": [dataclasses.asdict(p) for p in problems]}
    if args.json:
        json.dump(doc, sys.stdout, indent=2)
        print()
    else:
        _print_text(doc, args.verbose)
    for p in problems:
        subject = f"{p.subject}: " if p.subject else ""
        print(f"torcia plugins --check: [{p.kind}] {subject}{p.message}", file=sys.stderr)
    return status


def _child(args, folder: str) -> int | None:
    """Run this command again in a child process (``--in-process``) that writes its result
    to ``args.report``; its exit status, or None when it did not finish in time. What the
    plugins print goes to stderr: stdout is this command's."""
    flags = [flag for flag, on in (("-I", sys.flags.isolated), ("-E", sys.flags.ignore_environment),
                                   ("-s", sys.flags.no_user_site)) if on]
    command = [sys.executable, *flags, "-m", "torcia", "plugins", "--in-process",
               "--report", args.report]
    command += ["lock", str(args.path)] if args.action == "lock" else ["--check"]
    # files rather than pipes: a process a plugin started could hold a pipe open forever
    with open(os.path.join(folder, "output"), "w+") as output:
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=output,
                                 stderr=output)
        try:
            status = child.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            status = None
        output.seek(0)
        sys.stderr.write(output.read())
    return status


def _supervise(args) -> int:
    """``--check`` and ``lock``: the work runs in a child process, this one reports."""
    with tempfile.TemporaryDirectory(prefix="torcia-plugins-") as folder:
        args.report = os.path.join(folder, "report.json")
        result = _child(args, folder)
        try:
            with open(args.report) as f:
                report = json.load(f)
        except (OSError, ValueError):
            report = None
    if report is None:
        what = (f"did not finish within {args.timeout:g} s (a plugin hangs at import or in a "
                "hook; --timeout gives it longer)" if result is None else
                f"ended with status {result} before reporting")
        if args.action == "lock":
            print(f"torcia: cannot write the plugin lock: discovery {what}", file=sys.stderr)
            return 1
        doc = {"torcia": torcia.__version__, "plugins": []}
        problem = plugins.Problem("discovery", "", f"plugin discovery {what}")
        if args.json:
            return _report(doc, [problem], args)
        print(f"torcia plugins --check: [discovery] {problem.message}", file=sys.stderr)
        return plugins.CHECK_STATUS["discovery"]
    if "error" in report:
        print(f"torcia: {report['error']}", file=sys.stderr)
        return 1
    if args.action == "lock":
        print(report["message"])
        return 0
    problems = [plugins.Problem(**p) for p in report["problems"]]
    return _report(report["document"], problems, args)


def _write_report(path: str, report: dict) -> None:
    with open(path, "w") as f:
        json.dump(report, f)


def _plugins_command(args) -> int:
    if (args.check or args.action == "lock") and not args.in_process:
        return _supervise(args)
    if args.action == "lock":
        return _lock_command(args)
    if args.report:
        # the child of --check: strict mode reports, since the report lists every problem
        plugins._state.report_only = True
    try:
        doc, problems = _in_process(args)
    except (plugins.PluginConfigError, plugins.PluginError) as exc:
        if args.report:
            _write_report(args.report, {"error": str(exc)})
            return 1
        print(f"torcia: {exc}", file=sys.stderr)
        return 1
    if args.report:
        _write_report(args.report, {"document": doc,
                                    "problems": [dataclasses.asdict(p) for p in problems]})
        return 0
    return _report(doc, problems, args)


def _lock_command(args) -> int:
    try:
        doc = plugins.write_lock(args.path)
    except (plugins.PluginConfigError, plugins.PluginError, OSError) as exc:
        message = f"cannot write the plugin lock: {exc}"
        if args.report:
            _write_report(args.report, {"error": message})
        else:
            print(f"torcia: {message}", file=sys.stderr)
        return 1
    count = sum(len(d["files"]) for d in doc["distributions"])
    message = f"wrote {args.path}: {len(doc['distributions'])} distribution(s), {count} file(s)"
    if args.report:
        _write_report(args.report, {"message": message})
    else:
        print(message)
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
                         help="check the deployment against the plugin lock; the exit status "
                              "sums the kinds of problem found (see the module's help)")
    listing.add_argument("--timeout", type=float, default=_TIMEOUT, metavar="SECONDS",
                         help="how long --check and lock give plugin discovery (default "
                              f"{_TIMEOUT:g})")
    listing.add_argument("--in-process", action="store_true",
                         help="run discovery in this process (no child process, no timeout)")
    listing.add_argument("--report", help=argparse.SUPPRESS)
    listing.add_argument("action", nargs="?", choices=["lock"],
                         help="lock: write a lock file of the plugins that load")
    listing.add_argument("path", nargs="?", default="torcia-plugins.lock",
                         help="the lock file to write (default: torcia-plugins.lock)")
    listing.set_defaults(run=_plugins_command)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m torcia`` and of the ``torcia`` console script."""
    args = _parser().parse_args(argv)
    status = args.run(args)
    left = [t.name for t in threading.enumerate()
            if t is not threading.current_thread() and t.is_alive() and not t.daemon]
    if (getattr(args, "in_process", False) and args.report) or (argv is None and left):
        # the child of --check or lock, or the command itself: a thread a plugin left must
        # not keep it alive
        if left and not args.report:
            print(f"torcia: exiting although plugin thread(s) still run: {', '.join(left)}",
                  file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    return status


if __name__ == "__main__":
    sys.exit(main())
