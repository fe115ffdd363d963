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
