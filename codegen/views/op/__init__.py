"""Views of a generated operator module, one module per section (see ``module.py``)."""
