"""Winograd F(2x2, 3x3): 3x3 stride-1 convolutions with 2.25x fewer multiplications, in plain torch.

Each 2x2 block of output is computed from the 4x4 input tile around it as

    Y = A^T [ (G g G^T) * (B^T d B) ] A          (* elementwise, over the 16 tile positions)

with the constant matrices of Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks"
(2016). The weight transform ``G g G^T`` is done once, at load time (in float64, then rounded);
per call the input tiles are transformed with additions only, the 16 tile positions become one
batched GEMM ``(16, tiles, C_in) @ (16, C_in, C_out)``, and the output transform is additions
again. Against oneDNN's direct convolution on a 2-core AVX2 CPU this is a win where the GEMM is
large enough to run near peak (C_in >= 128 at ACT's 480x640 input: ResNet-18 layer2..layer4), and
a loss for the 64-channel layer1 (the GEMM's inner dimension is too small), so the caller chooses
per layer (`worthwhile`). Results match the direct convolution to ~1e-6 relative (float32).

Works on tensors in any memory format; the output is an NCHW-shaped tensor stored channels-last
(NHWC), which is what the next oneDNN convolution prefers.
"""

from __future__ import annotations

import torch
from torch import Tensor

# G (4x3): weight transform; B^T and A^T are applied below as explicit additions.
_G = ((1.0, 0.0, 0.0), (0.5, 0.5, 0.5), (0.5, -0.5, 0.5), (0.0, 0.0, 1.0))
MIN_CHANNELS = 128  # below this the batched GEMM is too thin to beat a direct convolution


def worthwhile(in_ch: int, kernel: int, stride: int, padding: int) -> bool:
    """Whether a conv of this shape should run through Winograd F(2x2, 3x3) here."""
    return kernel == 3 and stride == 1 and padding == 1 and in_ch >= MIN_CHANNELS


def transform_weight(weight: Tensor) -> Tensor:
    """(C_out, C_in, 3, 3) -> (16, C_in, C_out): G g G^T per filter, tile positions first."""
    if weight.dim() != 4 or tuple(weight.shape[2:]) != (3, 3):
        raise ValueError(f"expected a (C_out, C_in, 3, 3) weight, got {tuple(weight.shape)}")
    g = torch.tensor(_G, dtype=torch.float64, device=weight.device)
    u = torch.einsum("ai,kcij,bj->abck", g, weight.to(torch.float64), g)  # (4, 4, C_in, C_out)
    return u.reshape(16, weight.shape[1], weight.shape[0]).to(weight.dtype).contiguous()


def conv3x3(x: Tensor, u: Tensor, bias: Tensor | None = None) -> Tensor:
    """conv2d(x, weight, bias, stride=1, padding=1) with ``u = transform_weight(weight)``."""
    n, c, h, w = x.shape
    if u.shape[1] != c:
        raise ValueError(f"input has {c} channels, the transformed weight expects {u.shape[1]}")
    k = u.shape[2]
    th, tw = (h + 1) // 2, (w + 1) // 2
    # zero-padded NHWC copy, sized to a whole number of 2x2 output tiles (+1 pixel of border)
    xp = x.new_zeros((n, 2 * th + 2, 2 * tw + 2, c))
    xp[:, 1 : h + 1, 1 : w + 1] = x.permute(0, 2, 3, 1)
    # B^T d B. Rows of tile i are input rows 2i..2i+3; B^T = [[1,0,-1,0],[0,1,1,0],[0,-1,1,0],[0,1,0,-1]]
    r = [xp[:, j : j + 2 * th : 2] for j in range(4)]  # (n, th, 2tw+2, c) each
    rows = (r[0] - r[2], r[1] + r[2], r[2] - r[1], r[1] - r[3])
    v = x.new_empty((4, 4, n, th, tw, c))
    for a, t in enumerate(rows):
        col = [t[:, :, j : j + 2 * tw : 2] for j in range(4)]  # (n, th, tw, c) each
        torch.sub(col[0], col[2], out=v[a, 0])
        torch.add(col[1], col[2], out=v[a, 1])
        torch.sub(col[2], col[1], out=v[a, 2])
        torch.sub(col[1], col[3], out=v[a, 3])
    m = torch.bmm(v.view(16, n * th * tw, c), u).view(4, 4, n, th, tw, k)
    # A^T M A with A^T = [[1,1,1,0],[0,1,-1,-1]]: first over tile rows, then over tile columns
    out = x.new_empty((n, th, 2, tw, 2, k))
    for i, s in enumerate((m[0] + m[1] + m[2], m[1] - m[2] - m[3])):  # (4, n, th, tw, k)
        torch.add(s[0] + s[1], s[2], out=out[:, :, i, :, 0])
        torch.sub(s[1] - s[2], s[3], out=out[:, :, i, :, 1])
    if bias is not None:
        out += bias
    y = out.view(n, 2 * th, 2 * tw, k)
    if 2 * th != h or 2 * tw != w:
        y = y[:, :h, :w].contiguous()
    return y.permute(0, 3, 1, 2)
