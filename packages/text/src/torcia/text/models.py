"""Text models: an LSTM classifier, a GPT-style decoder-only language model, and GPT-2
with Hugging Face's parameter names (:class:`GPT2LMHeadModel`).

Both are found by name in a registry that plugins fill through
``torcia_register_text_models``: :func:`get_model` and :func:`list_models`.
"""

from __future__ import annotations

import json
import math
import os

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
        return _generate(self, self.block_size, input_ids, max_new_tokens, temperature, top_k,
                         top_p, do_sample, seed, generator)


def _generate(model, context, input_ids, max_new_tokens, temperature, top_k, top_p,
              do_sample, seed, generator):
    """The decoding loop shared by the language models: ``model(ids)`` gives logits, and
    at most the last ``context`` tokens are fed back."""
    if generator is None and seed is not None:
        generator = torcia.Generator().manual_seed(seed)
    was_training = model.training
    model.eval()
    ids = input_ids
    for _ in range(max_new_tokens):
        logits = model(ids[:, -context:])[:, -1]
        if not do_sample or temperature == 0:
            nxt = logits.argmax(-1, keepdim=True)
        else:
            probs = F.softmax(_filter(logits / temperature, top_k, top_p), dim=-1)
            nxt = torcia.multinomial(probs, 1, generator=generator)
        ids = torcia.cat([ids, nxt], 1)
    model.train(was_training)
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


# ---------------------------------------------------------------------------------------
# GPT-2 with Hugging Face's parameter names
# ---------------------------------------------------------------------------------------

_GPT2_DEFAULTS = {
    "vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12,
    "n_inner": None, "activation_function": "gelu_new", "resid_pdrop": 0.1,
    "embd_pdrop": 0.1, "attn_pdrop": 0.1, "layer_norm_epsilon": 1e-5,
    "tie_word_embeddings": True,
}

_ACTIVATIONS = {
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "gelu": F.gelu,
    "relu": F.relu,
    "silu": F.silu,
    "tanh": torcia.tanh,
}


class Conv1D(nn.Module):
    """GPT-2's projection: ``x @ weight + bias`` with ``weight`` stored (in, out), the
    transpose of :class:`torcia.nn.Linear`'s, as in OpenAI's and Hugging Face's checkpoints.

    Examples
    --------
    >>> import torcia
    >>> from torcia.text.models import Conv1D
    >>> Conv1D(6, 4).weight.shape, Conv1D(6, 4)(torcia.ones(2, 4)).shape
    (torcia.Size([4, 6]), torcia.Size([2, 6]))
    """

    def __init__(self, nf: int, nx: int):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torcia.empty(nx, nf))
        self.bias = nn.Parameter(torcia.zeros(nf))
        nn.init.normal_(self.weight, 0.0, 0.02)

    def forward(self, x):
        return x @ self.weight + self.bias


class _GPT2Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_head = c["n_head"]
        self.c_attn = Conv1D(3 * c["n_embd"], c["n_embd"])
        self.c_proj = Conv1D(c["n_embd"], c["n_embd"])
        self.attn_dropout = nn.Dropout(c["attn_pdrop"])
        self.resid_dropout = nn.Dropout(c["resid_pdrop"])

    def forward(self, x):
        n, t, width = x.shape
        q, k, v = self.c_attn(x).split(width, dim=2)
        q, k, v = (z.reshape(n, t, self.n_head, -1).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.attn_dropout.p if self.training else 0.0, is_causal=True)
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).reshape(n, t, width)))


class _GPT2MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        inner = c["n_inner"] or 4 * c["n_embd"]
        self.c_fc = Conv1D(inner, c["n_embd"])
        self.c_proj = Conv1D(c["n_embd"], inner)
        self.act = _ACTIVATIONS[c["activation_function"]]
        self.dropout = nn.Dropout(c["resid_pdrop"])

    def forward(self, x):
        return self.dropout(self.c_proj(self.act(self.c_fc(x))))


class _GPT2Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c["n_embd"], eps=c["layer_norm_epsilon"])
        self.attn = _GPT2Attention(c)
        self.ln_2 = nn.LayerNorm(c["n_embd"], eps=c["layer_norm_epsilon"])
        self.mlp = _GPT2MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2Model(nn.Module):
    """GPT-2's Transformer body (``wte``, ``wpe``, ``h.<i>``, ``ln_f``): the hidden states."""

    def __init__(self, c):
        super().__init__()
        self.wte = nn.Embedding(c["vocab_size"], c["n_embd"])
        self.wpe = nn.Embedding(c["n_positions"], c["n_embd"])
        self.drop = nn.Dropout(c["embd_pdrop"])
        self.h = nn.ModuleList([_GPT2Block(c) for _ in range(c["n_layer"])])
        self.ln_f = nn.LayerNorm(c["n_embd"], eps=c["layer_norm_epsilon"])
        for emb in (self.wte, self.wpe):
            nn.init.normal_(emb.weight, 0.0, 0.02)

    def forward(self, input_ids):
        t = input_ids.shape[1]
        if t > self.wpe.num_embeddings:
            raise ValueError(f"sequence of length {t} is longer than n_positions "
                             f"{self.wpe.num_embeddings}")
        pos = torcia.arange(t, device=input_ids.device)
        x = self.drop(self.wte(input_ids) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


class GPT2LMHeadModel(nn.Module):
    """GPT-2 with Hugging Face's module layout and parameter names, so that a Hugging Face
    GPT-2 folder (``config.json`` + ``model.safetensors``) loads with
    :meth:`from_pretrained` and gives the same logits as ``transformers``'
    ``GPT2LMHeadModel``.

    The keyword arguments are Hugging Face's ``GPT2Config`` fields (``vocab_size``,
    ``n_positions``, ``n_embd``, ``n_layer``, ``n_head``, ``n_inner``,
    ``activation_function``, ``resid_pdrop``, ``embd_pdrop``, ``attn_pdrop``,
    ``layer_norm_epsilon``, ``tie_word_embeddings``) with its defaults (the 124M model).
    ``forward`` returns the logits (N, T, vocab_size).

    Examples
    --------
    >>> import torcia
    >>> from torcia.text.models import GPT2LMHeadModel
    >>> lm = GPT2LMHeadModel(vocab_size=40, n_positions=16, n_embd=8, n_layer=1, n_head=2)
    >>> lm(torcia.tensor([[1, 2, 3]])).shape
    torcia.Size([1, 3, 40])
    >>> lm.generate(torcia.tensor([[1, 2]]), max_new_tokens=3).shape
    torcia.Size([1, 5])
    """

    def __init__(self, **config):
        super().__init__()
        unknown = sorted(set(config) - set(_GPT2_DEFAULTS))
        if unknown:
            raise TypeError(f"GPT2LMHeadModel got unknown configuration {unknown}")
        c = {**_GPT2_DEFAULTS, **config}
        if c["activation_function"] not in _ACTIVATIONS:
            raise ValueError(f"activation_function {c['activation_function']!r} is not one of "
                             f"{sorted(_ACTIVATIONS)}")
        if c["n_embd"] % c["n_head"]:
            raise ValueError(f"n_embd {c['n_embd']} is not a multiple of n_head {c['n_head']}")
        self.config = c
        self.transformer = GPT2Model(c)
        self.lm_head = nn.Linear(c["n_embd"], c["vocab_size"], bias=False)
        if c["tie_word_embeddings"]:
            self.lm_head.weight = self.transformer.wte.weight
        for block in self.transformer.h:  # GPT-2's scaling of residual projections by depth
            for proj in (block.attn.c_proj, block.mlp.c_proj):
                nn.init.normal_(proj.weight, 0.0, 0.02 / math.sqrt(2 * c["n_layer"]))

    def forward(self, input_ids):
        return self.lm_head(self.transformer(input_ids))

    @torcia.no_grad()
    def generate(self, input_ids, max_new_tokens, do_sample=False, temperature=1.0, top_k=None,
                 top_p=None, seed=None, generator=None):
        """Continue ``input_ids`` (N, T) by ``max_new_tokens`` tokens: greedy by default
        (Hugging Face's ``do_sample=False``), else sampled as :meth:`GPT.generate` samples.
        Without a key-value cache, each step runs the whole (cropped) context."""
        return _generate(self, self.config["n_positions"], input_ids, max_new_tokens,
                         temperature, top_k, top_p, do_sample, seed, generator)

    @classmethod
    def from_pretrained(cls, folder, map_location="cpu"):
        """Load a Hugging Face GPT-2 folder: ``config.json`` and ``model.safetensors`` (or
        ``pytorch_model.bin``), with parameter names as Hugging Face writes them (with or
        without the ``transformer.`` prefix; the attention-mask buffers of old files are
        skipped). Needs ``pip install 'torcia-text[hf]'`` for safetensors files.

        Examples
        --------
        >>> import tempfile, torcia
        >>> from torcia.text.models import GPT2LMHeadModel
        >>> lm = GPT2LMHeadModel(vocab_size=40, n_positions=16, n_embd=8, n_layer=1, n_head=2)
        >>> folder = tempfile.mkdtemp()
        >>> lm.save_pretrained(folder)
        >>> again = GPT2LMHeadModel.from_pretrained(folder)
        >>> ids = torcia.tensor([[1, 2, 3]])
        >>> torcia.equal(again(ids), lm.eval()(ids))
        True
        """
        folder = os.fspath(folder)
        with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
        if config.get("model_type", "gpt2") != "gpt2":
            raise ValueError(f"{folder} holds a {config['model_type']!r} model, not gpt2")
        model = cls(**{k: config[k] for k in _GPT2_DEFAULTS if k in config})
        path = os.path.join(folder, "model.safetensors")
        if os.path.exists(path):
            from torcia.utils import safetensors

            state = safetensors.load_file(path, device=map_location)
        elif os.path.exists(os.path.join(folder, "pytorch_model.bin")):
            state = torcia.load(os.path.join(folder, "pytorch_model.bin"),
                                map_location=map_location)
        else:
            raise FileNotFoundError(f"{folder} has neither model.safetensors nor "
                                    "pytorch_model.bin")
        model.load_state_dict(model._from_hf_names(state, folder))
        return model.eval()

    def _from_hf_names(self, state, folder):
        out = {}
        for key, value in state.items():
            if key.endswith((".attn.bias", ".attn.masked_bias")):
                continue  # the causal-mask buffers older transformers saved
            if not key.startswith(("transformer.", "lm_head.")):
                key = f"transformer.{key}"
            out[key] = value
        if "lm_head.weight" not in out:
            if not self.config["tie_word_embeddings"]:
                raise RuntimeError(f"{folder}: lm_head.weight is missing and the config does "
                                   "not tie it to the embedding")
            out["lm_head.weight"] = out.get("transformer.wte.weight")
        return out

    def save_pretrained(self, folder):
        """Write ``config.json`` and ``model.safetensors`` as Hugging Face's
        ``save_pretrained`` does, so that ``transformers`` loads the folder (the tied
        ``lm_head.weight`` is left out, as there)."""
        from torcia.utils import safetensors

        folder = os.fspath(folder)
        os.makedirs(folder, exist_ok=True)
        config = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", **self.config}
        with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f, indent=2)
        state = self.state_dict()
        if self.config["tie_word_embeddings"]:
            state.pop("lm_head.weight")
        safetensors.save_file(dict(state), os.path.join(folder, "model.safetensors"),
                              metadata={"format": "pt"})


def get_model(name: str, **kwargs) -> nn.Module:
    """Build the text model registered as ``name`` ("lstm_classifier", "gpt", ...).

    Examples
    --------
    >>> import torcia
    >>> from torcia.text.models import get_model
    >>> model = get_model("lstm_classifier", vocab_size=10, num_classes=3)
    >>> model(torcia.tensor([[1, 2, 3]])).shape
    torcia.Size([1, 3])
    """
    return REGISTRY.get(name)(**kwargs)


def list_models() -> list[str]:
    """The names of every registered text model, sorted.

    Examples
    --------
    >>> import torcia
    >>> "gpt" in torcia.text.models.list_models()
    True
    """
    return REGISTRY.names()
