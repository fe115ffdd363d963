"""Recurrent layers: reference formulas, gradcheck, PyTorch parity, a task learned."""

import numpy as np
import pytest

import torcia
from torcia import nn
from torcia.autograd import gradcheck
from torcia.nn.utils.rnn import (
    pack_padded_sequence,
    pack_sequence,
    pad_packed_sequence,
    pad_sequence,
)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _np(t):
    return t.detach().numpy().astype(np.float64)


def test_lstm_cell_matches_the_formulas():
    torcia.manual_seed(0)
    cell = nn.LSTMCell(3, 4)
    x, h, c = torcia.randn(2, 3), torcia.randn(2, 4), torcia.randn(2, 4)
    h1, c1 = cell(x, (h, c))
    gates = _np(x) @ _np(cell.weight_ih).T + _np(cell.bias_ih) + _np(h) @ _np(
        cell.weight_hh).T + _np(cell.bias_hh)
    i, f, g, o = np.split(gates, 4, axis=1)
    c_ref = _sigmoid(f) * _np(c) + _sigmoid(i) * np.tanh(g)
    np.testing.assert_allclose(_np(c1), c_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(h1), _sigmoid(o) * np.tanh(c_ref), rtol=1e-5, atol=1e-6)


def test_gru_and_rnn_cells_match_the_formulas():
    torcia.manual_seed(1)
    gru, rnn = nn.GRUCell(3, 4), nn.RNNCell(3, 4, nonlinearity="relu")
    x, h = torcia.randn(2, 3), torcia.randn(2, 4)
    gi = _np(x) @ _np(gru.weight_ih).T + _np(gru.bias_ih)
    gh = _np(h) @ _np(gru.weight_hh).T + _np(gru.bias_hh)
    r = _sigmoid(gi[:, :4] + gh[:, :4])
    z = _sigmoid(gi[:, 4:8] + gh[:, 4:8])
    n = np.tanh(gi[:, 8:] + r * gh[:, 8:])
    np.testing.assert_allclose(_np(gru(x, h)), (1 - z) * n + z * _np(h), rtol=1e-5, atol=1e-6)
    pre = _np(x) @ _np(rnn.weight_ih).T + _np(rnn.bias_ih) + _np(h) @ _np(rnn.weight_hh).T \
        + _np(rnn.bias_hh)
    np.testing.assert_allclose(_np(rnn(x, h)), np.maximum(pre, 0), rtol=1e-5, atol=1e-6)
    assert rnn(x[0], h[0]).shape == (4,)  # unbatched


def test_weight_layout_and_initialisation():
    lstm = nn.LSTM(5, 8, num_layers=2, bidirectional=True, proj_size=3)
    shapes = {k: tuple(v.shape) for k, v in lstm.state_dict().items()}
    assert shapes["weight_ih_l0"] == (32, 5) and shapes["weight_hh_l0"] == (32, 3)
    assert shapes["weight_hr_l0_reverse"] == (3, 8) and shapes["weight_ih_l1"] == (32, 6)
    bound = 1 / np.sqrt(8)
    assert all(np.abs(_np(p)).max() <= bound for p in lstm.parameters())


@pytest.mark.parametrize("cls", [nn.RNNCell, nn.LSTMCell, nn.GRUCell])
def test_cells_pass_gradcheck(cls):
    torcia.manual_seed(2)
    cell = cls(3, 2).double()
    x = torcia.randn(2, 3, dtype=torcia.float64, requires_grad=True)
    h = torcia.randn(2, 2, dtype=torcia.float64, requires_grad=True)

    def f(x, h, w):
        out = cell(x, (h, h * 0.5)) if cls is nn.LSTMCell else cell(x, h)
        return out[0] + out[1] if cls is nn.LSTMCell else out

    assert gradcheck(f, (x, h, cell.weight_hh))


@pytest.mark.parametrize("cls", [nn.RNN, nn.LSTM, nn.GRU])
def test_multi_layer_bidirectional_passes_gradcheck(cls):
    torcia.manual_seed(3)
    layer = cls(2, 3, num_layers=2, bidirectional=True).double()
    x = torcia.randn(3, 2, 2, dtype=torcia.float64, requires_grad=True)
    assert gradcheck(lambda x, w: layer(x)[0], (x, layer.weight_hh_l1_reverse))


def test_packed_sequences_round_trip_and_equal_separate_runs():
    seqs = [torcia.randn(4, 2), torcia.randn(2, 2), torcia.randn(3, 2)]
    padded = pad_sequence(seqs)
    packed = pack_padded_sequence(padded, [4, 2, 3], enforce_sorted=False)
    assert packed.batch_sizes.tolist() == [3, 3, 2, 1]
    back, lengths = pad_packed_sequence(packed)
    assert lengths.tolist() == [4, 2, 3]
    torcia.testing.assert_close(back, padded)
    torcia.manual_seed(4)
    lstm = nn.LSTM(2, 3, bidirectional=True)
    out, (h, c) = lstm(pack_sequence(seqs, enforce_sorted=False))
    out, _ = pad_packed_sequence(out)
    for i, s in enumerate(seqs):
        alone, (h1, _) = lstm(s.unsqueeze(1))
        torcia.testing.assert_close(out[: s.shape[0], i], alone[:, 0], rtol=1e-5, atol=1e-6)
        torcia.testing.assert_close(h[:, i], h1[:, 0], rtol=1e-5, atol=1e-6)
        assert out[s.shape[0]:, i].abs().sum().item() == 0


def test_bad_input_names_the_problem():
    lstm = nn.LSTM(4, 3)
    with pytest.raises(RuntimeError, match="input_size. Expected 4, got 5"):
        lstm(torcia.randn(2, 1, 5))
    with pytest.raises(RuntimeError, match="Expected hidden size"):
        lstm(torcia.randn(2, 1, 4), (torcia.zeros(1, 2, 3), torcia.zeros(1, 1, 3)))
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        pack_padded_sequence(torcia.zeros(3, 2), [1, 3])
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        nn.LSTM(3, 4, proj_size=4)


def _torch_twin(torch, ours, theirs):
    """Copy our weights into the torch layer so both compute the same function."""
    state = {k: torch.tensor(v.detach().numpy()) for k, v in ours.state_dict().items()}
    theirs.load_state_dict(state)


@pytest.mark.parametrize("name, kw", [
    ("LSTM", dict(num_layers=2, bidirectional=True, batch_first=True)),
    ("LSTM", dict(proj_size=2)),
    ("GRU", dict(num_layers=2, bidirectional=True)),
    ("RNN", dict(nonlinearity="relu", batch_first=True)),
])
def test_parity_with_pytorch(name, kw):
    torch = pytest.importorskip("torch")
    torcia.manual_seed(5)
    ours = getattr(nn, name)(3, 4, **kw)
    theirs = getattr(torch.nn, name)(3, 4, **kw)
    _torch_twin(torch, ours, theirs)
    x = np.random.default_rng(0).standard_normal((2, 5, 3)).astype(np.float32)
    out, state = ours(torcia.tensor(x, requires_grad=True))
    t_out, t_state = theirs(torch.tensor(x))
    np.testing.assert_allclose(_np(out), t_out.detach().numpy(), rtol=1e-4, atol=1e-5)
    (out.sum() + (state[0] if name == "LSTM" else state).sum()).backward()
    (t_out.sum() + (t_state[0] if name == "LSTM" else t_state).sum()).backward()
    for (k, p), tp in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(_np(p.grad), tp.grad.numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=k)


def test_lstm_learns_to_reverse_a_sequence():
    optim = pytest.importorskip("torcia.optim")
    torcia.manual_seed(0)
    vocab, length = 5, 4

    class Reverser(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, 16)
            self.encoder = nn.LSTM(16, 48, batch_first=True, bidirectional=True)
            self.head = nn.Linear(96, vocab)

        def forward(self, x):
            return self.head(self.encoder(self.embed(x))[0])

    model = Reverser()
    opt = optim.Adam(model.parameters(), lr=0.02)
    for _ in range(150):
        x = torcia.randint(0, vocab, (32, length))
        loss = nn.functional.cross_entropy(model(x).reshape(-1, vocab), x.flip(1).reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    x = torcia.randint(0, vocab, (200, length))
    accuracy = (model(x).argmax(-1) == x.flip(1)).float().mean().item()
    assert accuracy > 0.95, accuracy
