"""Helpers several families of :mod:`torcia.nn.functional` share."""

from __future__ import annotations


def _scalar(d) -> str:
    return {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
            "int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
            "bool": "Bool"}.get(d.name, d.name)
