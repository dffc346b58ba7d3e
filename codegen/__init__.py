"""Generate PyTorch custom-operator registration layers from a declarative spec (ops.yaml).

Pipeline, one module per stage: ``load`` (YAML with locations) -> ``model`` (frozen, typed) ->
``validate`` (every error at once) -> ``views`` (what templates print) -> ``render`` (Jinja) ->
``writer`` (only changed files). ``cli`` wires them as ``python -m codegen regenerate``.
"""
