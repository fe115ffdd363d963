"""torcia-distributions' built-in plugin: its distributions and KL divergences, registered
through the same hook a third-party plugin uses."""

from __future__ import annotations

from torcia.distributions import BUILTIN, hookimpl
from torcia.distributions import kl as _kl


@hookimpl
def torcia_register_distributions(registry):
    for name, cls in BUILTIN.items():
        registry.add(name, cls)
    for (type_p, type_q), fn in _kl.BUILTIN.items():
        registry.add_kl(type_p, type_q, fn)
