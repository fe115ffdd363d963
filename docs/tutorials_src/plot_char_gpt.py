"""
A character-level GPT with torcia-text
======================================

Train a tiny :class:`torcia.text.GPT` on the docstrings of Python's standard library
(:func:`torcia.text.python_docs_corpus`, built from the interpreter you run, so nothing
is downloaded), then sample from it. ``torcia-train-lm`` is the full-size job.
"""

import matplotlib.pyplot as plt

import torcia
from torcia.text import GPT, CharTokenizer, python_docs_corpus

torcia.manual_seed(0)
text = python_docs_corpus(max_chars=30_000)
tokenizer = CharTokenizer.train([text])
data = torcia.tensor(tokenizer.encode(text))
print(f"{len(text)} characters, {tokenizer.vocab_size} distinct")

# %%
# Batches of random windows; the target is the window shifted by one character.
block = 32


def batch(size=32):
    starts = torcia.randint(0, len(data) - block - 1, (size,)).tolist()
    x = torcia.stack([data[s:s + block] for s in starts])
    y = torcia.stack([data[s + 1:s + block + 1] for s in starts])
    return x, y


model = GPT(tokenizer.vocab_size, block_size=block, n_layer=2, n_head=2, d_model=48, dropout=0.0)
optimizer = torcia.optim.AdamW(model.parameters(), lr=3e-3)
losses = []
for _ in range(150):
    x, y = batch()
    logits = model(x)
    loss = torcia.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
print(f"loss {losses[0]:.2f} -> {losses[-1]:.2f}")

fig, ax = plt.subplots(figsize=(7, 3))
ax.plot(losses)
ax.set(xlabel="step", ylabel="cross-entropy (nats per character)", title="training loss")
fig.tight_layout()

# %%
# Sampling: the model continues a prompt one character at a time. After a few seconds of
# training it has learned spelling-like fragments and the shape of docstrings, not sense.
model.eval()
prompt = torcia.tensor([tokenizer.encode("Return the ")])
out = model.generate(prompt, max_new_tokens=120, temperature=0.8, top_k=10, seed=0)
print(tokenizer.decode(out[0].tolist()))
