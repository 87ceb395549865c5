# Bias + GeLU (tanh approximation) forward in bf16: the MLP activation of GPT-2 style
# models, gelu(x + bias, approximate="tanh") = 0.5 * y * (1 + tanh(0.797885 * (y + 0.044715 * y^3))).
#
# A purely pointwise fusion with one broadcast input (the bias), so it is the baseline
# for a single pointwise kernel: compare its achieved bandwidth with the memory-bound
# ideal (read 128 MiB, write 128 MiB), and the forward half of issue785_gelu_bias_bwd.py.
#
# What to look at in the workbench: one pointwise segment; the vectorization factor and
# the unroll chosen for bf16 rows of 16384; the bias broadcast in the loop nest and how
# often each bias element is loaded; the bf16<->float casts in the CUDA.
# Inputs: x bf16[4096, 16384] = 128 MiB, bias bf16[16384] = 32 KiB.
import torch
from nvfuser import FusionDefinition, DataType
def nvfuser_fusion_id10(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[1, 0])
    T1 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.BFloat16, is_cpu=False, stride_order=[0])
    T2 = fd.ops.cast(T0, dtype=DataType.Float)
    T3 = fd.ops.broadcast_in_dim(T1, shape=[4096, 16384], broadcast_dims=[1])
    T4 = fd.ops.cast(T3, dtype=DataType.Float)
    T5 = fd.ops.add(T2, T4)
    S6 = fd.define_scalar(0.500000, dtype=DataType.Double)
    T7 = fd.ops.mul(T5, S6)
    T8 = fd.ops.mul(T5, T5)
    T9 = fd.ops.mul(T8, T5)
    S10 = fd.define_scalar(0.0447150, dtype=DataType.Double)
    T11 = fd.ops.mul(T9, S10)
    T12 = fd.ops.add(T5, T11)
    S13 = fd.define_scalar(0.797885, dtype=DataType.Double)
    T14 = fd.ops.mul(T12, S13)
    T15 = fd.ops.tanh(T14)
    S16 = fd.define_scalar(1.00000, dtype=DataType.Double)
    T17 = fd.ops.add(T15, S16)
    T18 = fd.ops.mul(T7, T17)
    T19 = fd.ops.cast(T18, dtype=DataType.BFloat16)
    fd.add_output(T19)

inputs = [
    torch.randn(4096, 16384, dtype=torch.bfloat16, device="cuda"),
    torch.randn(16384, dtype=torch.bfloat16, device="cuda"),
]

with FusionDefinition() as fd:
    nvfuser_fusion_id10(fd)

for _ in range(5):
    out = fd.execute(inputs)
