"""Time-series forecasting with a two-layer LSTMCell network, as PyTorch's
time_sequence_prediction example: sine waves with random phases, predict the next value,
then generate the future autoregressively. Trained with Adam and ReduceLROnPlateau."""

import argparse

import numpy as np
import torch
import torch.nn as nn


class Sequence(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.hidden = hidden
        self.lstm1 = nn.LSTMCell(1, hidden)
        self.lstm2 = nn.LSTMCell(hidden, hidden)
        self.linear = nn.Linear(hidden, 1)

    def forward(self, input, future=0):
        outputs = []
        n = input.size(0)
        h_t = torch.zeros(n, self.hidden, dtype=input.dtype)
        c_t = torch.zeros(n, self.hidden, dtype=input.dtype)
        h_t2 = torch.zeros(n, self.hidden, dtype=input.dtype)
        c_t2 = torch.zeros(n, self.hidden, dtype=input.dtype)
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for _ in range(future):
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        return torch.cat(outputs, dim=1)


def main():
    parser = argparse.ArgumentParser(description="LSTM time series")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)

    T, L, N = 20, 60, 40
    x = np.empty((N, L), np.int64)
    x[:] = np.array(range(L)) + np.random.randint(-4 * T, 4 * T, N).reshape(N, 1)
    data = np.sin(x / 1.0 / T).astype("float32")
    input = torch.from_numpy(data[4:, :-1])
    target = torch.from_numpy(data[4:, 1:])
    test_input = torch.from_numpy(data[:4, :-1])
    test_target = torch.from_numpy(data[:4, 1:])

    seq = Sequence()
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(seq.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=2)
    for epoch in range(1, args.epochs + 1):
        for step in range(args.steps):
            optimizer.zero_grad(set_to_none=True)
            loss = criterion(seq(input), target)
            loss.backward()
            optimizer.step()
            if step % 3 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.6f}")
        with torch.no_grad():
            pred = seq(test_input, future=10)
            test_loss = criterion(pred[:, :-10], test_target)
        scheduler.step(test_loss)
        print(f"epoch {epoch} test mse {test_loss.item():.6f}")


if __name__ == "__main__":
    main()
