"""Hook specifications of torcia-compiler.

torcia-compiler adds them with :func:`torcia.plugins.add_hookspecs` when it is imported.
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("torcia")


@hookspec
def torcia_register_compile_backends(registry) -> None:
    """Add backends for ``torcia.compile`` by name.

    Called once, the first time a backend is looked up (``torcia.compile(...)``,
    :func:`torcia.compiler.list_backends`, ``python -m torcia plugins``). A backend is a
    callable ``backend(graph, example_inputs, **options) -> Graph``: it receives the
    captured :class:`torcia.compiler.Graph` and the arrays of its inputs, and returns the
    graph to run (rewritten, with fused nodes, or as it was).

    :param registry: a :class:`torcia.plugins.Registry` of kind ``"compile backend"``;
        call ``registry.add(name, backend)``.
    :returns: nothing; the registry is the result.

    Example::

        @torcia.hookimpl
        def torcia_register_compile_backends(registry):
            registry.add("count_ops", lambda graph, example_inputs: graph)

    .. versionadded:: 0.1
    """
