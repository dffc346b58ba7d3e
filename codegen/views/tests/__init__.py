"""Views of a generated test module, a module per section of it."""
