"""Word-level language model with a Transformer encoder and a causal mask, in the style of
PyTorch's word_language_model / "Language modeling with nn.Transformer" tutorial."""

import argparse
import math
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import TransformerEncoder, TransformerEncoderLayer

WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu").split()


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=500):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        return self.dropout(x + self.pe[:x.size(0)])


class TransformerModel(nn.Module):
    def __init__(self, ntoken, d_model, nhead, d_hid, nlayers, dropout=0.1):
        super().__init__()
        self.pos_encoder = PositionalEncoding(d_model, dropout)
        layers = TransformerEncoderLayer(d_model, nhead, d_hid, dropout)
        self.transformer_encoder = TransformerEncoder(layers, nlayers)
        self.embedding = nn.Embedding(ntoken, d_model)
        self.d_model = d_model
        self.linear = nn.Linear(d_model, ntoken)
        self.embedding.weight.data.uniform_(-0.1, 0.1)
        self.linear.bias.data.zero_()
        self.linear.weight.data.uniform_(-0.1, 0.1)

    def forward(self, src, src_mask):
        src = self.pos_encoder(self.embedding(src) * math.sqrt(self.d_model))
        return self.linear(self.transformer_encoder(src, src_mask))


def main():
    parser = argparse.ArgumentParser(description="Transformer word language model")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--bptt", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    # a corpus of counting runs: "gamma delta epsilon ..." starting anywhere
    tokens = []
    while len(tokens) < 3000:
        start = rng.randrange(len(WORDS))
        tokens += [(start + k) % len(WORDS) for k in range(rng.randint(3, 8))]
    data = torch.tensor(tokens, dtype=torch.long)
    nbatch = data.size(0) // args.batch_size
    train_data = data[:nbatch * args.batch_size].view(args.batch_size, -1).t().contiguous()
    train_data = train_data.to(device)

    model = TransformerModel(len(WORDS), 32, 2, 64, 2, dropout=0.1).to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.95)
    mask = nn.Transformer.generate_square_subsequent_mask(args.bptt).to(device)
    for epoch in range(1, args.epochs + 1):
        model.train()
        for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
            seq_len = min(args.bptt, train_data.size(0) - 1 - i)
            src = train_data[i:i + seq_len]
            target = train_data[i + 1:i + 1 + seq_len].reshape(-1)
            output = model(src, mask[:seq_len, :seq_len])
            loss = criterion(output.view(-1, len(WORDS)), target)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            optimizer.step()
            if batch % 3 == 0:
                print(f"epoch {epoch} batch {batch} loss {loss.item():.4f} "
                      f"lr {scheduler.get_last_lr()[0]:.3f}")
        scheduler.step()
    model.eval()
    with torch.no_grad():
        probs = F.softmax(model(train_data[:4], mask[:4, :4])[-1], dim=-1)
    print(f"mean max probability {probs.max(dim=-1).values.mean().item():.3f}")


if __name__ == "__main__":
    main()
