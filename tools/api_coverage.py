"""Compare torcia's public names with an installed PyTorch's, per namespace, and smoke-call
every name counted present.

For each namespace of the compatibility issue (torch, torch.Tensor, torch.nn,
torch.nn.functional, ...), PyTorch's public names are its ``__all__`` (or the public
attributes PyTorch defines there), leaving out what torcia deliberately does not cover:
JIT/TorchScript, quantization, MKLDNN, XPU/MPS internals, sparse CSR/BSR layouts and
symbolic-shape machinery. A name is *present* when the torcia module that ``torch.<ns>``
maps to (see :mod:`torcia.compat`) has it.

Every present name is then called with small sample arguments: the first argument set
(from a fixed list: no arguments, a float matrix, two matrices, a matrix and a dim, ...)
that PyTorch accepts is given to torcia too, which must accept it. A present name that
torcia rejects where PyTorch did not is counted *broken*, not present. Names PyTorch itself
takes none of the sample sets for are present but *not auto-called*.

Run ``python tools/api_coverage.py`` (PyTorch installed). It writes ``docs/coverage.rst``
(the table) and ``tools/api_coverage.json`` (each present name with the argument set that
smoke-calls it, which ``tests/test_api_coverage.py`` replays without PyTorch). ``--check``
writes nothing and prints the table.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import pathlib
import re
import signal
import sys
import types
import warnings

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent

MAIN_NAMESPACES = [
    "torch", "torch.Tensor", "torch.nn", "torch.nn.functional", "torch.nn.init",
    "torch.nn.utils", "torch.optim", "torch.optim.lr_scheduler", "torch.utils.data",
    "torch.autograd", "torch.amp", "torch.linalg", "torch.fft", "torch.special",
    "torch.distributions", "torch.distributed",
]

#: The subsystems training scripts reach for around the main namespaces (logging, weight
#: averaging, timing, sparse/masked/nested tensors, attention controls, signal windows,
#: interchange, profiling, checkpointing, test helpers, serialization), reported apart.
SUBSYSTEM_NAMESPACES = [
    "torch.utils.tensorboard", "torch.optim.swa_utils", "torch.utils.benchmark",
    "torch.sparse", "torch.masked", "torch.nested", "torch.nn.attention",
    "torch.nn.attention.flex_attention", "torch.signal.windows", "torch.utils.dlpack",
    "torch.profiler", "torch.utils.checkpoint", "torch.autograd.graph", "torch.testing",
    "torch.serialization", "torch.utils.hooks", "torch.nn.utils.rnn",
]

NAMESPACES = MAIN_NAMESPACES + SUBSYSTEM_NAMESPACES

#: Left out by the issue's rules: JIT/TorchScript (and its IR: fork/wait, parse_ir...),
#: quantization, MKLDNN and the other vendor kernels (cuDNN, MIOpen), XPU/MPS/IPU/XLA
#: internals, the block-sparse BSR/BSC layouts and CUDA's 2:4 semi-structured sparsity,
#: symbolic shapes and the functionalization ``*_copy`` variants (the compiler's machinery).
EXCLUDE = re.compile(
    r"jit|script|Script|quantiz|qint|quint|qscheme|^q_|_q_|int_repr|dequantize|fake_quant|"
    r"mkldnn|xpu|mps|ipu|xla|bsr|bsc|semi_structured|SemiStructured|^Sym|"
    r"^sym_|fbgemm|qnnpack|vulkan|^unsafe_|^has_|cudnn_|miopen_|_copy$|^native_|"
    r"^import_ir|parse_ir|parse_schema|type_comment|unify_type|^fork$|^wait$"
)

#: Classes torch re-exports from its C++ core (pybind11 bindings) that are not part of the
#: tensor library: JIT IR nodes and types, dispatch keys, benchmark and serialisation
#: internals; only these few of them are.
_C_KEPT = {"Generator", "Size", "Tensor", "device", "dtype", "finfo", "iinfo", "layout",
           "memory_format", "Stream", "Event"}

#: Never auto-called: they change process-wide state, wait, or need real resources.
NOT_CALLED = re.compile(
    r"^(set_|use_|manual_seed|seed|init_|compile|load|save|from_file|"
    r"wait|barrier|destroy|new_group|monitored|breakpoint|register_|unregister_|"
    r"cuda|empty_cache|synchronize|share_memory|pin_memory|backward|retain_grad|"
    r"requires_grad_|record_stream|resize|set_)|_$"
)


def public_names(torch, ns: str) -> list[str]:
    """PyTorch's public names in namespace ``ns`` (modules left out)."""
    obj = torch.Tensor if ns == "torch.Tensor" else importlib.import_module(ns)
    if ns == "torch.Tensor":
        names = [n for n in dir(obj) if not n.startswith("_")]
    elif hasattr(obj, "__all__"):
        names = list(obj.__all__)
    else:
        names = []
        for n in dir(obj):
            if n.startswith("_"):
                continue
            value = getattr(obj, n)
            module = getattr(value, "__module__", "") or ""
            if isinstance(value, types.ModuleType) or not module.startswith("torch"):
                continue
            names.append(n)
    out = []
    for n in sorted(set(names)):
        if EXCLUDE.search(n):
            continue
        value = getattr(obj, n, None)
        if isinstance(value, types.ModuleType):
            continue
        if ns == "torch" and n not in _C_KEPT and (
                (isinstance(value, type) and (value.__module__ or "").startswith("torch._C"))
                or type(value if isinstance(value, type) else type(value)).__name__
                == "pybind11_type"):
            continue
        out.append(n)
    return out


def torcia_target(ns: str):
    """The torcia object that serves PyTorch's namespace ``ns`` (None: not installed)."""
    import torcia
    from torcia import compat

    if ns == "torch.Tensor":
        return torcia.Tensor
    try:
        return importlib.import_module(compat.torcia_name(ns))
    except ModuleNotFoundError:
        return None


# ---------------------------------------------------------------------------------------
# sample arguments
# ---------------------------------------------------------------------------------------

_RNG = np.random.default_rng(0)
_A = _RNG.uniform(0.1, 0.9, (3, 4)).astype(np.float32)
_V = _RNG.uniform(0.1, 0.9, 4).astype(np.float32)
_Q = (lambda q: (q @ q.T + 4 * np.eye(4)).astype(np.float32))(_RNG.standard_normal((4, 4)))
_I = np.array([0, 2, 1], dtype=np.int64)

#: name -> (receiver or None, argument tokens); tokens name sample values.
ARGSETS = {
    "()": (None, ()),
    "(A)": (None, ("A",)),
    "(V)": (None, ("V",)),
    "(Q)": (None, ("Q",)),
    "(A,A)": (None, ("A", "A")),
    "(A,0)": (None, ("A", 0)),
    "(A,1)": (None, ("A", 1)),
    "(A,0.5)": (None, ("A", 0.5)),
    "(V,V)": (None, ("V", "V")),
    "(Q,Q)": (None, ("Q", "Q")),
    "(Q,V)": (None, ("Q", "V")),
    "(A,A,A)": (None, ("A", "A", "A")),
    "(A,0,I)": (None, ("A", 0, "I")),
    "(I)": (None, ("I",)),
    "(3)": (None, (3,)),
    "(3,4)": (None, (3, 4)),
    "(4,4)": (None, (4, 4)),
    "(P)": (None, ("P",)),
    "(P,0.1)": (None, ("P", 0.1)),
    "A.()": ("A", ()),
    "A.(A)": ("A", ("A",)),
    "A.(0)": ("A", (0,)),
    "A.(1)": ("A", (1,)),
    "A.(0.5)": ("A", (0.5,)),
    "A.(A,A)": ("A", ("A", "A")),
    "A.(0,I)": ("A", (0, "I")),
    "Q.()": ("Q", ()),
    "Q.(Q)": ("Q", ("Q",)),
    "Q.(V)": ("Q", ("V",)),
    "V.()": ("V", ()),
    "V.(V)": ("V", ("V",)),
    "I.()": ("I", ()),
    "I.(I)": ("I", ("I",)),
}


def _values(lib):
    t = lib.tensor
    return {"A": t(_A), "V": t(_V), "Q": t(_Q), "I": t(_I),
            "P": [lib.nn.Parameter(t(_A))] if hasattr(lib, "nn") else None}


def _resolve(token, values):
    return values[token] if isinstance(token, str) else token


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def call_with(lib, holder, name, key, seconds=2):
    """Call ``holder.name`` (``holder`` a module, or ``lib.Tensor`` for methods) with the
    argument set ``key``; return the result or raise what the call raised, or
    ``_Timeout`` after ``seconds`` (a survey skips what takes long; a test gives a
    loaded machine time to build a large default layer such as ``nn.Transformer``)."""
    values = _values(lib)
    receiver, tokens = ARGSETS[key]
    args = [_resolve(tok, values) for tok in tokens]
    if receiver is not None:
        fn = getattr(values[receiver], name)
    else:
        fn = getattr(holder, name)
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(seconds)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            result = fn(*args) if callable(fn) else fn
            if isinstance(fn, type) and hasattr(result, "__enter__"):
                # a switch such as detect_anomaly() or guaranteed_datapipes_determinism()
                # flips process state when made, as PyTorch's do; leaving it restores the
                # state, so that one smoke call does not change what later ones see
                with result:
                    pass
            return result
    finally:
        signal.alarm(0)


def _candidate_keys(is_method, is_class):
    keys = [k for k, (recv, _) in ARGSETS.items() if (recv is not None) == is_method]
    if is_class:
        # layers and losses are built from sizes: try those before tensors
        keys.sort(key=lambda k: not all(isinstance(t, int) for t in ARGSETS[k][1]))
    return keys


def smoke(torch, torcia_obj, ns, name):
    """("ok", key) / ("broken", key, error) / ("uncalled", None)."""
    # event files (torch.utils.tensorboard writes ./runs), processes and distributions'
    # constructors are not smoke-called
    if NOT_CALLED.search(name) or ns in ("torch.distributed", "torch.distributions",
                                         "torch.utils.tensorboard"):
        return ("uncalled", None)
    torch_holder = torch.Tensor if ns == "torch.Tensor" else importlib.import_module(ns)
    value = getattr(torch_holder, name)
    if not callable(value):
        return ("ok", "attr")
    import torcia

    for key in _candidate_keys(ns == "torch.Tensor", isinstance(value, type)):
        try:
            call_with(torch, torch_holder, name, key)
        except BaseException:  # noqa: BLE001 - any failure means: not this argument set
            continue
        try:
            call_with(torcia, torcia_obj, name, key)
        except BaseException as exc:  # noqa: BLE001 - reported
            return ("broken", key, f"{type(exc).__name__}: {str(exc)[:120]}")
        return ("ok", key)
    return ("uncalled", None)


def measure(torch, namespaces=None) -> dict:
    report = {}
    for ns in namespaces or NAMESPACES:
        names = public_names(torch, ns)
        target = torcia_target(ns)
        rows = {"total": len(names), "ok": {}, "uncalled": [], "broken": {}, "missing": []}
        for name in names:
            if target is None or not hasattr(target, name):
                rows["missing"].append(name)
                continue
            result = smoke(torch, target, ns, name)
            if result[0] == "ok":
                rows["ok"][name] = result[1]
            elif result[0] == "uncalled":
                rows["uncalled"].append(name)
            else:
                rows["broken"][name] = [result[1], result[2]]
        report[ns] = rows
    return report


def totals(report, group) -> tuple[int, int]:
    """PyTorch's names and torcia's present ones over the namespaces of ``group``."""
    rows = [report[ns] for ns in group if ns in report]
    return (sum(r["total"] for r in rows),
            sum(len(r["ok"]) + len(r["uncalled"]) for r in rows))


def percent(rows) -> float:
    present = len(rows["ok"]) + len(rows["uncalled"])
    return 100.0 * present / rows["total"] if rows["total"] else 100.0


def render(report, torch_version) -> str:
    lines = [
        "API coverage",
        "============",
        "",
        f"torcia's public names against PyTorch {torch_version}, per namespace, as",
        "``tools/api_coverage.py`` measures them (JIT/TorchScript, quantization, MKLDNN,",
        "XPU/MPS internals and the block-sparse layouts left out). *Present* names exist in",
        "torcia and, where PyTorch accepts one of the tool's sample argument sets, torcia",
        "accepts it too (*called*); *broken* names exist but fail where PyTorch does not,",
        "and count as missing. Regenerate with ``python tools/api_coverage.py``.",
        "",
        ".. list-table::",
        "   :header-rows: 1",
        "",
        "   * - namespace",
        "     - PyTorch names",
        "     - present",
        "     - called",
        "     - broken",
        "     - coverage",
    ]
    for ns, rows in report.items():
        n_present = len(rows["ok"]) + len(rows["uncalled"])
        lines += [f"   * - ``{ns}``", f"     - {rows['total']}", f"     - {n_present}",
                  f"     - {len(rows['ok'])}", f"     - {len(rows['broken'])}",
                  f"     - {percent(rows):.0f}%"]
    for label, group in (("main namespaces", MAIN_NAMESPACES),
                         ("subsystems", SUBSYSTEM_NAMESPACES), ("all", NAMESPACES)):
        total, present = totals(report, group)
        if total:
            lines += [f"   * - {label}", f"     - {total}", f"     - {present}", "     -",
                      "     -", f"     - {100.0 * present / total:.0f}%"]
    lines.append("")
    lines += ["Missing names", "-------------", ""]
    for ns, rows in report.items():
        gone = sorted(rows["missing"]) + sorted(rows["broken"])
        if gone:
            lines += [f"``{ns}``", "", "   " + ", ".join(f"``{n}``" for n in gone), ""]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="print, write nothing")
    parser.add_argument("--broken", action="store_true", help="list the broken names")
    parser.add_argument("--subsystems", action="store_true",
                        help="measure the subsystem namespaces only (implies --check)")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("api_coverage: PyTorch is not installed; nothing to compare with",
              file=sys.stderr)
        return 2
    report = measure(torch, SUBSYSTEM_NAMESPACES if args.subsystems else None)
    for ns, rows in report.items():
        print(f"{ns:36s} {rows['total']:5d} names  {percent(rows):5.1f}%  "
              f"broken {len(rows['broken'])}")
        if args.broken:
            for name, (key, err) in sorted(rows["broken"].items()):
                print(f"    {name}{key}: {err}")
            if rows["missing"]:
                print(f"    missing: {', '.join(sorted(rows['missing']))}")
    for label, group in (("main namespaces", MAIN_NAMESPACES),
                         ("subsystems", SUBSYSTEM_NAMESPACES)):
        total, present = totals(report, group)
        if total:
            print(f"{label}: {present} of {total} names ({100.0 * present / total:.1f}%)")
    if not (args.check or args.subsystems):
        (ROOT / "docs" / "coverage.rst").write_text(render(report, torch.__version__))
        data = {"torch": torch.__version__,
                "namespaces": {ns: rows["ok"] for ns, rows in report.items()}}
        (ROOT / "tools" / "api_coverage.json").write_text(json.dumps(data, indent=1,
                                                                     sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
