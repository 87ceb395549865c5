# Mixed memory layouts: a transposed (column-major) input, a row-major one, and
# output layouts the user requires with stride_order, one of them after a permute.
#
# x is a [4096, 8192] view of a row-major [8192, 4096] tensor (x.t(), strides [1, 4096]),
# declared with stride_order=[0, 1]; y is a row-major [4096, 8192]. Outputs:
#   T2 = x + y, required column-major like x: fd.add_output(T2, stride_order=[0, 1]);
#   T4 = relu(permute(y, [1, 0])), required row-major: fd.add_output(T4, stride_order=[1, 0]).
# Both requirements make a real transpose of y: y is read column by column. Without the
# second stride_order, allocation-order inference could give T4 y's own layout and
# make it a plain copy; with it, the layout is a user requirement that no pass may
# drop (nvFuser issue #2425 keeps such requirements apart from inferred hints).
#
# What to look at in the workbench: the input signature (the stride order of each
# input is part of the cache key; passing x.contiguous() instead is rejected, naming
# the input, since the definition declares x column-major); the allocation domains of
# T2 and T4 and the strides of the returned arrays; the permute's root and logical
# domains; which scheduler takes the segment and how it tiles the transposed accesses.
# Inputs: x float32[4096, 8192] (column-major) = 128 MiB, y float32[4096, 8192] = 128 MiB.
import torch
from nvfuser import FusionDefinition, DataType
def nvfuser_fusion_id11(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, is_cpu=False, stride_order=[0, 1])
    T1 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float, is_cpu=False, stride_order=[1, 0])
    T2 = fd.ops.add(T0, T1)
    T3 = fd.ops.permute(T1, dims=[1, 0])
    T4 = fd.ops.relu(T3)
    fd.add_output(T2, stride_order=[0, 1])
    fd.add_output(T4, stride_order=[1, 0])

inputs = [
    torch.randn(8192, 4096, dtype=torch.float32, device="cuda").t(),
    torch.randn(4096, 8192, dtype=torch.float32, device="cuda"),
]

with FusionDefinition() as fd:
    nvfuser_fusion_id11(fd)

for _ in range(5):
    out = fd.execute(inputs)
