"""Tokenizers: characters, words, and byte-level BPE trained on a corpus.

Every tokenizer maps text to a list of ids and back, knows its special tokens, pads and
truncates batches, and saves to / loads from a JSON file. They are found by name in a
registry that plugins fill through ``torcia_register_tokenizers``.

Byte-level BPE is written here rather than taken from Hugging Face ``tokenizers``: the
algorithm is short, and this keeps torcia-text free of a compiled dependency. It works on
the UTF-8 bytes of pre-tokenized pieces (so any text round-trips exactly), and merges the
most frequent adjacent pair first, ties broken by the smaller pair of ids.
"""

from __future__ import annotations

import collections
import json
import re
from pathlib import Path

import torcia
from torcia import plugins
from torcia.text import hookspecs

plugins.add_hookspecs(hookspecs)
REGISTRY = plugins.Registry("tokenizer", "torcia_register_tokenizers")

# GPT-2 style pieces: contractions, words with their leading space, numbers, punctuation
_PIECES = re.compile(r"""'(?:s|t|re|ve|m|ll|d)| ?\w+| ?[^\s\w]+|\s+(?!\S)|\s+""")
_WORDS = re.compile(r"\w+|[^\w\s]")


class Tokenizer:
    """Base class: subclasses implement ``_encode`` (text -> ids) and ``_decode``.

    ``special_tokens`` get ids after the ordinary vocabulary; ``pad_token`` (if any) pads
    batches, ``unk_token`` stands for what the vocabulary lacks (or, when None, an
    unknown symbol raises ``KeyError``).

    Examples
    --------
    >>> from torcia.text import CharTokenizer, Tokenizer
    >>> tokenizer = CharTokenizer.train(["hello"], pad_token="<pad>")
    >>> isinstance(tokenizer, Tokenizer), tokenizer.vocab_size
    (True, 5)
    >>> tokenizer.encode("hell")
    [1, 0, 2, 2]
    >>> tokenizer.decode([1, 0, 2, 2]), tokenizer.pad_token_id
    ('hell', 4)
    """

    kind = "base"

    def __init__(self, special_tokens=(), unk_token=None, pad_token=None, bos_token=None,
                 eos_token=None):
        named = [t for t in (pad_token, unk_token, bos_token, eos_token) if t is not None]
        self.special_tokens = list(dict.fromkeys(list(special_tokens) + named))
        self.unk_token = unk_token
        self.pad_token = pad_token
        self.bos_token = bos_token
        self.eos_token = eos_token
        self._special_ids: dict[str, int] = {}

    # ----- specials -----------------------------------------------------------------
    def _assign_special_ids(self, base: int) -> None:
        self._special_ids = {t: base + i for i, t in enumerate(self.special_tokens)}

    def token_to_id(self, token: str) -> int:
        return self._special_ids[token]

    @property
    def pad_token_id(self):
        return self._special_ids.get(self.pad_token)

    @property
    def unk_token_id(self):
        return self._special_ids.get(self.unk_token)

    @property
    def vocab_size(self) -> int:
        return self._base_size() + len(self.special_tokens)

    def __len__(self):
        return self.vocab_size

    # ----- encode and decode --------------------------------------------------------
    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Token ids of ``text`` (with bos/eos around it when asked)."""
        if not isinstance(text, str):
            raise TypeError(f"encode expects a str, got {type(text).__name__}")
        ids = self._encode(text)
        if add_special_tokens:
            if self.bos_token is not None:
                ids = [self._special_ids[self.bos_token]] + ids
            if self.eos_token is not None:
                ids = ids + [self._special_ids[self.eos_token]]
        return ids

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        """The text of ``ids`` (a list or a 1-D tensor)."""
        if isinstance(ids, torcia.Tensor):
            ids = ids.tolist()
        specials = {v: k for k, v in self._special_ids.items()}
        out, run = [], []
        for i in ids:
            if i in specials:
                out.append(self._decode(run))
                run = []
                if not skip_special_tokens:
                    out.append(specials[i])
            else:
                run.append(int(i))
        out.append(self._decode(run))
        return "".join(out)

    def __call__(self, texts, padding=False, truncation=False, max_length=None,
                 add_special_tokens=False, return_tensors=True):
        """Encode a batch: ``input_ids`` (padded with ``pad_token`` to the longest, or to
        ``max_length`` with ``padding="max_length"``), ``attention_mask`` and ``lengths``.

        Examples
        --------
        >>> from torcia.text import CharTokenizer
        >>> tok = CharTokenizer.train(["abc"], pad_token="<pad>")
        >>> tok(["ab", "c"], padding=True)["input_ids"]
        tensor([[0, 1],
                [2, 3]])
        """
        single = isinstance(texts, str)
        batch = [texts] if single else list(texts)
        encoded = [self.encode(t, add_special_tokens) for t in batch]
        if truncation:
            if max_length is None:
                raise ValueError("truncation=True needs max_length")
            encoded = [e[:max_length] for e in encoded]
        lengths = [len(e) for e in encoded]
        if not padding:
            if return_tensors and len(set(lengths)) > 1:
                raise ValueError("sequences of different lengths need padding=True to be "
                                 "returned as one tensor")
        if padding:
            if self.pad_token is None:
                raise ValueError("padding needs a tokenizer with a pad_token")
            width = max_length if padding == "max_length" else max(lengths, default=0)
            if padding == "max_length" and max_length is None:
                raise ValueError('padding="max_length" needs max_length')
            pad = self._special_ids[self.pad_token]
            encoded = [e + [pad] * (width - len(e)) for e in encoded]
        mask = [[1] * n + [0] * (len(e) - n) for e, n in zip(encoded, lengths)]
        if not return_tensors:
            return {"input_ids": encoded, "attention_mask": mask, "lengths": lengths}
        return {"input_ids": torcia.tensor(encoded), "attention_mask": torcia.tensor(mask),
                "lengths": torcia.tensor(lengths)}

    # ----- persistence --------------------------------------------------------------
    def to_dict(self) -> dict:
        return {"kind": self.kind, "special_tokens": self.special_tokens,
                "unk_token": self.unk_token, "pad_token": self.pad_token,
                "bos_token": self.bos_token, "eos_token": self.eos_token}

    def save(self, path) -> None:
        """Write the tokenizer as JSON."""
        Path(path).write_text(json.dumps(self.to_dict(), ensure_ascii=False))

    def _base_size(self) -> int:
        raise NotImplementedError

    def _encode(self, text: str) -> list[int]:
        raise NotImplementedError

    def _decode(self, ids: list[int]) -> str:
        raise NotImplementedError

    @classmethod
    def _specials_from(cls, d: dict) -> dict:
        return {k: d[k] for k in ("special_tokens", "unk_token", "pad_token", "bos_token",
                                  "eos_token")}


class _TableTokenizer(Tokenizer):
    """Tokenizers over a fixed table of symbols (characters or words)."""

    def __init__(self, symbols, **specials):
        super().__init__(**specials)
        self.symbols = [s for s in symbols if s not in self.special_tokens]
        self.ids = {s: i for i, s in enumerate(self.symbols)}
        self._assign_special_ids(len(self.symbols))

    def _base_size(self) -> int:
        return len(self.symbols)

    def _lookup(self, symbol):
        i = self.ids.get(symbol)
        if i is None:
            if self.unk_token is None:
                raise KeyError(f"{symbol!r} is not in the vocabulary and the tokenizer has no "
                               "unk_token")
            return self._special_ids[self.unk_token]
        return i

    def to_dict(self) -> dict:
        return {**super().to_dict(), "symbols": self.symbols}

    @classmethod
    def from_dict(cls, d: dict):
        return cls(d["symbols"], **cls._specials_from(d))


class CharTokenizer(_TableTokenizer):
    """One id per character seen in training.

    Examples
    --------
    >>> from torcia.text import CharTokenizer
    >>> tok = CharTokenizer.train(["hello"])
    >>> tok.encode("hole"), tok.decode(tok.encode("hole"))
    ([1, 3, 2, 0], 'hole')
    """

    kind = "char"

    @classmethod
    def train(cls, texts, **specials):
        """Every distinct character of ``texts``, sorted by code point."""
        chars = sorted({c for t in texts for c in t})
        return cls(chars, **specials)

    def _encode(self, text):
        return [self._lookup(c) for c in text]

    def _decode(self, ids):
        return "".join(self.symbols[i] for i in ids)


class WordTokenizer(_TableTokenizer):
    """Words and punctuation split by a regular expression, optionally lowercased;
    decoding joins them with spaces.

    Examples
    --------
    >>> from torcia.text import WordTokenizer
    >>> tok = WordTokenizer.train(["the cat sat", "the dog"], unk_token="<unk>")
    >>> tok.encode("the cow sat")
    [0, 4, 3]
    """

    kind = "word"

    def __init__(self, symbols, pattern=_WORDS.pattern, lowercase=False, **specials):
        super().__init__(symbols, **specials)
        self.pattern = re.compile(pattern)
        self.lowercase = lowercase

    def split(self, text):
        return self.pattern.findall(text.lower() if self.lowercase else text)

    @classmethod
    def train(cls, texts, min_freq=1, max_size=None, pattern=_WORDS.pattern, lowercase=False,
              **specials):
        """Words of ``texts`` seen at least ``min_freq`` times, most frequent first (ties
        alphabetical)."""
        splitter = cls([], pattern=pattern, lowercase=lowercase)
        counts = collections.Counter(w for t in texts for w in splitter.split(t))
        words = sorted((w for w, n in counts.items() if n >= min_freq),
                       key=lambda w: (-counts[w], w))
        return cls(words[:max_size], pattern=pattern, lowercase=lowercase, **specials)

    def _encode(self, text):
        return [self._lookup(w) for w in self.split(text)]

    def _decode(self, ids):
        return " ".join(self.symbols[i] for i in ids)

    def to_dict(self) -> dict:
        return {**super().to_dict(), "pattern": self.pattern.pattern,
                "lowercase": self.lowercase}

    @classmethod
    def from_dict(cls, d: dict):
        return cls(d["symbols"], pattern=d["pattern"], lowercase=d["lowercase"],
                   **cls._specials_from(d))


class ByteLevelBPETokenizer(Tokenizer):
    """Byte-pair encoding over UTF-8 bytes: ids 0-255 are bytes, then one id per merge.

    Examples
    --------
    >>> from torcia.text import ByteLevelBPETokenizer
    >>> tok = ByteLevelBPETokenizer.train(["low lower lowest"] * 10, vocab_size=260)
    >>> tok.merges[:2]
    [(108, 111), (256, 119)]
    >>> tok.decode(tok.encode("lowly ünïcode")) == "lowly ünïcode"
    True
    """

    kind = "byte_bpe"

    def __init__(self, merges=(), **specials):
        super().__init__(**specials)
        self.merges = [tuple(m) for m in merges]
        self.ranks = {pair: i for i, pair in enumerate(self.merges)}
        self._bytes = [bytes([i]) for i in range(256)]
        for a, b in self.merges:
            self._bytes.append(self._bytes[a] + self._bytes[b])
        self._cache: dict[str, list[int]] = {}
        self._assign_special_ids(len(self._bytes))

    def _base_size(self) -> int:
        return len(self._bytes)

    @classmethod
    def train(cls, texts, vocab_size=1000, min_frequency=2, **specials):
        """Learn merges from ``texts`` until the vocabulary (bytes, merges and specials)
        has ``vocab_size`` entries or no pair occurs ``min_frequency`` times."""
        n_specials = len(Tokenizer(**specials).special_tokens)
        if vocab_size < 256 + n_specials:
            raise ValueError(f"vocab_size must be at least {256 + n_specials} (256 bytes and "
                             f"{n_specials} special tokens), got {vocab_size}")
        counts = collections.Counter(p for t in texts for p in _PIECES.findall(t))
        words = [[list(p.encode("utf-8")), n] for p, n in counts.items()]
        pair_counts: collections.Counter = collections.Counter()
        where = collections.defaultdict(set)
        for w, (symbols, n) in enumerate(words):
            for pair in zip(symbols, symbols[1:]):
                pair_counts[pair] += n
                where[pair].add(w)
        merges = []
        while 256 + len(merges) + n_specials < vocab_size and pair_counts:
            best = max(pair_counts.items(), key=lambda kv: (kv[1], (-kv[0][0], -kv[0][1])))
            pair, count = best
            if count < min_frequency:
                break
            new = 256 + len(merges)
            merges.append(pair)
            for w in list(where[pair]):
                symbols, n = words[w]
                for old in zip(symbols, symbols[1:]):
                    pair_counts[old] -= n
                    if pair_counts[old] <= 0:
                        del pair_counts[old]
                merged = _merge(symbols, pair, new)
                words[w][0] = merged
                for p in zip(merged, merged[1:]):
                    pair_counts[p] += n
                    where[p].add(w)
            where.pop(pair, None)
        return cls(merges, **specials)

    def _encode_piece(self, piece: str) -> list[int]:
        cached = self._cache.get(piece)
        if cached is not None:
            return cached
        symbols = list(piece.encode("utf-8"))
        while len(symbols) > 1:
            ranked = [(self.ranks.get(p), i) for i, p in enumerate(zip(symbols, symbols[1:]))]
            ranked = [r for r in ranked if r[0] is not None]
            if not ranked:
                break
            rank, _ = min(ranked)
            symbols = _merge(symbols, self.merges[rank], 256 + rank)
        if len(self._cache) < 100_000:
            self._cache[piece] = symbols
        return symbols

    def _encode(self, text):
        ids = []
        for piece in _PIECES.findall(text):
            ids.extend(self._encode_piece(piece))
        return ids

    def _decode(self, ids):
        return b"".join(self._bytes[i] for i in ids).decode("utf-8", errors="replace")

    def to_dict(self) -> dict:
        return {**super().to_dict(), "merges": [list(m) for m in self.merges]}

    @classmethod
    def from_dict(cls, d: dict):
        return cls(d["merges"], **cls._specials_from(d))


def _merge(symbols, pair, new):
    out = []
    i = 0
    while i < len(symbols):
        if i + 1 < len(symbols) and symbols[i] == pair[0] and symbols[i + 1] == pair[1]:
            out.append(new)
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


def get(name: str):
    """The tokenizer class registered as ``name`` ("char", "word", "byte_bpe", ...).

    Examples
    --------
    >>> import torcia
    >>> Char = torcia.text.tokenizers.get("char")
    >>> tok = Char.train("hello")
    >>> tok.decode(tok.encode("hell"))
    'hell'
    """
    return REGISTRY.get(name)


def load(path) -> Tokenizer:
    """A tokenizer saved with :meth:`Tokenizer.save`, whatever its kind.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from torcia.text import CharTokenizer, tokenizers
    >>> tokenizer = CharTokenizer.train(["hello"])
    >>> with tempfile.TemporaryDirectory() as root:
    ...     tokenizer.save(pathlib.Path(root, 'tokenizer.json'))
    ...     again = tokenizers.load(pathlib.Path(root, 'tokenizer.json'))
    >>> type(again).__name__, again.encode("hello")
    ('CharTokenizer', [1, 0, 2, 2, 3])
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not a saved torcia tokenizer ({exc})") from None
    if not isinstance(data, dict) or "kind" not in data:
        raise ValueError(f"{path}: not a saved torcia tokenizer (no 'kind')")
    return get(data["kind"]).from_dict(data)
