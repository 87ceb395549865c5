# RMSNorm forward (LLaMA style): bf16 in, float compute, bf16 out.
#
#   rstd = rsqrt(mean(x^2, -1) + eps);  y = (x * rstd) * weight
# Outputs: y bf16 and rstd float [N, 1] (saved for the backward).
#
# What to look at in the workbench: one inner-normalization segment with a single
# reduction; the bf16->float casts kept in registers; vectorization of the 4096-wide
# bf16 rows (8 elements per 16-byte access) and the achieved bandwidth against the
# 2 x 128 MiB the kernel must move.
# Inputs: x bf16[16384, 4096] = 128 MiB, weight bf16[4096] = 8 KiB.
import torch
from nvfuser import FusionDefinition, DataType
def nvfuser_fusion_id7(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[1, 0])
    T1 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[0])
    T2 = fd.ops.cast(T0, dtype=DataType.Float)
    T3 = fd.ops.mul(T2, T2)
    T4 = fd.ops.sum(T3, dims=[1], keepdim=False, dtype=DataType.Null)
    T5 = fd.ops.broadcast_in_dim(T4, shape=[16384, 1], broadcast_dims=[0])
    S6 = fd.define_scalar(4096.00, dtype=DataType.Double)
    T7 = fd.ops.div(T5, S6)
    S8 = fd.define_scalar(1.00000e-06, dtype=DataType.Double)
    T9 = fd.ops.add(T7, S8)
    T10 = fd.ops.rsqrt(T9)
    T11 = fd.ops.broadcast_in_dim(T10, shape=[16384, 4096], broadcast_dims=[0, 1])
    T12 = fd.ops.mul(T2, T11)
    T13 = fd.ops.broadcast_in_dim(T1, shape=[16384, 4096], broadcast_dims=[1])
    T14 = fd.ops.cast(T13, dtype=DataType.Float)
    T15 = fd.ops.mul(T12, T14)
    T16 = fd.ops.cast(T15, dtype=DataType.BFloat16)
    fd.add_output(T16)
    fd.add_output(T10)

inputs = [
    torch.randn(16384, 4096, dtype=torch.bfloat16, device="cuda"),
    torch.randn(4096, dtype=torch.bfloat16, device="cuda"),
]

with FusionDefinition() as fd:
    nvfuser_fusion_id7(fd)

for _ in range(5):
    out = fd.execute(inputs)
