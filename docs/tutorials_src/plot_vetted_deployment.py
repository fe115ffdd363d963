"""
A vetted deployment: wheelhouse, hash-pinned install, plugin lock, check, attacks
==================================================================================

torcia loads its plugins from whatever is installed, so a production machine should run
exactly the code that was reviewed. Five steps get there:

1. build a **wheelhouse**: the wheels of the parts you deploy, with ``tools/build_wheels.py``,
   which also writes a ``requirements.txt`` pinning each wheel by its sha256;
2. install from it with ``pip install --require-hashes``: pip refuses a wheel whose hash
   differs, and ``--no-index`` keeps it off the package index;
3. write a **plugin lock** with ``torcia plugins lock``: every plugin's version, location,
   the hash of every one of its files and of their byte code; it refuses a plugin that does
   not load. The lock is the vetted list: review it as code;
4. name it in the **system config**, ``<sys.prefix>/etc/torcia/config.toml``, the policy's
   root, which nothing in the environment can replace;
5. run ``torcia plugins --check`` in CI and at start-up: its exit status says what differs
   from the lock.

Here we deploy torcia-nn with a third-party loss plugin (torcia-focal-loss) into a fresh
virtual environment, lock it, review and check it, see the lock refuse a file changed after
review, and then attack the deployment as someone who can write to its environment
(variables, ``PYTHONPATH``, new files) but not to the vetted files.
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
# The plugin lock, and its review
# -------------------------------
# ``torcia plugins lock`` loads every plugin the policy allows (in a child process, so that
# a plugin that hangs cannot hang it) and records those that load, torcia's own parts
# included, with the sha256 of each file as the wheels' RECORD lists them and of the byte
# code pip compiled beside each module. It refuses a file that already differs from its
# RECORD, and a plugin that fails to load: nothing broken is ever vetted. The lock and the
# system config go under the environment's prefix (``/etc/torcia`` would serve every
# environment of the machine).
etc = venv / "etc" / "torcia"
etc.mkdir(parents=True)
lock = etc / "plugins.lock"
run(python, "-m", "torcia", "plugins", "lock", lock, cwd=work)
doc = json.loads(lock.read_text())

# %%
# The lock is what a reviewer signs off: one entry per distribution, with its version, where
# it is installed, the entry points it may load, and how many files and byte-code files are
# pinned. Commit it beside the wheelhouse's ``requirements.txt``; a change to either is a
# change to review.
for entry in doc["distributions"]:
    print(f"{entry['distribution']:18} {entry['version']:8} {len(entry['files']):4} files "
          f"{len(entry['bytecode']):4} pycs  entry points: {entry['entry_points'] or '-'}")
print("start-up files:", list(doc["startup"]) or "none")
pinned = {d["distribution"]: len(d["files"]) for d in doc["distributions"]}

# %%
# The system config
# -----------------
# The root of the policy. ``locked = true``: no other config, and no other lock, may be
# named by the environment or the user; ``strict = true``: a failed or refused plugin is
# an error rather than a warning.
(etc / "config.toml").write_text('[plugins]\nlock = "plugins.lock"\nstrict = true\n'
                                 'locked = true\n')

# %%
# The check
# ---------
# ``--check`` is the CI step: it runs discovery in a child process with a timeout and exits
# with the sum of the kinds of problem it found; 0 here, every plugin loaded and pinned.
env = {"PATH": os.environ["PATH"], "HOME": str(work), "PYTHONDONTWRITEBYTECODE": "1"}


def check(**extra):
    """``torcia plugins --check --json``: its exit status, each plugin, each problem."""
    result = subprocess.run([python, "-m", "torcia", "plugins", "--check", "--json"],
                            env={**env, **extra}, cwd=work, capture_output=True, text=True,
                            timeout=300)
    report = json.loads(result.stdout)
    return result.returncode, report["plugins"], report["check"]["problems"]


def verdicts(plugins):
    return {p["distribution"]: p["status"] for p in plugins}


before = check()
print("exit status", before[0], verdicts(before[1]))

# %%
# A change after review
# ---------------------
# Someone edits the installed plugin (or a compromised mirror served another file). The
# lock notices: torcia refuses the plugin before importing it, and ``--check`` fails the
# deployment (1: a plugin refused; 8: a locked plugin not loaded).
plugin_file = site / "torcia_focal_loss" / "__init__.py"
reviewed = plugin_file.read_bytes()
plugin_file.write_bytes(reviewed + b"\nprint('not what was reviewed')\n")
after = check()
print("exit status", after[0], verdicts(after[1]))
print(next(p["reason"] for p in after[1] if p["status"] == "refused"))
plugin_file.write_bytes(reviewed)

# %%
# Attacks
# -------
# Now an attacker who can set environment variables, put folders on ``PYTHONPATH`` and add
# files, but cannot change the vetted files. Each attack runs a small workload (a focal
# loss, through torcia-nn and the plugin) and says whether the attacker's code ran.
workload = ("import torcia, torcia.nn.functional as F, torcia_focal_loss\n"
            "print(torcia.ones(2).sum().item())\n")


def attempt(**extra):
    """Run the workload; (exit status, whether the attacker's code ran, last error line)."""
    result = subprocess.run([python, "-c", workload], env={**env, **extra}, cwd=work,
                            capture_output=True, text=True, timeout=300)
    error = (result.stderr.strip().splitlines() or [""])[-1]
    return result.returncode, "ATTACKER" in result.stdout + result.stderr, error


attacks = {}
mine = work / "mine"
mine.mkdir()

# %%
# **The environment names another system config.** The root stays the root: with
# ``locked = true``, naming another config is refused, with the root's file and line.
(mine / "config.toml").write_text('[plugins]\nblock = ["nothing"]\n')
attacks["TORCIA_SYSTEM_CONFIG"] = attempt(TORCIA_SYSTEM_CONFIG=str(mine / "config.toml"))
print(attacks["TORCIA_SYSTEM_CONFIG"])

# %%
# **Byte code replaced.** A ``__pycache__`` file with other code, and a header that still
# matches the source's size and time, so that Python would load it. The lock guard runs
# the checked source (or the byte code the lock pinned) instead; ``--check`` reports it.
import importlib.util  # noqa: E402
import marshal  # noqa: E402

pyc = Path(importlib.util.cache_from_source(str(plugin_file)))
original_pyc = pyc.read_bytes()
forged = compile(plugin_file.read_text() + "\nprint('ATTACKER')\n", str(plugin_file), "exec")
pyc.write_bytes(original_pyc[:16] + marshal.dumps(forged))
attacks["replaced byte code"] = attempt()
print(attacks["replaced byte code"], "check:", check()[0])
pyc.write_bytes(original_pyc)

# %%
# **A vetted module edited.** The guard checks ``torcia/nn/functional/__init__.py`` when it is
# imported, before a line of it runs.
functional = site / "torcia" / "nn" / "functional" / "__init__.py"
vetted = functional.read_bytes()
functional.write_bytes(vetted + b"\nprint('ATTACKER')\n")
attacks["edited module"] = attempt()
print(attacks["edited module"])
functional.write_bytes(vetted)

# %%
# **A copy earlier on the path.** The plugin's package, copied (then changed) into a folder
# on ``PYTHONPATH``: it is not the locked file, so it is refused wherever it comes from.
shadow = mine / "torcia_focal_loss"
shadow.mkdir()
(shadow / "__init__.py").write_bytes(reviewed + b"\nprint('ATTACKER')\n")
attacks["copy on PYTHONPATH"] = attempt(PYTHONPATH=str(mine))
print(attacks["copy on PYTHONPATH"])

# %%
# **A .pth file.** Python runs it at every start, before torcia can check anything: the
# lock cannot stop it, but ``--check`` finds it (16: a start-up file the lock does not pin)
# and strict mode refuses to start.
pth = site / "zz_attacker.pth"
pth.write_text("import sys; sys.stderr.write('ATTACKER\\n')\n")
attacks[".pth file"] = attempt()
status, _, problems = check()
print(attacks[".pth file"], "check:", status, [p["subject"] for p in problems])
pth.unlink()

# %%
# What each attack got: the attacker's code never ran, except the ``.pth`` file, which
# Python itself runs and which the check and strict mode catch. Beside it, what the lock
# pins and the verdict before and after the change above.
names = sorted(pinned)
fig, axes = plt.subplots(1, 3, figsize=(13, 2.8))
for ax, (status, plugins, _), title in ((axes[0], before, "as installed"),
                                         (axes[1], after, "after the edit")):
    colours = ["tab:green" if verdicts(plugins).get(n) == "loaded" else "tab:red"
               for n in names]
    ax.barh(names, [pinned[n] for n in names], color=colours)
    ax.set_title(f"{title}: --check exits {status}")
    ax.set_xlabel("files pinned in the lock")
labels = list(attacks)
ran = [attacks[a][1] for a in labels]
axes[2].barh(labels, [1] * len(labels), color=["tab:red" if r else "tab:green" for r in ran])
axes[2].set_xticks([])
axes[2].set_title("attacks: green = the attacker's code did not run")
fig.tight_layout()
plt.show()
assert ran == [False, False, False, False, True], attacks
