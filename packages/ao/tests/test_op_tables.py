"""torcia-ao's tables of ops: OPS defines the quantized ops, SHAPES gives each its meta
shape; a SHAPES entry of a name OPS does not define would be read by nothing."""

from torcia import library
from torcia.ao import _ops


def test_every_op_of_the_shape_table_is_a_record_carrying_that_shape():
    shapes = library.op_table("torcia.ao._ops.SHAPES", _ops.SHAPES)
    assert shapes.keys() == _ops.OPS.keys()
    assert all(library.get_op(name).shape is shape for name, shape in shapes.items())
