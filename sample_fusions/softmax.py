# Attention-score softmax in bf16, as Thunder traces torch.softmax(scores * scale, dim=-1).
#
# The scores are computed in float: max over the last axis, subtract, exp, sum, divide,
# and cast back to bf16. Each reduction result is broadcast back with two
# broadcast_in_dim ops (first to [..., 1], then to the full shape), as Thunder writes it.
#
# What to look at in the workbench: a single reduction segment holding both reductions
# (its row is read again from L1/L2 rather than held in registers: `rereading` in the
# README); the heuristics chosen for a 1024-wide inner reduction over 65536 rows; bytes moved (one read and one write of 128 MiB in the ideal kernel) against
# the achieved bandwidth.
# Inputs: scores bf16[4, 16, 1024, 1024] = 128 MiB. Output: bf16, same shape.
import torch
from nvfuser import FusionDefinition, DataType
def nvfuser_fusion_id4(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1, -1, -1, -1], contiguity=[True, True, True, True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[3, 2, 1, 0])
    T1 = fd.ops.cast(T0, dtype=DataType.Float)
    S2 = fd.define_scalar(0.0883883, dtype=DataType.Double)
    T3 = fd.ops.mul(T1, S2)
    T4 = fd.ops.max(T3, dims=[3], keepdim=False, dtype=DataType.Null)
    T5 = fd.ops.broadcast_in_dim(T4, shape=[4, 16, 1024, 1], broadcast_dims=[0, 1, 2])
    T6 = fd.ops.broadcast_in_dim(T5, shape=[4, 16, 1024, 1024], broadcast_dims=[0, 1, 2, 3])
    T7 = fd.ops.sub(T3, T6)
    T8 = fd.ops.exp(T7)
    T9 = fd.ops.sum(T8, dims=[3], keepdim=False, dtype=DataType.Null)
    T10 = fd.ops.broadcast_in_dim(T9, shape=[4, 16, 1024, 1], broadcast_dims=[0, 1, 2])
    T11 = fd.ops.broadcast_in_dim(T10, shape=[4, 16, 1024, 1024], broadcast_dims=[0, 1, 2, 3])
    T12 = fd.ops.div(T8, T11)
    T13 = fd.ops.cast(T12, dtype=DataType.BFloat16)
    fd.add_output(T13)

inputs = [
    torch.randn(4, 16, 1024, 1024, dtype=torch.bfloat16, device="cuda"),
]

with FusionDefinition() as fd:
    nvfuser_fusion_id4(fd)

for _ in range(5):
    out = fd.execute(inputs)
