"""Records that the templates print: one module per kind of generated file."""
