import torch
import torch.nn.functional as F

_KINDS = ("softplus", "lower_bound")


def gate_ref(
    g: torch.Tensor,
    A_log: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    kind: str = "softplus",
    lower_bound: float = -5.0,
) -> torch.Tensor:
    """Float32 reference of ``gate`` (same arguments as ``gate_fwd``).

    Args:
        g: ``[..., H, K]``, any floating dtype.
        A_log: ``[H]``, or None (``exp(A_log) = 1``).
        dt_bias: ``[H * K]``, or None (zero).
        kind: ``"softplus"`` (``-exp(A_log) * softplus(g + dt_bias)``) or ``"lower_bound"``
            (``lower_bound * sigmoid(exp(A_log) * (g + dt_bias))``); anything else raises
            ``ValueError``.
        lower_bound: the scale of the ``"lower_bound"`` variant.

    Returns:
        ``out``: ``[..., H, K]`` float32. Differentiable in ``g``, ``A_log`` and ``dt_bias``;
        mutates nothing.
    """
    if kind not in _KINDS:
        raise ValueError(f"unknown gate kind {kind!r}; expected one of {list(_KINDS)}")
    H, K = g.shape[-2], g.shape[-1]
    x = g.float()
    if dt_bias is not None:
        x = x + dt_bias.float().reshape(H, K)
    a = None if A_log is None else torch.exp(A_log.float()).reshape(H, 1)
    if kind == "softplus":
        sp = F.softplus(x)
        return -sp if a is None else -a * sp
    z = x if a is None else a * x
    return lower_bound * torch.sigmoid(z)
