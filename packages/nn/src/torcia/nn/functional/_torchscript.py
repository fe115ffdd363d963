"""TorchScript's helpers that PyTorch code imports from ``torch.nn.functional``:
``assert_int_or_pair``, ``boolean_dispatch``, ``BroadcastingList1``..."""

from __future__ import annotations


def assert_int_or_pair(arg, arg_name, message):
    """Assert that ``arg`` is an int or a pair, as PyTorch's argument check does
    (``message`` is formatted with ``arg_name``).

    Examples
    --------
    >>> import torcia.nn.functional as F
    >>> F.assert_int_or_pair((2, 3), "kernel_size", "{} must be int or pair")
    """
    assert isinstance(arg, int) or len(arg) == 2, message.format(arg_name)


def boolean_dispatch(arg_name, arg_index, default, if_true, if_false, module_name, func_name):
    """A function that calls ``if_true`` or ``if_false`` by the boolean argument
    ``arg_name`` (keyword, or positional at ``arg_index``; ``default`` when absent), as
    PyTorch builds ``max_pool2d`` from its ``return_indices`` forms.

    Examples
    --------
    >>> import torcia
    >>> import torcia.nn.functional as F
    >>> def with_indices(x, k, return_indices=False):
    ...     return x.topk(k)
    >>> def values_only(x, k, return_indices=False):
    ...     return x.topk(k).values
    >>> top = F.boolean_dispatch("return_indices", 2, False, with_indices, values_only,
    ...                          __name__, "top")
    >>> top(torcia.tensor([1.0, 3.0]), 1), top(torcia.tensor([1.0, 3.0]), 1, True).indices
    (tensor([3.]), tensor([1]))
    """

    def fn(*args, **kwargs):
        flag = default
        if arg_name in kwargs:
            flag = kwargs[arg_name]
        elif arg_index < len(args):
            flag = args[arg_index]
        return if_true(*args, **kwargs) if flag else if_false(*args, **kwargs)

    # the documented one lends its docstring to the other, as in PyTorch
    if if_true.__doc__ is None and if_false.__doc__ is not None:
        if_true.__doc__ = if_false.__doc__
    elif if_false.__doc__ is None and if_true.__doc__ is not None:
        if_false.__doc__ = if_true.__doc__
    elif if_true.__doc__ is not None:
        raise RuntimeError("only one function can have a docstring")
    fn.__doc__ = if_true.__doc__
    fn.__module__ = module_name
    fn.__name__ = func_name
    return fn


class _BroadcastingListCls:
    """TorchScript's annotation of an argument given as one value or a list of N: outside
    TorchScript, subscripting it gives nothing, as in PyTorch."""

    def __getitem__(self, types):
        return None


#: Annotations of an argument that is one value or a list (``BroadcastingList2[int]``).
BroadcastingList1 = BroadcastingList2 = BroadcastingList3 = _BroadcastingListCls()
