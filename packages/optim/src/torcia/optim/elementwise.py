"""The step shared by optimizers whose update is elementwise per parameter, and the base a
plugin's optimizer can build on (torcia-lion does).

A subclass names its multi-tensor kernel (:mod:`torcia.optim.kernels`), the state buffers
the kernel takes in order, how a parameter's state starts, the kernel's keywords for a
group, and a per-parameter reference update written with Tensor ops. ``step`` runs the
kernel of the parameters' device over the whole group when there is one (and ``foreach``
is not False), and the reference update parameter by parameter otherwise. Every group
needs a ``"foreach"`` entry (None by default).
"""

from __future__ import annotations

import torcia
from torcia import Tensor
from torcia.library import wrap
from torcia.optim.optimizer import Optimizer, _closure_loss, arrays, bump_steps, bump_versions


class ElementwiseOptimizer(Optimizer):
    """An optimizer defined by an elementwise update; see the module docstring.

    Examples
    --------
    >>> import torcia
    >>> from torcia.optim import ElementwiseOptimizer
    >>> class SignSGD(ElementwiseOptimizer):
    ...     kernel_op = "signsgd_step"  # no such kernel: the per-parameter path runs
    ...     has_step = False
    ...     def __init__(self, params, lr=0.01):
    ...         super().__init__(params, dict(lr=lr, foreach=None))
    ...     def init_state(self, p, group):
    ...         return {}
    ...     def hyper(self, group):
    ...         return {"lr": group["lr"]}
    ...     @staticmethod
    ...     def reference(p, grad, state, step, *, lr):
    ...         p.add_(grad.sign(), alpha=-lr)
    >>> w = torcia.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = SignSGD([w], lr=0.5)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w
    tensor([ 0.5000, -1.5000], requires_grad=True)
    """

    #: the multi-tensor kernel's op name
    kernel_op: str = ""
    #: state keys whose arrays the kernel takes after params and grads, in order
    buffers: tuple[str, ...] = ()
    #: whether the state counts steps, and whether the kernel is given the counts
    has_step = True
    kernel_takes_steps = True
    #: whether :meth:`reference` takes sparse gradients (SGD's does: its update is a sum
    #: of the gradient into the parameter); others refuse them, as in PyTorch
    sparse_gradients = False

    def init_state(self, p: Tensor, group: dict) -> dict:
        raise NotImplementedError

    def hyper(self, group: dict) -> dict:
        """The kernel's keyword arguments for ``group``."""
        raise NotImplementedError

    @staticmethod
    def reference(p: Tensor, grad: Tensor, state: dict, step, **hyper) -> None:
        """Update one parameter in place with Tensor ops (the ``foreach=False`` path)."""
        raise NotImplementedError

    def _check_loaded_state(self, index, param, group, state) -> None:
        # each buffer must have the size a fresh state gives it (0-d for NAdam's
        # mu_product), or the parameter's where the state starts without it (SGD's momentum
        # buffer); PyTorch finds a wrong one only at the step
        fresh = self.init_state(param, group)
        for key in self.buffers:
            have, want = state.get(key), fresh.get(key)
            size = want.shape if isinstance(want, Tensor) else param.shape
            if isinstance(have, Tensor) and have.shape != size:
                raise RuntimeError(
                    f"loaded state dict has {key!r} of size {list(have.shape)} for parameter "
                    f"{index}, whose state needs size {list(size)}"
                )

    def step(self, closure=None):
        """Perform a single optimization step.

        Parameters
        ----------
        closure : callable, optional
            Re-evaluates the model and returns the loss.
        """
        loss = _closure_loss(closure)
        with torcia.no_grad():
            for group in self.param_groups:
                self._step_group(group)
        return loss

    def _step_group(self, group: dict) -> None:
        params = self._with_grads(group)
        if not params:
            return
        sparse = any(p.grad.is_sparse for p in params)
        if sparse and not self.sparse_gradients:
            name = type(self).__name__
            hint = ", please consider SparseAdam instead" if name == "Adam" else ""
            raise RuntimeError(f"{name} does not support sparse gradients{hint}")
        states = []
        for p in params:
            state = self.state[p]
            if not state:
                state.update(self.init_state(p, group))
            states.append(state)
        steps = bump_steps(states) if self.has_step else [None] * len(params)
        hyper = self.hyper(group)
        kernel = None if sparse else self._kernel(self.kernel_op, params, group["foreach"])
        if kernel is None:
            for p, state, step in zip(params, states, steps):
                self.reference(p, p.grad, state, step, **hyper)
        else:
            self._run_kernel(kernel, params, states, steps, hyper)
        for p in params:
            if not self.state[p]:
                del self.state[p]  # plain SGD keeps no state, as in PyTorch

    def _run_kernel(self, kernel, params, states, steps, hyper) -> None:
        lists = [
            [None if s.get(key) is None else s[key].__torcia_data__ for s in states]
            for key in self.buffers
        ]
        extra = [steps] if self.kernel_takes_steps else []
        kernel(arrays(params), [p.grad.__torcia_data__ for p in params], *lists, *extra, **hyper)
        bump_versions(params)
        for key, values in zip(self.buffers, lists):
            for p, state, arr in zip(params, states, values):
                if arr is not None and state.get(key) is None:
                    # a buffer the kernel made on this step (SGD's momentum)
                    state[key] = wrap(arr, p.device)
