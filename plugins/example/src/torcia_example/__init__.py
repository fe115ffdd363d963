"""An example torcia plugin: the ``"example"`` device.

The device keeps its arrays in NumPy like ``"cpu"``, but in memory of its own: moving a
tensor there or back copies it, as a transfer to a real accelerator would. It has kernels for
three ops only, enough to show the two hooks every device plugin implements; it declares
``fallback="host"``, so every other op runs core's reference kernel on the host, the
arrays copied there and back (:func:`torcia.library.fallback`)::

    >>> import torcia
    >>> x = torcia.tensor([1.0, -2.0], device="example")
    >>> (x * 3).relu()
    tensor([3., 0.], device='example:0')

It also defines a new differentiable op, ``logcosh``, through ``torcia_register_ops``: its
NumPy kernel, its derivative and its shape function (for the "meta" device)::

    >>> import torcia_example
    >>> torcia_example.logcosh(torcia.tensor([0.0, 100.0]))
    tensor([ 0.0000, 99.3069])
"""

from __future__ import annotations

import math

import numpy as np

import torcia
from torcia.library import Backend, call

DEVICE = "example"


def _copy(array, index=None):
    # NOTE: a copy, not a view: tensors on two devices must never share memory
    return np.array(array, copy=True)


def _relu(a):
    return np.maximum(a, 0).astype(a.dtype, copy=False)


#: op name -> kernel; a kernel takes arrays positionally and the op's parameters as keywords.
KERNELS = {"add": np.add, "mul": np.multiply, "relu": _relu}


def _logcosh(a):
    """log(cosh(a)), elementwise; written as |a| + log1p(exp(-2|a|)) - log 2 so that
    large inputs do not overflow cosh."""
    m = np.abs(a)
    return (m + np.log1p(np.exp(-2 * m)) - math.log(2)).astype(a.dtype, copy=False)


def _logcosh_backward(grad, x):
    # d/dx log(cosh(x)) = tanh(x); written with torcia ops, so second derivatives work
    return grad * x.tanh()


def _same_shape(x):
    return x.shape, x.dtype


def logcosh(input):
    """``log(cosh(input))`` elementwise: a differentiable op the plugin defines.

    Examples
    --------
    >>> import torcia, torcia_example
    >>> torcia_example.logcosh(torcia.zeros(2))
    tensor([0., 0.])
    """
    if not isinstance(input, torcia.Tensor):
        raise TypeError(f"logcosh(): argument 'input' must be Tensor, not "
                        f"{type(input).__name__}")
    if not input.is_floating_point():
        input = input.float()
    return call("logcosh", (input,), {})


@torcia.hookimpl
def torcia_register_ops(registry):
    registry.define("logcosh", _logcosh, backward=_logcosh_backward, shape=_same_shape,
                    group="unary_float")


@torcia.hookimpl
def torcia_register_backends(registry):
    registry.add(Backend(DEVICE, np, to_host=_copy, from_host=_copy, fallback="host"))


@torcia.hookimpl
def torcia_register_kernels(registry):
    for op, kernel in KERNELS.items():
        registry.add(op, DEVICE, kernel, priority=10)


#: the graphs compiled with ``backend="example_print"``, newest last
COMPILED_GRAPHS = []


def print_graph(graph, example_inputs, **options):
    """A ``torcia.compile`` backend, like PyTorch's custom-backend example: print the
    captured graph as a table and run it as captured.

    Examples
    --------
    >>> import torcia
    >>> f = torcia.compile(lambda x: x.exp() + 1, backend="example_print")
    >>> f(torcia.zeros(1)).tolist()  # doctest: +ELLIPSIS
    opcode ...
    [2.0]
    """
    print(graph.tabular())
    COMPILED_GRAPHS.append(graph)
    return graph


@torcia.hookimpl
def torcia_register_compile_backends(registry):
    # torcia-compiler's hook: called only where torcia-compiler is installed
    registry.add("example_print", print_graph)
