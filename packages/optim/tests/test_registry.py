"""Optimizers and schedulers by name through optim's hooks and torcia-optim's own plugin.
(A plugin optimizer registered in process, and a blocked one: plugins/lion/tests.)"""

import pytest

import torcia
from torcia import plugins
from torcia.optim import lr_scheduler, optimizers


def params():
    return [torcia.zeros(2, requires_grad=True)]


def test_hookspecs_are_added_and_every_hookimpl_matches_one():
    pm = plugins.manager()
    for name in ("torcia_register_optimizers", "torcia_register_lr_schedulers"):
        assert getattr(pm.hook, name).spec is not None
    pm.check_pending()


def test_builtin_optimizers_by_lowercase_or_class_name():
    assert set(optimizers.names()) >= {"sgd", "adam", "adamw", "adamax", "nadam", "radam",
                                       "rmsprop", "adagrad", "adadelta", "lbfgs"}
    assert optimizers.provider("adamw") == "optim"
    for name in ("adamw", "AdamW", "ADAMW"):
        opt = torcia.optim.create(name, params(), lr=0.5)
        assert type(opt) is torcia.optim.AdamW and opt.defaults["lr"] == 0.5


def test_builtin_schedulers_by_name():
    opt = torcia.optim.SGD(params(), lr=1.0)
    for name in ("cosine_annealing", "CosineAnnealingLR"):
        sched = lr_scheduler.create(name, opt, T_max=4)
        assert type(sched) is lr_scheduler.CosineAnnealingLR
    assert len(lr_scheduler.schedulers.names()) == 15


def test_unknown_names_list_the_known_ones():
    with pytest.raises(KeyError, match="no optimizer named 'adamz'; known: adadelta, "):
        torcia.optim.create("adamz", params())
    with pytest.raises(KeyError, match="no lr scheduler named 'warmup'"):
        lr_scheduler.create("warmup", torcia.optim.SGD(params(), lr=1.0))
    with pytest.raises(AttributeError, match="module 'torcia.optim' has no attribute 'Adamz'"):
        torcia.optim.Adamz  # noqa: B018
