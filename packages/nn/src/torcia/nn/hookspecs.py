"""Hook specifications of torcia-nn.

torcia-nn adds these to torcia's plugin manager when it is imported
(:func:`torcia.plugins.add_hookspecs`). Like core's hooks, each is called once, lazily, the
first time the table it fills is needed; call hooks with keyword arguments only.

A plugin distribution that ships a loss names its module in the ``torcia`` entry-point
group::

    # pyproject.toml
    [project.entry-points.torcia]
    focal_loss = "torcia_focal_loss"

    # torcia_focal_loss.py
    import torcia

    @torcia.hookimpl
    def torcia_register_losses(registry):
        registry.add("focal", FocalLoss)

after which ``torcia.nn.losses.get("focal")`` and ``torcia.nn.FocalLoss`` find it.
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("torcia")

# ---------------------------------------------------------------------------------------
# Losses
# ---------------------------------------------------------------------------------------


@hookspec
def torcia_register_losses(registry) -> None:
    """Add loss classes by name.

    Called once, the first time the loss table is needed: ``torcia.nn.losses.get(...)``,
    ``torcia.nn.losses.names()``, an attribute of ``torcia.nn`` that is not one of its own
    (``torcia.nn.FocalLoss``), or ``python -m torcia plugins``. Names are snake_case
    without the ``Loss`` suffix (``"cross_entropy"`` for ``CrossEntropyLoss``); the class
    is also found by its own name. A name taken by another plugin is an error reported
    against the later plugin, which is then skipped.

    :param registry: a :class:`torcia.nn.losses.LossRegistry`; call
        ``registry.add(name, cls)`` with a :class:`torcia.nn.Module` subclass whose
        constructor takes ``reduction=`` like PyTorch's losses.
    :returns: nothing; the registry is the result.

    Example::

        @torcia.hookimpl
        def torcia_register_losses(registry):
            registry.add("focal", FocalLoss)

    .. versionadded:: 0.1
    """


# ---------------------------------------------------------------------------------------
# Exporters
# ---------------------------------------------------------------------------------------


@hookspec
def torcia_register_exporters(registry) -> None:
    """Add model exporters by format name ("onnx", ...).

    Called once, the first time :func:`torcia.nn.export` or
    ``torcia.nn.exporters.names()`` needs the table. An exporter is a callable
    ``export(model, args, path, **options)`` that writes ``model`` traced on the example
    ``args`` to ``path``.

    :param registry: a :class:`torcia.plugins.Registry`; call ``registry.add(name, fn)``.
    :returns: nothing; the registry is the result.

    Example::

        @torcia.hookimpl
        def torcia_register_exporters(registry):
            registry.add("onnx", export_onnx)

    .. versionadded:: 0.1
    """
