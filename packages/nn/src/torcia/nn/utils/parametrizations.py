"""Ready-made parametrizations: ``weight_norm``, ``spectral_norm`` and ``orthogonal``, built on
:mod:`torcia.nn.utils.parametrize`."""

from __future__ import annotations

import math

import numpy as np

import torcia
import torcia.nn.functional as F
from torcia.nn.modules.conv import ConvTranspose1d, ConvTranspose2d
from torcia.nn.modules.module import Module
from torcia.nn.utils import parametrize

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


def norm_except_dim(v, pow: float = 2, dim: int = 0):
    """The ``pow``-norm of ``v`` over every dim but ``dim`` (kept, the others of size 1);
    ``dim=-1`` is the norm of the whole tensor, as PyTorch's ``norm_except_dim``."""
    if dim == -1:
        return torcia.linalg.vector_norm(v, pow)
    dim = dim % v.ndim
    others = tuple(d for d in range(v.ndim) if d != dim)
    return torcia.linalg.vector_norm(v, pow, dim=others, keepdim=True)


def _weight_norm(v, g, dim: int):
    return v * (g / norm_except_dim(v, 2, dim))


class _WeightNorm(Module):
    def __init__(self, dim: int | None = 0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparametrize ``module.<name>`` as ``g * v / ||v||`` (norm over every dim but
    ``dim``; the whole tensor when ``dim=None``): ``parametrizations.<name>.original0`` is
    ``g``, ``original1`` is ``v``.

    Parameters
    ----------
    module : Module
    name : str
        The parameter to reparametrize.
    dim : int or None
        The dim the magnitude is kept per (default 0, output channels).

    Returns
    -------
    Module
        ``module``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils.parametrizations import weight_norm
    >>> m = weight_norm(torcia.nn.Linear(20, 40))
    >>> m.parametrizations.weight.original0.shape, m.parametrizations.weight.original1.shape
    (torcia.Size([40, 1]), torcia.Size([40, 20]))
    """
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


class _SpectralNorm(Module):
    def __init__(self, weight, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError("Dimension out of range (expected to be in range of "
                             f"[-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight.detach())
            h, w = weight_mat.shape
            self.register_buffer("_u", F.normalize(torcia.randn(h, dtype=weight.dtype),
                                                   dim=0, eps=eps))
            self.register_buffer("_v", F.normalize(torcia.randn(w, dtype=weight.dtype),
                                                   dim=0, eps=eps))
            self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.ndim) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, weight_mat, n_power_iterations: int) -> None:
        # in place, so the buffers a state_dict or another holder sees stay current
        with torcia.no_grad():
            weight_mat = weight_mat.detach()
            for _ in range(n_power_iterations):
                self._u.copy_(F.normalize(weight_mat @ self._v, dim=0, eps=self.eps))
                self._v.copy_(F.normalize(weight_mat.T @ self._u, dim=0, eps=self.eps))

    def forward(self, weight):
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u = self._u.clone()
        v = self._v.clone()
        sigma = torcia.dot(u, weight_mat @ v)
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> Module:
    """Divide ``module.<name>`` by its spectral norm (largest singular value), estimated by
    power iteration: ``n_power_iterations`` steps on each access in training mode, the
    stored estimate in eval mode.

    Parameters
    ----------
    module : Module
    name : str
    n_power_iterations : int
    eps : float
        Guards the normalizations against division by zero.
    dim : int, optional
        The output dim: 1 for transposed convolutions, else 0.

    Returns
    -------
    Module
        ``module``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils.parametrizations import spectral_norm
    >>> _ = torcia.manual_seed(0)
    >>> m = spectral_norm(torcia.nn.Linear(20, 40))
    >>> m.parametrizations.weight.original.shape
    torcia.Size([40, 20])
    >>> for _ in range(20):  # each access in training mode runs one power iteration
    ...     w = m.weight
    >>> abs(float(torcia.linalg.matrix_norm(m.weight.detach(), 2)) - 1) < 0.01
    True
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, torcia.Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d)) else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module


# ---------------------------------------------------------------------------------------
# orthogonal
# ---------------------------------------------------------------------------------------


def _matrix_exp(a):
    """``exp(a)`` for square matrices by scaling and squaring a Taylor series, written with
    differentiable ops so gradients flow through it."""
    norm = float(a.detach().abs().sum(-2).max()) if a.numel() else 0.0
    squarings = max(0, math.ceil(math.log2(norm))) + 1 if norm > 0.5 else 0
    a = a / (2 ** squarings)
    eye = torcia.eye(a.shape[-1], dtype=a.dtype)
    result = eye + a
    term = a
    for k in range(2, 19):
        term = term @ a / k
        result = result + term
    for _ in range(squarings):
        result = result @ result
    return result


def _householder_product(a, tau):
    """``H_1 H_2 ... H_k`` (first ``k`` columns), ``H_i = I - tau_i v_i v_i^T`` with ``v_i``
    the ``i``-th column of ``a`` below the diagonal and 1 on it (LAPACK's ``orgqr``)."""
    n, k = a.shape[-2], a.shape[-1]
    eye = torcia.eye(n, dtype=a.dtype)
    below = torcia.tril(torcia.ones(n, k, dtype=torcia.bool), -1)
    v_all = torcia.where(below, a, torcia.zeros_like(a)) + torcia.eye(n, k, dtype=a.dtype)
    q = eye.expand(*a.shape[:-2], n, n)
    for i in range(k):
        v = v_all[..., :, i:i + 1]
        q = q - (q @ v) @ (tau[..., i:i + 1, None] * v.mT)
    return q[..., :k]


def _geqrf(a):
    """LAPACK's ``geqrf`` (Householder QR, no gradient): ``R`` on and above the diagonal,
    the reflectors below it, and their ``tau``."""
    work = a.detach().cpu().numpy().astype(np.float64, copy=True)
    n, k = work.shape[-2], work.shape[-1]
    flat = work.reshape(-1, n, k)
    taus = np.zeros((flat.shape[0], min(n, k)))
    for r, tau in zip(flat, taus):
        for j in range(min(n, k)):
            x = r[j:, j].copy()
            tail = np.linalg.norm(x[1:])
            if tail == 0.0:
                continue
            beta = -math.copysign(math.hypot(x[0], tail), x[0])
            tau[j] = (beta - x[0]) / beta
            v = x / (x[0] - beta)
            v[0] = 1.0
            r[j:, j:] -= tau[j] * np.outer(v, v @ r[j:, j:])
            r[j + 1:, j] = v[1:]
    shape = a.shape[:-2]
    return (torcia.tensor(flat.reshape(work.shape), dtype=a.dtype),
            torcia.tensor(taus.reshape(*shape, min(n, k)), dtype=a.dtype))


def _make_orthogonal(a):
    q, r = torcia.linalg.qr(a)
    return q * r.diagonal(dim1=-2, dim2=-1).sign().unsqueeze(-2)


def _is_orthogonal(q) -> bool:
    n, k = q.shape[-2], q.shape[-1]
    eps = 10.0 * n * float(np.finfo(np.float64 if q.dtype == torcia.float64 else np.float32).eps)
    return torcia.allclose(q.mT @ q, torcia.eye(k, dtype=q.dtype), atol=eps)


class _Orthogonal(Module):
    def __init__(self, weight, orthogonal_map: str, *, use_trivialization: bool = True):
        super().__init__()
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, x):
        n, k = x.shape[-2], x.shape[-1]
        transposed = n < k
        if transposed:
            x = x.mT
            n, k = k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            x = x.tril()
            if n != k:
                x = torcia.cat([x, torcia.zeros(*x.shape[:-2], n, n - k, dtype=x.dtype)], dim=-1)
            a = x - x.mT
            if self.orthogonal_map == "matrix_exp":
                q = _matrix_exp(a)
            else:
                eye = torcia.eye(n, dtype=a.dtype)
                q = torcia.linalg.solve(eye - 0.5 * a, eye + 0.5 * a)
            if n != k:
                q = q[..., :k]
        else:
            a = x.tril(-1)
            tau = 2.0 / (1.0 + (a * a).sum(dim=-2))
            q = _householder_product(a, tau)
            # the diagonal of x holds +-1: signs that are not trained
            q = q * x.diagonal(dim1=-2, dim2=-1).detach().to(torcia.int64).unsqueeze(-2)
        if "base" in self._buffers and self.base is not None:
            q = self.base @ q
        if transposed:
            q = q.mT
        return q

    def right_inverse(self, q):
        if q.shape != self.shape:
            raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                             f"Got a tensor of shape {q.shape}.")
        with torcia.no_grad():
            q_init = q
            n, k = q.shape[-2], q.shape[-1]
            transpose = n < k
            if transpose:
                q = q.mT
                n, k = k, n
            if "base" not in self._buffers:
                if self.orthogonal_map in ("matrix_exp", "cayley"):
                    raise NotImplementedError(
                        "It is not possible to assign to the matrix exponential or the Cayley "
                        "parametrizations when use_trivialization=False.")
                a, tau = _geqrf(q)
                diag = a.diagonal(dim1=-2, dim2=-1)
                signs = torcia.where(tau == 0, -diag.sign(), diag.sign())
                on_diag = torcia.eye(n, k, dtype=torcia.bool)
                a = torcia.where(on_diag, signs.unsqueeze(-2).expand(*a.shape), a)
                return a.mT if transpose else a
            if n == k:
                q = q.clone() if _is_orthogonal(q) else _make_orthogonal(q)
            else:
                extra = torcia.randn(*q.shape[:-2], n, n - k, dtype=q.dtype)
                q = _make_orthogonal(torcia.cat([q, extra], dim=-1))
            self.base = q
            neg_id = torcia.zeros_like(q_init)
            neg_id.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
            return neg_id


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True) -> Module:
    """Keep ``module.<name>`` orthogonal (orthonormal rows or columns, whichever are fewer).

    Parameters
    ----------
    module : Module
    name : str
    orthogonal_map : {"matrix_exp", "cayley", "householder"}, optional
        How an unconstrained matrix is mapped to an orthogonal one; ``matrix_exp`` for
        square matrices, ``householder`` otherwise.
    use_trivialization : bool
        Keep a base orthogonal matrix and parametrize around it (default), which also makes
        assignment to the weight possible.

    Returns
    -------
    Module
        ``module``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils.parametrizations import orthogonal
    >>> m = orthogonal(torcia.nn.Linear(20, 40))
    >>> q = m.weight.detach()
    >>> torcia.allclose(q.T @ q, torcia.eye(20), atol=1e-5)
    True
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, torcia.Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError("Expected a matrix or batch of matrices. Got a tensor of "
                         f"{weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else "householder"
    if orthogonal_map not in ("matrix_exp", "cayley", "householder"):
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", '
                         f'"householder". Got: {orthogonal_map}')
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
