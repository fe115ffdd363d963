"""Vocabularies: token <-> index tables built from token streams."""

from __future__ import annotations

import collections


class Vocab:
    """A table of tokens and their indices, with an optional default index for unknown
    tokens (without one, an unknown token raises).

    Examples
    --------
    >>> from torcia.text import Vocab
    >>> v = Vocab(["<unk>", "a", "b"]); v.set_default_index(0)
    >>> v["b"], v["zzz"], v.lookup_token(1), len(v)
    (2, 0, 'a', 3)
    """

    def __init__(self, tokens=()):
        self._itos: list[str] = []
        self._stoi: dict[str, int] = {}
        self._default: int | None = None
        for t in tokens:
            self.append_token(t)

    def __len__(self):
        return len(self._itos)

    def __contains__(self, token) -> bool:
        return token in self._stoi

    def __getitem__(self, token: str) -> int:
        i = self._stoi.get(token)
        if i is None:
            if self._default is None:
                raise RuntimeError(f"Token {token!r} not found and default index is not set")
            return self._default
        return i

    def __call__(self, tokens):
        return self.lookup_indices(tokens)

    def set_default_index(self, index: int | None) -> None:
        if index is not None and not 0 <= index < len(self):
            raise RuntimeError(f"default index {index} is out of range for a vocabulary of "
                               f"{len(self)} tokens")
        self._default = index

    def get_default_index(self):
        return self._default

    def append_token(self, token: str) -> None:
        if token in self._stoi:
            raise RuntimeError(f"Token {token!r} already exists in the Vocab")
        self._stoi[token] = len(self._itos)
        self._itos.append(token)

    def insert_token(self, token: str, index: int) -> None:
        if token in self._stoi:
            raise RuntimeError(f"Token {token!r} already exists in the Vocab")
        if not 0 <= index <= len(self):
            raise RuntimeError(f"index {index} is out of range for insertion into a vocabulary "
                               f"of {len(self)} tokens")
        self._itos.insert(index, token)
        self._stoi = {t: i for i, t in enumerate(self._itos)}

    def lookup_token(self, index: int) -> str:
        if not 0 <= index < len(self):
            raise RuntimeError(f"Index {index} is out of range [0, {len(self)})")
        return self._itos[index]

    def lookup_tokens(self, indices) -> list[str]:
        return [self.lookup_token(int(i)) for i in indices]

    def lookup_indices(self, tokens) -> list[int]:
        return [self[t] for t in tokens]

    def get_itos(self) -> list[str]:
        return list(self._itos)

    def get_stoi(self) -> dict[str, int]:
        return dict(self._stoi)


def build_vocab_from_iterator(iterator, min_freq=1, specials=None, special_first=True,
                              max_tokens=None) -> Vocab:
    """A :class:`Vocab` of the tokens in ``iterator`` (an iterable of token lists) seen at
    least ``min_freq`` times, most frequent first, ties in order of first appearance;
    ``specials`` go first (or last).

    Examples
    --------
    >>> from torcia.text import build_vocab_from_iterator
    >>> v = build_vocab_from_iterator([["b", "a", "b"], ["c"]], specials=["<unk>"])
    >>> v.get_itos()
    ['<unk>', 'b', 'a', 'c']
    """
    counts: collections.Counter = collections.Counter()
    for tokens in iterator:
        counts.update(tokens)
    specials = list(specials or [])
    ordered = sorted(counts.items(), key=lambda kv: -kv[1])  # stable: first appearance
    tokens = [t for t, n in ordered if n >= min_freq and t not in specials]
    if max_tokens is not None:
        tokens = tokens[: max(0, max_tokens - len(specials))]
    return Vocab(specials + tokens if special_first else tokens + specials)
