"""The developer tools: tools/parts.py, tools/install_parts.py, tools/check_deps.py and
tools/core_layout.py."""

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import build_wheels  # noqa: E402
import check_deps  # noqa: E402
import core_layout  # noqa: E402
import install_parts  # noqa: E402
import parts  # noqa: E402


def write_part(root, family, short, name, deps=(), modules=None, version="0.1.0"):
    folder = root / family / short
    folder.mkdir(parents=True)
    listed = "".join(f'    "{d}",\n' for d in deps)
    (folder / "pyproject.toml").write_text(
        f'[build-system]\nrequires = ["setuptools>=77"]\n\n'
        f'[project]\nname = "{name}"\nversion = "{version}"\ndependencies = [\n{listed}]\n'
    )
    for rel, source in (modules or {}).items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))


@pytest.fixture
def fake_repo(tmp_path):
    write_part(tmp_path, "packages", "core", "torcia-core",
               modules={"src/torcia/__init__.py": "", "src/torcia/ops.py": ""})
    write_part(tmp_path, "packages", "autograd", "torcia-autograd", ["torcia-core>=0.1,<0.2"],
               modules={"src/torcia/autograd/__init__.py": "import torcia.ops\n"})
    write_part(tmp_path, "packages", "nn", "torcia_nn",
               ["torcia-core>=0.1,<0.2", "torcia-autograd>=0.1,<0.2", "numpy>=1.26"],
               modules={"src/torcia/nn/__init__.py": "from torcia import autograd\n"})
    return tmp_path


def test_the_repository_passes_its_dependency_check():
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "check_deps.py")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 problem(s)" in result.stdout


def test_a_clean_fake_repository_has_no_problems(fake_repo):
    assert check_deps.check(fake_repo) == []


def test_check_deps_finds_each_kind_of_problem(fake_repo):
    write_part(fake_repo, "plugins", "bad", "torcia-bad", [
        "torcia-core>=0.1",          # no upper bound
        "torcia-autograd>=0.2,<0.3",  # excludes 0.1.0
        "torcia-missing>=0.1,<0.2",   # not in the repository
    ], modules={
        "src/torcia_bad/__init__.py": "import torcia\nfrom torcia.nn import Linear\n",
        "tests/test_bad.py": "from torcia import nn\n",
    })
    problems = check_deps.check(fake_repo)
    assert problems == [
        "torcia-bad: 'torcia-core>=0.1' needs a lower and an upper bound, "
        "e.g. 'torcia-core>=0.1,<0.2'",
        "torcia-bad: 'torcia-autograd>=0.2,<0.3' excludes torcia-autograd 0.1.0, "
        "the version here",
        "torcia-bad: 'torcia-missing>=0.1,<0.2' names a distribution that is not in this "
        "repository",
        "plugins/bad/src/torcia_bad/__init__.py imports torcia.nn from torcia-nn, which "
        "torcia-bad does not list in its dependencies or extras",
        "plugins/bad/tests/test_bad.py imports torcia.nn from torcia-nn, which torcia-bad "
        "does not list in its dependencies or its 'test' extra",
    ]


def test_tests_may_import_the_parts_of_the_test_extra(fake_repo):
    write_part(fake_repo, "plugins", "kern", "torcia-kern", ["torcia-core>=0.1,<0.2"], modules={
        "src/torcia_kern/__init__.py": "import torcia\n",
        "tests/test_kern.py": "from torcia.autograd import gradcheck\n",
    })
    pyproject = fake_repo / "plugins" / "kern" / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + \
        '[project.optional-dependencies]\ntest = ["torcia-autograd>=0.1,<0.2"]\n')
    assert check_deps.check(fake_repo) == []
    found = parts.discover(fake_repo)
    kern = parts.lookup(found, "kern")
    assert [p.short for p in parts.closure(found, kern)] == ["core", "kern"]
    assert [p.short for p in parts.closure(found, kern, tests=True)] == [
        "core", "kern", "autograd"]


def test_code_may_import_the_parts_of_its_other_extras(fake_repo):
    write_part(fake_repo, "plugins", "gpu", "torcia-gpu", ["torcia-core>=0.1,<0.2"], modules={
        "src/torcia_gpu/group.py": "from torcia.nn import Module\n",
    })
    pyproject = fake_repo / "plugins" / "gpu" / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + \
        '[project.optional-dependencies]\nlayers = ["torcia-nn>=0.1"]\n')
    # the extra is checked as a dependency is: here, for its missing upper bound
    assert check_deps.check(fake_repo) == [
        "torcia-gpu: 'torcia-nn>=0.1' needs a lower and an upper bound, e.g. "
        "'torcia-nn>=0.1,<0.2'"]
    pyproject.write_text(pyproject.read_text().replace('"torcia-nn>=0.1"',
                                                       '"torcia-nn>=0.1,<0.2"'))
    assert check_deps.check(fake_repo) == []
    # an optional feature is not installed with the part
    found = parts.discover(fake_repo)
    assert [p.short for p in parts.closure(found, parts.lookup(found, "gpu"))] == [
        "core", "gpu"]

def test_closure_puts_dependencies_first(fake_repo):
    found = parts.discover(fake_repo)
    nn = parts.lookup(found, "torcia-nn")
    assert [p.short for p in parts.closure(found, nn)] == ["core", "autograd", "nn"]


@pytest.mark.parametrize("key", ["nn", "torcia-nn", "torcia_nn", "packages/nn"])
def test_lookup_accepts_folder_distribution_and_path(fake_repo, monkeypatch, key):
    monkeypatch.chdir(fake_repo)
    assert [p.name for p in parts.lookup(parts.discover(fake_repo), key)] == ["torcia-nn"]


def test_lookup_of_a_family_and_of_an_unknown_name(fake_repo):
    found = parts.discover(fake_repo)
    assert {p.short for p in parts.lookup(found, "packages")} == {"core", "autograd", "nn"}
    with pytest.raises(SystemExit, match="'vision' is not a part of this repository"):
        parts.lookup(found, "vision")


def test_pip_commands_install_the_parts_and_no_build_tool(fake_repo):
    found = parts.discover(fake_repo)
    selected = parts.closure(found, parts.lookup(found, "autograd"))
    core, autograd = (str(fake_repo / "packages" / p) for p in ("core", "autograd"))
    # setuptools already there: built in place, quickly
    assert install_parts.pip_commands(selected, "py", editable=True,
                                      present={"setuptools"}) == [
        ["py", "-m", "pip", "install", "--no-build-isolation", "-e", core, "-e", autograd],
    ]
    # not there: an editable install gets it first, since pip's isolated build would leave
    # the parts' *.egg-info in the checkout
    assert install_parts.pip_commands(selected, "py", editable=True) == [
        ["py", "-m", "pip", "install", "setuptools>=77"],
        ["py", "-m", "pip", "install", "--no-build-isolation", "-e", core, "-e", autograd],
    ]
    # a plain install: pip's isolated build brings it, and the environment does not get it;
    # what is built is the copy of each part
    copies = {"torcia-core": "/tmp/c/core", "torcia-autograd": "/tmp/c/autograd"}
    assert install_parts.pip_commands(selected, "py") == [
        ["py", "-m", "pip", "install", core, autograd],
    ]
    assert install_parts.pip_commands(selected, "py", isolated=True, pip_args=["-q"],
                                      sources=copies) == [
        ["py", "-m", "pip", "install", "-q", "/tmp/c/core", "/tmp/c/autograd"],
    ]


def test_a_part_named_with_extras_is_installed_with_them(fake_repo):
    found = parts.discover(fake_repo)
    selected = parts.closure(found, parts.lookup(found, "autograd"))
    core, autograd = (str(fake_repo / "packages" / p) for p in ("core", "autograd"))
    assert install_parts._split_extras("autograd[fast, mkl]") == ("autograd", "fast,mkl")
    assert install_parts._split_extras("autograd") == ("autograd", "")
    with pytest.raises(SystemExit, match="expected a part, optionally with extras"):
        install_parts._split_extras("autograd[mkl")
    assert install_parts.pip_commands(selected, "py", editable=True, present={"setuptools"},
                                      extras={"torcia-autograd": "mkl"}) == [
        ["py", "-m", "pip", "install", "--no-build-isolation", "-e", core,
         "-e", f"{autograd}[mkl]"],
    ]


def test_parts_not_built_with_setuptools_keep_build_isolation_and_come_last(fake_repo):
    write_part(fake_repo, "plugins", "native", "torcia-native", ["torcia-core>=0.1,<0.2"])
    pyproject = fake_repo / "plugins" / "native" / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(
        'requires = ["setuptools>=77"]',
        'requires = ["scikit-build-core"]\nbuild-backend = "scikit_build_core.build"'))
    found = parts.discover(fake_repo)
    selected = parts.closure(found, parts.lookup(found, "native"))
    core, native = (str(fake_repo / p) for p in ("packages/core", "plugins/native"))
    assert install_parts.pip_commands(selected, "py", present={"setuptools"}) == [
        ["py", "-m", "pip", "install", "--no-build-isolation", core],
        ["py", "-m", "pip", "install", native],
    ]


def test_link_installs_parts_without_pip_where_a_fresh_python_finds_them(fake_repo, tmp_path):
    pyproject = fake_repo / "packages" / "nn" / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + '\n[project.entry-points.torcia]\n'
                         'nn = "torcia.nn"\n\n[project.scripts]\ntorcia-nn = "torcia.nn:main"\n')
    # as core's: the parts' folders make one torcia package
    (fake_repo / "packages" / "core" / "src" / "torcia" / "__init__.py").write_text(
        "__path__ = __import__('pkgutil').extend_path(__path__, __name__)\n")
    found = parts.discover(fake_repo)
    site = tmp_path / "site"
    others = install_parts.link(parts.closure(found, parts.lookup(found, "nn")), site)
    assert others == ["numpy>=1.26"]
    # twice is once: the .pth lists each folder one time
    install_parts.link(parts.closure(found, parts.lookup(found, "nn")), site)
    assert len((site / install_parts.LINK_FILE).read_text().split()) == 3
    script = (
        "import importlib.metadata as m, site, sys\n"
        f"site.addsitedir({str(site)!r})\n"
        "import torcia.nn\n"
        "d = m.distribution('torcia_nn')\n"
        "print(d.version, sorted(d.requires), sorted((e.group, e.name) for e in d.entry_points))\n")
    # -S: none of the environment's own site-packages, where the real parts are
    out = subprocess.run([sys.executable, "-I", "-S", "-c", script], capture_output=True, text=True,
                         check=True).stdout.split("\n")[0]
    assert out == ("0.1.0 ['numpy>=1.26', 'torcia-autograd>=0.1,<0.2', 'torcia-core>=0.1,<0.2'] "
                   "[('console_scripts', 'torcia-nn'), ('torcia', 'nn')]")


def test_link_refuses_a_part_that_needs_building(fake_repo):
    write_part(fake_repo, "plugins", "native", "torcia-native", ["torcia-core>=0.1,<0.2"])
    pyproject = fake_repo / "plugins" / "native" / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(
        'requires = ["setuptools>=77"]',
        'requires = ["scikit-build-core"]\nbuild-backend = "scikit_build_core.build"'))
    found = parts.discover(fake_repo)
    with pytest.raises(SystemExit, match="pure-Python parts only.*torcia-native"):
        install_parts.link(parts.closure(found, parts.lookup(found, "native")), fake_repo / "s")


def test_a_private_core_import_outside_core_fails_the_check(fake_repo):
    write_part(fake_repo, "plugins", "sneaky", "torcia-sneaky", ["torcia-core>=0.1,<0.2"],
               modules={
                   "src/torcia_sneaky/__init__.py": (
                       "import torcia\nfrom torcia._tensor import call\n"
                       "from torcia import _dtype\ntorcia._thread_callbacks.append(print)\n"
                       "from torcia.library import call as ok\n"),
               })
    # core itself may use its private modules
    (fake_repo / "packages" / "core" / "src" / "torcia" / "ops.py").write_text(
        "from torcia import _dtype\n")
    assert check_deps.check(fake_repo) == [
        f"plugins/sneaky/src/torcia_sneaky/__init__.py uses {name}, which is private to "
        "torcia-core: use torcia.library or the public API"
        for name in ("torcia._dtype", "torcia._tensor", "torcia._thread_callbacks")
    ]


def test_private_names_of_cores_modules_and_tensor_fail_the_check(fake_repo):
    (fake_repo / "packages" / "core" / "src" / "torcia" / "ops.py").write_text(
        "class Tensor:\n    __slots__ = ('_data', '_vc', '__weakref__')\n"
        "    _version = property(lambda self: self._vc[0])\n"
        "    def _make(cls, data): ...\n    __torcia_data__ = None\n"
        "_callbacks = []\n")
    write_part(fake_repo, "plugins", "sneaky", "torcia-sneaky", ["torcia-core>=0.1,<0.2"],
               modules={
                   "src/torcia_sneaky/__init__.py": (
                       "import torcia.ops as O\nfrom torcia import ops\n"
                       "from torcia.ops import Tensor, _callbacks\n"
                       "def f(t, u):\n    t._vc[0] += 1\n    ops._callbacks.append(f)\n"
                       "    return Tensor._make(u._data), O._callbacks\n"
                       "def ok(t, other):\n    other._private = 1\n"
                       "    return t.__torcia_data__, t._version\n"),
                   # a tensor subclass's self is a tensor; another class's self is not
                   "src/torcia_sneaky/sub.py": (
                       "from torcia.ops import Tensor\nclass Sub(Tensor):\n    pass\n"
                       "class SubSub(Sub):\n    def g(self):\n        return self._vc\n"),
                   "src/torcia_sneaky/other.py": (
                       "class Store:\n    def g(self):\n        return self._data\n"),
               })
    assert check_deps.check(fake_repo) == [
        f"plugins/sneaky/src/torcia_sneaky/{file} uses {name}, which is private to "
        "torcia-core: use torcia.library or the public API"
        for file, name in (("__init__.py", "Tensor._data"), ("__init__.py", "Tensor._make"),
                           ("__init__.py", "Tensor._vc"), ("__init__.py", "torcia.ops._callbacks"),
                           ("sub.py", "Tensor._vc"))
    ]


def test_a_module_named_by_a_string_follows_the_dependencies(fake_repo):
    write_part(fake_repo, "packages", "opt", "torcia-opt", ["torcia-core>=0.1,<0.2"],
               modules={
                   "src/torcia/opt/__init__.py": (
                       "import importlib\nnn = importlib.import_module('torcia.nn')\n"
                       "def part(name):\n"
                       "    return importlib.import_module(f'torcia.autograd.{name}')\n"
                       "ops = __import__('torcia.ops')\n"),
                   # a test may load a sample plugin by its name
                   "tests/test_opt.py": "import importlib\nimportlib.import_module('torcia.nn')\n",
               })
    assert check_deps.check(fake_repo) == [
        f"packages/opt/src/torcia/opt/__init__.py imports by name {module} from {owner}, "
        "which torcia-opt does not list in its dependencies or extras"
        for module, owner in (("torcia.autograd", "torcia-autograd"), ("torcia.nn", "torcia-nn"))
    ]


def test_dependencies_must_follow_the_architecture_arrows(fake_repo):
    (fake_repo / "architecture.toml").write_text(
        '[parts.torcia-core]\nuses = []\n[parts.torcia-autograd]\nuses = ["torcia-core"]\n'
        '[parts.torcia-nn]\nuses = ["torcia-autograd"]\n'
        '[parts.torcia-opt]\nuses = ["torcia-core"]\n')
    assert check_deps.check(fake_repo) == []  # nn reaches core through autograd
    write_part(fake_repo, "packages", "opt", "torcia-opt",
               ["torcia-core>=0.1,<0.2", "torcia-nn>=0.1,<0.2"],
               modules={"src/torcia/opt/__init__.py": "import torcia.nn\n"})
    write_part(fake_repo, "plugins", "stray", "torcia-stray", ["torcia-core>=0.1,<0.2"])
    assert check_deps.check(fake_repo) == [
        "torcia-opt depends on torcia-nn, which architecture.toml does not allow "
        "(allowed: torcia-core)",
        "torcia-stray is not in architecture.toml: add the parts it may use there",
    ]


def test_the_repository_lists_every_part_in_its_architecture():
    arrows = check_deps.load_arrows(ROOT)
    assert arrows is not None
    assert set(arrows) == set(parts.discover())


def test_every_distribution_ships_the_license():
    # setuptools and scikit-build-core put a LICENSE next to pyproject.toml into the wheel
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License")
    folders = [ROOT] + [part.path for part in parts.discover(ROOT).values()]
    assert len(folders) > 10
    for folder in folders:
        assert (folder / "LICENSE").read_text() == text, folder
        assert 'license = "BSD-3-Clause"' in (folder / "pyproject.toml").read_text(), folder


def test_build_wheels_builds_the_closure_and_downloads_third_party_wheels(fake_repo):
    found = parts.discover(fake_repo)
    selected = parts.closure(found, parts.lookup(found, "nn"))
    paths = [str(fake_repo / "packages" / p) for p in ("core", "autograd", "nn")]
    assert build_wheels.wheel_commands(selected, "wh", "py", with_deps=True) == [
        ["py", "-m", "pip", "wheel", "--no-deps", "-w", "wh", *paths],
        ["py", "-m", "pip", "download", "--only-binary", ":all:", "-d", "wh", "numpy>=1.26"],
    ]


def test_build_wheels_pins_each_wheel_by_sha256(tmp_path):
    import hashlib

    core = tmp_path / "torcia_core-0.1.0-py3-none-any.whl"
    core.write_bytes(b"core wheel")
    numpy = tmp_path / "numpy-2.1.0-cp311-cp311-manylinux_2_17_x86_64.whl"
    numpy.write_bytes(b"numpy wheel")
    text = build_wheels.requirements([core, numpy])
    assert text == (
        f"numpy==2.1.0 \\\n    --hash=sha256:{hashlib.sha256(b'numpy wheel').hexdigest()}\n"
        f"torcia-core==0.1.0 \\\n    --hash=sha256:{hashlib.sha256(b'core wheel').hexdigest()}\n")


@pytest.mark.slow
def test_installs_leave_no_build_metadata_in_the_checkout(fake_repo, tmp_path_factory):
    """demo.sh and test.sh install the same checkout into two environments: a part's
    ``*.egg-info`` left in its folder is on the path of every editable install of it, where
    it reads as a second installed copy (and breaks the docs' count of parts)."""
    shutil.copytree(ROOT / "tools", fake_repo / "tools",
                    ignore=shutil.ignore_patterns("__pycache__"))
    # a fresh venv: its bundled setuptools is too old to build a part, as in demo.sh's
    venv = tmp_path_factory.mktemp("env") / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    python = venv / "bin" / "python"
    count = ("import importlib.metadata as m; print(sorted(d.metadata['Name'] for d in "
             "m.distributions() if d.metadata['Name'].startswith('torcia')))")
    for how in (["--editable"], [], ["--editable"]):
        subprocess.run([python, fake_repo / "tools" / "install_parts.py", *how,
                        "--pip-arg=-q", "autograd"], check=True, cwd=fake_repo)
        left = [str(p.relative_to(fake_repo)) for p in fake_repo.rglob("*")
                if p.name == "build" or p.name.endswith(".egg-info")]
        assert left == [], f"install_parts {how} left {left} in the checkout"
        listed = subprocess.run([python, "-c", count], check=True, capture_output=True,
                                text=True, cwd=tmp_path_factory.getbasetemp()).stdout
        assert listed.strip() == "['torcia-autograd', 'torcia-core']"


def test_the_package_torcia_is_a_layer_of_its_own_module():
    # named alone: its name is not a prefix that puts every unnamed module in its layer
    layers = [name for name, _ in core_layout.LAYERS]
    assert layers.index("public API") < layers.index("package") < layers.index("services")
    assert core_layout.layer_of("torcia") == layers.index("package")
    assert core_layout.layer_of("torcia.not_in_a_layer") is None
    graph = {"torcia.linalg": {"torcia"}, "torcia.masked._ops": {"torcia"},
             "torcia": {"torcia.linalg"}, "torcia.version": {"torcia.library"}}
    # below the package, importing it runs upward; above it, it does not; the facade
    # is imported by no module of core
    assert core_layout.upward_imports(graph) == [
        "torcia.linalg (public API) -> torcia (package)",
        "torcia.version (services) -> torcia.library (facade)"]
