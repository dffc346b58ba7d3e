"""Generate PyTorch custom-operator registration layers from a declarative spec (ops.yaml).

Pipeline, one folder per stage: ``spec`` (``load`` YAML with locations, ``build`` the frozen,
typed ``model``) -> ``resolve`` (each operator's facts, once; ``validate`` reports every error at
once) -> ``views`` (what templates print) -> ``emit`` (``render`` with Jinja, ``writer`` writes
only changed files). ``cli`` wires them as ``python -m codegen regenerate``.
"""
