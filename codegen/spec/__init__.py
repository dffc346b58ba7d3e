"""The spec model: located YAML, schemas, shapes, names and the frozen dataclasses built from them."""
