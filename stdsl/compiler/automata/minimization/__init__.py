"""A trim DFA's Myhill-Nerode quotient, renumbered in canonical BFS order: Hopcroft refinement (`minimize`), batched
rounds of splitters for large tables (`batched_refinement`), and acyclic tables partitioned without refinement
(`acyclic_partition`)."""
