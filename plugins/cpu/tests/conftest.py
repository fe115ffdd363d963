"""Shared helpers of torcia-cpu's tests."""

import os
import subprocess
import sys

import numpy as np
import pytest


@pytest.fixture
def with_and_without_plugin(tmp_path):
    """Run a script (a format string with ``{out}``, where it saves an array) once with the
    plugin and once with it blocked; return ``{label: (stdout, array)}`` for "native" and
    "numpy"."""
    def run(script):
        results = {}
        for label, env in (("native", {}), ("numpy", {"TORCIA_DISABLE_PLUGINS": "cpu"})):
            out = tmp_path / f"{label}.npy"
            # the native run unblocks the plugin where the whole suite runs with it blocked
            base = {k: v for k, v in os.environ.items() if k != "TORCIA_DISABLE_PLUGINS"}
            proc = subprocess.run([sys.executable, "-c", script.format(out=str(out))],
                                  capture_output=True, text=True, env={**base, **env})
            assert proc.returncode == 0, proc.stderr
            results[label] = (proc.stdout.strip(), np.load(out))
        return results

    return run


@pytest.fixture
def registered():
    """Skip where this run blocks the plugin: the whole suite also runs on the reference
    path (``TORCIA_DISABLE_PLUGINS=cpu``), and the test is of the plugin as torcia loads it."""
    import torcia

    status = {p.name: p.status for p in torcia.plugins.plugin_infos()}.get("cpu")
    if status != "loaded":
        pytest.skip(f"torcia-cpu is {status or 'not found'} in this run")


@pytest.fixture
def on_threads():
    """``run(fn, counts)``: fn's results on each of the OpenMP thread counts ``counts``,
    twice each (the extension's count restored after)."""
    from torcia_cpu import _native

    def run(fn, counts=(1, 2)):
        before = _native.get_num_threads()
        try:
            out = []
            for n in counts:
                _native.set_num_threads(n)
                out += [fn(), fn()]
            return out
        finally:
            _native.set_num_threads(before)

    return run
