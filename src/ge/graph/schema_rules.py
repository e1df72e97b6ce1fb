"""What an operator's ONNX schema says of a node: the schema itself, and its attributes'
names, kinds and required ones (cached per operator, domain and version: validation asks
for every node, `Node.set_attr` for a new attribute)."""

from __future__ import annotations

from functools import lru_cache

from onnx import defs

__all__ = ["attribute_rules", "declared_kind", "op_schema"]


@lru_cache(maxsize=4096)
def op_schema(op_type: str, domain: str, version: int) -> defs.OpSchema | None:
    """ONNX's schema of the operator at opset `version` of `domain`, None if it has none."""
    try:
        return defs.get_schema(op_type, version, domain)
    except defs.SchemaError:
        return None


@lru_cache(maxsize=4096)
def attribute_rules(op_type: str, domain: str, version: int
                    ) -> tuple[dict[str, int], tuple[str, ...]]:
    """(attribute name -> its ONNX AttributeProto type, the required names) of a schema."""
    schema = op_schema(op_type, domain, version)
    assert schema is not None
    # (AttrType's values are AttributeProto's; its stub does not declare the int conversion.)
    types = {name: int(attr.type)  # type: ignore[call-overload]
             for name, attr in schema.attributes.items()}
    required = tuple(sorted(name for name, attr in schema.attributes.items() if attr.required))
    return types, required


def declared_kind(op_type: str, domain: str, version: int | None, name: str) -> int | None:
    """The AttributeProto type the schema gives attribute `name` of the operator, None
    when it has no schema or does not define it."""
    if version is None or op_schema(op_type, domain, version) is None:
        return None
    return attribute_rules(op_type, domain, version)[0].get(name)
