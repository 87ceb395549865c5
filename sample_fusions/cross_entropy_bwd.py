# Cross-entropy backward for a language-model head: d(logits) = (softmax(logits) -
# one_hot(labels)) * grad, with bf16 logits over a 32064-token vocabulary (Phi-3).
#
# The one-hot is never materialised as an input: it is built in the fusion from an
# iota over the vocabulary, compared (eq) with the broadcast int64 labels, and turned
# into 1.0/0.0 with where; this is the pattern PyTorch Inductor lowers a scatter onto a
# constant tensor to. grad is the per-token loss gradient (reduction="none").
#
# What to look at in the workbench: the iota/eq/where expressions joining the softmax in
# a single normalization segment (no [N, V] one-hot in memory); the int64 label
# broadcast; the two 32064-wide reductions per row and whether the row fits a
# persistent kernel; bytes moved (read and write 250 MiB) against the achieved bandwidth.
# Inputs: logits bf16[4096, 32064] = 250 MiB, labels int64[4096] = 32 KiB,
# grad bf16[4096] = 8 KiB. (8192 tokens would be 500 MiB of logits.)
import torch
from nvfuser import FusionDefinition, DataType
def nvfuser_fusion_id8(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[1, 0])
    T1 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Int, is_cpu=False, stride_order=[0])
    T2 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[0])
    T3 = fd.ops.cast(T0, dtype=DataType.Float)
    T4 = fd.ops.max(T3, dims=[1], keepdim=False, dtype=DataType.Null)
    T5 = fd.ops.broadcast_in_dim(T4, shape=[4096, 1], broadcast_dims=[0])
    T6 = fd.ops.broadcast_in_dim(T5, shape=[4096, 32064], broadcast_dims=[0, 1])
    T7 = fd.ops.sub(T3, T6)
    T8 = fd.ops.exp(T7)
    T9 = fd.ops.sum(T8, dims=[1], keepdim=False, dtype=DataType.Null)
    T10 = fd.ops.broadcast_in_dim(T9, shape=[4096, 1], broadcast_dims=[0])
    T11 = fd.ops.broadcast_in_dim(T10, shape=[4096, 32064], broadcast_dims=[0, 1])
    T12 = fd.ops.div(T8, T11)
    S13 = fd.define_scalar(32064, dtype=DataType.Int)
    S14 = fd.define_scalar(0, dtype=DataType.Int)
    S15 = fd.define_scalar(1, dtype=DataType.Int)
    T16 = fd.ops.iota(S13, S14, S15, dtype=DataType.Int)
    T17 = fd.ops.broadcast_in_dim(T16, shape=[4096, 32064], broadcast_dims=[1])
    T18 = fd.ops.broadcast_in_dim(T1, shape=[4096, 1], broadcast_dims=[0])
    T19 = fd.ops.broadcast_in_dim(T18, shape=[4096, 32064], broadcast_dims=[0, 1])
    T20 = fd.ops.eq(T17, T19)
    S21 = fd.define_scalar(1.00000, dtype=DataType.Float)
    S22 = fd.define_scalar(0.00000, dtype=DataType.Float)
    T23 = fd.ops.where(T20, S21, S22)
    T24 = fd.ops.sub(T12, T23)
    T25 = fd.ops.cast(T2, dtype=DataType.Float)
    T26 = fd.ops.broadcast_in_dim(T25, shape=[4096, 1], broadcast_dims=[0])
    T27 = fd.ops.broadcast_in_dim(T26, shape=[4096, 32064], broadcast_dims=[0, 1])
    T28 = fd.ops.mul(T24, T27)
    T29 = fd.ops.cast(T28, dtype=DataType.BFloat16)
    fd.add_output(T29)

inputs = [
    torch.randn(4096, 32064, dtype=torch.bfloat16, device="cuda"),
    torch.randint(0, 32064, (4096,), dtype=torch.int64, device="cuda"),
    torch.randn(4096, dtype=torch.bfloat16, device="cuda"),
]

with FusionDefinition() as fd:
    nvfuser_fusion_id8(fd)

for _ in range(5):
    out = fd.execute(inputs)
