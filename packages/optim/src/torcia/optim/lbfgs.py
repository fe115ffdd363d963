"""L-BFGS with an optional strong-Wolfe line search (the algorithm of minFunc, as PyTorch
follows it)."""

from __future__ import annotations

import functools
import math

import torcia
from torcia.optim.optimizer import Optimizer

# constants of the strong Wolfe conditions: sufficient decrease and curvature
_C1, _C2 = 1e-4, 0.9
_LINE_SEARCH_TOLERANCE = 1e-9


def _cubic_minimum(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimizer of the cubic through (x1, f1) and (x2, f2) with slopes g1 and g2,
    clipped to ``bounds`` (default: between x1 and x2); the bounds' midpoint when the cubic
    has no minimum."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 * d1 - g1 * g2
    if d2_square < 0:
        return (lo + hi) / 2.0
    d2 = math.sqrt(d2_square)
    if x1 <= x2:
        x = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        x = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(x, lo), hi)


def _strong_wolfe(evaluate, t, d, f, g, gtd, max_ls):
    """Find a step ``t`` along ``d`` meeting the strong Wolfe conditions.

    ``evaluate(t)`` returns the loss and flat gradient at ``x + t d``; at most ``max_ls``
    iterations follow the first evaluation. Returns the loss,
    gradient and step found, and how many evaluations it took. First brackets an interval
    holding a point that satisfies the conditions, then zooms into it by cubic
    interpolation.
    """
    d_norm = float(d.abs().max())
    f_new, g_new = evaluate(t)
    evals = 1
    gtd_new = float(g_new.dot(d))
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    ls_iter = 0
    bracket = bracket_f = bracket_g = bracket_gtd = None
    while ls_iter < max_ls:
        if f_new > f + _C1 * t * gtd or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -_C2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new], [gtd_prev, gtd_new]
            break
        # extrapolate, at least 1% beyond the last step and at most tenfold
        t_next = _cubic_minimum(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                                bounds=(t + 0.01 * (t - t_prev), t * 10))
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new, gtd_new
        t = t_next
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = float(g_new.dot(d))
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0.0, t], [f, f_new], [g, g_new]

    insufficient_progress = False
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < _LINE_SEARCH_TOLERANCE:
            break
        t = _cubic_minimum(bracket[0], bracket_f[0], bracket_gtd[0],
                           bracket[1], bracket_f[1], bracket_gtd[1])
        # keep away from the ends of the bracket, or the zoom can stall there
        top, bottom = max(bracket), min(bracket)
        margin = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < margin:
            if insufficient_progress or t >= top or t <= bottom:
                t = top - margin if abs(t - top) < abs(t - bottom) else bottom + margin
                insufficient_progress = False
            else:
                insufficient_progress = True
        else:
            insufficient_progress = False
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = float(g_new.dot(d))
        ls_iter += 1
        if f_new > f + _C1 * t * gtd or f_new >= bracket_f[low]:
            bracket[high], bracket_f[high] = t, f_new
            bracket_g[high], bracket_gtd[high] = g_new, gtd_new
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -_C2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
                bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
            bracket[low], bracket_f[low] = t, f_new
            bracket_g[low], bracket_gtd[low] = g_new, gtd_new
    return bracket_f[low], bracket_g[low], bracket[low], evals


class LBFGS(Optimizer):
    r"""L-BFGS: a quasi-Newton method keeping the last ``history_size`` pairs of steps and
    gradient changes to approximate the inverse Hessian (two-loop recursion).

    One call of ``step(closure)`` runs up to ``max_iter`` iterations, re-evaluating the
    model through ``closure`` (which must clear the gradients, compute the loss, call
    ``backward()`` and return the loss). All parameters form one group.

    Parameters
    ----------
    params : iterable of Tensor
    lr : float, default 1
        Step length (the first iteration's step is scaled down by the gradient's 1-norm).
    max_iter : int, default 20
        Iterations per ``step``.
    max_eval : int, optional
        Function evaluations per ``step`` (default ``max_iter * 5 // 4``).
    tolerance_grad : float, default 1e-7
        Stop when the largest gradient component is at most this.
    tolerance_change : float, default 1e-9
        Stop when the loss or the parameters change by less than this.
    history_size : int, default 100
    line_search_fn : None or "strong_wolfe", default None
        Without a line search each iteration moves by a fixed ``lr``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([-1.5, 2.0], dtype=torcia.float64, requires_grad=True)
    >>> opt = torcia.optim.LBFGS([x], line_search_fn="strong_wolfe")
    >>> def closure():
    ...     opt.zero_grad()
    ...     loss = (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2
    ...     loss.backward()
    ...     return loss
    >>> for _ in range(5):
    ...     _ = opt.step(closure)
    >>> [round(v, 4) for v in x.tolist()]
    [1.0, 1.0]
    """

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        if line_search_fn not in (None, "strong_wolfe"):
            raise RuntimeError("only 'strong_wolfe' is supported")
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                        tolerance_grad=tolerance_grad, tolerance_change=tolerance_change,
                        history_size=history_size, line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError(
                "LBFGS doesn't support per-parameter options (parameter groups)"
            )

    @property
    def _params(self):
        return self.param_groups[0]["params"]

    # ----- the parameters as one flat vector --------------------------------------------
    def _flat_grad(self):
        parts = [
            torcia.zeros(p.numel(), dtype=p.dtype, device=p.device) if p.grad is None
            else p.grad.reshape(-1)
            for p in self._params
        ]
        return torcia.cat(parts, 0)

    def _move(self, step_size, direction):
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(direction[offset:offset + n].view_as(p), alpha=step_size)
            offset += n

    def _evaluate_at(self, closure, x, t, d):
        self._move(t, d)
        loss = float(closure())
        flat_grad = self._flat_grad()
        for p, saved in zip(self._params, x):
            p.copy_(saved)
        return loss, flat_grad

    def step(self, closure):
        """Run up to ``max_iter`` L-BFGS iterations.

        Parameters
        ----------
        closure : callable
            Clears the gradients, re-evaluates the model, back-propagates and returns the
            loss.

        Returns
        -------
        The loss that the first call of ``closure`` returned.
        """
        if closure is None:
            raise RuntimeError("LBFGS requires a closure")
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        history_size, line_search_fn = group["history_size"], group["line_search_fn"]

        def evaluate():
            with torcia.enable_grad():
                return closure()

        with torcia.no_grad():
            # the state lives with the first parameter, as PyTorch keeps it
            state = self.state[self._params[0]]
            state.setdefault("func_evals", 0)
            state.setdefault("n_iter", 0)
            orig_loss = evaluate()
            loss = float(orig_loss)
            current_evals = 1
            state["func_evals"] += 1
            flat_grad = self._flat_grad()
            if float(flat_grad.abs().max()) <= tolerance_grad:
                return orig_loss

            d, t = state.get("d"), state.get("t")
            old_dirs, old_stps = state.get("old_dirs"), state.get("old_stps")
            ro, H_diag = state.get("ro"), state.get("H_diag")
            prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")

            n_iter = 0
            while n_iter < max_iter:
                n_iter += 1
                state["n_iter"] += 1
                if state["n_iter"] == 1:
                    d = -flat_grad
                    old_dirs, old_stps, ro, H_diag = [], [], [], 1.0
                else:
                    d, H_diag = self._direction(flat_grad, prev_flat_grad, d, t, old_dirs,
                                                old_stps, ro, H_diag, history_size, state)
                if prev_flat_grad is None:
                    prev_flat_grad = flat_grad.clone()
                else:
                    prev_flat_grad.copy_(flat_grad)
                prev_loss = loss

                if state["n_iter"] == 1:
                    t = min(1.0, 1.0 / float(flat_grad.abs().sum())) * lr
                else:
                    t = lr
                gtd = float(flat_grad.dot(d))
                if gtd > -tolerance_change:
                    break  # not a descent direction

                evals = 0
                if line_search_fn is not None:
                    x_init = [p.clone() for p in self._params]
                    loss, flat_grad, t, evals = _strong_wolfe(
                        functools.partial(self._evaluate_at, evaluate, x_init, d=d),
                        t, d, loss, flat_grad, gtd, max_ls=max_eval - current_evals,
                    )
                    self._move(t, d)
                    converged = float(flat_grad.abs().max()) <= tolerance_grad
                else:
                    self._move(t, d)
                    converged = False
                    if n_iter != max_iter:
                        loss = float(evaluate())
                        flat_grad = self._flat_grad()
                        converged = float(flat_grad.abs().max()) <= tolerance_grad
                        evals = 1
                current_evals += evals
                state["func_evals"] += evals

                if n_iter == max_iter or current_evals >= max_eval or converged:
                    break
                if float(d.mul(t).abs().max()) <= tolerance_change:
                    break
                if abs(loss - prev_loss) < tolerance_change:
                    break

            state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=H_diag,
                         prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss

    @staticmethod
    def _direction(flat_grad, prev_flat_grad, d, t, old_dirs, old_stps, ro, H_diag,
                   history_size, state):
        """Update the curvature history with the last step, then return the new search
        direction ``-H g`` (two-loop recursion) and the initial Hessian scale."""
        y = flat_grad - prev_flat_grad
        s = d * t
        ys = float(y.dot(s))
        if ys > 1e-10:  # skip pairs that would break positive definiteness
            if len(old_dirs) == history_size:
                old_dirs.pop(0)
                old_stps.pop(0)
                ro.pop(0)
            old_dirs.append(y)
            old_stps.append(s)
            ro.append(1.0 / ys)
            H_diag = ys / float(y.dot(y))
        al = [0.0] * len(old_dirs)
        q = -flat_grad
        for i in range(len(old_dirs) - 1, -1, -1):
            al[i] = float(old_stps[i].dot(q)) * ro[i]
            q.add_(old_dirs[i], alpha=-al[i])
        r = q * H_diag
        for i in range(len(old_dirs)):
            be_i = float(old_dirs[i].dot(r)) * ro[i]
            r.add_(old_stps[i], alpha=al[i] - be_i)
        state["al"] = al
        return r, H_diag
