"""A vetted deployment against an attacker who can write to the environment (variables,
``PYTHONPATH``, new files) but not to the vetted files: one test per case of issue 37.

Each test builds a deployment the way pip would leave it: a fresh virtual environment
under a temporary root, torcia's parts copied into its ``site-packages`` with the
``.dist-info`` folders pip writes (``RECORD`` hashes included) and their byte code
compiled, NumPy and pluggy linked from this environment (nothing is downloaded). Its
system config, ``<root>/etc/torcia/config.toml``, is written by the deployer; the attack
then runs in a subprocess.
"""

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
#: the parts a deployment holds: distribution -> source folder
PARTS = {"torcia-core": "packages/core", "torcia-autograd": "packages/autograd",
         "torcia-nn": "packages/nn", "torcia-optim": "packages/optim"}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def install_dist(site: Path, name: str, files: dict[str, bytes], entry_points=None,
                 version="1.0"):
    """Write distribution ``name`` into ``site`` as pip installs a wheel: its files, and a
    ``.dist-info`` with METADATA, entry_points.txt and a RECORD of every file's sha256."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "INSTALLER").write_text("pip\n")
    if entry_points:
        lines = "".join(f"{k} = {v}\n" for k, v in entry_points.items())
        (info / "entry_points.txt").write_text(f"[torcia]\n{lines}")
    for rel, data in files.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    record = []
    for path in sorted([*(site / rel for rel in files), *info.iterdir()]):
        data = path.read_bytes()
        record.append(f"{path.relative_to(site)},sha256={_b64(data)},{len(data)}")
    record.append(f"{info.relative_to(site)}/RECORD,,")
    (info / "RECORD").write_text("\n".join(record) + "\n")
    return info


def _part_files(folder: Path) -> dict[str, bytes]:
    src = folder / "src"
    return {str(p.relative_to(src)): p.read_bytes() for p in sorted(src.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts and ".egg-info" not in str(p)}


def _link_dependencies(site: Path) -> None:
    """NumPy and pluggy, linked from this environment (no index is needed)."""
    import numpy
    import pluggy

    for module in (numpy, pluggy):
        here = Path(module.__file__).parent.parent
        for entry in here.iterdir():
            if entry.name.split("-")[0].split(".")[0] == module.__name__:
                (site / entry.name).symlink_to(entry)


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A deployment's virtual environment, built once per module and copied per test."""
    base = tmp_path_factory.mktemp("template")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path("
                                "'purelib'))"], capture_output=True, text=True,
                               check=True).stdout.strip())
    _link_dependencies(site)
    for dist, folder in PARTS.items():
        meta = tomllib.loads((ROOT / folder / "pyproject.toml").read_text())["project"]
        install_dist(site, dist, _part_files(ROOT / folder),
                     meta.get("entry-points", {}).get("torcia"), version=meta["version"])
    # pip compiles what it installs
    subprocess.run([python, "-m", "compileall", "-q", str(site / "torcia")], check=True)
    return venv


class Deployment:
    """One deployment: ``root`` (the virtual environment, its ``sys.prefix``), ``site``,
    ``config`` (the system config), ``home`` (the attacker's writable place)."""

    def __init__(self, template: Path, tmp: Path):
        self.root = tmp / "venv"
        shutil.copytree(template, self.root, symlinks=True)
        self.python = self.root / "bin" / "python"
        self.site = next(self.root.glob("lib/python3*/site-packages"))
        self.config = self.root / "etc" / "torcia" / "config.toml"
        self.lock_file = self.config.parent / "plugins.lock"
        self.home = tmp / "home"
        self.home.mkdir()

    def env(self, **extra) -> dict:
        env = {"PATH": os.environ["PATH"], "HOME": str(self.home),
               "XDG_CONFIG_HOME": str(self.home / ".config"), "PYTHONDONTWRITEBYTECODE": "1"}
        env.update(extra)
        return env

    def run(self, code: str, *, check=False, timeout=120, **env):
        return subprocess.run([str(self.python), "-c", textwrap.dedent(code)],
                              capture_output=True, text=True, env=self.env(**env),
                              cwd=self.home, timeout=timeout, check=check)

    def torcia(self, *args, timeout=120, **env):
        return subprocess.run([str(self.python), "-m", "torcia", *args], capture_output=True,
                              text=True, env=self.env(**env), cwd=self.home, timeout=timeout)

    def install(self, name, modules: dict[str, str], entry_points=None):
        files = {f"{m.replace('.', '/')}.py": textwrap.dedent(src).encode()
                 for m, src in modules.items()}
        install_dist(self.site, name, files, entry_points)

    def lock(self, *, strict=True, allow=None, write=True):
        """Write the plugin lock (unless not ``write``) and a locked system config that
        names it."""
        self.config.parent.mkdir(parents=True, exist_ok=True)
        if write:
            result = self.torcia("plugins", "lock", str(self.lock_file))
            assert result.returncode == 0, result.stderr
        lines = ["[plugins]", 'lock = "plugins.lock"', "locked = true"]
        if strict:
            lines.append("strict = true")
        if allow is not None:
            lines.append(f"allow = {json.dumps(allow)}")
        self.config.write_text("\n".join(lines) + "\n")

    def check(self, **env):
        """``torcia plugins --check --json``: (exit status, the report)."""
        result = self.torcia("plugins", "--check", "--json", **env)
        try:
            doc = json.loads(result.stdout)
        except ValueError:
            doc = None
        return result.returncode, doc, result


@pytest.fixture
def deployment(template, tmp_path):
    return Deployment(template, tmp_path)


VETTED = {"vetted_mod": """
    import torcia

    @torcia.hookimpl
    def torcia_register_kernels(registry):
        pass
"""}


def problems(doc, kind=None):
    """The problems of a ``--check --json`` report (of one kind)."""
    return [p for p in doc["check"]["problems"] if kind is None or p["kind"] == kind]


def test_a_clean_locked_deployment_passes_the_check(deployment):
    deployment.install("vetted-plugin", VETTED, {"vetted": "vetted_mod"})
    deployment.lock()
    status, doc, result = deployment.check()
    assert status == 0, result.stderr
    assert doc["check"] == {"status": 0, "problems": []}
    assert {p["name"]: p["status"] for p in doc["plugins"]}["vetted"] == "loaded"
    run = deployment.run("import torcia.nn, vetted_mod; print(torcia.ones(2).sum().item())")
    assert (run.returncode, run.stdout.strip()) == (0, "2.0"), run.stderr


# ----- 1. the environment cannot replace or widen the system config ---------------------


@pytest.mark.parametrize("attack", ["TORCIA_SYSTEM_CONFIG", "TORCIA_CONFIG", "TORCIA_PLUGINS"])
def test_1_the_environment_cannot_replace_a_locked_system_config(deployment, attack):
    deployment.install("evil-dist", {"evil_mod": "print('EVIL RAN')\n"}, {"evil": "evil_mod"})
    deployment.config.parent.mkdir(parents=True)
    deployment.config.write_text('[plugins]\nallow = ["torcia-nn"]\nlocked = true\n')
    mine = deployment.home / "attacker.toml"
    mine.write_text('[plugins]\nallow = ["evil-dist"]\n')
    value = "evil-dist" if attack == "TORCIA_PLUGINS" else str(mine)
    result = deployment.run("import torcia; print(torcia.ones(1).tolist())", **{attack: value})
    assert "EVIL RAN" not in result.stdout
    if attack == "TORCIA_PLUGINS":
        # an allowlist from the environment narrows: evil-dist stays outside the root's
        assert result.returncode == 0 and result.stdout.strip() == "[1.0]", result.stderr
        listing = json.loads(deployment.torcia("plugins", "--json", TORCIA_PLUGINS=value).stdout)
        evil = {p["name"]: p for p in listing["plugins"]}["evil"]
        assert evil["status"] == "blocked"
        assert evil["reason"] == f"not in the allowlist (system config {deployment.config}:2)"
    else:
        # naming another config where the root is locked is refused, naming the root's line
        assert result.returncode != 0
        assert f"{attack} is set, but the plugin policy is locked by the system config " \
               f"{deployment.config}:3" in result.stderr


def test_1_the_system_config_is_read_from_the_installation_not_the_environment(deployment):
    deployment.install("evil-dist", {"evil_mod": "print('EVIL RAN')\n"}, {"evil": "evil_mod"})
    deployment.config.parent.mkdir(parents=True)
    deployment.config.write_text('[plugins]\nblock = ["evil-dist"]\n')
    # not locked: another config from the environment adds to the root, never replaces it
    mine = deployment.home / "attacker.toml"
    mine.write_text('[plugins]\nallow = ["evil-dist"]\n')
    result = deployment.run("import torcia; torcia.ones(1)", TORCIA_SYSTEM_CONFIG=str(mine))
    assert result.returncode == 0 and "EVIL RAN" not in result.stdout, result.stderr


# ----- 2. byte code is not what runs: the locked source is ------------------------------


def _forge_pyc(source: Path, code: str) -> Path:
    """Replace the byte code Python keeps for ``source`` with ``code``, under a header that
    still matches the source's size and modification time (so Python would load it)."""
    import importlib.util
    import marshal

    pyc = Path(importlib.util.cache_from_source(str(source)))
    stat = source.stat()
    header = importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little") + \
        int(stat.st_mtime).to_bytes(4, "little") + (stat.st_size & 0xFFFFFFFF).to_bytes(
            4, "little")
    pyc.write_bytes(header + marshal.dumps(compile(code, str(source), "exec")))
    return pyc


def test_2_a_replaced_pyc_of_a_vetted_module_does_not_run(deployment):
    deployment.install("vetted-plugin", VETTED, {"vetted": "vetted_mod"})
    subprocess.run([str(deployment.python), "-m", "compileall", "-q",
                    str(deployment.site / "vetted_mod.py")], check=True)
    deployment.lock()
    plugin = deployment.site / "vetted_mod.py"
    _forge_pyc(plugin, plugin.read_text() + "\nprint('PLUGIN PYC RAN')\n")
    random = deployment.site / "torcia" / "random.py"
    _forge_pyc(random, random.read_text() + "\nprint('CORE PYC RAN')\n")
    result = deployment.run("import torcia; print(torcia.ones(1).tolist())")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[1.0]"
    # and --check reports the byte code that differs from its source
    status, doc, result = deployment.check()
    assert status & 8, result.stderr
    subjects = {p["subject"] for p in problems(doc, "lock")}
    assert {"vetted_mod.py", "torcia/random.py"} <= subjects, problems(doc)


def test_2_a_replaced_pyc_of_torcia_itself_fails_the_check(deployment):
    deployment.lock()
    init = deployment.site / "torcia" / "__init__.py"
    # (it writes to stderr: stdout holds the report)
    _forge_pyc(init, init.read_text() + "\nimport sys\nprint('INIT PYC RAN', file=sys.stderr)\n")
    status, doc, result = deployment.check()
    # torcia/__init__ runs before any check can: --check names its byte code
    assert status & 8, result.stderr
    message = next(p["message"] for p in problems(doc, "lock")
                   if p["subject"] == "torcia/__init__.py")
    assert "byte code" in message and "differs from" in message


# ----- 3. the lock is checked when a module is imported, before it runs -----------------


def test_3_an_edited_locked_module_is_refused_at_import(deployment):
    deployment.lock()
    functional = deployment.site / "torcia" / "nn" / "functional" / "__init__.py"
    functional.write_text(functional.read_text() + "\nprint('EDITED CODE RAN')\n")
    result = deployment.run("import torcia.nn")
    assert "EDITED CODE RAN" not in result.stdout
    assert result.returncode != 0
    assert "torcia/nn/functional/__init__.py was modified after locking" in result.stderr
    status, doc, _ = deployment.check()
    assert status != 0


# ----- 4. a copy earlier on sys.path is not the locked module ---------------------------


def test_4_a_copy_of_a_vetted_module_earlier_on_the_path_is_refused(deployment):
    deployment.install("vetted-plugin", VETTED, {"vetted": "vetted_mod"})
    deployment.lock()
    elsewhere = deployment.home / "shadow"
    elsewhere.mkdir()
    shutil.copy(deployment.site / "vetted_mod.py", elsewhere / "vetted_mod.py")
    result = deployment.run("import torcia; torcia.ones(1)", PYTHONPATH=str(elsewhere))
    assert result.returncode != 0
    assert (f"vetted_mod is imported from {elsewhere / 'vetted_mod.py'}, not from its "
            f"locked file {deployment.site / 'vetted_mod.py'}") in result.stderr
    status, doc, result = deployment.check(PYTHONPATH=str(elsewhere))
    assert status & 8, result.stderr


def test_4_a_copy_of_all_of_torcia_earlier_on_the_path_is_refused(deployment):
    deployment.lock()
    elsewhere = deployment.home / "shadow"
    shutil.copytree(deployment.site / "torcia", elsewhere / "torcia")
    random = elsewhere / "torcia" / "random.py"
    random.write_text(random.read_text() + "\nprint('COPY RAN')\n")
    result = deployment.run("import torcia", PYTHONPATH=str(elsewhere))
    assert "COPY RAN" not in result.stdout
    assert result.returncode != 0
    assert f"torcia is imported from {elsewhere / 'torcia' / '__init__.py'}" in result.stderr
    status, doc, result = deployment.check(PYTHONPATH=str(elsewhere))
    assert status != 0


# ----- 5. --check fails when vetted plugins are gone -------------------------------------


def test_5_a_locked_plugin_uninstalled(deployment):
    deployment.install("vetted-plugin", VETTED, {"vetted": "vetted_mod"})
    deployment.lock(strict=False)
    (deployment.site / "vetted_mod.py").unlink()
    shutil.rmtree(next(deployment.site.glob("vetted_plugin-*.dist-info")))
    status, doc, result = deployment.check()
    assert status & 8, result.stderr
    assert any(p["subject"] == "vetted-plugin:vetted" and "missing" in p["message"]
               for p in problems(doc, "lock")), problems(doc)


def test_5_a_locked_part_hidden_by_a_second_distribution_of_its_name(deployment):
    deployment.lock(strict=False)
    elsewhere = deployment.home / "shadow"
    install_dist(elsewhere, "torcia-nn", {}, version="0.1.0")
    status, doc, result = deployment.check(PYTHONPATH=str(elsewhere))
    assert status & 8, result.stderr
    assert any(p["subject"].startswith("torcia-nn") and "shadow" in p["message"]
               for p in problems(doc, "lock")), problems(doc)


@pytest.mark.parametrize("variable", ["TORCIA_PLUGINS", "TORCIA_DISABLE_PLUGINS"])
def test_5_a_locked_plugin_narrowed_away(deployment, variable):
    deployment.install("vetted-plugin", VETTED, {"vetted": "vetted_mod"})
    deployment.lock(strict=False)
    value = "torcia-nn" if variable == "TORCIA_PLUGINS" else "vetted-plugin"
    status, doc, result = deployment.check(**{variable: value})
    assert status & 8, result.stderr
    assert any(p["subject"] == "vetted-plugin:vetted" and variable in p["message"]
               for p in problems(doc, "lock")), problems(doc)


@pytest.mark.parametrize("name", ["evil.pth", "sitecustomize.py", "usercustomize.py"])
def test_5_an_unlocked_startup_file(deployment, name):
    deployment.lock(strict=False)
    (deployment.site / name).write_text("import os\n" if name.endswith(".pth") else "X = 1\n")
    status, doc, result = deployment.check()
    assert status & 16, result.stderr
    assert [p["subject"] for p in problems(doc, "environment")] == [
        str(deployment.site / name)]
    # in strict mode, start-up refuses it too
    deployment.lock(strict=True, write=False)
    result = deployment.run("import torcia; torcia.ones(1)")
    assert result.returncode != 0 and str(deployment.site / name) in result.stderr


def test_5_plugins_lock_refuses_a_plugin_that_fails(deployment):
    deployment.install("broken-plugin", {"broken_mod": "raise ImportError('needs libfoo')\n"},
                       {"broken": "broken_mod"})
    deployment.config.parent.mkdir(parents=True)
    result = deployment.torcia("plugins", "lock", str(deployment.lock_file))
    assert result.returncode != 0
    assert "broken-plugin:broken" in result.stderr and "needs libfoo" in result.stderr
    assert not deployment.lock_file.exists()


# ----- 6. torcia's own parts are recognised by what cannot be copied ---------------------


def test_6_a_squatted_part_name_is_not_torcias_part(deployment):
    # a distribution named torcia-vision, installed next to torcia-core, whose entry point
    # loads a module of its own: it passes no allowlist as one of torcia's parts would
    deployment.install("torcia-vision", {"squat_mod": "print('SQUAT RAN')\n"},
                       {"vision": "squat_mod"})
    result = deployment.run("import torcia; torcia.ones(1)", TORCIA_PLUGINS="torcia-nn")
    assert result.returncode == 0, result.stderr
    assert "SQUAT RAN" not in result.stdout
    listing = json.loads(deployment.torcia("plugins", "--json",
                                           TORCIA_PLUGINS="torcia-nn").stdout)
    vision = {p["name"]: p for p in listing["plugins"]}["vision"]
    assert (vision["own"], vision["status"]) == (False, "blocked")
    assert {p["name"]: p for p in listing["plugins"]}["nn"]["own"]


# ----- 7. discovery leaves nothing behind when it aborts ---------------------------------


def test_7_a_refusal_leaves_no_state_behind(deployment):
    deployment.install("broken-plugin", {"broken_mod": "raise ImportError('needs libfoo')\n"},
                       {"broken": "broken_mod"})
    result = deployment.run("""
        import torcia
        for attempt in range(3):
            try:
                torcia.ones(1)
            except torcia.plugins.PluginError as exc:
                print(exc)
    """, TORCIA_STRICT_PLUGINS="1")
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 3, result.stderr
    assert all("'broken' (broken-plugin 1.0)" in line and "needs libfoo" in line
               for line in lines), lines


# ----- 8. two distributions registering one plugin name ----------------------------------


def _two_dups(deployment):
    source = "import torcia\n\n@torcia.hookimpl\ndef torcia_register_kernels(registry):\n" \
             "    pass\n"
    deployment.install("dup-dist", {"alpha_mod": source}, {"dup": "alpha_mod"})
    elsewhere = deployment.home / "other"
    install_dist(elsewhere, "dup-dist", {"beta_mod.py": source.encode()}, {"dup": "beta_mod"},
                 version="2.0")
    return elsewhere


def test_8_duplicate_plugin_names_are_a_warning_and_both_are_listed(deployment):
    elsewhere = _two_dups(deployment)
    result = deployment.run("import torcia; torcia.ones(1)", PYTHONPATH=str(elsewhere))
    assert result.returncode == 0, result.stderr
    assert "PluginWarning" in result.stderr
    assert "dup-dist 2.0" in result.stderr and "dup-dist 1.0" in result.stderr
    listing = json.loads(deployment.torcia("plugins", "--json",
                                           PYTHONPATH=str(elsewhere)).stdout)
    rows = [(p["distribution"], p["version"], p["status"]) for p in listing["plugins"]
            if p["distribution"] == "dup-dist"]
    assert sorted(rows) == [("dup-dist", "1.0", "refused"), ("dup-dist", "2.0", "loaded")]


def test_8_duplicate_plugin_names_are_an_error_in_strict_mode(deployment):
    elsewhere = _two_dups(deployment)
    result = deployment.run("import torcia; torcia.ones(1)", PYTHONPATH=str(elsewhere),
                            TORCIA_STRICT_PLUGINS="1")
    assert result.returncode != 0
    assert "PluginError" in result.stderr and "dup-dist" in result.stderr


# ----- 9. a vetted plugin that changes torcia or leaves a thread behind ------------------

PATCHING = {
    "add": "torcia.Tensor.__add__ = lambda self, other: torcia.full_like(self, 1002.0)",
    "manual_seed": "torcia.manual_seed = lambda seed: None",
    "mse_loss": "import torcia.nn.functional as F; F.mse_loss = lambda *a, **k: "
                "torcia.tensor(0.0)",
}


def _patcher(deployment, what):
    # it behaves while it is vetted and locked, and changes torcia once deployed
    deployment.install("patch-plugin", {"patch_mod": f"""
        import os
        import torcia

        if os.environ.get("PATCH_NOW"):
            {PATCHING[what]}
    """}, {"patch": "patch_mod"})


@pytest.mark.parametrize("what", sorted(PATCHING))
def test_9_a_plugin_changing_torcia_is_an_error_naming_it(deployment, what):
    _patcher(deployment, what)
    deployment.lock()
    result = deployment.run("import torcia; torcia.ones(1)", PATCH_NOW="1")
    assert result.returncode != 0
    assert "plugin 'patch' (patch-plugin 1.0)" in result.stderr
    assert what in result.stderr


def test_9_without_strict_mode_the_change_is_undone_and_reported(deployment):
    _patcher(deployment, "add")
    result = deployment.run("""
        import torcia
        torcia.zeros(1)  # discovery
        print((torcia.ones(1) + 1).tolist())
    """, PATCH_NOW="1")
    assert result.stdout.strip() == "[2.0]", result.stderr
    assert "PluginWarning" in result.stderr and "Tensor.__add__" in result.stderr


def test_9_a_thread_left_by_a_plugin_is_reported_and_check_ends(deployment):
    deployment.install("thread-plugin", {"thread_mod": """
        import threading
        import time

        threading.Thread(target=time.sleep, args=(3600,), name="beacon").start()
    """}, {"thread": "thread_mod"})
    deployment.lock(strict=False)
    status, doc, result = deployment.check()
    assert status & 32, result.stderr
    assert any("beacon" in p["message"] and p["subject"] == "thread-plugin:thread"
               for p in problems(doc, "integrity")), problems(doc)
    # the listing, in process, ends too
    listing = deployment.torcia("plugins", timeout=120)
    assert "plugin thread(s) still run: beacon" in listing.stderr


def test_9_torcias_own_rebinding_while_a_plugin_loads_is_no_change(deployment):
    # a Tensor subclass switches __torch_function__ dispatch on: torcia.overrides wraps
    # torcia's functions and Tensor's methods, in torcia's own code
    deployment.install("subclass-plugin", {"subclass_mod": """
        import torcia

        class Tagged(torcia.Tensor):
            pass
    """}, {"subclass": "subclass_mod"})
    result = deployment.run("""
        import sys
        import torcia
        torcia.zeros(1)  # discovery: the plugin's module is imported now
        t = torcia.ones(2).as_subclass(sys.modules["subclass_mod"].Tagged)
        print(type(t + 1).__name__, torcia.add.__wrapped__ is not None)
    """, TORCIA_STRICT_PLUGINS="1")
    assert (result.returncode, result.stdout.split()) == (0, ["Tagged", "True"]), result.stderr
