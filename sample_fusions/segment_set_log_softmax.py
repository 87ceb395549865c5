# A kernel boundary forced by the user: fd.ops.segment_set between a pointwise
# prologue and a log_softmax.
#
# Without T4 = segment_set(T3) the temperature scaling would fuse into the log_softmax
# kernel (compare softmax.py). segment_set is a plain copy that the segmenter must cut
# at, so the scaled logits are written to global memory by a pointwise kernel and read
# back by the normalization kernel.
#
# What to look at in the workbench: two segments, with the cut at the segment_set
# marked in the pre-scheduled IR and its reason given as the user's segment_set rather
# than a scheduler's refusal; the float32 scaled logits (T4 here) crossing the cut
# (256 MiB written and read again); the extra bytes moved against softmax.py's single
# kernel.
# Inputs: logits bf16[4096, 16384] = 128 MiB. Output: bf16 log-probabilities, same shape.
import torch
from nvfuser import FusionDefinition, DataType
def nvfuser_fusion_id12(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[1, 0])
    T1 = fd.ops.cast(T0, dtype=DataType.Float)
    S2 = fd.define_scalar(1.42857, dtype=DataType.Double)
    T3 = fd.ops.mul(T1, S2)
    T4 = fd.ops.segment_set(T3)
    T5 = fd.ops.max(T4, dims=[1], keepdim=False, dtype=DataType.Null)
    T6 = fd.ops.broadcast_in_dim(T5, shape=[4096, 1], broadcast_dims=[0])
    T7 = fd.ops.broadcast_in_dim(T6, shape=[4096, 16384], broadcast_dims=[0, 1])
    T8 = fd.ops.sub(T4, T7)
    T9 = fd.ops.exp(T8)
    T10 = fd.ops.sum(T9, dims=[1], keepdim=False, dtype=DataType.Null)
    T11 = fd.ops.broadcast_in_dim(T10, shape=[4096, 1], broadcast_dims=[0])
    T12 = fd.ops.log(T11)
    T13 = fd.ops.broadcast_in_dim(T12, shape=[4096, 16384], broadcast_dims=[0, 1])
    T14 = fd.ops.sub(T8, T13)
    T15 = fd.ops.cast(T14, dtype=DataType.BFloat16)
    fd.add_output(T15)

inputs = [
    torch.randn(4096, 16384, dtype=torch.bfloat16, device="cuda"),
]

with FusionDefinition() as fd:
    nvfuser_fusion_id12(fd)

for _ in range(5):
    out = fd.execute(inputs)
