"""An out-of-tree plugin distribution defines a differentiable op through
``torcia_register_ops``: it is found from its installed entry point, passes gradcheck and
gradgradcheck (and forward mode, through its own jvp), runs on the meta device from its
shape function, and is listed.

The distribution is a ``*.dist-info`` folder (METADATA + entry_points.txt) and a module in a
temporary directory, used from a fresh interpreter with that directory on its path, as an
installed distribution would be.
"""

import json
import os
import subprocess
import sys
import textwrap

PLUGIN = '''
import numpy as np
import torcia
from torcia import library


def _softclip(a, limit=1.0):
    """limit * tanh(a / limit): a smooth clip to (-limit, limit)."""
    return (limit * np.tanh(a / limit)).astype(a.dtype, copy=False)


def _softclip_backward(grad, x, *, limit=1.0):
    t = (x / limit).tanh()
    return grad * (1 - t * t)


def _softclip_shape(x, limit=1.0):
    return x.shape, x.dtype


JVP_CALLS = []


def _softclip_jvp(tangents, x, *, result, limit=1.0):
    JVP_CALLS.append(limit)
    t = (x / limit).tanh()
    return tangents[0] * (1 - t * t)


def softclip(x, limit=1.0):
    return library.call("softclip", (x,), {"limit": float(limit)})


@torcia.hookimpl
def torcia_register_ops(registry):
    registry.define("softclip", _softclip, backward=_softclip_backward,
                    shape=_softclip_shape, jvp=_softclip_jvp)
'''

CHECK = '''
import json
import numpy as np
import torcia
from torcia import library
from torcia.autograd import gradcheck, gradgradcheck
import softclip_plugin as p

x = torcia.randn(3, 4, dtype=torcia.float64, requires_grad=True)
ok = gradcheck(lambda x: p.softclip(x, 2.0), (x,))
ok2 = gradgradcheck(lambda x: p.softclip(x, 2.0), (x,))
values = p.softclip(torcia.tensor([0.0, 100.0]), 2.0).tolist()
meta = p.softclip(torcia.empty(5, 6, device="meta"))
record = library.get_op("softclip")
fwd = gradcheck(lambda x: p.softclip(x, 2.0), (x,), check_forward_ad=True)
print(json.dumps({"gradcheck": ok, "gradgradcheck": ok2, "values": values,
                  "forward": fwd, "jvp_used": 2.0 in p.JVP_CALLS,
                  "jvp_in_record": record.jvp is p._softclip_jvp,
                  "meta": [list(meta.shape), str(meta.device)],
                  "params": record.params, "group": record.group,
                  "differentiable": record.differentiable}))
'''


def _install(site, dist="torcia-softclip", entry="softclip", modules=None):
    """Install distribution ``dist`` whose plugin ``entry`` is the module
    ``<entry>_plugin``, with ``modules`` (name -> source; by default the softclip plugin)."""
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[torcia]\n{entry} = {entry}_plugin\n")
    for name, source in (modules or {f"{entry}_plugin": PLUGIN}).items():
        (site / f"{name}.py").write_text(textwrap.dedent(source))


def _run(site, *args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(site)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    env.pop("TORCIA_PLUGINS", None)
    env.pop("TORCIA_DISABLE_PLUGINS", None)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          check=True).stdout


def test_an_out_of_tree_plugin_defines_a_differentiable_op(tmp_path):
    _install(tmp_path)
    got = json.loads(_run(tmp_path, "-c", CHECK))
    assert got["gradcheck"] and got["gradgradcheck"]
    # forward mode runs the plugin's own jvp, which its op record holds
    assert got["forward"] and got["jvp_used"] and got["jvp_in_record"]
    assert got["values"][0] == 0.0 and abs(got["values"][1] - 2.0) < 1e-6
    assert got["meta"] == [[5, 6], "meta"]
    assert got["params"] == {"limit": 1.0} and got["group"] == "plugin"
    assert got["differentiable"]
    listing = json.loads(_run(tmp_path, "-m", "torcia", "plugins", "--json"))
    info = {p["name"]: p for p in listing["plugins"]}["softclip"]
    assert info["distribution"] == "torcia-softclip" and info["status"] == "loaded"
    assert "op:softclip" in info["provides"]


DECLARED = '''
import numpy as np
import torcia
from torcia import library


def _softclip(a, limit=1.0):
    return (limit * np.tanh(a / limit)).astype(a.dtype, copy=False)


def _tanh_slope(grad, x, limit):
    t = (x / limit).tanh()
    return grad * (1 - t * t)


# the op's parameter declared positionally, with and without its default, and gathered
def _positional(grad, x, limit):
    return _tanh_slope(grad, x, limit)


def _with_default(grad, x, limit=1.0):
    return _tanh_slope(grad, x, limit)


def _gathered(grad, x, **params):
    return _tanh_slope(grad, x, params["limit"])


def _unknown(grad, x, beta):
    return grad


@torcia.hookimpl
def torcia_register_ops(registry):
    for name, backward in (("clip_positional", _positional), ("clip_default", _with_default),
                           ("clip_gathered", _gathered)):
        registry.define(name, _softclip, backward=backward)
    # a schema names the inputs and parameters a kernel taking **params does not show
    registry.define("clip_schema(Tensor x, *, float limit=1.0) -> Tensor",
                    lambda a, **params: _softclip(a, **params), backward=_positional)
'''

BROKEN = '''
import torcia
from declared_plugin import _softclip, _unknown


@torcia.hookimpl
def torcia_register_ops(registry):
    registry.define("clip_unknown", _softclip, backward=_unknown)
'''

GRADIENTS = '''
import json
import torcia
from torcia import library
from torcia.autograd import gradcheck

x = torcia.randn(3, 4, dtype=torcia.float64, requires_grad=True)
out = {}
for op in ("clip_positional", "clip_default", "clip_gathered", "clip_schema"):
    # limit = 2 reaches the formula: with the default (1) its gradient would be wrong
    out[op] = gradcheck(lambda x: library.call(op, (x,), {"limit": 2.0}), (x,),
                        raise_exception=False)
record = library.get_op("clip_schema")
out["schema"] = [list(record.inputs), record.params]
print(json.dumps(out))
'''


def test_define_passes_backward_parameters_as_the_formula_declares_them(tmp_path):
    _install(tmp_path, "torcia-declared", "declared", {"declared_plugin": DECLARED})
    assert json.loads(_run(tmp_path, "-c", GRADIENTS)) == {
        "clip_positional": True, "clip_default": True, "clip_gathered": True,
        "clip_schema": True, "schema": [["x"], {"limit": 1.0}]}


def test_define_refuses_a_backward_parameter_the_op_does_not_have(tmp_path):
    _install(tmp_path, "torcia-broken-op", "broken_op",
             {"declared_plugin": DECLARED, "broken_op_plugin": BROKEN})
    listing = json.loads(_run(tmp_path, "-m", "torcia", "plugins", "--json"))
    info = {p["name"]: p for p in listing["plugins"]}["broken_op"]
    assert info["status"] == "failed"
    assert ("TypeError: the backward of op 'clip_unknown' has a parameter 'beta', which is "
            "neither an input (a) nor a parameter (limit) of its kernel") in info["reason"]


NOISY = '''
import numpy as np
import torcia
from torcia import library


def _jitter(a, scale=1.0, rng=None):
    """a plus uniform noise in [0, scale)."""
    return (a + scale * rng.random(a.shape)).astype(a.dtype, copy=False)


def jitter(x, scale=1.0):
    return library.call("jitter", (x,), {"scale": float(scale),
                                          "rng": torcia.random.default_generator.rng})


@torcia.hookimpl
def torcia_register_ops(registry):
    registry.define("jitter", _jitter, random=True)
'''

NOISY_CHECK = '''
import json
import warnings
import torcia
from torcia import library
import noisy_plugin as p

out = {"random": library.get_op("jitter").random}
try:
    from torcia.func import vmap
except ModuleNotFoundError:  # vmap comes with torcia-nn: torcia-autograd alone has none
    vmap = None
if vmap is not None:
    f = lambda t: t + p.jitter(torcia.zeros(4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # batched by its random rule, not the loop
        d = vmap(f, randomness="different")(torcia.zeros(3, 4))
        s = vmap(f, randomness="same")(torcia.zeros(3, 4))
    out["different"] = not torcia.equal(d[0], d[1])
    out["same"] = torcia.equal(s[0], s[1])
    try:
        vmap(f)(torcia.zeros(3, 4))
    except RuntimeError as e:
        out["error"] = "randomness error mode" in str(e)
print(json.dumps(out))
'''

NOT_NOISY = '''
import torcia


@torcia.hookimpl
def torcia_register_ops(registry):
    registry.define("quiet", lambda a, scale=1.0: a, random=True)
'''


def test_a_plugins_random_op_is_batched_by_vmap_as_its_record_says(tmp_path):
    _install(tmp_path, "torcia-noisy", "noisy", {"noisy_plugin": NOISY})
    got = json.loads(_run(tmp_path, "-c", NOISY_CHECK))
    assert got.pop("random")
    assert got in ({}, {"different": True, "same": True, "error": True})


def test_define_refuses_a_random_op_without_a_generator(tmp_path):
    _install(tmp_path, "torcia-not-noisy", "not_noisy", {"not_noisy_plugin": NOT_NOISY})
    listing = json.loads(_run(tmp_path, "-m", "torcia", "plugins", "--json"))
    info = {p["name"]: p for p in listing["plugins"]}["not_noisy"]
    assert info["status"] == "failed"
    assert ("op 'quiet' is declared random but its kernel takes no parameter 'rng'"
            in info["reason"])
