# LayerNorm forward in bf16 with float compute, as Thunder traces
# torch.nn.functional.layer_norm (var_mean with correction=0, then rsqrt(var + eps)).
#
# Three outputs: the normalised bf16 activation and the float mean and rstd [N, 1] that
# the backward (layer_norm_bwd.py) consumes.
#
# What to look at in the workbench: the Welford (var_mean) expression in the IR and the
# normalization segment that holds it with the prologue cast and the epilogue affine
# transform; the three outputs of one kernel; the persistent-buffer size for a
# 4096-wide bf16 row.
# Inputs: x bf16[16384, 4096] = 128 MiB, weight and bias bf16[4096] = 8 KiB each.
import torch
from nvfuser import FusionDefinition, DataType
def nvfuser_fusion_id5(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[1, 0])
    T1 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[0])
    T2 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[0])
    T3 = fd.ops.cast(T0, dtype=DataType.Float)
    T4, T5 = fd.ops.var_mean(T3, dims=[1], correction=0, keepdim=False)
    T6 = fd.ops.broadcast_in_dim(T4, shape=[16384, 1], broadcast_dims=[0])
    T7 = fd.ops.broadcast_in_dim(T5, shape=[16384, 1], broadcast_dims=[0])
    S8 = fd.define_scalar(1.00000e-05, dtype=DataType.Double)
    T9 = fd.ops.add(T6, S8)
    T10 = fd.ops.rsqrt(T9)
    T11 = fd.ops.broadcast_in_dim(T7, shape=[16384, 4096], broadcast_dims=[0, 1])
    T12 = fd.ops.sub(T3, T11)
    T13 = fd.ops.broadcast_in_dim(T10, shape=[16384, 4096], broadcast_dims=[0, 1])
    T14 = fd.ops.mul(T12, T13)
    T15 = fd.ops.broadcast_in_dim(T1, shape=[16384, 4096], broadcast_dims=[1])
    T16 = fd.ops.cast(T15, dtype=DataType.Float)
    T17 = fd.ops.mul(T14, T16)
    T18 = fd.ops.broadcast_in_dim(T2, shape=[16384, 4096], broadcast_dims=[1])
    T19 = fd.ops.cast(T18, dtype=DataType.Float)
    T20 = fd.ops.add(T17, T19)
    T21 = fd.ops.cast(T20, dtype=DataType.BFloat16)
    fd.add_output(T21)
    fd.add_output(T7)
    fd.add_output(T10)

inputs = [
    torch.randn(16384, 4096, dtype=torch.bfloat16, device="cuda"),
    torch.randn(4096, dtype=torch.bfloat16, device="cuda"),
    torch.randn(4096, dtype=torch.bfloat16, device="cuda"),
]

with FusionDefinition() as fd:
    nvfuser_fusion_id5(fd)

for _ in range(5):
    out = fd.execute(inputs)
