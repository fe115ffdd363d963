"""The Optimizer base: bad input in PyTorch's words, parameter groups, zero_grad, closures,
step hooks, and the fallback when a device has no multi-tensor kernel."""

import numpy as np
import pytest

import torcia
from torcia import optim

ALL = ["SGD", "Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop", "Adagrad", "Adadelta",
       "LBFGS"]
WITH_BETAS = ["Adam", "AdamW", "Adamax", "NAdam", "RAdam"]
WITH_EPS = WITH_BETAS + ["RMSprop", "Adagrad", "Adadelta"]


def leaf(*values):
    return torcia.tensor(list(values) or [1.0, 2.0], requires_grad=True)


@pytest.mark.parametrize("name", ALL)
def test_negative_learning_rate(name):
    with pytest.raises(ValueError, match=r"^Invalid learning rate: -0.1$"):
        getattr(optim, name)([leaf()], lr=-0.1)


@pytest.mark.parametrize("name", WITH_BETAS)
@pytest.mark.parametrize("betas, index", [((1.0, 0.999), 0), ((0.9, -0.1), 1)])
def test_betas_outside_zero_one(name, betas, index):
    with pytest.raises(ValueError, match=rf"^Invalid beta parameter at index {index}: "):
        getattr(optim, name)([leaf()], betas=betas)


@pytest.mark.parametrize("name", WITH_EPS)
def test_negative_eps(name):
    with pytest.raises(ValueError, match=r"^Invalid epsilon value: -1e-08$"):
        getattr(optim, name)([leaf()], eps=-1e-8)


@pytest.mark.parametrize("name, options, message", [
    ("SGD", {"momentum": -0.5}, "Invalid momentum value: -0.5"),
    ("SGD", {"weight_decay": -1}, "Invalid weight_decay value: -1"),
    ("SGD", {"nesterov": True}, "Nesterov momentum requires a momentum and zero dampening"),
    ("SGD", {"nesterov": True, "momentum": 0.9, "dampening": 0.1},
     "Nesterov momentum requires a momentum and zero dampening"),
    ("RMSprop", {"alpha": -0.1}, "Invalid alpha value: -0.1"),
    ("Adadelta", {"rho": 1.5}, "Invalid rho value: 1.5"),
    ("Adagrad", {"lr_decay": -1}, "Invalid lr_decay value: -1"),
    ("Adagrad", {"initial_accumulator_value": -1},
     "Invalid initial_accumulator_value value: -1"),
    ("NAdam", {"momentum_decay": -1}, "Invalid momentum_decay value: -1"),
])
def test_other_hyperparameters_are_checked(name, options, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        getattr(optim, name)([leaf()], **options)


def test_params_as_a_single_tensor():
    with pytest.raises(TypeError, match=r"should be an iterable of Tensors or dicts, but got "
                                        r"torcia.FloatTensor$"):
        optim.SGD(leaf(), lr=0.1)


def test_params_as_a_set_or_empty_or_not_tensors():
    with pytest.raises(TypeError, match="ordering of tensors in sets will change"):
        optim.SGD({leaf()}, lr=0.1)
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        optim.Adam([])
    with pytest.raises(TypeError, match="one of the params is float$"):
        optim.Adam([leaf(), 1.0])


def test_a_parameter_given_twice():
    w = leaf()
    with pytest.raises(ValueError, match="a parameter group with duplicate parameters"):
        optim.SGD([w, w], lr=0.1)
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter "
                                         "group"):
        optim.SGD([{"params": [w]}, {"params": [leaf(), w]}], lr=0.1)
    opt = optim.SGD([w], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": w})


def test_a_non_leaf_tensor():
    w = leaf()
    with pytest.raises(ValueError, match="^can't optimize a non-leaf Tensor$"):
        optim.Adam([w * 2])


def test_lbfgs_takes_one_group_and_knows_one_line_search():
    with pytest.raises(ValueError, match="doesn't support per-parameter options"):
        optim.LBFGS([{"params": [leaf()]}, {"params": [leaf()]}])
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        optim.LBFGS([leaf()], line_search_fn="armijo")


def test_groups_merge_defaults_and_keep_their_own_values():
    a, b = leaf(), leaf()
    opt = optim.SGD([{"params": [a]}, {"params": b, "lr": 0.5, "momentum": 0.1}], lr=0.1,
                    momentum=0.9)
    assert [(g["lr"], g["momentum"]) for g in opt.param_groups] == [(0.1, 0.9), (0.5, 0.1)]
    assert opt.param_groups[1]["params"] == [b]
    c = leaf()
    opt.add_param_group({"params": [c], "weight_decay": 0.01})
    assert opt.param_groups[2]["lr"] == 0.1 and opt.param_groups[2]["weight_decay"] == 0.01


def test_each_group_uses_its_own_rate():
    a, b = leaf(1.0), leaf(1.0)
    opt = optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1)
    (a + b).sum().backward()
    opt.step()
    assert a.tolist() == pytest.approx([0.9]) and b.tolist() == pytest.approx([0.5])


def test_zero_grad_to_none_or_to_zeros():
    w = leaf()
    opt = optim.SGD([w], lr=0.1)
    (w * w).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert w.grad.tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert w.grad is None


def test_step_returns_the_closure_loss_evaluated_with_grad_enabled():
    w = leaf()
    opt = optim.Adam([w], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss

    with torcia.no_grad():
        loss = opt.step(closure)
    assert loss.item() == 5.0
    assert w.tolist() == pytest.approx([0.9, 1.9])


def test_step_hooks_run_in_order_and_can_be_removed():
    w = leaf()
    opt = optim.SGD([w], lr=0.1)
    seen = []
    pre = opt.register_step_pre_hook(lambda o, args, kwargs: seen.append(("pre", o, args)))
    post = opt.register_step_post_hook(lambda o, args, kwargs: seen.append(("post", o, args)))
    (w * w).sum().backward()
    opt.step()
    assert seen == [("pre", opt, ()), ("post", opt, ())]
    pre.remove()
    post.remove()
    opt.step()
    assert len(seen) == 2


def test_a_pre_hook_may_replace_the_arguments():
    w = leaf()
    opt = optim.SGD([w], lr=0.1)
    calls = []

    def closure():
        calls.append(1)
        return torcia.tensor(0.0)

    opt.register_step_pre_hook(lambda o, args, kwargs: ((closure,), {}))
    (w * w).sum().backward()
    opt.step()
    assert calls == [1]


def test_without_a_kernel_the_per_parameter_path_runs(monkeypatch):
    kernels = torcia.device("cpu").backend.kernels

    def run(**options):
        w = leaf(1.0, -2.0)
        opt = optim.Adam([w], lr=0.1, **options)
        for _ in range(3):
            opt.zero_grad()
            (w * w).sum().backward()
            opt.step()
        return w.tolist()

    with_kernel = run()
    monkeypatch.delitem(kernels, "adam_step")
    assert run() == with_kernel
    with pytest.raises(RuntimeError, match="foreach=True needs the multi-tensor kernel "
                                           "'adam_step' for device type 'cpu'"):
        run(foreach=True)


def test_nn_parameters_are_optimized():
    nn = pytest.importorskip("torcia.nn")
    torcia.manual_seed(0)
    model = nn.Linear(3, 1)
    x = torcia.randn(16, 3)
    y = x @ torcia.tensor([[1.0], [-2.0], [0.5]]) + 0.3
    opt = optim.create("adam", model.parameters(), lr=0.05)
    losses = []
    for _ in range(100):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 1e-2 * losses[0]


def test_repr_lists_each_group():
    opt = optim.SGD([leaf()], lr=0.1)
    text = repr(opt)
    assert text.startswith("SGD (\nParameter Group 0\n    dampening: 0\n")
    assert "    lr: 0.1\n" in text and text.endswith("\n)")


def test_hyperparameter_changes_take_effect_at_the_next_step():
    w = leaf(1.0)
    opt = optim.SGD([w], lr=0.1)
    opt.param_groups[0]["lr"] = 0.0
    (w * 3).sum().backward()
    opt.step()
    np.testing.assert_array_equal(w.detach().numpy(), [1.0])


def test_named_parameters_keep_their_names():
    a, b = leaf(), leaf()
    opt = optim.SGD([("w", a), ("b", b)], lr=0.1)
    assert opt.param_groups[0]["params"] == [a, b]
    assert opt.state_dict()["param_groups"][0]["param_names"] == ["w", "b"]
    with pytest.raises(ValueError, match="Some param names are missing"):
        optim.SGD([("w", leaf()), leaf()], lr=0.1)
