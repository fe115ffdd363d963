"""Hook specifications of torcia-optim.

Both hooks are called once, lazily, the first time a name is looked up
(:func:`torcia.optim.create`, :func:`torcia.optim.lr_scheduler.create`, an attribute such as
``torcia.optim.Lion`` that is not a built-in class, ``python -m torcia plugins``). Call hooks
with keyword arguments only.

A plugin distribution that ships an optimizer::

    # pyproject.toml
    [project.entry-points.torcia]
    lion = "torcia_lion"

    # torcia_lion.py
    import torcia
    from torcia.optim import Optimizer

    class Lion(Optimizer):
        ...

    @torcia.hookimpl
    def torcia_register_optimizers(registry):
        registry.add("lion", Lion)

torcia-optim adds these specifications with :func:`torcia.plugins.add_hookspecs` when it is
imported.
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("torcia")

# ---------------------------------------------------------------------------------------
# Optimizers
# ---------------------------------------------------------------------------------------


@hookspec
def torcia_register_optimizers(registry) -> None:
    """Add optimizer classes by name.

    Called once, the first time an optimizer is looked up by name. Names are lowercase
    (``"adamw"``); :func:`torcia.optim.create` also accepts the class name (``"AdamW"``),
    and a registered class is reachable as an attribute of :mod:`torcia.optim`.

    :param registry: a :class:`torcia.plugins.Registry` of kind ``"optimizer"``; call
        ``registry.add(name, cls)`` with a subclass of :class:`torcia.optim.Optimizer`.
    :returns: nothing; the registry is the result.

    Example::

        @torcia.hookimpl
        def torcia_register_optimizers(registry):
            registry.add("lion", Lion)

    .. versionadded:: 0.1
    """


# ---------------------------------------------------------------------------------------
# Learning-rate schedulers
# ---------------------------------------------------------------------------------------


@hookspec
def torcia_register_lr_schedulers(registry) -> None:
    """Add learning-rate scheduler classes by name.

    Called once, the first time a scheduler is looked up by name with
    :func:`torcia.optim.lr_scheduler.create`. Names are lowercase with underscores
    (``"cosine_annealing"``); the class name (``"CosineAnnealingLR"``) is accepted too.

    :param registry: a :class:`torcia.plugins.Registry` of kind ``"lr scheduler"``; call
        ``registry.add(name, cls)`` with a subclass of
        :class:`torcia.optim.lr_scheduler.LRScheduler` (or any class taking the optimizer
        first).
    :returns: nothing; the registry is the result.

    Example::

        @torcia.hookimpl
        def torcia_register_lr_schedulers(registry):
            registry.add("inverse_sqrt", InverseSqrtLR)

    .. versionadded:: 0.1
    """
