"""Word-level language model with an LSTM, in the style of PyTorch's word_language_model
example (batchify, get_batch, repackage_hidden, gradient clipping, perplexity), on a
generated corpus with a simple grammar."""

import argparse
import math
import os
import random
import tempfile

import torch
import torch.nn as nn

SUBJECTS = ["the cat", "a dog", "my friend", "the teacher", "our neighbour"]
VERBS = ["sees", "likes", "helps", "follows", "calls"]
OBJECTS = ["the ball", "a bird", "the garden", "her brother", "the old car"]


def make_corpus(n_sentences, seed):
    rng = random.Random(seed)
    words = []
    for _ in range(n_sentences):
        words += f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} .".split()
        words.append("<eos>")
    return words


class Dictionary:
    def __init__(self):
        self.word2idx, self.idx2word = {}, []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.2, tie_weights=True):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            self.decoder.weight = self.encoder.weight
        self.nhid, self.nlayers = nhid, nlayers
        self.init_weights()

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output).view(-1, self.decoder.out_features)
        return nn.functional.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                weight.new_zeros(self.nlayers, bsz, self.nhid))


def batchify(data, bsz, device):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous().to(device)


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].view(-1)


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def main():
    parser = argparse.ArgumentParser(description="LSTM word language model")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--bptt", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=20.0)
    parser.add_argument("--clip", type=float, default=0.25)
    parser.add_argument("--seed", type=int, default=1111)
    parser.add_argument("--log-interval", type=int, default=5)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    dictionary = Dictionary()
    ids = torch.tensor([dictionary.add_word(w) for w in make_corpus(800, args.seed)],
                       dtype=torch.int64)
    split = int(0.9 * len(ids))
    train_data = batchify(ids[:split], args.batch_size, device)
    val_data = batchify(ids[split:], 4, device)
    ntokens = len(dictionary)
    model = RNNModel(ntokens, 32, 32, 2).to(device)
    criterion = nn.NLLLoss()
    lr = args.lr
    for epoch in range(1, args.epochs + 1):
        model.train()
        hidden, total_loss = model.init_hidden(args.batch_size), 0.0
        for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
            data, targets = get_batch(train_data, i, args.bptt)
            model.zero_grad(set_to_none=True)
            hidden = repackage_hidden(hidden)
            output, hidden = model(data, hidden)
            loss = criterion(output, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            total_loss += loss.item()
            if batch % args.log_interval == 0 and batch > 0:
                cur_loss = total_loss / args.log_interval
                print(f"epoch {epoch} batch {batch} lr {lr:.2f} loss {cur_loss:.4f} "
                      f"ppl {math.exp(cur_loss):.2f}")
                total_loss = 0.0
        model.eval()
        total, hidden = 0.0, model.init_hidden(4)
        with torch.no_grad():
            for i in range(0, val_data.size(0) - 1, args.bptt):
                data, targets = get_batch(val_data, i, args.bptt)
                output, hidden = model(data, hidden)
                total += len(data) * criterion(output, targets).item()
        print(f"epoch {epoch} valid ppl {math.exp(total / (len(val_data) - 1)):.2f}")
        lr /= 2.0
    with open(os.path.join(tempfile.mkdtemp(), "model.pt"), "wb") as f:
        torch.save(model.state_dict(), f)


if __name__ == "__main__":
    main()
