"""Front ends → byte IR → trim DFAs, minimal up to 8,000 states (`minimization.minimize.shrink`). Never imports MLX."""

from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton, compile_regex
from stdsl.compiler.regex.parser import parse_regex

__all__ = ["Automaton", "build_automaton", "compile_regex", "parse_regex"]
