"""The numpy-only kernel paths load no MLX, and preparing an automaton for walks never writes onto it."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from stdsl.compiler.automata.build import compile_regex
from stdsl.kernels.combined import WalkTable
from stdsl.kernels.rows import RowCache
from stdsl.kernels.token_table import token_table
from stdsl.kernels.vocabulary import Vocabulary


def test_importing_the_kernels_and_using_rows_loads_no_mlx() -> None:
    script = (
        "import sys\n"
        "import stdsl.kernels\n"
        "from stdsl.compiler.automata.build import compile_regex\n"
        "from stdsl.kernels import RowCache, Vocabulary, token_table\n"
        "vocab = Vocabulary([b'a', b'ab', b'b', None], eos_ids=[3])\n"
        "automaton = compile_regex('(ab|b)*a?')\n"
        "RowCache(automaton, vocab).mask(0)\n"
        "token_table(automaton, vocab)\n"
        "assert 'mlx' not in sys.modules, sorted(m for m in sys.modules if m.startswith('mlx'))\n"
        "from stdsl.kernels import walk_mask\n"
        "assert 'mlx.core' in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_walk_tables_are_cached_beside_the_automaton_not_on_it() -> None:
    automaton = compile_regex(r'\{"k":"[a-z]*"\}')
    before = dict(vars(automaton))
    first = WalkTable.of(automaton)
    vocab = Vocabulary([b'{"', b"k", b'":"', b"ab", b'"}', None], eos_ids=[5])
    cache = RowCache(automaton, vocab)
    cache.mask(0)
    assert WalkTable.of(automaton) is first and cache.table is first
    assert vars(automaton).keys() == before.keys()
    assert np.array_equal(first.transitions, automaton.transitions)
    state = automaton.step(0, b'{"k":"')
    assert np.array_equal(cache.next_states(state), token_table(automaton, vocab)[state])
