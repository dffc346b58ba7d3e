"""Every name the generated code defines for an operator, decided in one place.

Generated internals start with an underscore, which no spec name may (``spec/names.py``), so
nothing a spec names can shadow them. The test modules read the same record, so the names a
test looks up are the names the package defines.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..spec.names import camel


@dataclass(frozen=True, slots=True)
class StageNames:
    """One registered operator of the pair (``<op>_fwd``, ``<op>_fwd_<suffix>``, ``<op>_bwd``)."""

    name: str  # l2norm_fwd
    qualname: str  # attnops::l2norm_fwd
    binding: str  # _l2norm_fwd, the module-level torch.ops ... .default
    fake: str  # _l2norm_fwd_fake

    def impl(self, device: str | None) -> str:
        """The shim registered for ``device`` (None: one shim serves every device)."""
        return f"_{self.name}_{device or 'impl'}"

    def launcher(self, device: str | None) -> str:
        """Module-level launcher of an eager-integration shim (resolved at import)."""
        return f"{self.impl(device)}_launcher"


@dataclass(frozen=True, slots=True)
class OpNames:
    module: str  # generated/<package>/<module>.py
    public: str  # the public function
    result: str  # the NamedTuple it returns
    function: str  # the autograd.Function
    test_module: str  # generated/tests/<test_module>.py

    def constant(self, arg: str, what: str) -> str:
        """A module-level constant about one argument, e.g. _L2NORM_X_DTYPES."""
        return f"_{self.public.upper()}_{arg.upper()}_{what}"


def op_names(op: str) -> OpNames:
    cls = camel(op)
    return OpNames(
        module=op,
        public=op,
        result=f"{cls}Output",
        function=f"_{cls}Function",
        test_module=f"test_{op}",
    )


def stage_names(namespace: str, op: str, kind: str) -> StageNames:
    """``kind`` is ``fwd``, ``bwd`` or ``fwd_<suffix>`` for the wider operator of an arity pair."""
    name = f"{op}_{kind}"
    return StageNames(
        name=name, qualname=f"{namespace}::{name}", binding=f"_{name}", fake=f"_{name}_fake"
    )


def batch_local(op) -> str:
    """The local that holds the dims of ``...`` in generated code: ``batch``, or ``_batch`` in
    an operator one of whose arguments is named ``batch`` (as kernel libraries name a tensor of
    per-sequence batch indices)."""
    stages = (op.forward, op.backward, op.arity_pair)
    names = {a.name for s in stages if s is not None for a in s.schema.arguments}
    return "_batch" if "batch" in names else "batch"
