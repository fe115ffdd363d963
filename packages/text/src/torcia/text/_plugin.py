"""torcia-text's built-in plugin: its tokenizers and models, registered through the same
hooks as a third-party plugin's."""

from torcia.plugins import hookimpl


@hookimpl
def torcia_register_tokenizers(registry):
    from torcia.text.tokenizers import ByteLevelBPETokenizer, CharTokenizer, WordTokenizer

    for cls in (CharTokenizer, WordTokenizer, ByteLevelBPETokenizer):
        registry.add(cls.kind, cls)


@hookimpl
def torcia_register_text_models(registry):
    from torcia.text.models import GPT, GPT2LMHeadModel, LSTMClassifier

    registry.add("lstm_classifier", LSTMClassifier)
    registry.add("gpt", GPT)
    registry.add("gpt2", GPT2LMHeadModel)
