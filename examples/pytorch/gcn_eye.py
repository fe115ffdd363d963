"""Graph convolutional network in the style of pytorch/examples' gcn (Kipf & Welling): the
adjacency is a sparse COO tensor, the self-loops are added as ``torch.eye(V) + adj`` (a
dense matrix, as upstream), symmetrically normalised, and multiplied into the node features
with torch.spmm; trained on a synthetic citation-like graph (communities with a
bag-of-words signal per community) with masks for train/val/test, as upstream trains on Cora.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


class GraphConv(nn.Module):
    def __init__(self, input_dim, output_dim, use_bias=False):
        super().__init__()
        self.kernel = nn.Parameter(torch.Tensor(input_dim, output_dim))
        nn.init.xavier_normal_(self.kernel)
        self.bias = None
        if use_bias:
            self.bias = nn.Parameter(torch.Tensor(output_dim))
            nn.init.zeros_(self.bias)

    def forward(self, input_tensor, adj_mat):
        support = torch.mm(input_tensor, self.kernel)
        output = torch.spmm(adj_mat, support)
        if self.bias is not None:
            output = output + self.bias
        return output


class GCN(nn.Module):
    def __init__(self, input_dim, hidden_dim, output_dim, use_bias=True, dropout_p=0.1):
        super().__init__()
        self.gc1 = GraphConv(input_dim, hidden_dim, use_bias=use_bias)
        self.gc2 = GraphConv(hidden_dim, output_dim, use_bias=use_bias)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, input_tensor, adj_mat):
        x = self.gc1(input_tensor, adj_mat)
        x = F.relu(x)
        x = self.dropout(x)
        x = self.gc2(x, adj_mat)
        return F.log_softmax(x, dim=1)


def make_graph(num_nodes, num_classes, num_features, generator):
    labels = torch.randint(0, num_classes, (num_nodes,), generator=generator)
    # edges: mostly within a community (a citation graph's homophily)
    src = torch.randint(0, num_nodes, (6 * num_nodes,), generator=generator)
    dst = torch.randint(0, num_nodes, (6 * num_nodes,), generator=generator)
    keep = (labels[src] == labels[dst]) | (torch.rand(src.shape, generator=generator) < 0.1)
    src, dst = src[keep], dst[keep]
    edges = torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])
    V = num_nodes
    adj_mat = torch.sparse_coo_tensor(edges, torch.ones(edges.shape[1]), (V, V)).coalesce()
    adj_mat = torch.sparse_coo_tensor(adj_mat.indices(), torch.ones(adj_mat._nnz()), (V, V))
    # self-loops, then the symmetric normalisation D^-1/2 (A + I) D^-1/2 of upstream
    adj_mat = torch.eye(V) + adj_mat
    degree_mat = torch.sum(adj_mat, dim=1)
    degree_mat = torch.sqrt(1.0 / degree_mat)
    degree_mat[degree_mat == float("inf")] = 0
    degree_mat = torch.diag(degree_mat)
    adj_mat = degree_mat @ adj_mat @ degree_mat
    # binary bag-of-words features: each class favours its own block of words
    favoured = (torch.arange(num_features) % num_classes).unsqueeze(0) == labels.unsqueeze(1)
    prob = torch.where(favoured, torch.tensor(0.12), torch.tensor(0.03))
    features = (torch.rand(V, num_features, generator=generator) < prob).float()
    features = features / features.sum(1, keepdim=True).clamp(min=1)
    return features, labels, adj_mat


def train_iter(epoch, model, optimizer, criterion, input, target, mask_train, mask_val,
               print_every=10):
    model.train()
    optimizer.zero_grad()
    output = model(*input)
    loss = criterion(output[mask_train], target[mask_train])
    loss.backward()
    optimizer.step()
    loss_train = loss.item()
    acc_train = (output[mask_train].argmax(1) == target[mask_train]).float().mean().item()
    loss_val = criterion(output[mask_val], target[mask_val]).item()
    acc_val = (output[mask_val].argmax(1) == target[mask_val]).float().mean().item()
    if epoch % print_every == 0:
        print(f"Epoch {epoch:04d} loss {loss_train:.4f} acc_train {acc_train:.4f} "
              f"val_loss {loss_val:.4f} val_acc {acc_val:.4f}")


def test(model, criterion, input, target, mask):
    model.eval()
    with torch.no_grad():
        output = model(*input)
        output, target = output[mask], target[mask]
        loss = criterion(output, target)
        acc = (output.argmax(1) == target).float().mean()
    return loss.item(), acc.item()


def main():
    parser = argparse.ArgumentParser(description="PyTorch Graph Convolutional Network")
    parser.add_argument("--epochs", type=int, default=3, help="epochs of 40 iterations")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--l2", type=float, default=5e-4)
    parser.add_argument("--dropout-p", type=float, default=0.5)
    parser.add_argument("--hidden-dim", type=int, default=16)
    parser.add_argument("--nodes", type=int, default=600)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    features, labels, adj_mat = make_graph(args.nodes, 4, 96, generator)
    idx = torch.randperm(len(labels), generator=generator)
    idx_test, idx_val, idx_train = idx[:200], idx[200:300], idx[300:]
    gcn = GCN(features.shape[1], args.hidden_dim, int(labels.max()) + 1, True, args.dropout_p)
    optimizer = torch.optim.Adam(gcn.parameters(), lr=args.lr, weight_decay=args.l2)
    criterion = nn.NLLLoss()
    for epoch in range(args.epochs * 40):
        train_iter(epoch + 1, gcn, optimizer, criterion, (features, adj_mat), labels,
                   idx_train, idx_val, print_every=10)
    loss_test, acc_test = test(gcn, criterion, (features, adj_mat), labels, idx_test)
    print(f"Test set results: test_loss {loss_test:.4f} accuracy {acc_test:.4f}")


if __name__ == "__main__":
    main()
