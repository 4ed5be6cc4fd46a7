"""Front ends → byte IR → minimal DFAs. Never imports MLX."""

from stdsl.compiler.automata.automaton import Automaton
from stdsl.compiler.automata.build import build_automaton, compile_regex
from stdsl.compiler.regex.parser import parse_regex

__all__ = ["Automaton", "build_automaton", "compile_regex", "parse_regex"]
