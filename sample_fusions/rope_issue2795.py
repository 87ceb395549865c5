# nvFuser issue #2795 "performance issue on dynamic shaped tensor": litGPT RoPE at the
# issue's sizes (bsz=2, n_head=16, block_size=1024, head_size=32, rope_n_elem=8).
#
# Same math as rope_litgpt.py: rotate the first 8 of each head's 32 features (halves of
# 4, cat(-x2, x1)), multiply by cos/sin [1024, 8], add, cast to bf16, and cat the 24
# untouched features back. q is symbolic (shape [-1, -1, -1, -1]) while the slice end
# indices are constants: with symbolic input extents the indexing after the slices did
# not collapse, and the dynamic kernel ran several times slower than the static one
# (35 us against 8 us on a 3090 Ti in PR #2835, which fixed it by concretizing resize
# extents). The inputs are small (2 MiB); that is what the issue measured.
#
# What to look at in the workbench: the generated CUDA with and without
# `_disable_options=["concretize_resize_extents"]` (in nvFuser's kernels from the issue
# the static predicates read `% 32` and `< 4`, the dynamic ones divide by logical sizes,
# `% ((T.logical_size[1] + 4) + 24)`); the kernel time and achieved bandwidth of each;
# and the cache key, in which every resized extent is now a constant.
# Inputs: q bf16[2, 16, 1024, 32] = 2 MiB, cos and sin bf16[1024, 8] = 16 KiB each.
import torch
from nvfuser import FusionDefinition, DataType
def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1, -1, -1, -1], contiguity=[True, True, True, True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[3, 2, 1, 0])
    T1 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[1, 0])
    T2 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[1, 0])
    T3 = fd.ops.slice(T0, start_indices=[0, 0, 0, 0], end_indices=[2, 16, 1024, 8], strides=[1, 1, 1, 1])
    T4 = fd.ops.slice(T3, start_indices=[0, 0, 0, 0], end_indices=[2, 16, 1024, 4], strides=[1, 1, 1, 1])
    T5 = fd.ops.slice(T3, start_indices=[0, 0, 0, 4], end_indices=[2, 16, 1024, 8], strides=[1, 1, 1, 1])
    T6 = fd.ops.cast(T5, dtype=DataType.Float)
    T7 = fd.ops.neg(T6)
    T8 = fd.ops.cast(T7, dtype=DataType.BFloat16)
    T9 = fd.ops.cat([T8, T4], dim=-1)
    T10 = fd.ops.broadcast_in_dim(T1, shape=[2, 16, 1024, 8], broadcast_dims=[2, 3])
    T11 = fd.ops.cast(T3, dtype=DataType.Float)
    T12 = fd.ops.cast(T10, dtype=DataType.Float)
    T13 = fd.ops.mul(T11, T12)
    T14 = fd.ops.broadcast_in_dim(T2, shape=[2, 16, 1024, 8], broadcast_dims=[2, 3])
    T15 = fd.ops.cast(T9, dtype=DataType.Float)
    T16 = fd.ops.cast(T14, dtype=DataType.Float)
    T17 = fd.ops.mul(T15, T16)
    T18 = fd.ops.add(T13, T17)
    T19 = fd.ops.cast(T18, dtype=DataType.BFloat16)
    T20 = fd.ops.slice(T0, start_indices=[0, 0, 0, 8], end_indices=[2, 16, 1024, 32], strides=[1, 1, 1, 1])
    T21 = fd.ops.cat([T19, T20], dim=-1)
    fd.add_output(T21)

inputs = [
    torch.randn(2, 16, 1024, 32, dtype=torch.bfloat16, device="cuda"),
    torch.randn(1024, 8, dtype=torch.bfloat16, device="cuda"),
    torch.randn(1024, 8, dtype=torch.bfloat16, device="cuda"),
]

with FusionDefinition() as fd:
    nvfuser_fusion_id0(fd)

for _ in range(5):
    out = fd.execute(inputs)
