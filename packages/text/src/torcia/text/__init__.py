"""torcia.text: tokenizers, vocabularies, text datasets and language models.

Examples
--------
>>> from torcia.text import ByteLevelBPETokenizer
>>> tok = ByteLevelBPETokenizer.train(["hello world"] * 5, vocab_size=270)
>>> tok.decode(tok.encode("hello there"))
'hello there'
"""

from torcia.text import models, tokenizers
from torcia.text.datasets import (
    CSVClassificationDataset,
    LanguageModelDataset,
    TextLinesDataset,
    pad_collate,
    python_docs_corpus,
    read_text,
)
from torcia.text.models import GPT, LSTMClassifier
from torcia.text.tokenizers import (
    ByteLevelBPETokenizer,
    CharTokenizer,
    Tokenizer,
    WordTokenizer,
)
from torcia.text.vocab import Vocab, build_vocab_from_iterator

__all__ = [
    "ByteLevelBPETokenizer", "CSVClassificationDataset", "CharTokenizer", "GPT",
    "LSTMClassifier", "LanguageModelDataset", "TextLinesDataset", "Tokenizer", "Vocab",
    "WordTokenizer", "build_vocab_from_iterator", "models", "pad_collate",
    "python_docs_corpus", "read_text", "tokenizers",
]
