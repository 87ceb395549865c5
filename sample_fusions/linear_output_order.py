# An output that naive allocation-order inference would permute (nvFuser issue #2425,
# "allocation order inference should be a hint rather than a requirement"), built
# without matmul: a MoE router's logits, x @ w.T + bias, written as broadcast-multiply-sum.
#
# x [b, m, k] and w [n, k] are broadcast to [b, m, n, k] and summed over k, giving
# [b, m, n], plus a bias [n]. The naive rule takes the highest-rank input x as
# the reference, keeps the mapped axes b, m in its order and pushes the unmapped n
# outside, proposing an (n, b, m) allocation for an output that the caller expects
# row-major (b, m, n), as torch.nn.functional.linear returns it.
#
# What to look at in the workbench: the allocation domain the inference pass proposes
# for the output (T8 here, T11 in the IR) against the layout it is returned in (no
# stride_order was asked for, so that is the pass's hint alone); flip allocation-order
# inference and compare the reduction kernel's output writes; and the [b, m, n, k]
# broadcast domains that the reduction is scheduled over.
# Inputs: x float32[4, 2048, 1024] = 32 MiB, w float32[8, 1024] = 32 KiB, bias float32[8].
import torch
from nvfuser import FusionDefinition, DataType
def nvfuser_fusion_id3(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False, stride_order=[2, 1, 0])
    T1 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, is_cpu=False, stride_order=[1, 0])
    T2 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float, is_cpu=False, stride_order=[0])
    T3 = fd.ops.broadcast_in_dim(T0, shape=[4, 2048, 8, 1024], broadcast_dims=[0, 1, 3])
    T4 = fd.ops.broadcast_in_dim(T1, shape=[4, 2048, 8, 1024], broadcast_dims=[2, 3])
    T5 = fd.ops.mul(T3, T4)
    T6 = fd.ops.sum(T5, dims=[3], keepdim=False, dtype=DataType.Null)
    T7 = fd.ops.broadcast_in_dim(T2, shape=[4, 2048, 8], broadcast_dims=[2])
    T8 = fd.ops.add(T6, T7)
    fd.add_output(T8)

inputs = [
    torch.randn(4, 2048, 1024, dtype=torch.float32, device="cuda"),
    torch.randn(8, 1024, dtype=torch.float32, device="cuda"),
    torch.randn(8, dtype=torch.float32, device="cuda"),
]

with FusionDefinition() as fd:
    nvfuser_fusion_id3(fd)

for _ in range(5):
    out = fd.execute(inputs)
