"""`multipleOf` as a remainder automaton over the decimal digits of an exponent-free JSON number.

A value is a multiple of m = p / 10^k (p a positive integer) exactly when its digits, read as
the integer N = value · 10^k, leave remainder 0 mod p — and every fraction digit beyond the k-th
is 0.  The automaton tracks N mod p while reading `-?(0|[1-9][0-9]*)(.[0-9]+)?`, so it has about
p · (k + 3) states; it is intersected with the bounds' automaton and embedded in the IR.
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np

from stdsl import caches
from stdsl.compiler import ir
from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton
from stdsl.compiler.automata.minimization.minimize import minimize
from stdsl.compiler.automata.ops import intersect
from stdsl.errors import EmptyLanguageError, SchemaError

MAX_MODULUS = 5000
MAX_FRACTION_DIGITS = 6
DIGITS = [ord(c) for c in "0123456789"]


def modulus_of(multiple: Decimal, where: str) -> tuple[int, int]:
    """(p, k) with multiple = p / 10^k; refused when p or k is too large for an automaton."""
    if multiple <= 0:
        raise SchemaError(f"'multipleOf' must be positive, got {multiple}", where)
    sign, digits, exponent = multiple.normalize().as_tuple()
    k = max(0, -int(exponent))
    p = int(multiple.scaleb(k))
    if k > MAX_FRACTION_DIGITS or p > MAX_MODULUS:
        raise SchemaError(f"'multipleOf' {multiple} needs a remainder automaton over {p} values with {k} fraction "
                          f"digits; supported up to {MAX_MODULUS} and {MAX_FRACTION_DIGITS}", where)
    return p, k


def multiple_automaton(p: int, k: int, allow_fraction: bool) -> Automaton:
    """Exponent-free JSON numbers (integers only unless `allow_fraction`) that are multiples of p / 10^k."""
    start, minus, zero = 0, 1, 2
    int_base = 3
    dot_base = int_base + p
    frac_base = dot_base + p
    tail_base = frac_base + k * p
    n = tail_base + p
    table = np.full((n, 256), -1, dtype=np.int64)
    accepting = np.zeros(n, dtype=bool)
    scale = pow(10, k, p)

    def frac(j: int, r: int) -> int:
        return frac_base + (j - 1) * p + r

    for state in (start, minus):
        table[state, DIGITS[0]] = zero
        for d in range(1, 10):
            table[state, DIGITS[d]] = int_base + d % p
    table[start, ord("-")] = minus
    accepting[zero] = True
    for r in range(p):
        ints = int_base + r
        accepting[ints] = (r * scale) % p == 0
        for d in range(10):
            table[ints, DIGITS[d]] = int_base + (10 * r + d) % p
        if allow_fraction:
            table[ints, ord(".")] = dot_base + r
            for j in range(1, k + 1):
                accepting[frac(j, r)] = (r * pow(10, k - j, p)) % p == 0
                if j < k:
                    for d in range(10):
                        table[frac(j, r), DIGITS[d]] = frac(j + 1, (10 * r + d) % p)
                else:
                    table[frac(j, r), DIGITS[0]] = tail_base + r
            dot = dot_base + r
            if k >= 1:
                for d in range(10):
                    table[dot, DIGITS[d]] = frac(1, (10 * r + d) % p)
            else:
                table[dot, DIGITS[0]] = tail_base + r
            accepting[tail_base + r] = r == 0
            table[tail_base + r, DIGITS[0]] = tail_base + r
    if allow_fraction:
        table[zero, ord(".")] = dot_base + 0
    return Automaton(*minimize(table, accepting))


_PRODUCTS = caches.kind("multipleOf products")
"""`_product` per range expression (by structure) and modulus: a number schema met in many places (a definition
merged into each `allOf` that names it is a new schema each time) is intersected once; 109 lowerings of three
schemas took 0.19 s of MaskBench o46322's 0.77 s compile."""


def multiple_of(range_node: ir.Node, multiple: Decimal, integer: bool, where: str) -> ir.Node:
    """The numbers of `range_node` (an exponent-free number or integer language) that are multiples of `multiple`.

    Each call returns a node of its own (an embedded automaton is one NFA fragment per node object, so sharing one
    would change the automata built from the IR), over the tables kept for its range and modulus."""
    p, k = modulus_of(multiple, where)
    if integer and k > 0:
        p //= _gcd(p, 10 ** k)
        k = 0
    product = _PRODUCTS.get((), lambda: _product(range_node, p, k, integer), (range_node, p, k, integer))
    return ir.NOTHING if product is None else ir.Embedded(product.transitions, product.accepting)


def _product(range_node: ir.Node, p: int, k: int, integer: bool) -> Automaton | None:
    """The automaton of the multiples of p / 10^k in `range_node`, or None where there is none."""
    try:
        product = intersect(build_automaton(range_node), multiple_automaton(p, k, not integer))
    except EmptyLanguageError:
        return None
    return product if product.accepting.any() else None


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a
