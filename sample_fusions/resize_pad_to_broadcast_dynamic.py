# nvFuser PR #2835 "Concretize resize": the test ResizePadToBroadcastDynamic as a script.
#
# T0 is padded by eight runtime Int scalars (innermost axis first, as torch pads):
#   axis 4: (0, -1)  trims the last element   6 -> 5
#   axis 3: (0, -4)  keeps only the first     5 -> 1  (becomes a Broadcast)
#   axis 2: (1,  1)  pads a zero on each side 2 -> 4
#   axis 1: (-1, -1) keeps only the middle    3 -> 1  (becomes a Broadcast)
#   axis 0: not padded (only 8 widths for a 5-D tensor)
# and multiplied by T1 [N, 4, 4, 3, 5], so the two size-1 axes are broadcast against
# T1's 4 and 3. Until the inputs are known, T2's resized axes are Symbolic.
#
# What to look at in the workbench: the concretized fusion and its TransformPrinter
# block (FUSER_DUMP=fusion_ir_concretized). With the default options the resized
# extents become static (`Resize: iS..{3}rf by -1 and -1 -> bS..{1}rf`) and only axis 0
# stays dynamic; with `_disable_options=["concretize_resize_extents"]` (or
# FUSER_DISABLE=concretize_resize_extents) only the IterTypes are concretized and the
# extents stay symbolic. Then change a pad width (axis 2 to (2, 2), T1 to [N, 4, 6, 3, 5])
# and re-run: a cache miss with the option on, a hit with it off (FUSER_DUMP=cache_events).
# Inputs: T0 float32[65536, 3, 2, 5, 6] = 45 MiB, T1 float32[65536, 4, 4, 3, 5] = 60 MiB.
import torch
from nvfuser import FusionDefinition, DataType
def nvfuser_fusion_id0(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1, -1, -1, -1, -1], contiguity=[False, False, False, False, False], dtype=DataType.Float, is_cpu=False, stride_order=[4, 3, 2, 1, 0])
    T1 = fd.define_tensor(shape=[-1, -1, -1, -1, -1], contiguity=[False, False, False, False, False], dtype=DataType.Float, is_cpu=False, stride_order=[4, 3, 2, 1, 0])
    S2 = fd.define_scalar(None, dtype=DataType.Int)
    S3 = fd.define_scalar(None, dtype=DataType.Int)
    S4 = fd.define_scalar(None, dtype=DataType.Int)
    S5 = fd.define_scalar(None, dtype=DataType.Int)
    S6 = fd.define_scalar(None, dtype=DataType.Int)
    S7 = fd.define_scalar(None, dtype=DataType.Int)
    S8 = fd.define_scalar(None, dtype=DataType.Int)
    S9 = fd.define_scalar(None, dtype=DataType.Int)
    T10 = fd.ops.pad(T0, [S2, S3, S4, S5, S6, S7, S8, S9], None)
    T11 = fd.ops.mul(T1, T10)
    fd.add_output(T11)

inputs = [
    torch.randn(65536, 3, 2, 5, 6, dtype=torch.float32, device="cuda"),
    torch.randn(65536, 4, 4, 3, 5, dtype=torch.float32, device="cuda"),
    0, -1,    # axis 4: trim the last element
    0, -4,    # axis 3: pad to a broadcast of the first element
    1, 1,     # axis 2: pad with zeros on either side
    -1, -1,   # axis 1: pad to a broadcast of the second element
]

with FusionDefinition() as fd:
    nvfuser_fusion_id0(fd)

for _ in range(5):
    out = fd.execute(inputs)
