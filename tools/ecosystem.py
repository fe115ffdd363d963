#!/usr/bin/env python3
"""The ecosystem harness: unmodified PyTorch libraries run on torcia, compared with PyTorch.

The libraries of ``tools/ecosystem/requirements.txt`` (timm, transformers, torchmetrics,
einops, ...) are installed, pinned and without their dependencies, into an environment
(``.venv-eco``) laid over the test environment (``.venv-test``: torcia's parts and, where
CI installs it, PyTorch), with the other packages they need from
``tools/ecosystem/deps.txt``. Each case of ``tools/ecosystem/cases/`` (small configs, weights
seeded from NumPy, nothing downloaded) then runs twice in fresh processes: through the compat
runner (``python -m torcia.compat``, so ``import torch`` is torcia) and, where PyTorch is
installed, on PyTorch. The arrays each run returns are compared within the case's tolerance.

Each case ends as PASS (same values as PyTorch, or ran where PyTorch is absent), FAIL (raised
on torcia, or differed: the first error or difference is printed), SKIP (needs a torcia
part that is not installed) or XFAIL (known not to run yet; XPASS when it does). The last
line counts them; the exit status is 1 when any case failed.

Usage::

    python3 tools/ecosystem.py                 # install (once, then up to date) and run
    python3 tools/ecosystem.py -k transformers # the cases whose name contains a word
    python3 tools/ecosystem.py --no-install --report eco.json
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "tools" / "ecosystem"
RUN_CASE = HERE / "run_case.py"


def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _site_packages(python: Path) -> str:
    return subprocess.check_output(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        text=True).strip()


def install(venv: Path, test_venv: Path) -> None:
    """Create ``venv`` over ``test_venv`` and install the pinned libraries into it."""
    if not _python(test_venv).exists():
        sys.exit(f"ecosystem: no test environment at {test_venv} (run ./tools/test.sh first)")
    if not _python(venv).exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # the test environment's packages (torcia's parts, editable; PyTorch where installed)
    # are seen from this one: a site directory added after its own
    overlay = Path(_site_packages(_python(venv))) / "_torcia_test_env.pth"
    overlay.write_text(f"import site; site.addsitedir({_site_packages(_python(test_venv))!r})\n")
    pip = [str(_python(venv)), "-m", "pip", "install", "--disable-pip-version-check"]
    subprocess.run(pip + ["-r", str(HERE / "deps.txt")], check=True)
    subprocess.run(pip + ["--no-deps", "-r", str(HERE / "requirements.txt")], check=True)


def _run(cmd, timeout: float) -> tuple[int, str, str]:
    env = dict(os.environ, PYTHONHASHSEED="0", TOKENIZERS_PARALLELISM="false",
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TORCIA_HUB_OFFLINE="1",
               OMP_NUM_THREADS="1")
    env.pop("PYTHONPATH", None)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                           cwd=str(HERE))
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {timeout:.0f}s"
    return p.returncode, p.stdout, p.stderr


def first_error(stderr: str) -> str:
    """The exception line of a traceback, with the innermost frame's place."""
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    if not lines:
        return "failed without a message"
    where = ""
    for ln in lines:
        s = ln.strip()
        if s.startswith('File "'):
            path, _, rest = s[6:].partition('", line ')
            where = f"{_short(path)}:{rest.split(',')[0]}"
    error = lines[-1].strip()
    for ln in reversed(lines):
        if ln and not ln.startswith(" ") and ":" in ln and not ln.startswith("Traceback"):
            error = ln.strip()
            break
    return f"{error[:300]}" + (f" (at {where})" if where else "")


def _short(path: str) -> str:
    for marker in ("site-packages/", "/packages/", "/plugins/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


def compare(torcia_npz: Path, torch_npz: Path) -> tuple[bool, str]:
    import numpy as np

    a, b = np.load(torcia_npz), np.load(torch_npz)
    meta = json.loads(str(b["__meta__"]))
    rtol, atol = meta["rtol"], meta["atol"]
    keys_a, keys_b = set(a.files) - {"__meta__"}, set(b.files) - {"__meta__"}
    if keys_a != keys_b:
        return False, (f"different outputs: only on torcia {sorted(keys_a - keys_b)[:5]}, "
                       f"only on torch {sorted(keys_b - keys_a)[:5]}")
    worst = 0.0
    for key in sorted(keys_b):
        x, y = a[key], b[key]
        if x.shape != y.shape:
            return False, f"{key}: shape {list(x.shape)} on torcia, {list(y.shape)} on torch"
        if y.dtype.kind in "fc" or x.dtype.kind in "fc":
            x64, y64 = x.astype(np.float64), y.astype(np.float64)
            if not np.allclose(x64, y64, rtol=rtol, atol=atol, equal_nan=True):
                diff = np.abs(x64 - y64)
                i = np.unravel_index(np.nanargmax(diff), diff.shape) if diff.ndim else ()
                return False, (f"{key}: differs by {float(diff[i]):.3g} at {list(i)} "
                               f"({float(x64[i]):.6g} on torcia, {float(y64[i]):.6g} on "
                               f"torch; rtol={rtol}, atol={atol})")
            if x64.size:
                worst = max(worst, float(np.nanmax(np.abs(x64 - y64))))
        elif not np.array_equal(x, y):
            return False, f"{key}: values differ ({x.ravel()[:6]} vs {y.ravel()[:6]})"
    return True, f"{len(keys_b)} outputs, max |diff| {worst:.2g}"


def run_case(python: Path, case: dict, have_torch: bool, tmp: Path, timeout: float) -> dict:
    name = f"{case['module']}.{case['case']}"
    out_torcia, out_torch = tmp / f"{name}.torcia.npz", tmp / f"{name}.torch.npz"
    args = [case["module"], case["case"]]
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        on_torcia = pool.submit(_run, [str(python), "-m", "torcia.compat", str(RUN_CASE),
                                       *args, str(out_torcia)], timeout)
        on_torch = pool.submit(_run, [str(python), str(RUN_CASE), *args, str(out_torch)],
                               timeout) if have_torch else None
        rc, out, err = on_torcia.result()
        torch_result = on_torch.result() if on_torch else None
    result = {**case, "name": name, "seconds": round(time.monotonic() - started, 1)}
    if rc == 3:
        return {**result, "status": "SKIP", "detail": out.strip()}
    if rc != 0:
        ok, detail = False, first_error(err)
    elif torch_result is None:
        ok, detail = True, "ran (PyTorch is not installed: not compared)"
    elif torch_result[0] != 0:
        # e.g. timm needs torchvision, which has no CPU build for this PyTorch on PyPI
        ok, detail = True, ("ran; not compared: the case does not run on PyTorch here ("
                            + first_error(torch_result[2]) + ")")
    else:
        ok, detail = compare(out_torcia, out_torch)
    known = case.get("known_failure")
    if known:
        status = "XPASS" if ok else "XFAIL"
        detail = detail if ok else f"{detail} [known: {known}]"
    else:
        status = "PASS" if ok else "FAIL"
    return {**result, "status": status, "detail": detail}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", default=os.environ.get("TORCIA_ECO_VENV", ".venv-eco"))
    parser.add_argument("--test-venv", default=os.environ.get("TORCIA_TEST_VENV", ".venv-test"))
    parser.add_argument("--no-install", action="store_true",
                        help="use the environment as it is")
    parser.add_argument("-k", dest="pattern", default="",
                        help="only the cases whose module.case name contains this")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per case run")
    parser.add_argument("--report", help="write the results as JSON to this file")
    args = parser.parse_args(argv)
    venv, test_venv = ROOT / args.venv, ROOT / args.test_venv
    if not args.no_install:
        install(venv, test_venv)
    python = _python(venv)
    rc, out, err = _run([str(python), "-c", "import torch; print(torch.__version__)"], 120)
    have_torch = rc == 0
    print(f"ecosystem: PyTorch {out.strip() if have_torch else 'is not installed'}; torcia "
          f"through the compat runner", flush=True)
    rc, out, err = _run([str(python), "-m", "torcia.compat", str(RUN_CASE), "--list"], 300)
    if rc != 0:
        print(err, file=sys.stderr)
        sys.exit("ecosystem: could not list the cases")
    cases = [c for c in json.loads(out) if args.pattern in f"{c['module']}.{c['case']}"]
    if not cases:
        sys.exit(f"ecosystem: no case matches {args.pattern!r}")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            r = run_case(python, case, have_torch, Path(tmp), args.timeout)
            results.append(r)
            print(f"{r['status']:5} {r['name']} ({r['seconds']}s): {r['detail']}", flush=True)
    print("\nper library (cases that run as on PyTorch / cases):")
    for lib in sorted({r["library"] for r in results}):
        mine = [r for r in results if r["library"] == lib]
        good = sum(r["status"] in ("PASS", "XPASS") for r in mine)
        print(f"  {lib}: {good}/{len(mine)}")
    if args.report:
        Path(args.report).write_text(json.dumps(results, indent=1))
    counts = {s: sum(r["status"] == s for r in results)
              for s in ("PASS", "FAIL", "SKIP", "XFAIL", "XPASS")}
    print(f"{counts['PASS'] + counts['XPASS']} passed, {counts['FAIL']} failed, "
          f"{counts['SKIP']} skipped, {counts['XFAIL']} xfailed")
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
