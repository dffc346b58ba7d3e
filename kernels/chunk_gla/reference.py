import torch


def chunk_gla_ref(
    q,
    k,
    v,
    g,
    scale=None,
    initial_state=None,
    output_final_state=False,
    cu_seqlens=None,
    save_states=False,
):
    """Token-by-token float32 reference of ``chunk_gla``.

    ``S_t = exp(g_t) S_{t-1} + k_t^T v_t`` and ``o_t = scale * q_t S_t`` per sequence and head.
    Note the argument order: ``output_final_state`` comes before ``cu_seqlens``.

    Args:
        q: ``[B, T, H, K]``; k: ``[B, T, H, K]``; v: ``[B, T, H, V]``; any floating dtype.
        g: ``[B, T, H]`` log-decay.
        scale: None means ``K ** -0.5``.
        initial_state: ``[N, H, K, V]``, or None (zeros).
        output_final_state: whether to return the final states.
        cu_seqlens: ``[N + 1]`` offsets of packed sequences (``B == 1``, asserted), or None.
        save_states: what the operator keeps for its backward; the results do not depend on it.

    Returns:
        ``(o, final_state)``: ``o`` ``[B, T, H, V]`` float32 (zero outside the sequences);
        ``final_state`` ``[N, H, K, V]`` float32, or None unless ``output_final_state``.
        Differentiable; mutates nothing.
    """
    B, T, H, K = q.shape
    V = v.shape[-1]
    if scale is None:
        scale = K**-0.5
    q, k, v, g = q.float(), k.float(), v.float(), g.float()
    if cu_seqlens is None:
        seqs = [(b, 0, T) for b in range(B)]
    else:
        assert B == 1
        cu = cu_seqlens.tolist()
        seqs = [(0, cu[i], cu[i + 1]) for i in range(len(cu) - 1)]

    o = q.new_zeros(B, T, H, V)
    finals = []
    for n, (b, bos, eos) in enumerate(seqs):
        if initial_state is None:
            S = q.new_zeros(H, K, V)
        else:
            S = initial_state[n].float()
        for t in range(bos, eos):
            S = torch.exp(g[b, t])[:, None, None] * S + k[b, t][:, :, None] * v[b, t][:, None, :]
            o[b, t] = scale * torch.einsum("hk,hkv->hv", q[b, t], S)
        finals.append(S)
    final_state = None
    if output_final_state:
        final_state = torch.stack(finals) if finals else q.new_zeros(0, H, K, V)
    return o, final_state
