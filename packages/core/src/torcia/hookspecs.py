"""Hook specifications of torcia-core.

Every hook here is called once, lazily, the first time torcia needs the table the hook
fills; the per-operation path never calls a hook. Call hooks with keyword arguments only.

A plugin is a module (or object) whose functions carry the ``torcia.hookimpl`` marker and
that is named in the ``torcia`` entry-point group of its distribution::

    # my_plugin.py
    import torcia

    @torcia.hookimpl
    def torcia_register_kernels(registry):
        registry.add("relu", "cpu", my_fast_relu, priority=10)

Other torcia packages add their own hook specifications (losses, optimizers, datasets...)
from their own ``hookspecs`` module through :func:`torcia.plugins.add_hookspecs`.
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("torcia")

# ---------------------------------------------------------------------------------------
# Devices and kernels
# ---------------------------------------------------------------------------------------


@hookspec
def torcia_register_backends(registry) -> None:
    """Add device backends.

    Called once, the first time a device is used (creating a tensor, ``torcia.device(...)``
    resolution, ``python -m torcia plugins``). A backend names a device type, the array
    module its tensors hold, how arrays cross to and from the host, and what runs the ops
    it has no kernel for (``fallback=``, see :func:`torcia.library.fallback`).

    :param registry: a :class:`torcia.backend.BackendRegistry`; call
        ``registry.add(backend)`` with a :class:`torcia.backend.Backend`.
    :returns: nothing; the registry is the result.

    Example::

        @torcia.hookimpl
        def torcia_register_backends(registry):
            registry.add(Backend("cuda", xp=cupy, to_host=cupy.asnumpy, from_host=cupy.asarray,
                                 fallback="reference"))

    .. versionadded:: 0.1
    .. versionchanged:: 0.2
       ``Backend(fallback=...)``.
    """


@hookspec
def torcia_register_kernels(registry) -> None:
    """Add or override the kernels of a device type.

    Called once, after :func:`torcia_register_backends`, to build the kernel table of every
    backend. A kernel takes the arrays of its tensor arguments positionally and the op's
    parameters as keywords, and returns an array (or a tuple of arrays for ops with several
    outputs). For one op and device type the kernel of highest ``priority`` wins; core's
    NumPy reference kernels have priority 0. The ops a device gets no kernel for run
    through the fallback its backend declares, after every plugin's kernels are in.

    The kernels of ``add``, ``sub``, ``mul`` and ``div`` (true division) may take ``out=``,
    as NumPy's ufuncs do: an array of the result's dtype and shape to write the result
    into and return. It may be one of the operands (``a += b`` passes ``a``'s array), and
    otherwise shares no memory with them. Core passes it for the in-place ops when nothing
    records, converts or watches; a kernel that raises TypeError for it, or returns an
    array of its own, has its result copied into ``self`` instead. An ``add`` or ``sub``
    kernel whose signature names ``alpha`` (the ops' schemas do) takes it, with or without
    ``out=`` (``a.add_(b, alpha=2)``, ``torcia.add(a, b, alpha=0.5)``): ``a op b * alpha``
    for real floats as one fused multiply-add, ``alpha`` in the result's dtype, as
    PyTorch's CPU kernels round it; for a kernel without ``alpha`` core runs ``mul``'s
    kernel and then the op's.

    :param registry: a :class:`torcia.backend.KernelRegistry`; call
        ``registry.add(op, device_type, fn, priority=0)``.
    :returns: nothing.

    Example::

        @torcia.hookimpl
        def torcia_register_kernels(registry):
            registry.add("softmax", "cpu", fast_softmax, priority=10)

    .. versionadded:: 0.1
    """


# ---------------------------------------------------------------------------------------
# Ops
# ---------------------------------------------------------------------------------------


@hookspec
def torcia_register_ops(registry) -> None:
    """Define new ops, differentiable ones included.

    Called once, the first time torcia needs the op records or the kernel tables (the first
    tensor operation, :func:`torcia.library.op_records`, ``python -m torcia plugins``).
    Each op gets a reference kernel on NumPy arrays (run on "cpu", and on other devices
    through the host fallback until a device plugin registers its own kernel), optionally
    a backward formula (so the op is differentiable) and a shape function (for the "meta"
    device). Call the op with :func:`torcia.library.call`.

    :param registry: a :class:`torcia.library.OpRegistry`; call
        ``registry.define(name, kernel, backward=..., shape=...)``.
    :returns: nothing; the registry is the result.

    Example::

        @torcia.hookimpl
        def torcia_register_ops(registry):
            registry.define("cube", lambda a: a ** 3, backward=lambda grad, x: 3 * x * x * grad)

    .. versionadded:: 0.2
    """


# ---------------------------------------------------------------------------------------
# Autograd
# ---------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def torcia_autograd_engine():
    """Return the object that records operations for automatic differentiation.

    Called once, the first time a tensor asks for gradients. torcia-autograd implements it;
    without it installed, ``requires_grad=True`` raises an error naming that distribution.
    Stops at the first non-None result.

    :returns: a :class:`torcia.library.AutogradMode` implementing
        :class:`torcia.library.AutogradEngine` (``record``, ``check_inplace``,
        ``rebase_inplace``, ``backward``, ``grad``, ``derivative``,
        ``define_derivative``...), or None; core registers it with
        :func:`torcia.library.register_autograd_mode` (an engine object that is not a
        mode is wrapped in one). This hook is the only way the engine reaches core:
        blocking the plugin that implements it disables gradients.

    Example::

        @torcia.hookimpl
        def torcia_autograd_engine():
            from torcia.autograd import engine
            return engine.ENGINE

    .. versionadded:: 0.1
    .. versionchanged:: 0.3
       Returns an :class:`torcia.library.AutogradMode`.
    """


# ---------------------------------------------------------------------------------------
# Names lent across the arrows
# ---------------------------------------------------------------------------------------


@hookspec
def torcia_register_names(registry) -> None:
    """Lend objects to the namespace of a part that may not import yours.

    PyTorch's names do not follow torcia's arrows: ``torch.compile`` is the compiler's,
    ``torch.kl_div`` nn's functional form, ``torch.nn.parallel.DistributedDataParallel``
    the distributed part's. The part that owns the object lends it here under the dotted
    name it has there; the part that shows the name looks it up with
    ``torcia.library.lent``, never by importing a part it does not depend on.
    Called once, the first time a lent name is looked up.

    :param registry: a :class:`torcia.plugins.Registry` of kind "name"; call
        ``registry.add(dotted_name, obj)``.
    :returns: nothing.

    Example::

        @torcia.hookimpl
        def torcia_register_names(registry):
            registry.add("torcia.compile", compile)

    .. versionadded:: 0.4
    """
