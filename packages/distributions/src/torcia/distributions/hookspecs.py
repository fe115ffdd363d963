"""Hook specifications of torcia-distributions.

The hook is called once, lazily, the first time the table is needed
(:func:`torcia.distributions.kl_divergence`, :func:`torcia.distributions.create`, an
attribute of :mod:`torcia.distributions` that is not a built-in class,
``python -m torcia plugins``). Call hooks with keyword arguments only.

A plugin distribution that ships a distribution and its KL divergence::

    # pyproject.toml
    [project.entry-points.torcia]
    kumaraswamy2 = "torcia_kumaraswamy2"

    # torcia_kumaraswamy2.py
    import torcia
    from torcia.distributions import Distribution

    class Kumaraswamy2(Distribution):
        ...

    @torcia.hookimpl
    def torcia_register_distributions(registry):
        registry.add("kumaraswamy2", Kumaraswamy2)
        registry.add_kl(Kumaraswamy2, Kumaraswamy2, kl_kumaraswamy2)

torcia-distributions adds this specification with :func:`torcia.plugins.add_hookspecs` when
it is imported.
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("torcia")

# ---------------------------------------------------------------------------------------
# Distributions and KL divergences
# ---------------------------------------------------------------------------------------


@hookspec
def torcia_register_distributions(registry) -> None:
    """Add distribution classes by name, and closed-form KL divergences between them.

    Called once, the first time the table is needed. Names are lowercase (``"normal"``);
    :func:`torcia.distributions.create` also accepts the class name (``"Normal"``), and a
    registered class is reachable as an attribute of :mod:`torcia.distributions`.

    :param registry: a :class:`torcia.distributions.DistributionRegistry`; call
        ``registry.add(name, cls)`` with a subclass of
        :class:`torcia.distributions.Distribution`, and
        ``registry.add_kl(type_p, type_q, fn)`` with ``fn(p, q)`` returning KL(p || q)
        (what :func:`torcia.distributions.register_kl` does, but owned by the plugin).
    :returns: nothing; the registry is the result.

    Example::

        @torcia.hookimpl
        def torcia_register_distributions(registry):
            registry.add("kumaraswamy2", Kumaraswamy2)

    .. versionadded:: 0.1
    """
