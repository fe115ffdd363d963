"""Graph convolutional network (Kipf & Welling) for node classification, in the style of
pygcn: a sparse normalised adjacency matrix (torch.sparse_coo_tensor) multiplied into the
node features with torch.spmm, on a synthetic two-community graph with noisy features."""

import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.nn.parameter import Parameter


class GraphConvolution(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.weight = Parameter(torch.FloatTensor(in_features, out_features))
        self.bias = Parameter(torch.FloatTensor(out_features)) if bias else None
        if not bias:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.weight.size(1))
        self.weight.data.uniform_(-stdv, stdv)
        if self.bias is not None:
            self.bias.data.uniform_(-stdv, stdv)

    def forward(self, input, adj):
        support = torch.mm(input, self.weight)
        output = torch.spmm(adj, support)
        return output + self.bias if self.bias is not None else output


class GCN(nn.Module):
    def __init__(self, nfeat, nhid, nclass, dropout):
        super().__init__()
        self.gc1 = GraphConvolution(nfeat, nhid)
        self.gc2 = GraphConvolution(nhid, nclass)
        self.dropout = dropout

    def forward(self, x, adj):
        x = F.relu(self.gc1(x, adj))
        x = F.dropout(x, self.dropout, training=self.training)
        return F.log_softmax(self.gc2(x, adj), dim=1)


def make_graph(n, p_in, p_out, nfeat):
    labels = torch.arange(n) % 2
    same = labels.unsqueeze(0) == labels.unsqueeze(1)
    prob = torch.where(same, torch.tensor(p_in), torch.tensor(p_out))
    upper = torch.triu((torch.rand(n, n) < prob).float(), diagonal=1)
    dense = upper + upper.t() + torch.eye(n)
    degree = dense.sum(1)
    r_inv = degree.pow(-1)
    edges = dense.nonzero().t()
    values = r_inv[edges[0]]
    adj = torch.sparse_coo_tensor(edges, values, (n, n)).coalesce()
    features = torch.randn(n, nfeat) + 0.3 * F.one_hot(labels, nfeat).float()
    return adj, features, labels


def accuracy(output, labels):
    return output.max(1)[1].type_as(labels).eq(labels).double().sum() / len(labels)


def main():
    parser = argparse.ArgumentParser(description="GCN")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--weight_decay", type=float, default=5e-4)
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    torch.manual_seed(args.seed)

    adj, features, labels = make_graph(200, 0.08, 0.01, 16)
    idx_train, idx_val = torch.LongTensor(range(0, 60)), torch.LongTensor(range(60, 200))
    model = GCN(features.shape[1], args.hidden, 2, 0.5)
    optimizer = optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    if torch.cuda.is_available():
        model.cuda()
        features, adj, labels = features.cuda(), adj.cuda(), labels.cuda()
    for epoch in range(1, args.epochs + 1):
        for step in range(args.steps):
            model.train()
            optimizer.zero_grad(set_to_none=True)
            output = model(features, adj)
            loss_train = F.nll_loss(output[idx_train], labels[idx_train])
            loss_train.backward()
            optimizer.step()
            if step % 5 == 0:
                print(f"epoch {epoch} step {step} loss {loss_train.item():.4f}")
        model.eval()
        with torch.no_grad():
            output = model(features, adj)
        print(f"epoch {epoch} val_loss {F.nll_loss(output[idx_val], labels[idx_val]).item():.4f}"
              f" val accuracy {accuracy(output[idx_val], labels[idx_val]).item():.3f}")


if __name__ == "__main__":
    main()
