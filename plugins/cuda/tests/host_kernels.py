"""``cupy.ElementwiseKernel`` on the host: the kernel's C body compiled by the host's C++
compiler into a loop over NumPy arrays, so that the fused kernels' source runs (and is
checked) without a GPU.

As in CuPy, an argument is a scalar or an array by what the call passes; input arrays bind
their element by value, output arrays by reference, ``raw`` arrays are indexed by the body
(with the loop index ``i``); ``T`` is the arrays' element type; a ``preamble`` comes
before the loop (``__device__`` means nothing on the host). Arrays must be contiguous;
the input arrays that are not raw broadcast to the output arrays' shape, as CuPy's do.
"""

from __future__ import annotations

import ctypes
import hashlib
import pathlib
import shutil
import subprocess
import tempfile

import numpy as np

CXX = shutil.which("c++") or shutil.which("g++")
_C_TYPES = {"float64": ("double", ctypes.c_double), "float32": ("float", ctypes.c_float),
            "bool": ("bool", ctypes.c_bool), "int64": ("long long", ctypes.c_longlong),
            "int32": ("int", ctypes.c_int)}
_BUILD = pathlib.Path(tempfile.mkdtemp(prefix="torcia-host-kernels-"))

_PRELUDE = """
#include <cmath>
#define __device__
using std::exp;
using std::sqrt;
using std::tanh;
using std::log;
using std::log1p;
using std::expm1;
using std::exp2;
using std::erf;
using std::pow;
using std::sin;
using std::cos;
using std::fabs;
using std::fma;
template <typename U> static inline U max(U a, U b) { return a > b ? a : b; }
template <typename U> static inline U min(U a, U b) { return a < b ? a : b; }
"""


def _params(text):
    """``[(raw, type, name)]`` of a CuPy parameter string."""
    params = []
    for p in text.split(","):
        words = p.split()
        if words:
            params.append((words[0] == "raw", *words[-2:]))
    return params


class ElementwiseKernel:
    def __init__(self, in_params, out_params, operation, name="kernel", preamble="",
                 **options):
        self.inputs, self.outputs = _params(in_params), _params(out_params)
        self.operation, self.name, self.preamble = operation, name, preamble
        self._built = {}

    def __call__(self, *args):
        params = self.inputs + self.outputs
        if len(args) != len(params):
            raise TypeError(f"{self.name} takes {len(params)} arguments, got {len(args)}")
        # a NumPy scalar (a reduction's result) is a 0-d array, as CuPy's would be
        args = [np.asarray(a) if isinstance(a, np.generic) else a for a in args]
        n_in = len(self.inputs)
        shape = next((a.shape for a, (raw, _, _) in zip(args[n_in:], self.outputs)
                      if isinstance(a, np.ndarray) and not raw), None)
        if shape is not None:
            args = [np.ascontiguousarray(np.broadcast_to(a, shape))
                    if k < n_in and isinstance(a, np.ndarray) and not params[k][0] else a
                    for k, a in enumerate(args)]
        kinds = tuple(isinstance(a, np.ndarray) for a in args)
        arrays = [a for a in args if isinstance(a, np.ndarray)]
        looped = [a for a, (raw, _, _) in zip(args, params) if isinstance(a, np.ndarray)
                  and not raw]
        dtype, size = arrays[0].dtype, looped[0].size
        for a in arrays:
            if a.dtype != dtype or not a.flags.c_contiguous:
                raise ValueError(f"{self.name}: arrays must be contiguous and of one dtype")
        if any(a.size != size for a in looped):
            raise ValueError(f"{self.name}: the arrays that are not raw differ in size")
        run = self._build(_C_TYPES[dtype.name][0], kinds)
        c_args = [ctypes.c_longlong(size)]
        for (_, ptype, _), arg, is_array in zip(params, args, kinds):
            if is_array:
                c_args.append(ctypes.c_void_p(arg.ctypes.data))
            else:
                ctype = _C_TYPES[dtype.name if ptype == "T" else ptype][1]
                c_args.append(ctype(arg))
        run(*c_args)

    def _build(self, t, kinds):
        key = (t, kinds)
        if key not in self._built:
            n_in = len(self.inputs)
            signature, binds = ["long long n"], []
            for k, ((raw, ptype, name), is_array) in enumerate(zip(self.inputs + self.outputs,
                                                                     kinds)):
                ctype = t if ptype == "T" else _C_TYPES[ptype][0]
                if is_array and raw:
                    signature.append(f"{'const ' if k < n_in else ''}{ctype}* {name}")
                elif is_array:
                    signature.append(f"{ctype}* {name}_")
                    binds.append(f"{ctype}{'&' if k >= n_in else ''} {name} = {name}_[i];")
                else:
                    signature.append(f"{ctype} {name}")
            source = (f"{_PRELUDE}\ntypedef {t} T;\n{self.preamble}\nextern \"C\" void run("
                      + ", ".join(signature) + ") {\n  for (long long i = 0; i < n; ++i) {\n"
                      + "\n".join(binds) + "\n" + self.operation + "\n  }\n}\n")
            digest = hashlib.sha256(source.encode()).hexdigest()[:16]
            cpp, lib = _BUILD / f"{digest}.cpp", _BUILD / f"{digest}.so"
            cpp.write_text(source)
            subprocess.run([CXX, "-O2", "-shared", "-fPIC", "-std=c++17", str(cpp), "-o",
                            str(lib)], check=True, capture_output=True, text=True)
            self._built[key] = ctypes.CDLL(str(lib)).run
        return self._built[key]
