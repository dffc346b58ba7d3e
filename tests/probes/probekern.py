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
