"""``torcia.nested``: nested (jagged) tensors, a batch of tensors whose lengths differ in
one dimension, as ``torch.nested`` with ``layout=torch.jagged``.

A :class:`NestedTensor` holds the components concatenated along their ragged dimension
(``values()``, ``(sum of lengths, *rest)``) and where each starts (``offsets()``, ``B + 1``
of them); its shape shows the ragged size symbolically (``torcia.Size([2, j1, 4])``).
Elementwise ops, ``torcia.nn.functional.linear`` (so ``nn.Linear``), softmax over a
regular dimension, reductions over the regular dimensions, ``transpose``/``unflatten`` of
the heads of attention and :func:`torcia.nn.functional.scaled_dot_product_attention` work
on it without padding; :func:`to_padded_tensor` pads when a dense tensor is needed.
Gradients flow to the values.

Examples
--------
>>> import torcia
>>> nt = torcia.nested.nested_tensor([torcia.ones(2, 3), torcia.ones(4, 3)],
...                                  layout=torcia.jagged)
>>> nt.shape, nt.offsets()
(torcia.Size([2, j..., 3]), tensor([0, 2, 6]))
>>> torcia.nested.to_padded_tensor(nt * 2, 0.0)[0]
tensor([[2., 2., 2.],
        [2., 2., 2.],
        [0., 0., 0.],
        [0., 0., 0.]])
"""

from torcia.nested._nested import (
    NestedTensor,
    as_nested_tensor,
    masked_select,
    narrow,
    nested_tensor,
    nested_tensor_from_jagged,
    scaled_dot_product_attention,
    to_padded_tensor,
)

__all__ = [
    "NestedTensor", "as_nested_tensor", "masked_select", "narrow", "nested_tensor",
    "nested_tensor_from_jagged", "scaled_dot_product_attention", "to_padded_tensor",
]
