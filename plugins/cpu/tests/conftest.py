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
            proc = subprocess.run([sys.executable, "-c", script.format(out=str(out))],
                                  capture_output=True, text=True, env={**os.environ, **env})
            assert proc.returncode == 0, proc.stderr
            results[label] = (proc.stdout.strip(), np.load(out))
        return results

    return run


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
