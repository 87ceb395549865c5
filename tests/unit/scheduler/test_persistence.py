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


def test_row_sums_of_a_flattened_batch_reshaped_back_onto_the_batch_are_persistent():
    # layer norm's shape: [B, T, C] flattened to [B * T, C] and summed over C, the sums
    # reshaped back to [B, T] and subtracted along the input's C: the rows split back into
    # B and T, which never reach C
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=True, dtype=DataType.Float)
        sums = fd.ops.reshape(fd.ops.sum(fd.ops.reshape(t0, new_shape=[8 * 4, 64]), dims=[1]), new_shape=[8, 4])
        fd.add_output(fd.ops.sub(t0, fd.ops.broadcast_in_dim(sums, shape=[8, 4, 64], broadcast_dims=[0, 1])))
    assert schedulers(fd, np.ones((8, 4, 64), np.float32)) == ["inner_persistent"]


def test_row_sums_reshaped_and_back_onto_their_rows_are_persistent():
    # the sums of 6 rows reshaped to [2, 3] and back to [6], then broadcast along the
    # rows' own columns: each row reads its own sum again
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        sums = fd.ops.reshape(fd.ops.reshape(fd.ops.sum(t0, dims=[1]), new_shape=[2, 3]), new_shape=[6])
        fd.add_output(fd.ops.add(t0, fd.ops.broadcast_in_dim(sums, shape=[6, 8], broadcast_dims=[0])))
    assert schedulers(fd, np.ones((6, 8), np.float32)) == ["inner_persistent"]
