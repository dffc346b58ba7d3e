"""Launchers and references of the probe operators (tests/probes/ops.yaml): plain PyTorch, so
that each generated suite runs in seconds and tests the generated layer, not a kernel."""

import torch


def affine_fwd(x, alpha=1, *, beta=0.0, flip=False):
    y = x * alpha + beta
    return (-y if flip else y).contiguous()


def affine_bwd(grad_y, x, alpha, *, flip):
    g = grad_y * alpha
    return (-g if flip else g).contiguous()


def affine_ref(x, alpha=1, beta=0.0, flip=False):
    y = x.float() * alpha + beta
    return -y if flip else y


def scale_into(out, x, alpha=1.0):
    out.copy_(x * alpha)


def scale_into_ref(out, x, alpha=1.0):
    out.copy_(x * alpha)


def add_out(x, y, *, out):
    torch.add(x, y, out=out)


def add_out_ref(x, y, out):
    out.copy_(x + y)


def fused_add(x, y, residual=None, alpha=1.0):
    x.add_(y, alpha=alpha)
    if residual is not None:
        residual.copy_(x)


def fused_add_ref(x, y, residual=None, alpha=1.0):
    x.add_(y * alpha)
    if residual is not None:
        residual.copy_(x)


def library_names(input, filter=None, _x=1.0, *, out):
    y = input * _x
    out.copy_(y if filter is None else y * filter)


def library_names_ref(input, filter=None, _x=1.0, out=None):
    y = input * _x
    out.copy_(y if filter is None else y * filter)


def self_names(self, other=1, *, type=0):
    shifted = self + type
    high, low = torch.maximum(shifted, shifted * other), torch.minimum(shifted, shifted * other)
    return high.contiguous(), low.contiguous()


def self_names_ref(self, other=1, type=0):
    shifted = self.float() + type
    return torch.maximum(shifted, shifted * other), torch.minimum(shifted, shifted * other)


def softmax_lse(x, bias=None, return_lse=False):
    shifted = None if bias is None else (x + bias).contiguous()
    z = x if bias is None else shifted
    lse = torch.logsumexp(z, dim=-1)
    return torch.exp(z - lse[..., None]).contiguous(), lse if return_lse else None, shifted


def softmax_lse_ref(x, bias=None, return_lse=False):
    z = x.float() if bias is None else x.float() + bias.float()
    lse = torch.logsumexp(z, dim=-1)
    return torch.softmax(z, -1), lse if return_lse else None, None if bias is None else z


# What 'record_rows' did outside its tensors: the host-side log a communicator or an allocator
# registry would keep.
HOST_LOG = []


def record_rows(x, tag=0):
    HOST_LOG.append((tag, tuple(x.shape)))


def record_rows_ref(x, tag=0):
    return None


def outliers(x, batch=None, threshold=0.0, I=1):  # noqa: E741 (the schema's name)
    y = x * I if batch is None else x * I + batch[:, None]
    picked = (x.abs() > threshold).to(x.dtype).contiguous() if threshold else None
    return y.contiguous(), picked


def outliers_ref(x, batch=None, threshold=0.0, I=1):  # noqa: E741
    y = x.float() * I if batch is None else x.float() * I + batch.float()[:, None]
    return y, (x.float().abs() > threshold).float() if threshold else None


def split_pair(x, alpha=2.0):
    return [(x * alpha).contiguous(), (x + 1).contiguous()]


def split_pair_ref(x, alpha=2.0):
    return [x.float() * alpha, x.float() + 1]


def repeat_n(x, n, shift=None):
    base = x if shift is None else x + shift
    return base.cumsum(0).contiguous(), [(base * (i + 1)).float().contiguous() for i in range(n)]


def repeat_n_ref(x, n, shift=None):
    base = x.float() if shift is None else x.float() + shift.float()
    return base.cumsum(0), [base * (i + 1) for i in range(n)]


def grouped_mm(X, W):
    return [(x @ w.T).contiguous() for x, w in zip(X, W, strict=True)]


def grouped_mm_ref(X, W):
    return [x.float() @ w.float().T for x, w in zip(X, W, strict=True)]


def weighted_sum(x, weights=None):
    return (x + sum(weights or [], torch.zeros_like(x))).contiguous()


def weighted_sum_ref(x, weights=None):
    return x.float() + sum((w.float() for w in weights or []), torch.zeros_like(x.float()))
