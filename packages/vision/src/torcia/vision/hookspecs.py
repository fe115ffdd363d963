"""Hook specifications of torcia-vision.

Each hook is called once, lazily, the first time torcia-vision needs the table the hook
fills (``torcia.vision.models.list_models()``, ``get_model(...)``,
``torcia.vision.datasets.get_dataset(...)``, ``python -m torcia plugins``). torcia-vision's
own models and datasets are registered through these same hooks by its built-in plugin,
:mod:`torcia.vision._plugin`. Call hooks with keyword arguments only.

A plugin distribution that adds a model names its module in the ``torcia`` entry-point
group::

    [project.entry-points.torcia]
    tinynets = "tinynets"

    # tinynets.py
    import torcia

    @torcia.hookimpl
    def torcia_register_models(registry):
        registry.add("tinynet", build_tinynet)
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("torcia")

# ---------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------


@hookspec
def torcia_register_models(registry) -> None:
    """Add image models by name.

    Called once, the first time a model is looked up or listed. An entry is a builder: a
    callable that takes the model's keyword arguments (``num_classes=...`` and the like) and
    returns a new :class:`torcia.nn.Module`. A name may be registered by one plugin only.

    :param registry: a :class:`torcia.plugins.Registry` of kind ``"model"``; call
        ``registry.add(name, builder)``.
    :returns: nothing; the registry is the result.

    Example::

        @torcia.hookimpl
        def torcia_register_models(registry):
            registry.add("tinynet", lambda num_classes=10: TinyNet(num_classes))

    .. versionadded:: 0.1
    """


# ---------------------------------------------------------------------------------------
# Datasets
# ---------------------------------------------------------------------------------------


@hookspec
def torcia_register_datasets(registry) -> None:
    """Add image datasets by name (the names ``torcia-train --dataset`` accepts).

    Called once, the first time a dataset is looked up by name or listed. An entry is a
    dataset class (or any callable) called as ``entry(root, train=..., transform=...)``
    with ``root`` possibly None for datasets that need no files.

    :param registry: a :class:`torcia.plugins.Registry` of kind ``"dataset"``; call
        ``registry.add(name, dataset_class)``.
    :returns: nothing.

    Example::

        @torcia.hookimpl
        def torcia_register_datasets(registry):
            registry.add("svhn", SVHN)

    .. versionadded:: 0.1
    """
