# Bias + (dropout) + residual add + LayerNorm, the "bias_dropout_add_norm" block of a
# pre-norm transformer, in bf16 with float compute. Dropout is left out (eval mode, or
# p=0): no RNG in this workbench.
#
#   h = proj_out + bias;  residual_out = residual + h;  y = layer_norm(residual_out)
# Two outputs of different kinds from one normalization: the updated residual stream
# (pointwise, written before the reduction) and the normalised activation.
#
# What to look at in the workbench: one normalization segment with a pointwise prologue
# and two outputs; which tensors the scheduler keeps as persistent buffers (the bf16
# inputs, recomputing the sum, or the float residual sum itself); the bytes moved (read
# 2 x 128 MiB, write 2 x 128 MiB).
# Inputs: proj_out and residual bf16[16384, 4096] = 2 x 128 MiB; bias, ln weight and
# ln bias bf16[4096].
import torch
from nvfuser import FusionDefinition, DataType
def nvfuser_fusion_id13(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[1, 0])
    T1 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[0])
    T2 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[1, 0])
    T3 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[0])
    T4 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[0])
    T5 = fd.ops.cast(T0, dtype=DataType.Float)
    T6 = fd.ops.broadcast_in_dim(T1, shape=[16384, 4096], broadcast_dims=[1])
    T7 = fd.ops.cast(T6, dtype=DataType.Float)
    T8 = fd.ops.add(T5, T7)
    T9 = fd.ops.cast(T2, dtype=DataType.Float)
    T10 = fd.ops.add(T9, T8)
    T11 = fd.ops.cast(T10, dtype=DataType.BFloat16)
    T12, T13 = fd.ops.var_mean(T10, dims=[1], correction=0, keepdim=False)
    T14 = fd.ops.broadcast_in_dim(T12, shape=[16384, 1], broadcast_dims=[0])
    T15 = fd.ops.broadcast_in_dim(T13, shape=[16384, 1], broadcast_dims=[0])
    S16 = fd.define_scalar(1.00000e-05, dtype=DataType.Double)
    T17 = fd.ops.add(T14, S16)
    T18 = fd.ops.rsqrt(T17)
    T19 = fd.ops.broadcast_in_dim(T15, shape=[16384, 4096], broadcast_dims=[0, 1])
    T20 = fd.ops.sub(T10, T19)
    T21 = fd.ops.broadcast_in_dim(T18, shape=[16384, 4096], broadcast_dims=[0, 1])
    T22 = fd.ops.mul(T20, T21)
    T23 = fd.ops.broadcast_in_dim(T3, shape=[16384, 4096], broadcast_dims=[1])
    T24 = fd.ops.cast(T23, dtype=DataType.Float)
    T25 = fd.ops.mul(T22, T24)
    T26 = fd.ops.broadcast_in_dim(T4, shape=[16384, 4096], broadcast_dims=[1])
    T27 = fd.ops.cast(T26, dtype=DataType.Float)
    T28 = fd.ops.add(T25, T27)
    T29 = fd.ops.cast(T28, dtype=DataType.BFloat16)
    fd.add_output(T11)
    fd.add_output(T29)

inputs = [
    torch.randn(16384, 4096, dtype=torch.bfloat16, device="cuda"),
    torch.randn(4096, dtype=torch.bfloat16, device="cuda"),
    torch.randn(16384, 4096, dtype=torch.bfloat16, device="cuda"),
    torch.randn(4096, dtype=torch.bfloat16, device="cuda"),
    torch.randn(4096, dtype=torch.bfloat16, device="cuda"),
]

with FusionDefinition() as fd:
    nvfuser_fusion_id13(fd)

for _ in range(5):
    out = fd.execute(inputs)
