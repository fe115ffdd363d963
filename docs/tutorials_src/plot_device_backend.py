"""
Writing a device backend and running the conformance suite
==========================================================

A device plugin gives torcia a new device type: a backend (its array module and how arrays
cross to and from the host) and kernels for the ops it implements. It does not have to
implement all of them on day one: it declares a *fallback* for the rest, and the
conformance suite shipped with torcia-core (``pytest --torcia-device NAME``) checks every
op against the NumPy reference kernels and says, op by op, how the device runs it.

Here the device ``"tutdev"`` keeps its arrays in NumPy, in memory of its own (a transfer
copies, as it would to an accelerator). It implements four ops and runs every other one
on the host: ``fallback="host"`` copies the arrays to the host, runs the reference kernel
and copies the result back (PyTorch's boxed CPU fallback). The other choices are
``"reference"`` (the reference kernels on the device's own array module, for a
NumPy-compatible one such as CuPy) and ``"decompose"`` (composite ops through their
decomposition into primitives, nothing else); :doc:`/ops` lists every op, primitive or
composite, with its kernel signature.
"""

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

# %%
# The plugin: one module with two hook implementations. A kernel receives the arrays of
# the op's tensor inputs positionally and its parameters as keywords. ``exp`` covers
# float32 only and hands other dtypes to the device's fallback with
# ``library.fallback(op, device, itself)``, the one way back for every device.
# ``TUTDEV_BUG=1`` plants a bug in ``add``, for the conformance suite to find below.

PLUGIN = '''
import os

import numpy as np

import torcia
from torcia import library

DEVICE = "tutdev"


def _copy(array, index=None):
    return np.array(array, copy=True)  # device memory of its own: never a view


def add(a, b):
    out = np.add(a, b)
    return out + 1 if os.environ.get("TUTDEV_BUG") else out


def exp(a):
    if a.dtype != np.float32:
        return library.fallback("exp", DEVICE, exp)(a)
    return np.exp(a)


def relu(a):
    return np.maximum(a, 0).astype(a.dtype, copy=False)


@torcia.hookimpl
def torcia_register_backends(registry):
    registry.add(library.Backend(DEVICE, np, to_host=_copy, from_host=_copy,
                                 fallback="host"))


@torcia.hookimpl
def torcia_register_kernels(registry):
    for op, kernel in {"add": add, "exp": exp, "relu": relu, "matmul": np.matmul}.items():
        registry.add(op, DEVICE, kernel, priority=10)
'''

# %%
# Install it. A real plugin is a distribution whose ``pyproject.toml`` names the module in
# the ``torcia`` entry-point group (see :doc:`/plugin_guide`); ``pip install`` leaves a
# ``*.dist-info`` folder with that entry point next to the module, which is what we write
# here, into a folder put on ``PYTHONPATH`` for the commands below.

site = Path(tempfile.mkdtemp(prefix="tutdev-"))
(site / "tutdev_plugin.py").write_text(textwrap.dedent(PLUGIN))
info = site / "tutdev_plugin-0.1.dist-info"
info.mkdir()
(info / "METADATA").write_text("Metadata-Version: 2.1\nName: tutdev-plugin\nVersion: 0.1\n")
(info / "entry_points.txt").write_text("[torcia]\ntutdev = tutdev_plugin\n")
env = dict(os.environ, PYTHONPATH=os.pathsep.join(
    [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]))


def run(*args, **extra_env):
    """Run a command with the plugin installed; its output."""
    done = subprocess.run(args, env={**env, **extra_env}, cwd=site, capture_output=True,
                          text=True, timeout=300)
    return done.stdout + done.stderr


# %%
# Use the device. A small network runs on it: ``matmul`` and ``relu`` natively, the
# rest (``transpose``, ``sum``...) through the host fallback; ``exp`` natively in float32
# and through the fallback in float64. ``torcia.library.device_ops`` says how the device
# runs each op: natively, through its fallback, through the op's decomposition, or not at
# all (``missing``); ``python -m torcia plugins`` lists the same for every device.

usage = run(sys.executable, "-c", textwrap.dedent("""
    from collections import Counter
    import torcia
    from torcia import library
    torcia.manual_seed(0)
    x = torcia.randn(4, 3).to("tutdev")
    w = torcia.randn(3, 2).to("tutdev")
    y = (x @ w).relu()
    print(y.device, y.sum().item())
    print(x.exp().cpu().allclose(x.cpu().exp()), x.double().exp().dtype)
    ops = library.device_ops("tutdev")
    print(dict(Counter(ops.values())))
    print("native:", sorted(op for op, how in ops.items() if how == "native"))
"""))
print(usage)

# %%
# The same count as a picture: a new device starts almost entirely on its fallback, and
# each kernel its author writes moves one op from the grey bar to the green one.

import ast  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402

counts = ast.literal_eval(usage.splitlines()[2])
kinds = [kind for kind in ("native", "fallback", "decomposed", "missing") if kind in counts]
fig, ax = plt.subplots(figsize=(6, 2.2))
ax.barh(kinds, [counts[kind] for kind in kinds],
        color=[{"native": "tab:green", "fallback": "tab:gray", "decomposed": "tab:blue",
                "missing": "tab:red"}[kind] for kind in kinds])
ax.set_xlabel("ops")
ax.set_title("how the device 'tutdev' runs each op")
fig.tight_layout()
plt.show()

# %%
# The conformance suite: a pytest plugin shipped with torcia-core. For every op with a
# sample input it compares the device's values with the reference kernels (float32,
# float64, integers, broadcast and non-contiguous inputs) and the gradients through the
# device with those on "cpu", then prints the coverage. A plugin's CI runs it in full;
# here ``-k`` keeps it to a few ops (the coverage lines always cover every op).

checks = "add or exp or relu or matmul or sum or softmax"


def summary(output):
    section = output.split("torcia conformance: device 'tutdev'", 1)[1]
    lines = [line[:110] + (" ..." if len(line) > 110 else "") for line in
             section.splitlines()[1:] if line.strip()]
    return "\n".join(lines)


print(summary(run(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                  "--torcia-device", "tutdev", "-k", checks)))

# %%
# A bug is named by op: with ``TUTDEV_BUG=1`` the device's ``add`` is off by one, and the
# suite fails its checks (and those of ops written with ``add``, such as a gradient that
# accumulates), listing each failing op and check.

print(summary(run(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                  "--torcia-device", "tutdev", "-k", checks, TUTDEV_BUG="1")))
