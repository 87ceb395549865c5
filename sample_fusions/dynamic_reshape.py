# A reshape whose shape is only known at run time (nvFuser PR #215, "Support dynamic
# reshapes in FusionExecutorCache"): per-head RMS normalisation of a [B, T, C]
# activation, as in QK-norm.
#
# The new shape [B, T, n_head, -1] is made of the input's own sizes (fd.ops.size), a
# runtime Int scalar (n_head) and -1; the head size is inferred. The reshape output and
# everything downstream of it is Symbolic until the inputs are known. Two outputs: the
# normalised heads transposed to [B, n_head, T, head_size], as attention takes them,
# and the per-head rstd [B, T, n_head, 1].
#
# What to look at in the workbench: the Symbolic IterDomains of the original fusion and
# the splits/merges they concretize to (FUSER_DUMP=fusion_ir_concretized); the cache:
# re-run with n_head=32 (a different split: a concretization miss), then with a
# different B and the same n_head (the same transforms: the concretization is reused),
# as FUSER_DUMP=cache_events reports; and the inferred head-size extent
# (numel / (B * T * n_head)), which the mean's divisor is taken from.
# Inputs: x float32[8, 2048, 2048] = 128 MiB, n_head = 16 (head size 128).
import torch
from nvfuser import FusionDefinition, DataType
def nvfuser_fusion_id2(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False, stride_order=[2, 1, 0])
    S1 = fd.define_scalar(None, dtype=DataType.Int)
    S2 = fd.ops.size(T0, 0)
    S3 = fd.ops.size(T0, 1)
    S4 = fd.define_scalar(-1, dtype=DataType.Int)
    T5 = fd.ops.reshape(T0, new_shape=[S2, S3, S1, S4])
    T6 = fd.ops.mul(T5, T5)
    T7 = fd.ops.sum(T6, dims=[3], keepdim=True, dtype=DataType.Null)
    S8 = fd.ops.size(T5, 3)
    T9 = fd.ops.div(T7, S8)
    S10 = fd.define_scalar(1.00000e-06, dtype=DataType.Double)
    T11 = fd.ops.add(T9, S10)
    T12 = fd.ops.rsqrt(T11)
    T13 = fd.ops.mul(T5, T12)
    T14 = fd.ops.permute(T13, dims=[0, 2, 1, 3])
    fd.add_output(T14)
    fd.add_output(T12)

inputs = [
    torch.randn(8, 2048, 2048, dtype=torch.float32, device="cuda"),
    16,
]

with FusionDefinition() as fd:
    nvfuser_fusion_id2(fd)

for _ in range(5):
    out = fd.execute(inputs)
