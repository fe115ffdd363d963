"""Fine-tuning with frozen layers: a small CNN is pre-trained on one task and saved with
torch.save(state_dict); a new model loads it, freezes the feature extractor
(requires_grad_(False), eval-mode BatchNorm), replaces the classifier head and trains only
the head on a second task (as in PyTorch's transfer-learning tutorial)."""

import argparse
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class SmallNet(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d((2, 2)))
        self.fc = nn.Linear(16 * 4, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


def make_task(n, n_classes, seed):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, n_classes, (n,), generator=g)
    images = 0.3 * torch.randn(n, 1, 12, 12, generator=g)
    for c in range(n_classes):
        rows = labels == c
        images[rows, 0, c % 6 * 2:(c % 6) * 2 + 2, :] += 1.0
        images[rows, 0, :, c // 6 * 6:(c // 6) * 6 + 3] += 0.5
    return images, labels


def run(model, loader, optimizer, epochs, tag, device):
    for epoch in range(1, epochs + 1):
        for step, (x, y) in enumerate(loader):
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            if step % 4 == 0:
                # only the fine-tuning loss is the one reported as "loss"
                name = "loss" if tag == "finetune" else "pretrain_loss"
                print(f"{tag} epoch {epoch} step {step} {name} {loss.item():.4f}")


def main():
    parser = argparse.ArgumentParser(description="fine-tuning with frozen layers")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    path = os.path.join(tempfile.mkdtemp(), "pretrained.pth")

    x, y = make_task(512, 6, seed=1)
    pretrained = SmallNet(6).to(device)
    run(pretrained, DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True),
        torch.optim.SGD(pretrained.parameters(), lr=0.1, momentum=0.9), 2, "pretrain", device)
    torch.save(pretrained.state_dict(), path)

    model = SmallNet(6)
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    for param in model.parameters():
        param.requires_grad = False
    model.fc = nn.Linear(model.fc.in_features, 4)
    model = model.to(device)
    model.features.eval()
    trainable = [p for p in model.parameters() if p.requires_grad]
    print(f"trainable parameters {sum(p.numel() for p in trainable)} of "
          f"{sum(p.numel() for p in model.parameters())}")
    optimizer = torch.optim.SGD(filter(lambda p: p.requires_grad, model.parameters()), lr=0.05,
                                momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    x2, y2 = make_task(384, 12, seed=2)
    y2 = y2 % 4
    loader = DataLoader(TensorDataset(x2, y2), batch_size=32, shuffle=True)
    frozen_before = model.features[0].weight.clone()
    for _ in range(args.epochs):
        run(model, loader, optimizer, 1, "finetune", device)
        scheduler.step()
    assert torch.equal(frozen_before, model.features[0].weight), "frozen layer changed"
    print("frozen layers unchanged")


if __name__ == "__main__":
    main()
