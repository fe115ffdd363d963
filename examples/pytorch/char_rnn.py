"""Character-level language model with a GRU (in the style of char-rnn), trained with
truncated backpropagation through time on a small built-in text."""

import argparse
import os
import tempfile

import torch
import torch.nn as nn

TEXT = ("the quick brown fox jumps over the lazy dog. " * 8 +
        "pack my box with five dozen liquor jugs. " * 8 +
        "how vexingly quick daft zebras jump! " * 8)


class CharRNN(nn.Module):
    def __init__(self, vocab, hidden=64, layers=1):
        super().__init__()
        self.embed = nn.Embedding(vocab, 32)
        self.rnn = nn.GRU(32, hidden, layers, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, x, h=None):
        out, h = self.rnn(self.embed(x), h)
        return self.head(out), h


def main():
    parser = argparse.ArgumentParser(description="char-rnn")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seq-len", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    chars = sorted(set(TEXT))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in TEXT], dtype=torch.long)
    n = (len(data) - 1) // (args.batch_size * args.seq_len) * args.batch_size * args.seq_len
    inputs = data[:n].view(args.batch_size, -1)
    targets = data[1:n + 1].view(args.batch_size, -1)

    model = CharRNN(len(chars)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(1, args.epochs + 1):
        hidden = None
        for step, i in enumerate(range(0, inputs.size(1), args.seq_len)):
            x = inputs[:, i:i + args.seq_len].to(device)
            y = targets[:, i:i + args.seq_len].to(device)
            if hidden is not None:
                hidden = hidden.detach()
            optimizer.zero_grad(set_to_none=True)
            logits, hidden = model(x, hidden)
            loss = criterion(logits.reshape(-1, len(chars)), y.reshape(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
    model.eval()
    with torch.no_grad():
        idx = torch.tensor([[stoi["t"]]], device=device)
        h, out = None, ["t"]
        for _ in range(40):
            logits, h = model(idx, h)
            idx = torch.multinomial(torch.softmax(logits[:, -1], dim=-1), 1)
            out.append(chars[idx.item()])
    print("sample:", "".join(out))
    torch.save(model.state_dict(), os.path.join(tempfile.mkdtemp(), "char_rnn.pt"))


if __name__ == "__main__":
    main()
