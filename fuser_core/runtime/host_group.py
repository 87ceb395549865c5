"""A segment group with no generated kernel (an expr_eval or no_op group, or one codegen
refuses), run by the cuda backend between its kernels.

A matmul or linear group calls a library on the device (`device_library`); any other
runs its math on the host with the reference backend: its inputs are copied from the
device, its outputs back to it. That is slow but never wrong, and the run's launch
records and compile events say where each group ran.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fuser_core.ir.dtype import DataType
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.tensor_view import TensorView
from fuser_core.runtime.device_arrays import to_device_array, to_host_array
from fuser_core.runtime.device_library import device_path, run_on_device
from fuser_core.runtime.reference import bind_leaves, evaluate_fusion, expanded_axes
from fuser_core.segmenter.segmented_fusion import SegmentedGroup


class HostGroup:
    """A group with no generated kernel: its math on the host, with the reference backend."""

    def __init__(self, group: SegmentedGroup, complete: Fusion) -> None:
        self.group = group
        assert group.unscheduled is not None
        self.fusion = group.unscheduled
        self.complete = complete
        self.device_path = device_path(self.fusion)  # matmul/linear: on the device, not the host

    def run(self, tensors: dict[int, Any], leaves: dict[int, Any], cupy: Any, dtypes: dict[int, DataType]) -> None:
        if self.device_path is not None:
            run_on_device(self.fusion, self.device_path, tensors, cupy, leaves)
            return
        ev = bind_leaves(self.fusion, leaves)
        for val in self.fusion.inputs:
            if isinstance(val, TensorView):
                ev.bind(val, to_host_array(tensors[val.name], val.dtype))
        results = evaluate_fusion(self.fusion, ev)
        for out, value in zip(self.fusion.outputs, results, strict=True):
            if isinstance(out, TensorView):
                # An expanded axis keeps stride 0 on the device: a kernel reads it so.
                tensors[out.name] = to_device_array(cupy, np.asarray(value), out.dtype, expanded_axes(out))
