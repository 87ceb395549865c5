"""Whether a reduction needs persistence, seen through reshapes: a tensor after the
reduction that iterates an axis the reduced one was reshaped from or into reads the
reduced elements again; the other half of a reshape's split does not."""

from __future__ import annotations

import numpy as np

from fuser_core import DataType, FusionDefinition, use_options


def schedulers(fd: FusionDefinition, x: np.ndarray) -> list[str]:
    with use_options(device_model="h100_sxm", backend="reference"):
        runtime = fd.runtime_for([x])
    return [g.scheduler.value for g in runtime.segmented.groups]


def test_a_mean_over_a_flattened_input_added_back_to_the_input_is_persistent():
    # the add iterates i0 and i1, which the reshape merged into the reduced axis
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        total = fd.ops.sum(fd.ops.reshape(t0, new_shape=[16 * 64]), dims=[0])
        fd.add_output(fd.ops.add(t0, fd.ops.broadcast_in_dim(total, shape=[16, 64], broadcast_dims=[])))
    assert schedulers(fd, np.ones((16, 64), np.float32)) == ["inner_persistent"]


def test_a_flat_input_broadcast_a_row_sum_of_its_reshape_is_persistent():
    # the sums over the inner half of [1024] -> [16, 64], reshaped back onto the flat axis
    # the reduced axis was split from
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        sums = fd.ops.sum(fd.ops.reshape(t0, new_shape=[16, 64]), dims=[1])
        wide = fd.ops.broadcast_in_dim(sums, shape=[16, 64], broadcast_dims=[0])
        fd.add_output(fd.ops.add(t0, fd.ops.reshape(wide, new_shape=[1024])))
    assert schedulers(fd, np.ones(1024, np.float32)) == ["inner_persistent"]


def test_the_other_half_of_a_reshape_split_is_not_read_again():
    # row sums of [1024] -> [16, 64], scaled: the scale iterates the 16 rows, which share
    # no element with the 64 reduced columns, so a plain reduction computes it
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        sums = fd.ops.sum(fd.ops.reshape(t0, new_shape=[16, 64]), dims=[1])
        fd.add_output(fd.ops.mul(sums, sums))
    assert schedulers(fd, np.ones(1024, np.float32)) == ["reduction"]
