"""chunk_gla's Triton launchers: ``chunk_gla_fwd``, ``chunk_gla_bwd`` and
``chunk_gla_bwd_sequential``, which ops.yaml and the tests name. The kernels are in common.py (jit
helpers), fwd.py, walks.py (the state walks), bwd.py and sequential.py; their launch
configurations in config.py."""

import math

import torch

from .._triton import cdiv, launchable
from . import config
from .bwd import _gla_bwd_dqk_kernel, _gla_bwd_dv_kernel
from .fwd import _gla_fwd_fused_kernel, _gla_fwd_g_kernel, _gla_fwd_o_kernel
from .sequential import (
    _gla_bwd_dg_kernel,
    _gla_bwd_dkv_kernel,
    _gla_bwd_dq_kernel,
)
from .walks import (
    _gla_bwd_dh_kernel,
    _gla_bwd_dhseg_kernel,
    _gla_bwd_seg_carry_kernel,
    _gla_bwd_states_kernel,
    _gla_bwd_states_seg_kernel,
    _gla_fwd_h_kernel,
    _gla_fwd_hseg_kernel,
    _gla_seg_carry_kernel,
)


def _launch_g(like, g, gc, cu, flag, N, NT, NS, BT):
    """The cumulative log-decay within each chunk into ``gc`` (``flag``: whether packed offsets
    fall somewhere)."""
    _, T, H = g.shape
    grid = (NS, cdiv(H, config._BH))
    kw = dict(BT=BT, BH=config._BH, USE_CU=cu is not None, num_warps=4, num_stages=1)
    launchable(_gla_fwd_g_kernel, like)[grid](g, gc, cu, flag, T, H, N, NT, g.stride(), **kw)


def _decay_first(like, g, gc, N, NT, launch):
    """The ``(g, g.stride())`` from which a split walk's first step, running in Triton, computes
    ``gc`` itself (Note [decay in the first step], walks.py); or ``(None, (0,))`` where it does
    not: ``g`` None (``gc`` already holds the log-decay), or ``launch`` (the first step runs in
    CuTeDSL, or the walk is whole), after the log-decay's own launch into ``gc``."""
    if g is None:
        return None, (0,)
    if launch:
        _launch_g(like, g, gc, None, None, N, NT, N * NT, config._BT)
        return None, (0,)
    return g, g.stride()


def _launch_walk(like, a, b, gc, s0, out, s_end, cu, scale, N, NT, BT, cfg, mode, segments,
                 tile=None, every=1, g=None):  # fmt: skip
    """A state walk (walks.py): forward (``a, b = k, v``; ``scale`` None) writing the state at the
    start of each chunk into ``out`` from the initial states ``s0`` and the final states into
    ``s_end`` unless it is None; or reverse (``a, b = q, do``) writing the gradient of the state
    at the end of each chunk from ``s0 = dht`` and that of the initial states into ``s_end``.
    ``cfg``: the walk's (BK, BV, num_warps, num_stages); ``N`` sequences (``cu``: their offsets,
    or None); ``segments``: (chunks per segment, segments) from ``config._walk_segments``. With
    one segment, one program per (sequence, head, state tile) walks the whole sequence; with
    several, three launches: each segment's own part, what is carried across segments, then
    each segment again from its start. ``tile``: the CuTeDSL first step's state tile per CTA
    where it walks forward alone (``cute_states._launch``). Forward without ``out`` (the
    segments' starts alone, returned), ``every``: only every such segment's start, compact
    (``[N * cdiv(segments, every), H, K, V]``). ``g``: the log-decay, when ``gc`` is yet to be
    computed from it (equal-length sequences; see ``_decay_first``)."""
    _, T, H, K = a.shape
    V = b.shape[-1]
    hk, hv, hw, hs = cfg
    tiles = cdiv(K, hk) * cdiv(V, hv)
    cps, nseg = segments
    reverse = scale is not None
    st = (a.stride(), b.stride())
    kw = dict(K=K, V=V, BT=BT, BK=hk, BV=hv, MODE=mode, num_warps=hw, num_stages=hs)
    if nseg > 1:
        own = a.new_empty((N * nseg, H, K, V), dtype=torch.float32)
        every = every if out is None and not reverse else 1
        start = a.new_empty((N * cdiv(nseg, every), H, K, V), dtype=torch.float32)
        gseg = a.new_empty((N * nseg, H), dtype=torch.float32)
        kernel = _gla_bwd_dhseg_kernel if reverse else _gla_fwd_hseg_kernel
        grid = (N * H * nseg * tiles,)
        head = (a, b, gc, out, own, gseg, start) + ((float(scale),) if reverse else ())
        args = (*head, T, H, NT, cps, nseg, *st)
        # The two steps in CuTeDSL where they can run there (the carry stays).
        in_cute = cu is None and config._cute_split_walks(a, b, N, segments, out)
        raw = _decay_first(like, g, gc, N, NT, in_cute)
        which, wscale = ("reverse", float(scale)) if reverse else ("forward", 1.0)
        if in_cute:
            from . import cute_states

            walk = {which: (a, b, own, gseg)}
            cute_states.split_walks(
                gc, **walk, scale=wscale, segments=segments, own=True, tile=tile
            )
        else:
            launchable(kernel, like)[grid](*args, *raw, **kw, STEP=1, RAW_G=raw[0] is not None)
        rows, per, blocks = config._carry_blocks(nseg, K * V)
        launchable(_gla_seg_carry_kernel, like)[(N * H * blocks,)](
            s0, own, gseg, start, s_end, H, nseg, KV=K * V, BE=per, P=rows,
            USE_S0=s0 is not None, STORE_END=s_end is not None, REVERSE=reverse, EVERY=every,
            num_warps=4,
        )  # fmt: skip
        if out is None:
            # Only the states at the segments' starts were asked for.
            return start
        if in_cute:
            walk = {which: (a, b, start, out)}
            cute_states.split_walks(gc, **walk, scale=wscale, segments=segments, own=False)
        else:
            launchable(kernel, like)[grid](*args, None, (0,), **kw, STEP=2, RAW_G=False)
    elif reverse:
        _decay_first(like, g, gc, N, NT, True)
        args = (a, b, gc, s0, out, s_end, cu, float(scale), T, H, NT, *st)
        flags = dict(USE_CU=cu is not None, USE_DHT=s0 is not None)
        launchable(_gla_bwd_dh_kernel, like)[(N * H * tiles,)](*args, **kw, **flags)
    else:
        _decay_first(like, g, gc, N, NT, True)
        args = (a, b, gc, s0, out, s_end, cu, T, H, NT, *st)
        flags = dict(USE_CU=cu is not None, USE_H0=s0 is not None, STORE_HT=s_end is not None)
        launchable(_gla_fwd_h_kernel, like)[(N * H * tiles,)](*args, **kw, **flags)


def _launch_walks_split(like, k, v, q, do, gc, h0, h, dht, dh, dh0, scale, N, NT, BT, cfg, mode,
                        segments, g=None):  # fmt: skip
    """The backward's two walks split into segments (see _launch_walk), side by side: the
    forward one recomputing the chunk states ``h`` from ``h0`` and the reverse one writing the
    gradients ``dh`` from ``dht`` and ``dh0``; three launches, each one step of both walks.
    ``g``: the log-decay, when ``gc`` is yet to be computed from it (``_decay_first``)."""
    _, T, H, K = k.shape
    V = v.shape[-1]
    hk, hv, hw, hs = cfg
    tiles = cdiv(K, hk) * cdiv(V, hv)
    cps, nseg = segments
    np_ = N * H * tiles
    own = k.new_empty((2, N * nseg, H, K, V), dtype=torch.float32)
    start = torch.empty_like(own)
    gseg = k.new_empty((2, N * nseg, H), dtype=torch.float32)
    st = (k.stride(), v.stride(), q.stride(), do.stride())
    kw = dict(K=K, V=V, BT=BT, BK=hk, BV=hv, MODE=mode, num_warps=hw, num_stages=hs)
    walks = (k, v, q, do, gc, h, own[0], gseg[0], start[0], dh, own[1], gseg[1], start[1])
    args = (*walks, float(scale), T, H, NT, cps, nseg, np_ * nseg, *st)
    grid = (2 * np_ * nseg,)
    # The two steps in CuTeDSL where both walks can run there (the carry stays).
    ok = config._cute_split_walks
    in_cute = ok(k, v, N, segments, h, both=True) and ok(q, do, N, segments, dh, both=True)
    raw = _decay_first(like, g, gc, N, NT, in_cute)
    if in_cute:
        from . import cute_states

        split = dict(scale=float(scale), segments=segments)
        cute_states.split_walks(
            gc, (k, v, own[0], gseg[0]), (q, do, own[1], gseg[1]), **split, own=True
        )
    else:
        launchable(_gla_bwd_states_seg_kernel, like)[grid](
            *args, *raw, **kw, STEP=1, RAW_G=raw[0] is not None
        )
    rows, per, blocks = config._carry_blocks(nseg, K * V)
    launchable(_gla_bwd_seg_carry_kernel, like)[(2 * N * H * blocks,)](
        h0, own[0], gseg[0], start[0], dht, own[1], gseg[1], start[1], dh0, H, nseg,
        N * H * blocks, KV=K * V, BE=per, P=rows, USE_H0=h0 is not None,
        USE_DHT=dht is not None, num_warps=4,
    )  # fmt: skip
    if in_cute:
        cute_states.split_walks(gc, (k, v, start[0], h), (q, do, start[1], dh), **split, own=False)
    else:
        launchable(_gla_bwd_states_seg_kernel, like)[grid](
            *args, None, (0,), **kw, STEP=2, RAW_G=False
        )


def _packed(cu_seqlens, B, T, device):
    """(cu_seqlens read contiguously, N): refuses what is wrong without looking at the values.

    The values themselves are not checked here (that would synchronize with the device): the
    kernels clamp each sequence to ``0 <= bos <= eos <= T``, so malformed offsets never lead
    outside the tensors.
    """
    if cu_seqlens is None:
        return None, B
    if not isinstance(cu_seqlens, torch.Tensor) or cu_seqlens.ndim != 1:
        raise ValueError(
            "chunk_gla: cu_seqlens must be a 1-D tensor of N + 1 offsets, got "
            + (
                f"shape {tuple(cu_seqlens.shape)}"
                if isinstance(cu_seqlens, torch.Tensor)
                else type(cu_seqlens).__name__
            )
        )
    if cu_seqlens.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"chunk_gla: cu_seqlens must be int32 or int64, got {cu_seqlens.dtype}")
    if cu_seqlens.shape[0] < 2:
        raise ValueError(
            f"chunk_gla: cu_seqlens must hold at least two offsets (0 and T), "
            f"got {cu_seqlens.shape[0]}"
        )
    if cu_seqlens.device != device:
        raise ValueError(f"chunk_gla: cu_seqlens is on {cu_seqlens.device}, q on {device}")
    if B != 1:
        raise ValueError(f"chunk_gla: packed sequences (cu_seqlens) need B == 1, got B = {B}")
    # The kernels read cu_seqlens[i] at cu + i.
    return cu_seqlens.contiguous(), cu_seqlens.shape[0] - 1


def _scale(scale, K):
    # Note [finite scale]: a non-finite scale is refused. With scale = inf every output is
    # +-inf or NaN (0 * inf) and every gradient NaN, so no caller wants it; and the kernels
    # fold scale into partial products (q * exp(G) * scale, the in-chunk attention) whose sum
    # is inf - inf = NaN where the reference's scale * (q S) is +-inf. Matching that would
    # take a scale applied after every sum, for results no one can use.
    scale = K**-0.5 if scale is None else scale
    if not math.isfinite(scale):
        raise ValueError(f"chunk_gla: scale must be finite, got {scale}")
    return scale


def _float32(x):
    """None, or ``x`` as a contiguous float32 tensor (itself when it already is one)."""
    if x is None or (x.dtype is torch.float32 and x.is_contiguous()):
        return x
    return x.to(torch.float32).contiguous()


def _per_sequence(name, x, shape):
    # A per-sequence state must have one [H, K, V] slice for each of the N sequences.
    if x is not None and tuple(x.shape) != shape:
        raise ValueError(f"chunk_gla: {name} must have shape {shape}, got {tuple(x.shape)}")


def _saved_states(h, q, v, N, use_cu, save_states=True):
    """None, or the forward's chunk states ``h`` (as :func:`chunk_gla_fwd` returns them with
    ``save_states``: shape ``[S, H, K, V]``, ``q``'s dtype and device) read contiguously;
    anything else: ValueError. Without ``save_states``, None: ``h`` must then be None or hold
    no state (the forward's ``[0, H, K, V]``), ValueError otherwise."""
    if not save_states:
        if h is not None and (not isinstance(h, torch.Tensor) or h.ndim < 1 or h.shape[0] != 0):
            got = tuple(h.shape) if isinstance(h, torch.Tensor) else type(h).__name__
            raise ValueError(
                "chunk_gla: h must be None or hold no state when save_states is false (the "
                f"backward recomputes the states), got {got}"
            )
        return None
    if h is None:
        return None
    B, T, H, K = q.shape
    shape = (config._state_slots(B, T, N, use_cu), H, K, v.shape[-1])
    if not isinstance(h, torch.Tensor):
        raise ValueError(f"chunk_gla: h must be a tensor of shape {shape}, got {type(h).__name__}")
    if tuple(h.shape) != shape or h.dtype != q.dtype or h.device != q.device:
        raise ValueError(
            f"chunk_gla: h must have shape {shape}, dtype {q.dtype} and device {q.device} (the "
            f"forward's chunk states), got {tuple(h.shape)}, {h.dtype}, {h.device}"
        )
    return h.contiguous()


def chunk_gla_fwd(
    q,
    k,
    v,
    g,
    scale: float | None,
    initial_state,
    cu_seqlens,
    output_final_state: bool,
    *,
    save_states: bool = True,
):
    """Forward of ``chunk_gla``: ``S_t = exp(g_t) S_{t-1} + k_t^T v_t``, ``o_t = scale * q_t S_t``.

    Chunks of 64 tokens, in one of two ways (``config._fused_plan`` chooses, by what measured
    faster on an H200):

    - In one walk: one program per (sequence, head, V block) walks the chunks in order with
      the state in registers, writing each chunk's output as it goes (and with ``save_states``
      the state at each chunk's start into ``h``). For 16-bit inputs without ``cu_seqlens``:
      ``K <= 64`` on more than 64 programs, or ``K <= 128`` on long sequences, which are then
      split into segments walked side by side from the state at each segment's start (two
      launches before: each segment's own walk, which first stores the cumulative log-decay
      within each of its chunks into float32 ``[B, H, 2, T]`` scratch (Note [decay in the
      first step]), and a short pass across segments, float32 ``[N * segments, H, K, V]``
      scratch twice).
    - Otherwise in three to five launches: the cumulative log-decay within each chunk; the
      state at the start of each chunk (``h``: returned for the backward with
      ``save_states``, else scratch freed on return), one program per (sequence, head, state
      tile) walking its chunks; each chunk's output from that state and the causal in-chunk
      attention, one program per (chunk, head, V block); and, with ``cu_seqlens`` only, the
      walk above of each whole sequence, which does the work only where the clamped offsets
      fall somewhere. When the state walk would have very few programs (long equal-length
      sequences, few heads: see ``_segments``), each sequence is walked as segments side by
      side twice: once for each segment's own end state, then, after one short pass across
      segments for the state at each segment's start, again from that state to store the
      chunk states; the first of those walks computes the cumulative log-decay, which then
      has no launch of its own.

    Args:
        q: ``[B, T, H, K]``, bfloat16, float16 or float32, any strides.
        k: ``[B, T, H, K]``, ``q``'s dtype, any strides.
        v: ``[B, T, H, V]``, ``q``'s dtype, any strides.
        g: ``[B, T, H]`` float32 log-decay per token and head, any strides.
        scale: multiplies the output; None means ``K ** -0.5``; finite (``ValueError``
            otherwise, Note [finite scale]).
        initial_state: ``[N, H, K, V]`` float32 state before the first token of each sequence,
            or None (zeros).
        cu_seqlens: ``[N + 1]`` int32 or int64 offsets of ``N`` packed sequences in ``T``, any
            stride (needs ``B == 1`` and ``N >= 1``, else ``ValueError``; valid offsets are
            nondecreasing, with ``cu_seqlens[0] == 0`` and ``cu_seqlens[-1] == T``), or None
            (``N = B`` sequences of length ``T``). Other values are not refused but never lead
            outside the tensors: sequence ``i`` runs over ``[bos, eos)`` with
            ``bos = clamp(cu_seqlens[i], 0, T)`` and ``eos = clamp(cu_seqlens[i + 1], bos, T)``;
            tokens that no sequence covers get zeros in ``output``; tokens that several
            sequences cover (decreasing offsets) get the values of one of them, unspecified.
        output_final_state: whether to return the state after each sequence's last token.
        save_states: whether to return the chunk states ``h`` for :func:`chunk_gla_bwd`; without,
            ``h`` is empty and the backward recomputes them. True by default here (what callers
            of the launcher that pass ``h`` on expect); the operator's schema default is False
            (ops.yaml).

    Returns:
        ``(output, h, final_state)``, newly allocated and contiguous: ``output`` is
        ``[B, T, H, V]`` in ``q``'s dtype; ``h`` is ``[S, H, K, V]`` in ``q``'s dtype, the state
        at the start of each chunk for :func:`chunk_gla_bwd` (``S`` = ``B * ceil(T / 64)``, or
        ``ceil(T / 64) + N - 1`` with ``cu_seqlens``: a slot per chunk, and zeros in the slots
        between packed sequences), or ``[0, H, K, V]`` unless ``save_states``;
        ``final_state`` is ``[N, H, K, V]`` float32, or None when ``output_final_state`` is
        false.

    Mutates nothing. ``K <= 256`` (``ValueError`` otherwise); ``V`` is unrestricted;
    ``initial_state`` of another shape than ``[N, H, K, V]``: ``ValueError``.
    """
    B, T, H, K = q.shape
    scale = _scale(scale, K)
    V = v.shape[-1]
    cu_seqlens, N = _packed(cu_seqlens, B, T, q.device)
    _per_sequence("initial_state", initial_state, (N, H, K, V))
    o = q.new_empty((B, T, H, V))
    ht = q.new_empty((N, H, K, V), dtype=torch.float32) if output_final_state else None
    h0 = _float32(initial_state)
    use_cu = cu_seqlens is not None
    NT = cdiv(T, config._BT)
    NS = config._state_slots(B, T, N, use_cu)

    if N * H * K * V == 0 or B * T == 0:
        # Nothing to launch: no tokens, so outputs are zeros and the state passes through.
        o.zero_()
        if ht is not None:
            if h0 is None:
                ht.zero_()
            else:
                ht.copy_(h0)
        return o, q.new_zeros((NS if save_states else 0, H, K, V)), ht

    if g.dtype is not torch.float32:
        g = g.to(torch.float32)
    mode = config._mode(q.dtype)
    use_cu = cu_seqlens is not None
    sdt = q.dtype if mode == 0 else torch.float32
    # The gap slots of packed sequences are never written: zeros keep the returned h defined.
    h_shape = (NS if save_states else 0, H, K, V)
    h = (q.new_zeros if use_cu else q.new_empty)(h_shape, dtype=sdt)
    st = (q.stride(), k.stride(), v.stride())
    cute_plan = config._cute_plan(q, k, v, use_cu, save_states, N)
    if cute_plan is not None:
        return _cute_fwd(q, k, v, g, o, h, h0, ht, cu_seqlens, scale, N, NT, NS, mode, cute_plan)
    plan = config._fused_plan(B, T, H, K, V, q.dtype, use_cu, save_states)
    if plan is not None:
        (BK, BV, warps, stages), (cps, nseg) = plan
        s0 = h0
        if nseg > 1:
            gc = q.new_empty((B, H, 2, T), dtype=torch.float32)
            s0 = _segment_starts(o, k, v, gc, h0, ht, N, NT, mode, plan[1], g)
        args = (q, k, v, g, s0, h, o, ht, None, None, float(scale), T, H, NT, cps, nseg, *st)
        kw = dict(K=K, V=V, BT=config._BT, BK=BK, BV=BV, USE_CU=False, FALLEN_ONLY=False)
        flags = dict(
            USE_S0=s0 is not None, STORE_H=save_states, STORE_HT=ht is not None and nseg == 1
        )
        launchable(_gla_fwd_fused_kernel, o)[(N * H * nseg, cdiv(V, BV))](
            *args, g.stride(), **kw, **flags, MODE=mode, num_warps=warps, num_stages=stages
        )
        return o, h if mode == 0 else h.to(q.dtype), ht

    BT, state_cfg, (ok, ov, ow, os_), (fk, fv, fw, fs) = config._fwd_config(K, V, q.dtype)
    gc = q.new_empty((B, H, 2, T), dtype=torch.float32)
    # The walk stores the chunk states even when they are not kept: scratch for the output pass.
    hw = h if save_states else (q.new_zeros if use_cu else q.new_empty)((NS, H, K, V), dtype=sdt)
    flag = q.new_empty((1,), dtype=torch.int32) if use_cu else None
    if use_cu:
        _launch_g(o, g, gc, cu_seqlens, flag, N, NT, NS, BT)
    tiles = cdiv(K, state_cfg[0]) * cdiv(V, state_cfg[1])
    segments = config._walk_segments(N * H * tiles, NT, use_cu)
    _launch_walk(
        o, k, v, gc, h0, hw, ht, cu_seqlens, None, N, NT, BT, state_cfg, mode, segments,
        g=None if use_cu else g,
    )  # fmt: skip
    args = (q, k, v, gc, hw, o, cu_seqlens, flag, float(scale), T, H, N, NT, *st)
    kw = dict(K=K, V=V, BT=BT, BK=ok, BV=ov, USE_CU=use_cu, MODE=mode)
    launchable(_gla_fwd_o_kernel, o)[(cdiv(V, ov) * NS, H)](
        *args, **kw, num_warps=ow, num_stages=os_
    )
    if use_cu:
        # Offsets that fall somewhere: the whole forward again, one walk per sequence.
        args = (q, k, v, g, h0, None, o, ht, cu_seqlens, flag, float(scale), T, H, NT, NT, 1, *st)
        kw = dict(K=K, V=V, BT=BT, BK=fk, BV=fv, USE_CU=True, FALLEN_ONLY=True)
        flags = dict(USE_S0=h0 is not None, STORE_H=False, STORE_HT=ht is not None)
        launchable(_gla_fwd_fused_kernel, o)[(N * H, cdiv(V, fv))](
            *args, g.stride(), **kw, **flags, MODE=mode, num_warps=fw, num_stages=fs
        )
    # Under the interpreter bf16 states are walked in float32 (MODE 2); the products round them
    # to bf16 on use, so h is returned rounded as the GPU stores it.
    return o, h if mode == 0 else h.to(q.dtype), ht


def _segment_starts(o, k, v, gc, h0, ht, N, NT, mode, segments, g):
    """The state at each segment's start (``[N * segments, H, K, V]`` float32), from each
    segment's own walk over ``gc``, and the final states into ``ht`` unless it is None: what a
    forward in one walk split into segments starts each segment from. The own walk may run on
    finer segments (``config._start_segments``), every r-th of whose starts is then taken.
    ``gc`` is computed from ``g`` on the way (``_decay_first``)."""
    state_cfg = config._fwd_config(k.shape[-1], v.shape[-1], k.dtype)[1]
    cps, nseg = segments
    fine, nfine, r = config._start_segments(cps, NT)
    tile = config._CUTE_START_TILE_FINER if r > 1 else None
    # Segment i of the plan starts at chunk i * cps = (i * r) * fine: finer segment i * r's
    # start, which the carry alone stores (cdiv(cdiv(NT, fine), r) == cdiv(NT, cps) == nseg of
    # them a sequence).
    return _launch_walk(
        o, k, v, gc, h0, None, ht, None, None, N, NT, config._BT, state_cfg, mode, (fine, nfine),
        tile, r, g,
    )  # fmt: skip


def _cute_fwd(q, k, v, g, o, h, h0, ht, cu, scale, N, NT, NS, mode, plan):
    """The forward as one CuTeDSL walk (cute.py), with segments as the Triton walk has them:
    the state at each segment's start first comes from each segment's own walk. The chunk
    states go into ``h`` unless it holds none (``save_states`` false). Packed
    sequences are walked whole, their offsets clamped first as the Triton kernels clamp them
    (so that int64 offsets beyond int32 keep their meaning)."""
    from . import cute

    B, T, H = q.shape[:3]
    cps, nseg = plan
    gc = q.new_empty((B, H, 2, T), dtype=torch.float32)
    flag = q.new_empty((1,), dtype=torch.int32) if cu is not None else None
    if nseg == 1:
        _launch_g(o, g, gc, cu, flag, N, NT, NS, config._BT)
        s0 = h0
    else:
        s0 = _segment_starts(o, k, v, gc, h0, ht, N, NT, mode, plan, g)
    cu32 = None if cu is None else cu.clamp(0, T).to(torch.int32)
    hs = h if h.shape[0] else None
    rows = N if cu is not None else B * nseg
    split = config._cute_walk_split(q.device, cdiv(v.shape[-1], cute.BV) * H * rows)
    args = (o, ht if nseg == 1 else None, cu32, float(scale), cps, nseg, hs)
    cute.walk(q, k, v, gc, s0, *args, split=split)
    return o, h, ht


def chunk_gla_bwd(
    q, k, v, g, scale: float | None, initial_state, cu_seqlens, do, dht, h=None, *, save_states=True
):
    """Backward of ``chunk_gla``: the gradients of every differentiable forward input.

    Chunks of 64 tokens, in three or four launches (more where the walks split, and three
    more with ``cu_seqlens``): the
    cumulative log-decay within each chunk, as in :func:`chunk_gla_fwd` (computed by the first
    step of split walks where that runs in Triton); the gradient of the
    state at the end of each chunk, one program per (sequence, head, state tile) walking its
    chunks backwards (the last step gives ``dh0``), side by side in one launch with the walk
    that recomputes the state at the start of each chunk unless ``h`` brings the forward's;
    then ``dq``, ``dk`` and ``dg`` from those states and the in-chunk attention: for 16-bit inputs with ``K <= 64`` one
    item per (chunk, head) that computes ``dv`` as well, taken in turn by two programs per SM
    (Note [persistent passes]; one program per item with ``cu_seqlens``), otherwise one program
    per (chunk, head, K block) and a fourth launch for ``dv``, one program per (chunk, head,
    V block); on Hopper with CuTeDSL installed, where ``config._cute_bwd_plan`` accepts the
    inputs (K = V of 64 or 128, no ``cu_seqlens``), one CuTeDSL launch (cute_bwd.py) computes dq,
    dk, dv and dg instead; at K = V = 64 with enough sequences and heads
    (``config._cute_bwd_walks``) it also walks the gradients of the states itself (and gives
    ``dh0``), so that the reverse walk does not run. Wherever that pass runs, the state walks
    that run whole are CuTeDSL's too where T is a multiple of 4 (cute_states.py,
    ``config._cute_states``). When each walk would have very few programs (long equal-length sequences, few heads: see
    ``_segments``), each runs as in :func:`chunk_gla_fwd`: segments side by side, twice, with a
    short launch across segments between (float32 scratch ``[N * segments, H, K, V]`` twice
    per walk), the two walks' steps in the same three launches when both run. With ``cu_seqlens``, a walk of each whole sequence that does
    the work only where the clamped offsets fall somewhere (the chunks of different sequences
    may then overlap) follows.

    Args:
        q, k, v, g, scale, initial_state, cu_seqlens: as for :func:`chunk_gla_fwd`
            (``q, k: [B, T, H, K]``, ``v: [B, T, H, V]``, ``g: [B, T, H]`` float32,
            ``initial_state: [N, H, K, V]`` float32 or None, ``cu_seqlens: [N + 1]`` or None;
            malformed offsets are clamped as there, and gradients of tokens that no sequence
            covers are zeros).
        do: ``[B, T, H, V]``, the gradient of ``output`` (``q``'s dtype), any strides.
        dht: ``[N, H, K, V]`` float32, the gradient of ``final_state``, or None (zero).
        h: the ``h`` that :func:`chunk_gla_fwd` returned for these inputs with ``save_states``,
            or None (the states are then recomputed, as they are also where the walks here run
            as segments). Of another shape, dtype or device: ``ValueError``.
        save_states: whether ``h`` holds the forward's states (True by default here, as in
            :func:`chunk_gla_fwd`); when false ``h`` is the forward's empty ``[0, H, K, V]`` (or
            None, or any tensor with no state: ``ValueError`` otherwise) and the states are
            recomputed.

    Returns:
        ``(dq, dk, dv, dg, dh0)``, newly allocated and contiguous: ``dq`` ``[B, T, H, K]`` in
        ``q``'s dtype, ``dk`` ``[B, T, H, K]`` in ``k``'s dtype, ``dv`` ``[B, T, H, V]`` in
        ``v``'s dtype, ``dg`` ``[B, T, H]`` float32, ``dh0`` ``[N, H, K, V]`` float32 (the
        gradient of ``initial_state``, returned also when it is None).

    Mutates nothing. Scratch: one ``[S, H, K, V]`` state tensor, two without a usable ``h``
    (one fewer where the CuTeDSL pass walks the gradients itself; ``S`` as for ``h``; ``q``'s dtype for 16-bit inputs on a GPU, else float32), float32
    ``[B, H, 2, T]`` and, for ``K`` over 64 when ``dv`` has its own launch, ``[K / 64, B, T, H]``;
    with ``cu_seqlens`` also the fallback's float32 ``NV * (2 * T * H * K + T * H + N * H)``
    (``NV`` = number of V blocks). ``K <= 256`` (``ValueError`` otherwise); ``initial_state``
    or ``dht`` of another shape than ``[N, H, K, V]``: ``ValueError``.
    """
    B, T, H, K = q.shape
    scale = _scale(scale, K)
    V = v.shape[-1]
    cu_seqlens, N = _packed(cu_seqlens, B, T, q.device)
    _per_sequence("initial_state", initial_state, (N, H, K, V))
    _per_sequence("dht", dht, (N, H, K, V))
    h_saved = _saved_states(h, q, v, N, cu_seqlens is not None, save_states)
    dq = q.new_empty((B, T, H, K))
    dk = k.new_empty((B, T, H, K))
    dv = v.new_empty((B, T, H, V))
    dg = q.new_empty((B, T, H), dtype=torch.float32)
    dh0 = q.new_empty((N, H, K, V), dtype=torch.float32)
    h0 = _float32(initial_state)
    dht = _float32(dht)

    if N * H * K * V == 0 or B * T == 0:
        dq.zero_()
        dk.zero_()
        dv.zero_()
        dg.zero_()
        if dht is None:
            dh0.zero_()
        else:
            dh0.copy_(dht)
        return dq, dk, dv, dg, dh0

    if g.dtype is not torch.float32:
        g = g.to(torch.float32)
    BT, state_cfg, (qk, qv, qw, qs, qp), dv_cfg, fb = config._bwd_config(K, V, q.dtype)
    mode = config._mode(q.dtype)
    cu = cu_seqlens
    use_cu = cu is not None
    NT = cdiv(T, BT)
    NS = config._state_slots(B, T, N, use_cu)
    NKG = cdiv(K, qk)
    gc = q.new_empty((B, H, 2, T), dtype=torch.float32)
    sdt = q.dtype if mode == 0 else torch.float32
    cute_grads = config._cute_bwd_plan(q, k, v, do, use_cu)
    # The CuTeDSL pass may walk dh itself (config._cute_bwd_walks): then it has no dh to read.
    cute_walk = cute_grads and config._cute_bwd_walks(q.device, B, H, K)
    dh = None if cute_walk else q.new_empty((NS, H, K, V), dtype=sdt)
    dg_part = q.new_empty((NKG, B, T, H), dtype=torch.float32) if NKG > 1 else None
    flag = q.new_empty((1,), dtype=torch.int32) if use_cu else None
    q_st, k_st, v_st, do_st = q.stride(), k.stride(), v.stride(), do.stride()

    # The cumulative log-decay: with packed sequences first (it also sets flag); otherwise with
    # the first launch that reads it, computed by the split walks' first step where that runs in
    # Triton (_decay_first).
    raw = None if use_cu else g
    if use_cu:
        _launch_g(dv, g, gc, cu, flag, N, NT, NS, BT)
    NP = N * H * cdiv(K, state_cfg[0]) * cdiv(V, state_cfg[1])
    seg_max = (
        config._BWD_SEG_MAX_PROGRAMS
        if h_saved is not None
        else config._BWD_SEG_MAX_PROGRAMS_RECOMPUTING
    )
    segments = config._walk_segments(NP, NT, use_cu, seg_max)
    if h_saved is None:
        h = q.new_empty((NS, H, K, V), dtype=sdt)
    else:
        # The forward's chunk states: only the gradients are walked.
        h = h_saved if mode != 2 else h_saved.to(torch.float32)
    cute_states = cute_grads and config._cute_states(B, T, H)
    if cute_walk:
        from . import cute_bwd

        if h_saved is None:
            # The chunk states alone: the pass walks their gradients.
            walk_segments = config._walk_segments(NP, NT, use_cu)
            if cute_states and walk_segments[1] == 1:
                from . import cute_states as cs

                _decay_first(dv, raw, gc, N, NT, True)
                cs.walks(gc, forward=(k, v, h0, h, None))
            else:
                _launch_walk(
                    dv, k, v, gc, h0, h, None, cu, None, N, NT, BT, state_cfg, mode,
                    walk_segments, g=raw,
                )  # fmt: skip
        else:
            _decay_first(dv, raw, gc, N, NT, True)
        cute_bwd.grads(q, k, v, do, gc, h, None, dq, dk, dv, dg, float(scale), dht, dh0)
        return dq, dk, dv, dg, dh0
    if cute_states and segments[1] == 1:
        from . import cute_states as cs

        fwd_walk = (k, v, h0, h, None) if h_saved is None else None
        _decay_first(dv, raw, gc, N, NT, True)
        cs.walks(gc, fwd_walk, (q, do, dht, dh, dh0), float(scale))
    elif h_saved is None and segments[1] == 1:
        # Both whole walks in one launch.
        hk, hv, hw, hs = state_cfg
        args = (k, v, q, do, gc, h0, h, dht, dh, dh0, cu, float(scale), T, H, NT, NP)
        kw = dict(K=K, V=V, BT=BT, BK=hk, BV=hv, MODE=mode, num_warps=hw, num_stages=hs)
        flags = dict(USE_CU=use_cu, USE_H0=h0 is not None, USE_DHT=dht is not None)
        _decay_first(dv, raw, gc, N, NT, True)
        launchable(_gla_bwd_states_kernel, dv)[(2 * NP,)](
            *args, k_st, v_st, q_st, do_st, **kw, **flags
        )
    elif h_saved is None:
        # Both split walks, side by side.
        _launch_walks_split(
            dv, k, v, q, do, gc, h0, h, dht, dh, dh0, scale, N, NT, BT, state_cfg, mode, segments,
            raw,
        )  # fmt: skip
    else:
        _launch_walk(
            dv, q, do, gc, dht, dh, dh0, cu, scale, N, NT, BT, state_cfg, mode, segments, g=raw
        )
    if cute_grads:
        from . import cute_bwd

        cute_bwd.grads(q, k, v, do, gc, h, dh, dq, dk, dv, dg, float(scale))
        return dq, dk, dv, dg, dh0
    per_sm = 0 if use_cu else qp
    grid = config._items_grid(NKG * NS, H, q.device, per_sm)
    args = (q, k, v, gc, h, dh, do, dq, dk, dv, dg, dg_part, cu, flag, float(scale), T, H, N, NT)
    kw = dict(K=K, V=V, BT=BT, BK=qk, BV=qv, USE_CU=use_cu, MODE=mode, PERSIST=per_sm > 0)
    launchable(_gla_bwd_dqk_kernel, dv)[grid](
        *args, B * T, NKG * NS, q_st, k_st, v_st, do_st, **kw, FUSE_DV=dv_cfg is None,
        num_warps=qw, num_stages=qs,
    )  # fmt: skip
    if dv_cfg is not None:
        _bwd_dv(
            q, k, gc, dh, do, dv, dg, dg_part, cu, flag, scale, N, NT, NS, NKG, BT, dv_cfg, mode
        )
    if use_cu:
        _bwd_sequential(q, k, v, g, scale, h0, cu, flag, do, dht, dq, dk, dv, dg, dh0, N, fb, mode)
    return dq, dk, dv, dg, dh0


def _bwd_dv(q, k, gc, dh, do, dv, dg, dg_part, cu, flag, scale, N, NT, NS, NKG, BT, cfg, mode):
    """The dv pass of :func:`chunk_gla_bwd` (which sums the partial dg too)."""
    B, T, H, K = q.shape
    V = do.shape[-1]
    vk, vv, vw, vs, vp = cfg
    per_sm = 0 if cu is not None else vp
    NVS = cdiv(V, vv) * NS
    grid = config._items_grid(NVS, H, q.device, per_sm)
    args = (q, k, gc, dh, do, dv, dg, dg_part, cu, flag, float(scale), T, H, N, NT, B * T, NVS)
    kw = dict(K=K, V=V, BT=BT, BK=vk, BV=vv, NKG=NKG, USE_CU=cu is not None, MODE=mode)
    launchable(_gla_bwd_dv_kernel, dv)[grid](
        *args, q.stride(), k.stride(), do.stride(), **kw, PERSIST=per_sm > 0, num_warps=vw,
        num_stages=vs,
    )  # fmt: skip


def _bwd_sequential(q, k, v, g, scale, h0, cu, flag, do, dht, dq, dk, dv, dg, dh0, N, cfg, mode):
    """The sequential backward: each program walks a whole sequence. With packed sequences
    (``cu`` not None) its kernels do the work only when the clamped offsets fall somewhere
    (``flag`` != 0), and then rewrite every result; without, they always do (the benchmarks
    compare the chunk-parallel passes with it)."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    BK, BV, nw, ns = cfg
    NV = cdiv(V, BV)
    NTOK = B * T
    dq_part = q.new_empty((NV, B, T, H, K), dtype=torch.float32)
    dk_part = q.new_empty((NV, B, T, H, K), dtype=torch.float32)
    dg_part = q.new_empty((NV, B, T, H), dtype=torch.float32)
    dhs_part = q.new_empty((NV, N, H), dtype=torch.float32)
    st = (q.stride(), k.stride(), v.stride(), g.stride(), do.stride())
    flags = dict(USE_CU=cu is not None, USE_DHT=dht is not None, MODE=mode)
    common = dict(K=K, BT=config._BT, BK=BK, **flags, num_warps=nw, num_stages=ns)
    args = (q, k, v, g, do, dht, dk_part, dg_part, dv, dh0, cu, flag, float(scale), T, H, NTOK)
    launchable(_gla_bwd_dkv_kernel, dv)[(N * H, NV)](*args, *st, V=V, BV=BV, **common)
    args = (q, k, v, g, do, h0, dht, dq_part, dg_part, dhs_part, cu, flag, float(scale), T, H)
    launchable(_gla_bwd_dq_kernel, dv)[(N * H, NV)](
        *args, N, NTOK, *st, V=V, BV=BV, USE_H0=h0 is not None, **common
    )
    args = (dq_part, dk_part, dg_part, dhs_part, dq, dk, dg, cu, flag, T, H, N, NTOK)
    launchable(_gla_bwd_dg_kernel, dv)[(N * H,)](*args, NV=NV, **common)


def chunk_gla_bwd_sequential(q, k, v, g, scale, initial_state, cu_seqlens, do, dht):
    """:func:`chunk_gla_bwd` by the sequential kernels alone (one program per sequence, head and
    V block walking every chunk), as the backward was computed before the chunk-parallel
    passes; for comparisons. Same arguments and results; ``g`` float32."""
    B, T, H, K = q.shape
    scale = _scale(scale, K)
    V = v.shape[-1]
    cu, N = _packed(cu_seqlens, B, T, q.device)
    h0, dht = _float32(initial_state), _float32(dht)
    out = (
        q.new_empty((B, T, H, K)),
        k.new_empty((B, T, H, K)),
        v.new_empty((B, T, H, V)),
        q.new_empty((B, T, H), dtype=torch.float32),
        q.new_empty((N, H, K, V), dtype=torch.float32),
    )
    flag = None
    if cu is not None:
        # every offset "falls": the kernels do the work
        flag = torch.ones((1,), dtype=torch.int32, device=q.device)
    cfg, mode = config._config(K, V, q.dtype, True), config._mode(q.dtype)
    _bwd_sequential(q, k, v, g, scale, h0, cu, flag, do, dht, *out, N, cfg, mode)
    return out
