"""``load_state_dict`` refuses state buffers that cannot serve their parameter (issue #20:
a checkpoint's momentum buffer or Adam moment of the wrong size crashed the native update
with SIGSEGV, SIGABRT or a hang) and casts floating state to the parameter's dtype."""

import subprocess
import sys
import textwrap

import pytest

import torcia


def _stepped(opt_cls, **kw):
    p = torcia.zeros(4, 3, requires_grad=True)
    opt = opt_cls([p], **kw)
    p.grad = torcia.ones(4, 3)
    opt.step()
    return p, opt


@pytest.mark.parametrize("opt_cls, kw, key", [
    (torcia.optim.SGD, dict(lr=0.1, momentum=0.9), "momentum_buffer"),
    (torcia.optim.Adam, {}, "exp_avg"),
    (torcia.optim.Adam, {}, "exp_avg_sq"),
    (torcia.optim.Adam, dict(amsgrad=True), "max_exp_avg_sq"),
    (torcia.optim.AdamW, {}, "exp_avg"),
    (torcia.optim.RMSprop, dict(momentum=0.9, centered=True), "grad_avg"),
])
def test_wrong_size_buffer_is_refused(opt_cls, kw, key):
    p, opt = _stepped(opt_cls, **kw)
    sd = opt.state_dict()
    before = {k: v.clone() for k, v in opt.state[p].items()}
    # state_dict hands out the live per-parameter dicts: edit a copy
    sd["state"][0] = {**sd["state"][0], key: torcia.zeros(5)}
    with pytest.raises(RuntimeError, match=f"'{key}' of size \\[5\\] for parameter 0, whose "
                                           "state needs size \\[4, 3\\]"):
        opt.load_state_dict(sd)
    # the optimizer keeps its own state
    for k, v in before.items():
        assert torcia.equal(opt.state[p][k], v)


def test_scalar_buffer_keeps_its_size():
    # NAdam's mu_product is 0-d whatever the parameter's shape
    p, opt = _stepped(torcia.optim.NAdam)
    opt.load_state_dict(opt.state_dict())
    opt.step()
    sd = opt.state_dict()
    sd["state"][0]["mu_product"] = torcia.zeros(4, 3)
    with pytest.raises(RuntimeError, match="'mu_product' of size \\[4, 3\\]"):
        opt.load_state_dict(sd)


def test_floating_state_is_cast_to_the_parameter():
    p, opt = _stepped(torcia.optim.Adam)
    sd = opt.state_dict()
    sd["state"][0]["exp_avg"] = sd["state"][0]["exp_avg"].double()
    opt.load_state_dict(sd)
    assert opt.state[p]["exp_avg"].dtype is torcia.float32
    opt.step()
    assert p.dtype is torcia.float32


CRASH = textwrap.dedent("""
    import sys, torcia
    p = torcia.zeros(1 << 20, requires_grad=True)
    opt = torcia.optim.{name}([p], lr=0.1, {kw})
    p.grad = torcia.ones(1 << 20)
    opt.step()
    sd = opt.state_dict()
    sd["state"][0][{key!r}] = torcia.zeros(1)
    try:
        opt.load_state_dict(sd)
        opt.step()
    except RuntimeError as e:
        print(e)
        sys.exit(3)
""")


@pytest.mark.parametrize("name, kw, key", [
    ("SGD", "momentum=0.9", "momentum_buffer"),
    ("Adam", "", "exp_avg"),
    ("Adam", "", "exp_avg_sq"),
    ("Adam", "amsgrad=True", "max_exp_avg_sq"),
])
def test_bad_checkpoint_state_is_an_error_not_a_crash(name, kw, key):
    # in a child process: before the check, the native update wrote past the buffer
    r = subprocess.run([sys.executable, "-c", CRASH.format(name=name, kw=kw, key=key)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, (r.returncode, r.stderr[-2000:])
    assert f"'{key}' of size [1]" in r.stdout
