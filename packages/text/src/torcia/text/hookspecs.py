"""Hook specifications of torcia-text.

Call hooks with keyword arguments only. Each is called once, lazily, the first time its
registry is used (``torcia.text.tokenizers.get``, ``torcia.text.models.get_model``...).
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("torcia")


@hookspec
def torcia_register_tokenizers(registry) -> None:
    """Add tokenizer classes by name.

    Called once, the first time :func:`torcia.text.tokenizers.get` or
    :func:`torcia.text.tokenizers.load` needs the table. A tokenizer class subclasses
    :class:`torcia.text.Tokenizer` (``encode``, ``decode``, ``to_dict``/``from_dict``).

    :param registry: a :class:`torcia.plugins.Registry`; call ``registry.add(name, cls)``.
    :returns: nothing; the registry is the result.

    Example::

        @torcia.hookimpl
        def torcia_register_tokenizers(registry):
            registry.add("sentencepiece", SentencePieceTokenizer)

    .. versionadded:: 0.1
    """


@hookspec
def torcia_register_text_models(registry) -> None:
    """Add text model builders by name.

    Called once, the first time :func:`torcia.text.models.get_model` or
    :func:`torcia.text.models.list_models` runs. A builder is a callable returning a
    :class:`torcia.nn.Module` from keyword arguments.

    :param registry: a :class:`torcia.plugins.Registry`; call ``registry.add(name, builder)``.
    :returns: nothing.

    Example::

        @torcia.hookimpl
        def torcia_register_text_models(registry):
            registry.add("tiny_gpt", lambda **kw: GPT(n_layer=1, **kw))

    .. versionadded:: 0.1
    """
