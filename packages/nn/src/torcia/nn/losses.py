"""The loss registry: losses by name, filled through the ``torcia_register_losses`` hook.

torcia-nn's own losses register through that hook from its built-in plugin
(:mod:`torcia.nn._plugin`), exactly like a third-party plugin's do.

Examples
--------
>>> import torcia
>>> loss = torcia.nn.losses.get("cross_entropy", label_smoothing=0.1)
>>> type(loss).__name__, loss.label_smoothing
('CrossEntropyLoss', 0.1)
>>> "mse" in torcia.nn.losses.names()
True
"""

from __future__ import annotations

from torcia import plugins


class LossRegistry(plugins.Registry):
    """Loss classes by snake_case name; :meth:`get` also accepts a class name.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn import losses
    >>> isinstance(losses.REGISTRY, losses.LossRegistry)
    True
    >>> losses.REGISTRY.get("mse") is torcia.nn.MSELoss
    True
    """

    def __init__(self):
        super().__init__("loss", "torcia_register_losses")

    def lookup(self, name: str):
        """The class registered as ``name`` (or whose class name is ``name``)."""
        entries = self.build()
        if name in entries:
            return entries[name]
        for cls in entries.values():
            if getattr(cls, "__name__", None) == name:
                return cls
        raise KeyError(plugins.missing_message(self.kind, name, sorted(entries)))

    def class_names(self) -> dict:
        """Class name -> class, for every registered loss."""
        return {cls.__name__: cls for cls in self.build().values()}


REGISTRY = LossRegistry()


def get(name: str, **kwargs):
    """Build the loss registered as ``name`` (snake_case, or its class name) with
    ``kwargs``.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.losses.get("MSELoss", reduction="sum").reduction
    'sum'
    """
    return REGISTRY.lookup(name)(**kwargs)


def names() -> list[str]:
    """The registered loss names.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn import losses
    >>> "cross_entropy" in losses.names()
    True
    """
    return REGISTRY.names()


def provider(name: str) -> str | None:
    """The plugin that registered loss ``name``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn import losses
    >>> losses.provider("mse")
    'nn'
    """
    return REGISTRY.provider(name)
