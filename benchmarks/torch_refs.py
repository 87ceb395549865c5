"""Torch versions of the bundled samples (`sample_fusions/*.py`): what eager PyTorch runs
for the same math.

Each function takes the sample's `inputs` in the order of its `inputs = [...]` list (the
Python scalars among them included) and returns the sample's outputs in the order of its
`fd.add_output` calls, with the same dtypes. Reduced-precision inputs are cast to float
for the arithmetic and the results cast back where the definition casts them, as the
definitions do. Sizes are read from the inputs, never from the definitions' literal
shapes, so a function also runs at the small sizes the unit tests shrink the samples to
(tests/unit/codegen/kernels_check.py: shrunk_sample); where a definition has a size as a
constant (the 4096.0 divisor of rms_norm_fwd and layer_norm_bwd, the 32064-wide iota of
cross_entropy_bwd), it is the size of the input axis the definition broadcasts against,
so reading it from the input gives the same value.

Only torch is imported here (no CuPy, no Triton), so a CPU check can import this module.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

# -- pointwise ------------------------------------------------------------------------------


def rope(x, cos, sin, n):
    """litGPT RoPE on the first n features of each head: halves of n/2, cat(-x2, x1) in the
    input dtype, then x * cos + rotated * sin in float, cast back, and the rest cat back."""
    half = n // 2
    head = x[..., :n].float()
    x1, x2 = x[..., :half], x[..., half:n]
    rotated = torch.cat([(-x2.float()).to(x.dtype), x1], dim=-1).float()
    roped = (head * cos.float() + rotated * sin.float()).to(x.dtype)
    return torch.cat([roped, x[..., n:]], dim=-1)


def rope_litgpt(x, cos, sin):
    return rope(x, cos, sin, 64)


def rope_issue2795(x, cos, sin):
    return rope(x, cos, sin, 8)


def gelu_tanh_fwd(x, bias):
    t = x.float() + bias.float()
    return (t * 0.5 * (torch.tanh((t + t * t * t * 0.044715) * 0.797885) + 1.0)).to(x.dtype)


def transpose_add(x, y):
    return x + y, torch.relu(y.permute(1, 0)).contiguous()


def resize_pad(x, y, *pads):
    """pad(x) by the eight runtime widths (innermost axis first, negative ones crop), times y."""
    return y * F.pad(x, list(pads))


def issue785_gelu_bias_bwd(s0, s1, s2, s3, t4, t5, t6):
    """The bias gradient (a sum of t4 over the two outer axes) and the GeLU (tanh) input
    gradient, op for op in the definition's order (its multiplications by 1.0, which
    change nothing, left out)."""
    t8 = 0.5 * t6
    t16 = torch.tanh(0.797885 * (t6 + 0.044715 * torch.pow(t6, 3.0)))
    t18 = 1.0 + t16
    t19 = t4.sum(dim=(0, 1))
    t20 = t5 * t18
    t23 = t5 * t8
    t27 = t23 * (1.0 - t16 * t16)
    t30 = t27 * s3
    t32 = t30 * s2 * s1
    t36 = t30 + t32 * torch.pow(t6, 2.0)
    t38 = t36 + t20 * s0
    return t19, t38


def issue785_reduction_pow(t4, t6):
    """A sum of t4 over the two outer axes, and t6 cubed (the definition's 0.5 * t6 is dead)."""
    return t4.sum(dim=(0, 1)), torch.pow(t6, 3.0)


# -- normalizations and other reductions ------------------------------------------------------


def softmax(scores):
    """softmax(scores * 0.0883883, dim=-1) in float, cast back to the input dtype."""
    t = scores.float() * 0.0883883
    e = torch.exp(t - t.amax(dim=-1, keepdim=True))
    return (e / e.sum(dim=-1, keepdim=True)).to(scores.dtype)


def segment_set_log_softmax(logits):
    """log_softmax(logits * 1.42857, dim=1) in float, cast back to the input dtype."""
    t = logits.float() * 1.42857
    shifted = t - t.amax(dim=1, keepdim=True)
    return (shifted - torch.log(torch.exp(shifted).sum(dim=1, keepdim=True))).to(logits.dtype)


def cross_entropy_bwd(logits, labels, grad):
    """(softmax(logits, dim=1) - one_hot(labels)) * grad[:, None], in float, cast to bf16."""
    t = logits.float()
    e = torch.exp(t - t.amax(dim=1, keepdim=True))
    probs = e / e.sum(dim=1, keepdim=True)
    vocab = torch.arange(t.shape[1], dtype=torch.int64, device=t.device)
    one_hot = torch.where(vocab[None, :] == labels[:, None], 1.0, 0.0)
    return ((probs - one_hot) * grad.float()[:, None]).to(torch.bfloat16)


def layer_norm_fwd(x, weight, bias):
    """layer_norm over dim 1 (var_mean with correction 0, eps 1e-5) in float: the bf16
    output, and the float mean and rstd, each [N, 1]."""
    t = x.float()
    var, mean = torch.var_mean(t, dim=1, correction=0, keepdim=True)
    rstd = torch.rsqrt(var + 1e-05)
    y = (t - mean) * rstd * weight.float() + bias.float()
    return y.to(x.dtype), mean, rstd


def bias_residual_layer_norm(proj_out, bias, residual, ln_weight, ln_bias):
    """residual + (proj_out + bias) in float, returned in bf16, and its layer_norm over dim 1
    (correction 0, eps 1e-5), in bf16."""
    h = residual.float() + (proj_out.float() + bias.float())
    var, mean = torch.var_mean(h, dim=1, correction=0, keepdim=True)
    y = (h - mean) * torch.rsqrt(var + 1e-05) * ln_weight.float() + ln_bias.float()
    return h.to(torch.bfloat16), y.to(torch.bfloat16)


def layer_norm_bwd(grad_out, x, mean, rstd, weight):
    """grad input (bf16), grad weight (bf16) and grad bias (bf16) of layer_norm over dim 1,
    from the saved [N, 1] mean and rstd. The definition's 4096.0 is H, x.shape[1]."""
    hidden = float(x.shape[1])
    x_hat = (x.float() - mean) * rstd
    g_out = grad_out.float()
    g = g_out * weight.float()
    sum_g = g.sum(dim=1, keepdim=True)
    sum_g_xhat = (g * x_hat).sum(dim=1, keepdim=True)
    grad_input = (rstd / hidden) * (g * hidden - sum_g - x_hat * sum_g_xhat)
    grad_weight = (g_out * x_hat).sum(dim=0)
    grad_bias = g_out.sum(dim=0)
    return grad_input.to(torch.bfloat16), grad_weight.to(torch.bfloat16), grad_bias.to(torch.bfloat16)


def rms_norm_fwd(x, weight):
    """rstd = rsqrt(mean(x^2, dim 1) + 1e-6) in float; y = x * rstd * weight in bf16; and
    rstd [N, 1] in float. The definition's 4096.0 divisor is x.shape[1]."""
    t = x.float()
    rstd = torch.rsqrt((t * t).sum(dim=1, keepdim=True) / float(x.shape[1]) + 1e-06)
    return (t * rstd * weight.float()).to(torch.bfloat16), rstd


def var_mean(x):
    """var_mean over dim 2 (correction 1, keepdim) and (x - mean) * rsqrt(var + 1e-5)."""
    var, mean = torch.var_mean(x, dim=2, correction=1, keepdim=True)
    return var, mean, (x - mean) * torch.rsqrt(var + 1e-05)


def dynamic_reshape(x, n_head):
    """Per-head RMS norm of x reshaped to [B, T, n_head, -1] (eps 1e-6): the normalised
    heads permuted to [B, n_head, T, head_size], and the rstd [B, T, n_head, 1]."""
    heads = x.reshape(x.shape[0], x.shape[1], n_head, -1)
    rstd = torch.rsqrt((heads * heads).sum(dim=3, keepdim=True) / heads.shape[3] + 1e-06)
    return (heads * rstd).permute(0, 2, 1, 3), rstd


def linear_output_order(x, w, bias):
    """The definition's broadcast-multiply-sum over k is x @ w.T + bias: eager PyTorch
    runs it as F.linear (one GEMM) rather than materializing the [b, m, n, k] product."""
    return F.linear(x, w, bias)


TORCH = {
    "bias_residual_layer_norm": bias_residual_layer_norm,
    "cross_entropy_bwd": cross_entropy_bwd,
    "dynamic_reshape": dynamic_reshape,
    "gelu_tanh_fwd": gelu_tanh_fwd,
    "issue785_gelu_bias_bwd": issue785_gelu_bias_bwd,
    "issue785_reduction_pow": issue785_reduction_pow,
    "layer_norm_bwd": layer_norm_bwd,
    "layer_norm_fwd": layer_norm_fwd,
    "linear_output_order": linear_output_order,
    "resize_pad_to_broadcast_dynamic": resize_pad,
    "rms_norm_fwd": rms_norm_fwd,
    "rope_issue2795": rope_issue2795,
    "rope_litgpt": rope_litgpt,
    "segment_set_log_softmax": segment_set_log_softmax,
    "softmax": softmax,
    "transpose_add": transpose_add,
    "var_mean": var_mean,
}

# Samples with a reduction: their outputs are compared with a looser tolerance, since the
# order of a sum differs between this project's kernels and torch's.
REDUCTIONS = frozenset(TORCH) - {
    "gelu_tanh_fwd",
    "resize_pad_to_broadcast_dynamic",
    "rope_issue2795",
    "rope_litgpt",
    "transpose_add",
}
