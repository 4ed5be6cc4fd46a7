"""A number or integer schema's IR: its bounds read as exact decimals, then `multipleOf`."""

from __future__ import annotations

from decimal import Decimal

from stdsl import caches
from stdsl.compiler.ir import Node
from stdsl.compiler.json_schema.scalars.multiple import multiple_of
from stdsl.compiler.json_schema.scalars.numbers import NUMBER, decimal_in_range, integer_bounds, integer_in_range
from stdsl.errors import SchemaError

MAX_BOUND_DIGITS = 60


def exact_bound(flat: dict, key: str, path: str) -> Decimal | None:
    """A numeric bound as an exact decimal; bounds with very many fraction digits are refused."""
    if key not in flat:
        return None
    value = Decimal(repr(flat[key]))
    if -int(value.as_tuple().exponent) > MAX_BOUND_DIGITS:
        raise SchemaError(f"'{key}' has more than {MAX_BOUND_DIGITS} fraction digits; not supported", f"{path}/{key}")
    return value


def number_node(name: str, flat: dict, path: str) -> Node:
    """Integers (canonical, exact bounds) or numbers (full grammar, or exponent-free when bounded)."""
    lo, lo_x, hi, hi_x = None, False, None, False
    for key, exclusive in (("minimum", False), ("exclusiveMinimum", True)):
        b = exact_bound(flat, key, path)
        if b is not None and (lo is None or b > lo or (b == lo and exclusive)):
            lo, lo_x = b, exclusive
    for key, exclusive in (("maximum", False), ("exclusiveMaximum", True)):
        b = exact_bound(flat, key, path)
        if b is not None and (hi is None or b < hi or (b == hi and exclusive)):
            hi, hi_x = b, exclusive
    multiple = Decimal(repr(flat["multipleOf"])) if "multipleOf" in flat else None
    if name == "integer":
        int_lo, int_hi = integer_bounds(lo, lo_x, hi, hi_x)
        if multiple is None:
            return integer_in_range(int_lo, int_hi)
        node = _RANGES.get((), lambda: integer_in_range(int_lo, int_hi), ("integer", int_lo, int_hi))
        return multiple_of(node, multiple, True, f"{path}/multipleOf")
    if multiple is None:
        return NUMBER if lo is None and hi is None else decimal_in_range(lo, lo_x, hi, hi_x)
    node = _RANGES.get((), lambda: decimal_in_range(lo, lo_x, hi, hi_x), ("number", str(lo), lo_x, str(hi), hi_x))
    return multiple_of(node, multiple, False, f"{path}/multipleOf")


_RANGES = caches.kind("multipleOf ranges")
"""The range under a `multipleOf` per bounds (as written): built once, and `multiple_of`'s kept products find it by
identity rather than by comparing two equal trees (MaskBench o46322 lowers 114 schemas of one range and multiple: 31
ms of its compile).  Only there: the node returned is then `multiple_of`'s own, so the IR keeps one node per schema
(a range shared by many members would count once in the outline's size estimate, `outline_size`, which counts
distinct nodes, while the NFA still builds it once per place)."""
