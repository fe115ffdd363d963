"""
A vetted deployment: wheelhouse, hash-pinned install, plugin lock, check
========================================================================

torcia loads its plugins from whatever is installed, so a production machine should run
exactly the code that was reviewed. Four steps get there:

1. build a **wheelhouse**: the wheels of the parts you deploy, with ``tools/build_wheels.py``,
   which also writes a ``requirements.txt`` pinning each wheel by its sha256;
2. install from it with ``pip install --require-hashes``: pip refuses a wheel whose hash
   differs, and ``--no-index`` keeps it off the package index;
3. write a **plugin lock** with ``torcia plugins lock``: every plugin's version and the hash of
   every one of its files;
4. run ``torcia plugins --check`` with the lock in force, in CI and at start-up: it exits
   with status 1 when a plugin failed, was refused or is not pinned.

Here we deploy torcia-nn with a third-party loss plugin (torcia-focal-loss) into a fresh
virtual environment, lock it, check it, and then see the lock refuse a file changed after
review.
"""

import json
import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt

# the checkout's root: the build runs this script in docs/tutorials_src
root = next(p for p in [Path.cwd(), *Path.cwd().parents]
            if (p / "tools" / "build_wheels.py").exists())
work = Path(tempfile.mkdtemp())


def run(*command, **kwargs):
    """Run a command, print what it printed, and return its result."""
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True,
                            timeout=300, **kwargs)
    print(result.stdout.strip() or result.stderr.strip())
    return result


# %%
# The wheelhouse
# --------------
# ``build_wheels.py`` takes parts by folder or distribution name and adds the torcia parts
# they need (torcia-focal-loss needs torcia-nn, which needs torcia-autograd and torcia-core).
# Each wheel is built from a copy of its part; ``--with-deps`` would also download the
# third-party wheels (NumPy, pluggy) for a machine without an index. The build here reuses
# this environment's setuptools (``--no-build-isolation``) so that it needs no network.
wheelhouse = work / "wheelhouse"
built = run(sys.executable, root / "tools" / "build_wheels.py", "focal-loss",
            "--out", wheelhouse, "--pip-arg=--no-build-isolation", "--pip-arg=-q")
assert built.returncode == 0, built.stderr
print((wheelhouse / "requirements.txt").read_text())

# %%
# A hash-pinned install
# ---------------------
# A fresh virtual environment stands for the production machine. On a real one, the
# wheelhouse holds NumPy and pluggy too and a single command installs everything::
#
#     pip install --no-index --find-links wheelhouse --require-hashes \
#         -r wheelhouse/requirements.txt
#
# This build machine may have no index, so the new environment borrows this one's NumPy and
# pluggy (linked into its site-packages) and pip installs the torcia wheels alone.
venv = work / "venv"
subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
python = venv / "bin" / "python"
where = "import sysconfig; print(sysconfig.get_path('purelib'))"
site = Path(subprocess.run([python, "-c", where], capture_output=True, text=True,
                           check=True).stdout.strip())
here = Path(sysconfig.get_path("purelib"))
for entry in here.iterdir():
    if entry.name.split("-")[0].split(".")[0] in ("numpy", "pluggy"):
        (site / entry.name).symlink_to(entry)
installed = run(sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-index",
                "--find-links", wheelhouse, "--require-hashes", "--no-deps",
                "-r", wheelhouse / "requirements.txt")
assert installed.returncode == 0, installed.stderr

# %%
# The plugin lock
# ---------------
# ``torcia plugins lock`` records every plugin that loads under the current policy (torcia's
# own parts included) with the sha256 of each of its files, as the wheels' RECORD lists
# them. It refuses to lock a file that already differs from its RECORD.
lock = work / "torcia-plugins.lock"
run(python, "-m", "torcia", "plugins", "lock", lock, cwd=work)
pinned = {d["distribution"]: len(d["files"]) for d in json.loads(lock.read_text())["distributions"]}
print(pinned)

# %%
# The check
# ---------
# The lock is in force through ``TORCIA_PLUGIN_LOCK`` (or ``lock = ...`` in the system
# config, with ``locked = true`` so that no user setting can replace it). ``--check`` is
# the CI step: status 0 here, every plugin loaded and pinned.
env = {**os.environ, "TORCIA_PLUGIN_LOCK": str(lock)}


def check():
    """``torcia plugins --check`` (with ``--json``): its exit status and each plugin."""
    result = subprocess.run([python, "-m", "torcia", "plugins", "--check", "--json"], env=env,
                            cwd=work, capture_output=True, text=True)
    return result.returncode, json.loads(result.stdout)["plugins"]


def verdicts(plugins):
    return {p["distribution"]: p["status"] for p in plugins}


before = check()
print("exit status", before[0], verdicts(before[1]))

# %%
# A change after review
# ---------------------
# Someone edits the installed plugin (or a compromised mirror served another file). The
# lock notices: torcia refuses the plugin before importing it, the rest of torcia keeps
# working, and ``--check`` fails the deployment.
plugin_file = site / "torcia_focal_loss" / "__init__.py"
plugin_file.write_text(plugin_file.read_text() + "\nprint('not what was reviewed')\n")
after = check()
print("exit status", after[0], verdicts(after[1]))
print(next(p["reason"] for p in after[1] if p["status"] == "refused"))

# %%
# What the lock pins, and the verdict before and after the change: each distribution's
# files, coloured by its plugin's status.
names = sorted(pinned)
fig, axes = plt.subplots(1, 2, figsize=(9, 2.6), sharey=True)
for ax, (status, plugins), title in ((axes[0], before, "as installed"),
                                      (axes[1], after, "after the edit")):
    colours = ["tab:green" if verdicts(plugins).get(n) == "loaded" else "tab:red"
               for n in names]
    ax.barh(names, [pinned[n] for n in names], color=colours)
    ax.set_title(f"{title}: --check exits {status}")
    ax.set_xlabel("files pinned in the lock")
fig.tight_layout()
plt.show()
