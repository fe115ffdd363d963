"""Metric learning: a siamese embedding network trained with nn.TripletMarginLoss on
synthetic clustered data (anchor, positive from the same class, negative from another),
then evaluated by nearest-centroid accuracy in the embedding space."""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class TripletDataset(Dataset):
    def __init__(self, points, labels, generator):
        self.points, self.labels, self.generator = points, labels, generator
        self.by_class = [torch.nonzero(labels == c).flatten() for c in range(int(labels.max()) + 1)]

    def __len__(self):
        return len(self.points)

    def __getitem__(self, i):
        c = int(self.labels[i])
        same = self.by_class[c]
        other = int(torch.randint(0, len(self.by_class) - 1, (1,), generator=self.generator))
        other = other + (other >= c)
        diff = self.by_class[other]
        j = same[torch.randint(0, len(same), (1,), generator=self.generator)].item()
        k = diff[torch.randint(0, len(diff), (1,), generator=self.generator)].item()
        return self.points[i], self.points[j], self.points[k]


class EmbeddingNet(nn.Module):
    def __init__(self, dim_in, dim_out=8):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim_in, 64), nn.PReLU(), nn.Linear(64, 64),
                                 nn.PReLU(), nn.Linear(64, dim_out))

    def forward(self, x):
        return F.normalize(self.net(x), p=2, dim=1)


def main():
    parser = argparse.ArgumentParser(description="triplet metric learning")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--margin", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    centres = torch.randn(6, 20) * 1.5
    labels = torch.randint(0, 6, (900,))
    points = centres[labels] + torch.randn(900, 20)
    dataset = TripletDataset(points, labels, torch.Generator().manual_seed(args.seed))
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True)
    model = EmbeddingNet(20).to(device)
    criterion = nn.TripletMarginLoss(margin=args.margin, p=2)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    for epoch in range(1, args.epochs + 1):
        model.train()
        for step, (anchor, positive, negative) in enumerate(loader):
            anchor, positive, negative = (t.to(device) for t in (anchor, positive, negative))
            optimizer.zero_grad(set_to_none=True)
            loss = criterion(model(anchor), model(positive), model(negative))
            loss.backward()
            optimizer.step()
            if step % 3 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
        scheduler.step()
        model.eval()
        with torch.no_grad():
            emb = model(points.to(device))
            cents = torch.stack([emb[labels == c].mean(0) for c in range(6)])
            pred = torch.cdist(emb, cents).argmin(1).cpu()
        print(f"epoch {epoch} nearest-centroid accuracy {(pred == labels).float().mean():.3f}")


if __name__ == "__main__":
    main()
