"""Byte automata: Thompson NFA, subset construction, minimization, products and the Automaton the runtime reads."""
