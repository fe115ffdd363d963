"""Full backward hooks: identity autograd Functions around a module's inputs and outputs.

The Function wrapped around the outputs sees the gradients with respect to the outputs
(``grad_output``) first; the one around the inputs then sees the gradients with respect to
the inputs (``grad_input``), which is when :meth:`Module.register_full_backward_hook`'s
hooks run. Only tensors that require gradients go through them, so a module whose inputs
need no gradient gets its hooks called from the output side with ``grad_input`` all None.
"""

from __future__ import annotations

from torcia import Tensor
from torcia.autograd import Function


class _Identity(Function):
    """Passes tensors through; its backward hands their gradients to ``hook.<side>``."""

    @staticmethod
    def forward(ctx, hook, side, *tensors):
        ctx.callback = getattr(hook, side)
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        return (None, None) + ctx.callback(grads)


class BackwardHook:
    """The state of one hooked module call, between forward and backward."""

    def __init__(self, module):
        self.module = module
        self.n_inputs = 0
        self.input_positions: list[int] = []
        self.output_positions: list[int] = []
        self.n_outputs = 0
        self.grad_output = None

    def setup_input_hook(self, args: tuple) -> tuple:
        tensor_positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        self.n_inputs = len(tensor_positions)
        self.input_positions = [k for k, i in enumerate(tensor_positions)
                                if args[i].requires_grad]
        if not self.input_positions:
            return args
        wrapped = _Identity.apply(self, "on_grad_input", *(args[tensor_positions[k]]
                                               for k in self.input_positions))
        args = list(args)
        for k, t in zip(self.input_positions, wrapped):
            args[tensor_positions[k]] = t
        return tuple(args)

    def setup_output_hook(self, output):
        single = isinstance(output, Tensor)
        outs = [output] if single else list(output) if isinstance(output, (tuple, list)) else []
        self.n_outputs = sum(isinstance(o, Tensor) for o in outs)
        grad_positions = [i for i, o in enumerate(outs)
                          if isinstance(o, Tensor) and o.requires_grad]
        tensor_index = {i: k for k, i in enumerate(
            i for i, o in enumerate(outs) if isinstance(o, Tensor))}
        self.output_positions = [tensor_index[i] for i in grad_positions]
        if not grad_positions:
            return output
        wrapped = _Identity.apply(self, "on_grad_output", *(outs[i] for i in grad_positions))
        for i, t in zip(grad_positions, wrapped):
            outs[i] = t
        if single:
            return outs[0]
        return type(output)(outs)

    def _spread(self, grads, positions, n):
        full = [None] * n
        for k, g in zip(positions, grads):
            full[k] = g
        return tuple(full)

    def on_grad_output(self, grads):
        grad_output = self._spread(grads, self.output_positions, self.n_outputs)
        for hook in self.module._backward_pre_hooks.values():
            result = hook(self.module, grad_output)
            if result is not None:
                grad_output = _checked(result, len(grad_output), "backward pre-hook",
                                       "grad_output")
        self.grad_output = grad_output
        if not self.input_positions:
            # nothing upstream will report grad_input: the hooks run now
            self._call_hooks((None,) * self.n_inputs)
        return tuple(grad_output[k] for k in self.output_positions)

    def on_grad_input(self, grads):
        grad_input = self._spread(grads, self.input_positions, self.n_inputs)
        grad_input = self._call_hooks(grad_input)
        return tuple(grad_input[k] for k in self.input_positions)

    def _call_hooks(self, grad_input):
        grad_output = self.grad_output
        if grad_output is None:
            grad_output = (None,) * self.n_outputs
        for hook in self.module._backward_hooks.values():
            result = hook(self.module, grad_input, grad_output)
            if result is not None:
                grad_input = _checked(result, len(grad_input), "backward hook", "grad_input")
        return grad_input


def _checked(result, n, what, name):
    result = (result,) if isinstance(result, Tensor) else tuple(result)
    if len(result) != n:
        raise RuntimeError(
            f"{what} returned an invalid number of {name}, got {len(result)}, but expected {n}"
        )
    return result
