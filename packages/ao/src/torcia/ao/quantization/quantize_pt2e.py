"""The export flow of quantization (``prepare_pt2e`` / ``convert_pt2e``): on the graph of
a program of :func:`torcia.export.export` rather than on modules.

::

    exported = torcia.export.export(model.eval(), (x,)).module()
    prepared = prepare_pt2e(exported, X86InductorQuantizer().set_global(
        get_default_x86_inductor_quantization_config()))
    for batch in calibration:
        prepared(batch)
    quantized = convert_pt2e(prepared)      # a program of int8 ops: torcia.export.save it

The quantizer picks the linear layers and 2-D convolutions of the graph; ``prepare_pt2e``
puts an observer on each one's input (a Python step of the program: it runs, it is not
saved); ``convert_pt2e`` replaces each with ``quantize_per_tensor`` of its input at the
observed scale and zero point and the int8 op on int8 weights (symmetric, per output
channel), float out, as the x86 inductor lowering of PyTorch's pt2e graphs runs them.
"""

from __future__ import annotations

import numpy as np

import torcia
from torcia import nn
from torcia.ao.quantization.quantizer import Quantizer
from torcia.export import ExportedModule, Node, passes

__all__ = ["PreparedModule", "convert_pt2e", "prepare_pt2e", "prepare_qat_pt2e"]


class _Observer:
    """A program step: feeds the array to ``observer``, returns it unchanged; ``config``
    says how convert_pt2e quantizes the op it watches."""

    def __init__(self, observer, config):
        self.observer = observer
        self.config = config
        self.__name__ = "observe"

    def __call__(self, arr):
        self.observer(torcia.from_numpy(np.asarray(arr)))
        return arr


class PreparedModule(nn.Module):
    """What :func:`prepare_pt2e` returns: the program with an observer on the input of
    each quantized op; calling it calibrates them."""

    def __init__(self, ep, observers):
        super().__init__()
        self.program_module = ep.module()
        self.observers = nn.ModuleList(observers)

    def forward(self, *args, **kwargs):
        with torcia.no_grad():
            return self.program_module(*args, **kwargs)


def prepare_pt2e(model, quantizer: Quantizer) -> PreparedModule:
    """Observers on the inputs of the ops ``quantizer`` annotates, in the graph of an
    exported program's module (``torch.ao.quantization.quantize_pt2e.prepare_pt2e``).

    Examples
    --------
    >>> import torcia
    >>> from torcia.ao.quantization.quantize_pt2e import prepare_pt2e, convert_pt2e
    >>> from torcia.ao.quantization.quantizer import (X86InductorQuantizer,
    ...     get_default_x86_inductor_quantization_config)
    >>> model = torcia.nn.Sequential(torcia.nn.Linear(8, 4), torcia.nn.ReLU()).eval()
    >>> exported = torcia.export.export(model, (torcia.randn(2, 8),)).module()
    >>> quantizer = X86InductorQuantizer().set_global(
    ...     get_default_x86_inductor_quantization_config())
    >>> prepared = prepare_pt2e(exported, quantizer)
    >>> for _ in range(4):
    ...     _ = prepared(torcia.randn(2, 8))
    >>> q = convert_pt2e(prepared)
    >>> [n.op for n in q.exported_program.graph.nodes]
    ['quantize_per_tensor', 'quantized_linear', 'relu']
    """
    if not isinstance(model, ExportedModule):
        raise TypeError("prepare_pt2e expects the module of an exported program "
                        "(torcia.export.export(model, args).module()), got "
                        f"{type(model).__name__}")
    ep = model.exported_program
    edit = passes.Rewriter(ep)
    annotated = quantizer.annotate(edit.nodes)
    observers = []
    for index in sorted(annotated, reverse=True):
        node, config = edit.nodes[index], annotated[index]
        weight = edit.input_of(node.args[1][1])
        shape = edit.meta.get(node.args[1][1], (None, None))[0]
        if weight is None or weight[0] == "user" or shape is None or (
                node.op == "conv" and len(shape) != 4):
            continue  # weights the graph computes, or not a 2-D convolution: stays float
        observer = config.input_activation()
        seen = edit.value()
        edit.nodes.insert(index, Node("python", "observe", [node.args[0]], {}, [seen],
                                      loc=node.loc, fn=_Observer(observer, config)))
        node.args[0] = ("v", seen)
        observers.append(observer)
    return PreparedModule(edit.program(), observers[::-1])


def prepare_qat_pt2e(model, quantizer: Quantizer) -> PreparedModule:
    """:func:`prepare_pt2e`: torcia's exported programs run forward only, so the
    observers watch the calibration that training data gives (no fake quantization)."""
    return prepare_pt2e(model, quantizer)


def convert_pt2e(model: PreparedModule, use_reference_representation: bool = False,
                 fold_quantize: bool = True) -> ExportedModule:
    """Replace each observed op with its int8 form (``torch.ao.quantization.
    quantize_pt2e.convert_pt2e``): the input quantized at the observed parameters, the
    weights int8 per output channel, the output float. Returns the module of the new
    program (``.exported_program`` can be saved with :func:`torcia.export.save`)."""
    if not isinstance(model, PreparedModule):
        raise TypeError("convert_pt2e expects what prepare_pt2e returned")
    prepared = model.program_module.exported_program
    edit = passes.Rewriter(prepared)
    out, k = [], 0
    replace_next = {}
    for node in edit.nodes:
        if node.kind == "python":
            observer, config = node.fn.observer, node.fn.config
            scale, zero = observer.calculate_qparams()
            replace_next[node.outs[0]] = (node.args[0], float(scale.item()),
                                          int(zero.item()), observer, config)
            continue
        ref = node.args[0] if node.args else None
        if ref is not None and ref[0] == "v" and ref[1] in replace_next:
            source, scale, zero, observer, config = replace_next.pop(ref[1])
            out.extend(_int8_nodes(edit, node, source, scale, zero, observer, config, k))
            k += 1
        else:
            out.append(node)
    edit.nodes = out
    return edit.program().module()


def _int8_nodes(edit, node, source, scale, zero, observer, config, k):
    """``node`` (linear or conv) as quantize_per_tensor + the int8 op."""
    w_ref = node.args[1]
    weight = torcia.from_numpy(np.array(edit.array_of(w_ref[1]), dtype=np.float32))
    wobs = config.weight()
    wobs(weight)
    wscale, wzero = wobs.calculate_qparams()
    out_channels = weight.shape[0]
    scales = wscale.to(torcia.float32).reshape(-1).expand(out_channels).contiguous()
    wq = torcia.from_numpy(np.clip(np.rint(weight.numpy() / scales.numpy().reshape(
        (-1,) + (1,) * (weight.dim() - 1))), wobs.quant_min, wobs.quant_max).astype(np.int8))
    wq_ref = ("v", edit.constant(f"pt2e{k}.weight_int8", wq))
    s_ref = ("v", edit.constant(f"pt2e{k}.weight_scales", scales))
    bias = node.args[2] if len(node.args) > 2 else ("c", None)
    q = edit.value()
    quantize = Node("call", "quantize_per_tensor", [source],
                    {"scale": ("c", scale), "zero_point": ("c", zero), "qmin": ("c", 0),
                     "qmax": ("c", 255), "dtype": ("c", "quint8")}, [q], loc=node.loc)
    params = {"x_scale": ("c", scale), "x_zero_point": ("c", zero), "out_scale": ("c", None),
              "out_zero_point": ("c", 0), "relu": ("c", False)}
    if node.op == "linear":
        op = "quantized_linear"
    else:
        op = "quantized_conv2d"
        params.update({k2: node.params[k2] for k2 in ("stride", "padding", "dilation",
                                                       "groups")})
    int8 = Node("call", op, [("v", q), wq_ref, s_ref, bias], params, list(node.outs),
                loc=node.loc)
    return [quantize, int8]

