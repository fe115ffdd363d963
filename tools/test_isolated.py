"""Run each part's tests in an environment that holds only that part, the torcia parts it
declares (with those its ``test`` extra names), and the test tools: a part whose tests pass
here does not lean on a part it fails to declare.

For each part, ``.venv-iso/<part>`` is created afresh (so nothing stays from an earlier
run), the part is installed with :mod:`install_parts` and its fast tests are run. The test
tools are installed once, into ``.venv-iso/_tools``, which each part's environment sees.

It is what ``tox -e <part>`` does, for every part found: tox knows only the environments
tox.ini names, so a new plugin is tested alone here before anyone adds it there.

Examples
--------
::

    python tools/test_isolated.py               # every part that has source
    python tools/test_isolated.py nn example    # those two
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import parts as repo

TOOLS = Path(__file__).resolve().parent
VENVS = repo.ROOT / ".venv-iso"


def site_packages(python: Path) -> Path:
    """The site-packages folder of the environment whose interpreter is ``python``."""
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return Path(subprocess.run([python, "-c", code], capture_output=True, text=True,
                               check=True).stdout.strip())


def make_tools_env(python: str, venvs: Path = VENVS) -> Path:
    """A fresh environment with the test tools only (pytest, hypothesis..., pip); returns
    its site-packages, which every part's environment sees through a ``.pth`` file."""
    venv = venvs / "_tools"
    subprocess.run([python, "-m", "venv", "--clear", venv], check=True)
    subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "-q", "-r",
                    TOOLS / "requirements-test.txt"], check=True)
    return site_packages(venv / "bin" / "python")


def run_part(part: repo.Part, python: str, tools_site: Path,
             venvs: Path = VENVS) -> tuple[int, float, float]:
    """Create the part's environment, install it and run its tests: (exit status, seconds
    installing, seconds testing).

    The environment is new each time and holds only the part and what it needs; the test
    tools come from the shared tools environment, so that they are installed once per run
    rather than once per part.
    """
    start = time.monotonic()
    venv = venvs / part.short
    subprocess.run([python, "-m", "venv", "--clear", "--without-pip", venv], check=True)
    venv_python = venv / "bin" / "python"
    (site_packages(venv_python) / "_torcia_test_tools.pth").write_text(f"{tools_site}\n")
    install = [venv_python, TOOLS / "install_parts.py", "--editable", "--with-tests",
               "--pip-arg=-q", part.short]
    returncode = subprocess.run(install, cwd=repo.ROOT).returncode
    installed = time.monotonic()
    if returncode:
        return returncode, installed - start, 0.0
    test = [venv_python, "-m", "pytest", "-q", "-m", "not slow", part.path / "tests"]
    returncode = subprocess.run(test, cwd=repo.ROOT).returncode
    return returncode, installed - start, time.monotonic() - installed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("parts", nargs="*", help="folder or distribution names (default: all)")
    parser.add_argument("--python", default=sys.executable, help="the Python to create venvs")
    parser.add_argument(
        "--venvs", type=Path, default=VENVS,
        help="where the environments go (default: .venv-iso); two runs at once need two",
    )
    args = parser.parse_args(argv)

    found = repo.discover()
    if args.parts:
        selected = [p for key in args.parts for p in repo.lookup(found, key)]
    else:
        selected = []
        for part in found.values():
            if repo.has_source(part):
                selected.append(part)
            else:
                print(f"test_isolated: {part.name} has no source yet; skipped", flush=True)

    start = time.monotonic()
    tools_site = make_tools_env(args.python, args.venvs)
    tools_seconds = time.monotonic() - start
    results = {}
    for part in selected:
        print(f"\n== {part.name} alone", flush=True)
        results[part.name] = run_part(part, args.python, tools_site, args.venvs)

    print("\n== each part alone (seconds installing, testing)")
    print(f"{'the test tools':28} {'':20} {tools_seconds:6.1f}s")
    for name, (returncode, install_seconds, test_seconds) in results.items():
        # pytest's 5 means it collected no test, which counts as a failure here
        verdict = "ok" if returncode == 0 else f"FAILED (exit {returncode})"
        print(f"{name:28} {verdict:20} {install_seconds:6.1f}s {test_seconds:6.1f}s")
    print(f"{'in all':28} {'':20} {time.monotonic() - start:6.1f}s")
    failed = [name for name, (returncode, *_) in results.items() if returncode]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
