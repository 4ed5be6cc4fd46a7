"""The `.stc` program language: Lark grammar, type resolution, output templates, `CompiledProgram`."""
