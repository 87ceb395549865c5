# RoPE on the queries of a litGPT attention block, as Thunder traces it for nvFuser.
#
# litGPT rotates only the first rope_n_elem (n) features of each head:
#     q_roped = apply_rope(q[..., :n], cos, sin)      # x1, x2 = halves; cat(-x2, x1)
#     q = torch.cat((q_roped, q[..., n:]), dim=-1)
# Thunder computes bf16 elementwise ops in float (cast, neg, cast back), so the
# rotation's cat happens in bf16, and cos/sin [T, n] are broadcast to [B, H, T, n].
# The slice end indices and broadcast shapes are literal ints, as in a Thunder repro,
# while q, cos and sin are defined with symbolic sizes (-1); each cat becomes pads.
#
# What to look at in the workbench: the Resize lines of the slices and pads in the
# TransformPrinter block and how concretization fixes their extents (compare with
# `_disable_options=["concretize_resize_extents"]`), that the whole thing is one
# pointwise kernel, and the indexing and predicates of the generated CUDA around the
# n/2 and n boundaries of the last axis.
# Shapes: B=8, H=32, T=4096, head_size=128, n=64. Inputs: q bf16[8, 32, 4096, 128] =
# 256 MiB, cos and sin bf16[4096, 64] = 512 KiB each. Output: bf16[8, 32, 4096, 128].
import torch
from nvfuser import FusionDefinition, DataType
def nvfuser_fusion_id1(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1, -1, -1, -1], contiguity=[True, True, True, True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[3, 2, 1, 0])
    T1 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[1, 0])
    T2 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[1, 0])
    T3 = fd.ops.slice(T0, start_indices=[0, 0, 0, 0], end_indices=[8, 32, 4096, 64], strides=[1, 1, 1, 1])
    T4 = fd.ops.slice(T3, start_indices=[0, 0, 0, 0], end_indices=[8, 32, 4096, 32], strides=[1, 1, 1, 1])
    T5 = fd.ops.slice(T3, start_indices=[0, 0, 0, 32], end_indices=[8, 32, 4096, 64], strides=[1, 1, 1, 1])
    T6 = fd.ops.cast(T5, dtype=DataType.Float)
    T7 = fd.ops.neg(T6)
    T8 = fd.ops.cast(T7, dtype=DataType.BFloat16)
    T9 = fd.ops.cat([T8, T4], dim=-1)
    T10 = fd.ops.broadcast_in_dim(T1, shape=[8, 32, 4096, 64], broadcast_dims=[2, 3])
    T11 = fd.ops.cast(T3, dtype=DataType.Float)
    T12 = fd.ops.cast(T10, dtype=DataType.Float)
    T13 = fd.ops.mul(T11, T12)
    T14 = fd.ops.broadcast_in_dim(T2, shape=[8, 32, 4096, 64], broadcast_dims=[2, 3])
    T15 = fd.ops.cast(T9, dtype=DataType.Float)
    T16 = fd.ops.cast(T14, dtype=DataType.Float)
    T17 = fd.ops.mul(T15, T16)
    T18 = fd.ops.add(T13, T17)
    T19 = fd.ops.cast(T18, dtype=DataType.BFloat16)
    T20 = fd.ops.slice(T0, start_indices=[0, 0, 0, 64], end_indices=[8, 32, 4096, 128], strides=[1, 1, 1, 1])
    T21 = fd.ops.cat([T19, T20], dim=-1)
    fd.add_output(T21)

inputs = [
    torch.randn(8, 32, 4096, 128, dtype=torch.bfloat16, device="cuda"),
    torch.randn(4096, 64, dtype=torch.bfloat16, device="cuda"),
    torch.randn(4096, 64, dtype=torch.bfloat16, device="cuda"),
]

with FusionDefinition() as fd:
    nvfuser_fusion_id1(fd)

for _ in range(5):
    out = fd.execute(inputs)
