# ruff: noqa: UP006, UP007, UP035, UP045  (typing's names, as code using torch.jit writes them)
"""torcia.jit's decorators and predicates: what libraries touch at import.

Each is checked against what PyTorch 2.13's does in eager code where torch is installed
(the same object back, the same marks, the same refusals), and by hand otherwise.
"""

from __future__ import annotations

import itertools
import warnings
from typing import Any, Dict, List, Optional, Tuple, Union

import pytest

import torcia
import torcia.jit
from torcia import nn
from torcia.jit._markers import FunctionModifiers, get_torchscript_modifier

try:
    import torch
except ImportError:
    torch = None

def needs_torch(test):
    return pytest.mark.torch(
        pytest.mark.skipif(torch is None, reason="torch 2.13 is not installed")(test))


def _mark(fn):
    return next(k for k, v in vars(FunctionModifiers).items()
                if v == get_torchscript_modifier(fn))


def _fn(x):
    return x


def test_decorators_return_the_function_marked():
    for deco, mark in ((torcia.jit.ignore, "IGNORE"), (torcia.jit.unused, "UNUSED"),
                       (torcia.jit.export, "EXPORT")):
        def f(x):
            return x + 1

        assert deco(f) is f
        assert _mark(f) == mark
        assert f(1) == 2  # eager calls run it as written
    assert _mark(_fn) == "DEFAULT"


def test_ignore_with_arguments():
    def f():
        return 1

    assert torcia.jit.ignore(drop=True)(f) is f
    assert _mark(f) == "UNUSED"
    assert _mark(torcia.jit.ignore(drop=False)(lambda: 0)) == "IGNORE"
    assert _mark(torcia.jit.ignore(drop_on_export=True)(lambda: 0)) == "UNUSED"
    with pytest.raises(RuntimeError, match="must be a bool or a function"):
        torcia.jit.ignore(drop="yes")


def test_unused_on_a_property_marks_its_accessors():
    class M(nn.Module):
        @torcia.jit.unused
        @property
        def size(self):
            return 3

    assert _mark(M.size.fget) == "UNUSED"
    assert M().size == 3


def test_methods_marked_in_a_class_keep_working():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

        def forward(self, x):
            if torcia.jit.is_scripting() or torcia.jit.is_tracing():
                return self.fc(x)
            return self.helper(self.fc(x))

        @torcia.jit.ignore
        def helper(self, x):
            return x * 1

        @torcia.jit.export
        def extra(self, x):
            return x - 1

    block = Block()
    x = torcia.randn(3, 2)
    assert torcia.allclose(block(x), block.fc(x))
    assert _mark(Block.helper) == "IGNORE"
    assert _mark(block.extra) == "EXPORT"


def test_predicates_false_in_eager_code():
    assert torcia.jit.is_scripting() is False
    assert torcia.jit.is_tracing() is False


def test_overloads_keep_the_last_definition():
    @torcia.jit._overload
    def pick(x: int) -> int: ...

    @torcia.jit._overload
    def pick(x: str) -> str: ...  # noqa: F811

    def pick(x):  # noqa: F811  (the implementation follows its overloads, as in PyTorch)
        return x

    assert pick(3) == 3
    assert len(torcia.jit._get_overloads(pick)) == 2

    class M(nn.Module):
        @torcia.jit._overload_method
        def forward(self, x: int) -> int: ...

        def forward(self, x):  # noqa: F811
            return x * 2

    assert M()(2) == 4


def test_interface_marks_classes_only():
    @torcia.jit.interface
    class Scorer(nn.Module):
        def forward(self, x: torcia.Tensor) -> torcia.Tensor: ...

    assert Scorer.__torch_script_interface__ is True
    with pytest.raises(RuntimeError, match="interface must be applied to a class"):
        torcia.jit.interface(_fn)


def test_small_helpers():
    assert torcia.jit.annotate(List[int], [1]) == [1]
    assert torcia.jit.Final is __import__("typing").Final
    attr = torcia.jit.Attribute([1], List[int])
    assert attr.value == [1] and attr.type == List[int]
    assert torcia.jit._unwrap_optional(5) == 5
    with pytest.raises(AssertionError, match="null optional"):
        torcia.jit._unwrap_optional(None)
    assert issubclass(torcia.jit.Error, RuntimeError)


def test_broadcasting_lists():
    from torcia.jit.annotations import BroadcastingList1, BroadcastingList2, BroadcastingList3

    for n, lst in ((1, BroadcastingList1), (2, BroadcastingList2), (3, BroadcastingList3)):
        ann = lst[int]
        assert torcia.jit.isinstance(4, ann)
        assert torcia.jit.isinstance((4,) * n, ann)
        assert not torcia.jit.isinstance("4", ann)


_TYPES = [int, float, str, torcia.Tensor, List[int], List[torcia.Tensor], Dict[str, int],
          Dict[str, torcia.Tensor], Tuple[int, str], Tuple[int, ...], Optional[int],
          Optional[List[int]], Union[int, str], List[List[int]], Any]


def _values(tensor):
    return [1, 2.0, "a", None, tensor(1.0), [1, 2], [], [1, "a"], [tensor(1.0)], {"a": 1},
            {"a": "b"}, {"a": tensor(0.0)}, (1, "a"), (1, 2, 3), ("a", 1), [[1], [2]],
            [[1], ["a"]]]


def test_isinstance_by_hand():
    t = torcia.tensor
    assert torcia.jit.isinstance([1, 2], List[int])
    assert not torcia.jit.isinstance([1, "a"], List[int])
    assert torcia.jit.isinstance([], List[str])  # an empty list is any list
    assert torcia.jit.isinstance({"a": t(1.0)}, Dict[str, torcia.Tensor])
    assert not torcia.jit.isinstance({1: t(1.0)}, Dict[str, torcia.Tensor])
    assert torcia.jit.isinstance((1, "a"), Tuple[int, str])
    assert not torcia.jit.isinstance((1, "a", 2), Tuple[int, str])
    assert torcia.jit.isinstance((1, 2, 3), Tuple[int, ...])
    assert torcia.jit.isinstance(None, Optional[int])
    assert torcia.jit.isinstance([[1], [2]], List[List[int]])


@needs_torch
@pytest.mark.filterwarnings("ignore:The inner type of a container:UserWarning")
def test_isinstance_matches_torch():
    torch_types = {torcia.Tensor: torch.Tensor}

    def to_torch(tp):
        if tp in torch_types:
            return torch_types[tp]
        origin = __import__("typing").get_origin(tp)
        if origin is None:
            return tp
        args = tuple(a if a is Ellipsis else to_torch(a)
                     for a in __import__("typing").get_args(tp))
        return {list: List, dict: Dict, tuple: Tuple}.get(origin, origin)[args] \
            if origin is not Union else Union[args]

    for tp, (mine, theirs) in itertools.product(
            _TYPES, zip(_values(torcia.tensor), _values(torch.tensor))):
        if tp is Any or tp == Tuple[int, ...]:
            continue  # torch.jit.isinstance refuses Any and variadic tuples
        if mine is None and tp == Union[int, str]:
            # torch's eager check takes None for any Union (its test for Optional);
            # TorchScript's compiled isinstance, which torcia follows, answers False
            continue
        assert torcia.jit.isinstance(mine, tp) == torch.jit.isinstance(theirs, to_torch(tp)), \
            (mine, tp)


@needs_torch
def test_markers_match_torch():
    for name in ("ignore", "unused", "export"):
        def f(x):
            return x

        def g(x):
            return x

        assert getattr(torcia.jit, name)(f) is f
        assert getattr(torch.jit, name)(g) is g
        assert get_torchscript_modifier(f) == g._torchscript_modifier
    assert torch.jit.is_scripting() is torcia.jit.is_scripting()
    assert torch.jit.is_tracing() is torcia.jit.is_tracing()
    assert torch.jit.annotate(int, 3) == torcia.jit.annotate(int, 3)
    assert torch.jit.Attribute(1, int) == torcia.jit.Attribute(1, int)
    with pytest.raises(RuntimeError):
        torch.jit.interface(_fn)


def test_script_of_a_function_runs_it():
    @torcia.jit.script
    def swish(x, inplace: bool = False):
        return x.mul_(x.sigmoid()) if inplace else x * x.sigmoid()

    x = torcia.randn(5)
    assert torcia.allclose(swish(x), x * x.sigmoid())
    assert swish.__name__ == "swish"
    with pytest.raises(RuntimeError, match="cannot be compiled"):
        torcia.jit.script(3)


def test_reached_as_an_attribute_of_torcia_and_through_compat():
    import importlib

    import torcia.compat

    assert importlib.import_module("torcia").jit is torcia.jit
    assert torcia.compat.torcia_name("torch.jit") == "torcia.jit"
    assert torcia.compat.torcia_name("torch.jit.annotations") == "torcia.jit.annotations"


def test_fusion_strategy_round_trips_and_checks_like_torchs():
    old = torcia.jit.set_fusion_strategy([("DYNAMIC", 3), ("STATIC", 0)])
    try:
        assert old == [("STATIC", 2), ("DYNAMIC", 10)]
        assert torcia.jit.set_fusion_strategy(old) == [("DYNAMIC", 3), ("STATIC", 0)]
        with pytest.raises(ValueError, match="only supported 'STATIC' or 'DYNAMIC', got: FOO"):
            torcia.jit.set_fusion_strategy([("FOO", 2)])
        for bad in ([("STATIC", -1)], [("STATIC", 2.0)], ["STATIC"]):
            with pytest.raises(TypeError):
                torcia.jit.set_fusion_strategy(bad)
        assert torcia.jit.set_fusion_strategy(old) == old  # refused calls changed nothing
    finally:
        torcia.jit.set_fusion_strategy(old)


def test_onednn_fusion_switch_and_strict_fusion():
    assert torcia.jit.onednn_fusion_enabled() is False
    torcia.jit.enable_onednn_fusion(1)
    try:
        assert torcia.jit.onednn_fusion_enabled() is True
    finally:
        torcia.jit.enable_onednn_fusion(False)
    with pytest.warns(UserWarning, match="Only works in script mode"):
        with torcia.jit.strict_fusion():
            pass

    @torcia.jit.script
    def triple(x):
        with torcia.jit.strict_fusion():
            return x + x + x

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert triple(torcia.ones(2)).tolist() == [3.0, 3.0]
