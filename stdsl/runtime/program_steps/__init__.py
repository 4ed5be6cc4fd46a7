"""Programs written as Python functions: steps (`gen`, `select`), messages and forks driven by ordinary control flow
(`@stdsl.program` on a function whose first parameter is the state `s`; docs/programs.md)."""
