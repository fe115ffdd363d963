"""Objects a distributed checkpoint saves through their own state dicts, as
``torch.distributed.checkpoint.stateful``."""

from __future__ import annotations

from typing import Protocol, TypeVar, runtime_checkable

__all__ = ["Stateful", "StatefulT"]


@runtime_checkable
class Stateful(Protocol):
    """Anything with ``state_dict()`` and ``load_state_dict(state_dict)``: the values of a
    checkpointed state dict that are not tensors (a training state that bundles the
    model and optimizer, say) are saved as what ``state_dict()`` returns and loaded back
    through ``load_state_dict``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributed.checkpoint.stateful import Stateful
    >>> isinstance(torcia.nn.Linear(1, 1), Stateful)
    True
    """

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state_dict: dict) -> None: ...


StatefulT = TypeVar("StatefulT", bound=Stateful)
