# nvFuser issue #785, "Creating better Segmented Fusion IR Debug Output": the simplified example.
#
# A sum over the two outer axes of one input next to an unrelated pow of another. No
# single scheduler takes a reduction and an unrelated pointwise op together, so the
# fusion is split into two kernels: a reduction and a pointwise one (T8 = 0.5 * T6 is
# dead code, kept as the issue has it; it never reaches the IR).
#
# What to look at in the workbench: the pre-scheduled fusion IR with each expression
# marked by the segment it ended up in (the main ask), the segment graph with
# its two unconnected groups, and the reason the merge of the two was rejected.
# Inputs: 2 x float32[16, 512, 4096] = 2 x 128 MiB.
import torch
from nvfuser import FusionDefinition, DataType
def nvfuser_fusion_id6(fd : FusionDefinition) -> None :
    T4 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)
    T6 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)
    S7 = fd.define_scalar(0.500000, dtype=DataType.Double)
    T8 = fd.ops.mul(S7, T6)
    S9 = fd.define_scalar(3.00000, dtype=DataType.Double)
    T10 = fd.ops.pow(T6, S9)
    T19 = fd.ops.sum(T4, axes=[0, 1], keepdim=False, dtype=DataType.Null)
    fd.add_output(T19)
    fd.add_output(T10)

inputs = [
        torch.randn(16, 512, 4096, device="cuda"),
        torch.randn(16, 512, 4096, device="cuda"),
]

with FusionDefinition() as fd:
    nvfuser_fusion_id6(fd)

for _ in range(5):
        out = fd.execute(inputs)
