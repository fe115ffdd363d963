"""Text models: an LSTM classifier and a GPT-style decoder-only language model.

Both are found by name in a registry that plugins fill through
``torcia_register_text_models``: :func:`get_model` and :func:`list_models`.
"""

from __future__ import annotations

import math

import torcia
from torcia import nn, plugins
from torcia.nn import functional as F
from torcia.nn.utils.rnn import pack_padded_sequence
from torcia.text import hookspecs

plugins.add_hookspecs(hookspecs)
REGISTRY = plugins.Registry("text model", "torcia_register_text_models")


class LSTMClassifier(nn.Module):
    """Embedding, a (bidirectional) LSTM over the real tokens of each sequence, and a
    linear layer on its final hidden states.

    Examples
    --------
    >>> import torcia
    >>> from torcia.text.models import LSTMClassifier
    >>> model = LSTMClassifier(vocab_size=20, num_classes=3)
    >>> model(torcia.randint(1, 20, (4, 7)), lengths=torcia.tensor([7, 5, 3, 1])).shape
    torcia.Size([4, 3])
    """

    def __init__(self, vocab_size, num_classes, embed_dim=64, hidden_size=64, num_layers=1,
                 bidirectional=True, dropout=0.0, padding_idx=0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=padding_idx)
        self.lstm = nn.LSTM(embed_dim, hidden_size, num_layers=num_layers, batch_first=True,
                            bidirectional=bidirectional,
                            dropout=dropout if num_layers > 1 else 0.0)
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(hidden_size * (2 if bidirectional else 1), num_classes)

    def forward(self, input_ids, lengths=None):
        x = self.embedding(input_ids)
        if lengths is not None:
            x = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        _, (h, _) = self.lstm(x)
        last = h[-2:].transpose(0, 1).reshape(h.shape[1], -1) if self.lstm.bidirectional \
            else h[-1]
        return self.fc(self.dropout(last))


class GPT(nn.Module):
    """A decoder-only Transformer language model: token and position embeddings, pre-norm
    causal self-attention blocks, a final LayerNorm and a head tied to the embedding.

    Examples
    --------
    >>> import torcia
    >>> from torcia.text.models import GPT
    >>> lm = GPT(vocab_size=50, block_size=16, n_layer=1, n_head=2, d_model=16)
    >>> lm(torcia.randint(0, 50, (2, 10))).shape
    torcia.Size([2, 10, 50])
    >>> lm.generate(torcia.tensor([[1, 2]]), max_new_tokens=3, seed=0).shape
    torcia.Size([1, 5])
    """

    def __init__(self, vocab_size, block_size=128, n_layer=2, n_head=4, d_model=128,
                 dim_feedforward=None, dropout=0.1, tie_weights=True):
        super().__init__()
        self.block_size = block_size
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(block_size, d_model)
        self.drop = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(d_model, n_head, dim_feedforward or 4 * d_model,
                                           dropout=dropout, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, n_layer)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.apply(self._init)
        if tie_weights:
            self.head.weight = self.token_embedding.weight
        # GPT-2's scaling of the residual projections by depth
        for name, p in self.named_parameters():
            if name.endswith("linear2.weight") or name.endswith("out_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * n_layer))

    @staticmethod
    def _init(module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, 0.0, 0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, 0.0, 0.02)

    def forward(self, input_ids):
        n, t = input_ids.shape
        if t > self.block_size:
            raise ValueError(f"sequence of length {t} is longer than block_size "
                             f"{self.block_size}")
        pos = torcia.arange(t, device=input_ids.device)
        x = self.drop(self.token_embedding(input_ids) + self.position_embedding(pos))
        mask = torcia.ones(t, t, dtype=torcia.bool, device=input_ids.device).triu(1)
        x = self.blocks(x, mask=mask)
        return self.head(self.norm(x))

    @torcia.no_grad()
    def generate(self, input_ids, max_new_tokens, temperature=1.0, top_k=None, top_p=None,
                 do_sample=True, seed=None, generator=None):
        """Continue ``input_ids`` (N, T) by ``max_new_tokens`` tokens: greedy when
        ``do_sample`` is False or ``temperature`` is 0, else sampled from the softmax at
        ``temperature``, restricted to the ``top_k`` tokens and/or the smallest set whose
        probability reaches ``top_p``. ``seed`` makes the samples reproducible."""
        if generator is None and seed is not None:
            generator = torcia.Generator().manual_seed(seed)
        was_training = self.training
        self.eval()
        ids = input_ids
        for _ in range(max_new_tokens):
            logits = self(ids[:, -self.block_size:])[:, -1]
            if not do_sample or temperature == 0:
                nxt = logits.argmax(-1, keepdim=True)
            else:
                probs = F.softmax(_filter(logits / temperature, top_k, top_p), dim=-1)
                nxt = torcia.multinomial(probs, 1, generator=generator)
            ids = torcia.cat([ids, nxt], 1)
        self.train(was_training)
        return ids


def _filter(logits, top_k, top_p):
    """Logits with everything outside the top-k / nucleus set to -inf."""
    if top_k is not None:
        k = min(int(top_k), logits.shape[-1])
        kth = logits.topk(k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        cumulative = F.softmax(sorted_logits, dim=-1).cumsum(-1)
        # drop a token once the tokens before it already reach top_p
        drop = (cumulative - F.softmax(sorted_logits, dim=-1)) >= top_p
        drop_original = torcia.zeros_like(drop).scatter(-1, order, drop)
        logits = logits.masked_fill(drop_original, float("-inf"))
    return logits


def get_model(name: str, **kwargs) -> nn.Module:
    """Build the text model registered as ``name`` ("lstm_classifier", "gpt", ...)."""
    return REGISTRY.get(name)(**kwargs)


def list_models() -> list[str]:
    return REGISTRY.names()
