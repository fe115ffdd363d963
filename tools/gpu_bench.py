"""The training workloads of ``benchmarks/bench_training.py`` on "cuda": torcia eager,
torcia compiled (``torcia.compile`` of the whole step) and PyTorch eager on the same GPU,
in one run, with the ratios of torcia's step times to PyTorch's. Run by ``tools/gpu_check``.

    python tools/gpu_bench.py [--only mlp,cnn] [--seconds 1.0] [--diagnose DIR]

Each workload is built by the same code for both frameworks (their APIs match) with the
default device set to "cuda"; each step is timed with the device synchronised before and
after a batch of steps (a batch of about ``--seconds``). ``--diagnose DIR`` also writes,
per workload, the first host synchronisation a torcia step makes (``cupyx``'s
``allow_synchronize``: where Python waits for the GPU) and a cProfile of a few steps,
to ``DIR/profile_<workload>.txt``.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import importlib.util
import io
import pstats
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ("mlp", "cnn", "resnet18", "gpt", "lstm")


def _training():
    spec = importlib.util.spec_from_file_location(
        "bench_training", ROOT / "benchmarks" / "bench_training.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(lib, name):
    """The workload's step, its model and data made on "cuda"."""
    lib.set_default_device("cuda")
    try:
        return _training().WORKLOADS[name](lib)
    finally:
        # PyTorch's default device is a mode every call goes through: off while timing
        lib.set_default_device(None)


def time_step(step, sync, seconds, warmup=3):
    """(seconds per step, seconds of the first call): ``warmup`` calls, then a batch of
    calls of about ``seconds`` in all, the device synchronised around it."""
    start = time.perf_counter()
    step()
    sync()
    first = time.perf_counter() - start
    for _ in range(warmup - 1):
        step()
    sync()
    start = time.perf_counter()
    step()
    sync()
    one = max(time.perf_counter() - start, 1e-6)
    number = max(3, min(200, int(seconds / one)))
    start = time.perf_counter()
    for _ in range(number):
        step()
    sync()
    return (time.perf_counter() - start) / number, first


def _compiled(torcia, step):
    """torcia.compile of the step, and what its guard log said while it warmed up."""
    torcia.compiler.set_logs(guards=True)
    compiled = torcia.compile(step)
    said = io.StringIO()

    def run():
        with contextlib.redirect_stderr(said):
            compiled()

    return run, said


def diagnose(torcia, name, step, folder: Path) -> str:
    """Write where a torcia step waits for the GPU and a cProfile of it; returns the
    first synchronisation's place, in one line."""
    import cupyx

    out = io.StringIO()
    step()
    torcia.cuda.synchronize()
    first = "none"
    forbid = getattr(cupyx, "allow_synchronize", None)
    try:
        if forbid is None:
            raise RuntimeError("this CuPy has no cupyx.allow_synchronize")
        with forbid(False):
            step()
        print("no host synchronisation in a step", file=out)
    except Exception as exc:  # noqa: BLE001 - cupyx.DeviceSynchronized, or what it hid
        frames = [f for f in traceback.extract_tb(exc.__traceback__)
                  if "torcia" in f.filename or "bench" in f.filename]
        print(f"first host synchronisation ({type(exc).__name__}: {exc}):", file=out)
        print("".join(traceback.format_list(frames[-8:])), file=out)
        if frames:
            f = frames[-1]
            first = f"{Path(f.filename).name}:{f.lineno} {f.name}"
    torcia.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(5):
        step()
    torcia.cuda.synchronize()
    prof.disable()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("tottime").print_stats(30)
    stats.print_callers(r"'get' of|'item' of|__bool__|tolist|asnumpy|synchronize")
    (folder / f"profile_{name}.txt").write_text(out.getvalue())
    return first


def _ms(cells, key) -> str:
    return f"{cells[key] * 1e3:9.2f} ms" if key in cells else f"{'-':>12}"


def _ratio(cells, key) -> str:
    if key in cells and "pytorch" in cells:
        return f"{cells[key] / cells['pytorch']:8.2f}x"
    return f"{'-':>9}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(WORKLOADS))
    parser.add_argument("--seconds", type=float, default=1.0,
                        help="timed steps per workload and framework, in seconds")
    parser.add_argument("--diagnose", metavar="DIR", type=Path, default=None)
    parser.add_argument("--no-compile", action="store_true")
    args = parser.parse_args(argv)

    import torcia

    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and not torch.cuda.is_available():
        torch = None
    print(f"device: {torcia.cuda.get_device_name()}; torch: "
          f"{torch.__version__ if torch else 'not there (no ratios)'}", flush=True)
    head = (f"{'workload':<10}{'torcia eager':>14}{'compiled':>12}{'pytorch':>12}"
            f"{'eager/pt':>10}{'comp/pt':>9}  notes")
    rows = [head]
    print(head, flush=True)
    failed = 0
    for name in args.only.split(","):
        cells, notes = {}, []
        try:
            step = build(torcia, name)
            cells["eager"], first = time_step(step, torcia.cuda.synchronize, args.seconds)
            notes.append(f"first step {first:.1f}s")
            if not args.no_compile:
                run, said = _compiled(torcia, build(torcia, name))
                cells["compiled"], first = time_step(run, torcia.cuda.synchronize,
                                                     args.seconds)
                guards = [line.split("] ", 1)[-1] for line in said.getvalue().splitlines()
                          if "guards" in line]
                notes.append(f"compile {first:.1f}s" + (f" [{guards[-1][:110]}]"
                                                        if guards else ""))
            if args.diagnose is not None:
                args.diagnose.mkdir(parents=True, exist_ok=True)
                notes.append("sync: " + diagnose(torcia, name, step, args.diagnose))
        except Exception as exc:  # noqa: BLE001 - one failing workload must not hide the others
            failed += 1
            notes.append(f"torcia FAILED: {type(exc).__name__}: {str(exc)[:200]}")
            traceback.print_exc()
        if torch is not None:
            try:
                cells["pytorch"], _ = time_step(build(torch, name), torch.cuda.synchronize,
                                                args.seconds)
            except Exception as exc:  # noqa: BLE001
                notes.append(f"torch failed: {type(exc).__name__}: {exc}")

        row = (f"{name:<10}{_ms(cells, 'eager'):>14}{_ms(cells, 'compiled'):>12}"
               f"{_ms(cells, 'pytorch'):>12}{_ratio(cells, 'eager'):>10}"
               f"{_ratio(cells, 'compiled'):>9}  {'; '.join(notes)}")
        rows.append(row)
        print(row, flush=True)
    print("\n".join(["", "summary:"] + rows))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
