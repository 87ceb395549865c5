# var_mean with keepdim=True and an unbiased correction, used directly for an
# instance-norm style normalisation: z = (x - mean) * rsqrt(var + eps).
#
# fd.ops.var_mean(x, dims=[2], correction=1, keepdim=True) returns [B, C, 1] results
# whose last axis is a Broadcast, so they combine with x with no broadcast_in_dim. All
# sizes are symbolic (no literal shapes), so any [B, C, L] input runs.
#
# What to look at in the workbench: the Welford expression (Avg/Var/Count) and the
# correction's divisor `max(L - 1, 0)` as scalar IR; the keepdim broadcast axes (bS{1})
# of the var and mean outputs; one normalization segment with three outputs.
# Inputs: x float32[32, 256, 4096] = 128 MiB.
import torch
from nvfuser import FusionDefinition, DataType
def nvfuser_fusion_id9(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False, stride_order=[2, 1, 0])
    T1, T2 = fd.ops.var_mean(T0, dims=[2], correction=1, keepdim=True)
    T3 = fd.ops.sub(T0, T2)
    S4 = fd.define_scalar(1.00000e-05, dtype=DataType.Double)
    T5 = fd.ops.add(T1, S4)
    T6 = fd.ops.rsqrt(T5)
    T7 = fd.ops.mul(T3, T6)
    fd.add_output(T1)
    fd.add_output(T2)
    fd.add_output(T7)

inputs = [
    torch.randn(32, 256, 4096, dtype=torch.float32, device="cuda"),
]

with FusionDefinition() as fd:
    nvfuser_fusion_id9(fd)

for _ in range(5):
    out = fd.execute(inputs)
