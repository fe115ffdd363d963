"""Fused CUDA kernels: the optimizer updates (one launch per parameter) and the LSTM cell.

torcia-optim's per-parameter path updates a parameter in about ten elementwise operations
(each a kernel launch and a pass over memory on the GPU), as core's reference LSTM cell
takes about ten for one step; these kernels do each in one. Each is a
:class:`cupy.ElementwiseKernel` whose body is plain C (arithmetic, ``sqrt``, ``exp``,
``tanh``, ``max``), so the tests compile the very same body with the host's C++ compiler
and check it against the NumPy kernels on the CPU; ``tools/gpu_check`` checks it on a GPU.
The optimizer updates follow torcia-optim's per-parameter path step for step, as
torcia-optim asks of a kernel.

A kernel is described by :class:`Spec` (array and scalar parameters apart, which CuPy's
parameter string does not say) and built once per process by :func:`kernels`.
"""

from __future__ import annotations

import dataclasses
import functools

from torcia.library import fallback


@dataclasses.dataclass(frozen=True)
class Spec:
    """One elementwise kernel: ``inputs`` (arrays read), ``scalars`` (``"type name"``,
    per call), ``outputs`` (arrays read and written in place) and the C body, run for
    each element ``i`` with the arrays' elements bound to their names (``T`` is their
    type). An array named ``"raw name"`` is not bound to an element: the body indexes it."""

    name: str
    inputs: tuple[str, ...]
    scalars: tuple[str, ...]
    outputs: tuple[str, ...]
    body: str

    def params(self):
        """CuPy's ``(in_params, out_params)`` strings."""
        ins = [_array(a) for a in self.inputs] + list(self.scalars)
        return ", ".join(ins), ", ".join(_array(a) for a in self.outputs)


def _array(name):
    return f"raw T {name.split()[1]}" if name.startswith("raw ") else f"T {name}"


# add's alpha, lerp_ and addcmul_ as one fma each (one rounding), as torch's kernels and
# the per-parameter path compute them
_SGD_BODY = """
T d = maximize ? -g : g;
if (weight_decay != 0) d = fma(p, (T)weight_decay, d);
MOMENTUM
p = fma(d, (T)(-lr), p);
"""
_MOMENTUM = """
buf = first ? d : fma(d, (T)(1 - dampening), buf * (T)momentum);
d = nesterov ? fma(buf, (T)momentum, d) : buf;
"""
_SGD_SCALARS = ("float64 lr", "float64 weight_decay", "float64 momentum", "float64 dampening",
                "bool nesterov", "bool maximize", "bool first")

_ADAM_BODY = """
T d = maximize ? -g : g;
if (weight_decay != 0) {
    if (decoupled) p *= (T)(1 - lr * weight_decay);
    else d = fma(p, (T)weight_decay, d);
}
const T w = (T)(1 - beta1);  /* lerp_'s weight: from the gradient's end from 0.5 */
m = (w < (T)0.5 && w > (T)-0.5) ? fma(w, d - m, m) : fma(-(d - m), (T)1 - w, d);
v = fma((T)(1 - beta2) * d, d, v * (T)beta2);
T second = v;
AMSGRAD
p += m * (T)(-step_size) / (sqrt(second) / (T)bias_correction2_sqrt + (T)eps);
"""

_ADAM_SCALARS = ("float64 lr", "float64 beta1", "float64 beta2", "float64 eps",
                 "float64 weight_decay", "bool decoupled", "bool maximize",
                 "float64 step_size", "float64 bias_correction2_sqrt")

# the LSTM cell over (M, H) elements; the gates (M, 4H) are indexed: [i f g o] quarters
_LSTM_INDEX = """
const long long row = i / hidden, k = i % hidden;
const long long at = row * 4 * hidden + k;
"""
_LSTM_BODY = _LSTM_INDEX + """
const T ig = 1 / (1 + exp(-gates[at]));
const T fg = 1 / (1 + exp(-gates[at + hidden]));
const T gg = tanh(gates[at + 2 * hidden]);
const T og = 1 / (1 + exp(-gates[at + 3 * hidden]));
c_new = fg * c + ig * gg;
h = og * tanh(c_new);
act[at] = ig;
act[at + hidden] = fg;
act[at + 2 * hidden] = gg;
act[at + 3 * hidden] = og;
"""
_LSTM_BACKWARD_BODY = _LSTM_INDEX + """
const T ig = act[at], fg = act[at + hidden], gg = act[at + 2 * hidden];
const T og = act[at + 3 * hidden];
const T tc = tanh(c_new);
const T dc = gc + gh * og * (1 - tc * tc);
g_gates[at] = dc * gg * ig * (1 - ig);
g_gates[at + hidden] = dc * c * fg * (1 - fg);
g_gates[at + 2 * hidden] = dc * ig * (1 - gg * gg);
g_gates[at + 3 * hidden] = gh * tc * og * (1 - og);
g_c = dc * fg;
"""

SPECS = {
    "sgd": Spec("torcia_sgd", ("g",), _SGD_SCALARS, ("p",),
                _SGD_BODY.replace("MOMENTUM", "")),
    "sgd_momentum": Spec("torcia_sgd_momentum", ("g",), _SGD_SCALARS, ("p", "buf"),
                         _SGD_BODY.replace("MOMENTUM", _MOMENTUM)),
    "adam": Spec("torcia_adam", ("g",), _ADAM_SCALARS, ("p", "m", "v"),
                 _ADAM_BODY.replace("AMSGRAD", "")),
    "adam_amsgrad": Spec("torcia_adam_amsgrad", ("g",), _ADAM_SCALARS, ("p", "m", "v", "vmax"),
                         _ADAM_BODY.replace("AMSGRAD", "vmax = max(vmax, v);\nsecond = vmax;")),
    "lstm_cell": Spec("torcia_lstm_cell", ("raw gates", "c"), ("int64 hidden",),
                      ("h", "c_new", "raw act"), _LSTM_BODY),
    "lstm_cell_backward": Spec("torcia_lstm_cell_backward", ("gh", "gc", "raw act", "c", "c_new"),
                               ("int64 hidden",), ("raw g_gates", "g_c"), _LSTM_BACKWARD_BODY),
}


@functools.cache
def kernels(cupy) -> dict:
    """The kernels of :data:`SPECS` made with ``cupy.ElementwiseKernel`` (compiled by CuPy
    at their first call, then cached)."""
    return {key: cupy.ElementwiseKernel(*spec.params(), spec.body, name=spec.name)
            for key, spec in SPECS.items()}


def optimizer_steps(cupy) -> dict:
    """torcia-optim's ``sgd_step`` and ``adam_step`` for "cuda" on the fused kernels."""
    made = kernels(cupy)

    def sgd_step(params, grads, momentum_buffers, *, lr, weight_decay, momentum, dampening,
                 nesterov, maximize):
        for i, (p, g) in enumerate(zip(params, grads)):
            first = momentum != 0 and momentum_buffers[i] is None
            scalars = (lr, weight_decay, momentum, dampening, nesterov, maximize, first)
            if momentum == 0:
                made["sgd"](g, *scalars, p)
                continue
            if first:  # the kernel fills it with the gradient
                momentum_buffers[i] = cupy.empty_like(p)
            made["sgd_momentum"](g, *scalars, p, momentum_buffers[i])

    def adam_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, *, lr, beta1,
                  beta2, eps, weight_decay, amsgrad, maximize, decoupled_weight_decay):
        for i, (p, g, m, v) in enumerate(zip(params, grads, exp_avgs, exp_avg_sqs)):
            step = steps[i]
            scalars = (lr, beta1, beta2, eps, weight_decay, decoupled_weight_decay, maximize,
                       lr / (1 - beta1**step), (1 - beta2**step) ** 0.5)
            if amsgrad:
                made["adam_amsgrad"](g, *scalars, p, m, v, max_exp_avg_sqs[i])
            else:
                made["adam"](g, *scalars, p, m, v)

    return {"sgd_step": sgd_step, "adam_step": adam_step}


def fused_kernels(cupy) -> dict:
    """The LSTM cell fused (the reference's whole-layer ``lstm_layer``, which calls it each
    step, then runs it too); other shapes and dtypes go to the reference kernel."""
    made = kernels(cupy)

    def cell_rows(*arrays) -> bool:
        dt = arrays[0].dtype
        return dt.kind == "f" and dt.itemsize >= 4 and all(
            a.dtype == dt and a.flags.c_contiguous for a in arrays)

    def lstm_cell(gates, c):
        hidden = gates.shape[-1] // 4
        if c.shape != gates.shape[:-1] + (hidden,) or not cell_rows(gates, c):
            return fallback("lstm_cell", "cuda")(gates, c)
        h, c_new, act = cupy.empty_like(c), cupy.empty_like(c), cupy.empty_like(gates)
        made["lstm_cell"](gates, c, hidden, h, c_new, act)
        return h, c_new, act

    def lstm_cell_backward(gh, gc, act, c, c_new):
        gh = cupy.zeros_like(c_new) if gh is None else gh
        gc = cupy.zeros_like(c_new) if gc is None else gc
        if (not gh.shape == gc.shape == c.shape == c_new.shape
                or not cell_rows(gh, gc, act, c, c_new)):
            return fallback("lstm_cell_backward", "cuda")(gh, gc, act, c, c_new)
        g_gates, g_c = cupy.empty_like(act), cupy.empty_like(c_new)
        made["lstm_cell_backward"](gh, gc, act, c, c_new, c_new.shape[-1], g_gates, g_c)
        return g_gates, g_c

    return {"lstm_cell": lstm_cell, "lstm_cell_backward": lstm_cell_backward}
