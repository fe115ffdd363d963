"""Sequence-to-sequence with attention (in the style of PyTorch's "translation with a
sequence to sequence network and attention" tutorial): a GRU encoder and a GRU decoder
with Bahdanau attention learn to reverse digit sequences, with teacher forcing."""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

SOS, EOS, VOCAB = 0, 1, 12


class EncoderRNN(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.embedding = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)

    def forward(self, input):
        return self.gru(self.embedding(input))


class BahdanauAttention(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.Wa = nn.Linear(hidden_size, hidden_size)
        self.Ua = nn.Linear(hidden_size, hidden_size)
        self.Va = nn.Linear(hidden_size, 1)

    def forward(self, query, keys):
        scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))
        weights = F.softmax(scores.squeeze(2).unsqueeze(1), dim=-1)
        return torch.bmm(weights, keys), weights


class AttnDecoderRNN(nn.Module):
    def __init__(self, hidden_size, output_size):
        super().__init__()
        self.embedding = nn.Embedding(output_size, hidden_size)
        self.attention = BahdanauAttention(hidden_size)
        self.gru = nn.GRU(2 * hidden_size, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size, output_size)

    def forward(self, encoder_outputs, encoder_hidden, length, target_tensor=None):
        batch_size = encoder_outputs.size(0)
        decoder_input = torch.empty(batch_size, 1, dtype=torch.long).fill_(SOS)
        decoder_input = decoder_input.to(encoder_outputs.device)
        hidden, outputs = encoder_hidden, []
        for i in range(length):
            embedded = self.embedding(decoder_input)
            query = hidden.permute(1, 0, 2)
            context, _ = self.attention(query, encoder_outputs)
            output, hidden = self.gru(torch.cat((embedded, context), dim=2), hidden)
            output = self.out(output)
            outputs.append(output)
            if target_tensor is not None:
                decoder_input = target_tensor[:, i].unsqueeze(1)
            else:
                decoder_input = output.topk(1)[1].squeeze(-1).detach()
        return F.log_softmax(torch.cat(outputs, dim=1), dim=-1), hidden


def main():
    parser = argparse.ArgumentParser(description="seq2seq with attention")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--length", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    src = torch.randint(2, VOCAB, (640, args.length))
    tgt = torch.cat([src.flip(1), torch.full((640, 1), EOS)], dim=1)
    loader = DataLoader(TensorDataset(src, tgt), batch_size=args.batch_size, shuffle=True)
    encoder = EncoderRNN(VOCAB, 48).to(device)
    decoder = AttnDecoderRNN(48, VOCAB).to(device)
    enc_opt = torch.optim.Adam(encoder.parameters(), lr=0.01)
    dec_opt = torch.optim.Adam(decoder.parameters(), lr=0.01)
    criterion = nn.NLLLoss()
    for epoch in range(1, args.epochs + 1):
        total = 0.0
        for step, (x, y) in enumerate(loader):
            x, y = x.to(device), y.to(device)
            enc_opt.zero_grad(set_to_none=True)
            dec_opt.zero_grad(set_to_none=True)
            enc_out, enc_hidden = encoder(x)
            dec_out, _ = decoder(enc_out, enc_hidden, y.size(1), y)
            loss = criterion(dec_out.view(-1, dec_out.size(-1)), y.view(-1))
            loss.backward()
            enc_opt.step()
            dec_opt.step()
            total += loss.item()
            if step % 5 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
        with torch.no_grad():
            enc_out, enc_hidden = encoder(src[:64].to(device))
            pred, _ = decoder(enc_out, enc_hidden, tgt.size(1))
            acc = (pred.argmax(-1) == tgt[:64].to(device)).float().mean().item()
        print(f"epoch {epoch} mean_loss {total / len(loader):.4f} greedy accuracy {acc:.3f}")


if __name__ == "__main__":
    main()
