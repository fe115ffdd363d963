"""Fused CUDA kernels for the optimizer updates: one launch per parameter.

torcia-optim's per-parameter path updates a parameter in about ten elementwise operations
(each a kernel launch and a pass over memory on the GPU); these kernels do the whole update
in one. Each is a :class:`cupy.ElementwiseKernel` whose body is plain C (arithmetic,
``sqrt``, ``max``), so the tests compile the very same body with the host's C++ compiler
and check it against torcia-optim's NumPy kernels on the CPU; ``tools/gpu_check`` checks
it on a GPU. The operations follow the per-parameter path step for step, as torcia-optim
asks of a kernel.

A kernel is described by :class:`Spec` (array and scalar parameters apart, which CuPy's
parameter string does not say) and built once per process by :func:`kernels`.
"""

from __future__ import annotations

import dataclasses
import functools


@dataclasses.dataclass(frozen=True)
class Spec:
    """One elementwise kernel: ``inputs`` (arrays read), ``scalars`` (``"type name"``,
    per call), ``outputs`` (arrays read and written in place) and the C body, run for
    each element with the arrays' elements bound to their names (``T`` is their type)."""

    name: str
    inputs: tuple[str, ...]
    scalars: tuple[str, ...]
    outputs: tuple[str, ...]
    body: str

    def params(self):
        """CuPy's ``(in_params, out_params)`` strings."""
        ins = [f"T {a}" for a in self.inputs] + list(self.scalars)
        return ", ".join(ins), ", ".join(f"T {a}" for a in self.outputs)


_SGD_BODY = """
T d = maximize ? -g : g;
if (weight_decay != 0) d += p * (T)weight_decay;
MOMENTUM
p += d * (T)(-lr);
"""
_MOMENTUM = """
buf = first ? d : buf * (T)momentum + (dampening == 0 ? d : d * (T)(1 - dampening));
d = nesterov ? d + buf * (T)momentum : buf;
"""
_SGD_SCALARS = ("float64 lr", "float64 weight_decay", "float64 momentum", "float64 dampening",
                "bool nesterov", "bool maximize", "bool first")

_ADAM_BODY = """
T d = maximize ? -g : g;
if (weight_decay != 0) {
    if (decoupled) p *= (T)(1 - lr * weight_decay);
    else d += p * (T)weight_decay;
}
m += (d - m) * (T)(1 - beta1);
v = v * (T)beta2 + d * (T)(1 - beta2) * d;
T second = v;
AMSGRAD
p += m * (T)(-step_size) / (sqrt(second) / (T)bias_correction2_sqrt + (T)eps);
"""

_ADAM_SCALARS = ("float64 lr", "float64 beta1", "float64 beta2", "float64 eps",
                 "float64 weight_decay", "bool decoupled", "bool maximize",
                 "float64 step_size", "float64 bias_correction2_sqrt")

SPECS = {
    "sgd": Spec("torcia_sgd", ("g",), _SGD_SCALARS, ("p",),
                _SGD_BODY.replace("MOMENTUM", "")),
    "sgd_momentum": Spec("torcia_sgd_momentum", ("g",), _SGD_SCALARS, ("p", "buf"),
                         _SGD_BODY.replace("MOMENTUM", _MOMENTUM)),
    "adam": Spec("torcia_adam", ("g",), _ADAM_SCALARS, ("p", "m", "v"),
                 _ADAM_BODY.replace("AMSGRAD", "")),
    "adam_amsgrad": Spec("torcia_adam_amsgrad", ("g",), _ADAM_SCALARS, ("p", "m", "v", "vmax"),
                         _ADAM_BODY.replace("AMSGRAD", "vmax = max(vmax, v);\nsecond = vmax;")),
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
