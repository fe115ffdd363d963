"""Curve fitting with torch.optim.LBFGS and a closure (as in PyTorch's time-sequence
prediction example): a small network fits a damped sine wave."""

import argparse

import torch
import torch.nn as nn


def main():
    parser = argparse.ArgumentParser(description="LBFGS curve fitting")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_default_dtype(torch.float64)

    x = torch.linspace(-3, 3, 200).unsqueeze(1)
    y = torch.sin(2 * x) * torch.exp(-0.2 * x ** 2) + 0.01 * torch.randn_like(x)
    model = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(),
                          nn.Linear(32, 1))
    criterion = nn.MSELoss()
    optimizer = torch.optim.LBFGS(model.parameters(), lr=0.8, max_iter=20,
                                  line_search_fn="strong_wolfe")
    with torch.no_grad():
        print(f"epoch 0 loss {criterion(model(x), y).item():.6f}")
    for epoch in range(1, args.epochs + 1):
        def closure():
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            return loss

        optimizer.step(closure)
        with torch.no_grad():
            loss = criterion(model(x), y)
        print(f"epoch {epoch} loss {loss.item():.6f}")
    with torch.no_grad():
        future = torch.linspace(3, 4, 5).unsqueeze(1)
        print("extrapolation", [round(v, 3) for v in model(future).squeeze(1).tolist()])


if __name__ == "__main__":
    main()
