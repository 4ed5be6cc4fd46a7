"""A skeleton DFA whose placeholder edges stand for other DFAs (a reply's tool calls, a structural tag's tags), the
pieces put in without determinizing their union: laid out whole as blocks where their shapes allow (`blocks`),
else by a subset construction that branches only where the pieces can (`subsets`); `placeholders` picks."""
