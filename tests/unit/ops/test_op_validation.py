"""Definition-time validation: a bad axis, rank, shape or dtype is a FuserError that
names the op, the argument and the tensor, and points at the user's line.

Lines are found by the marker comment at their end, so the tests survive edits."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from fuser_core import DataType, FuserError, FusionDefinition

THIS_FILE = Path(__file__).resolve()


def line_of(marker: str) -> int:
    """The line of this file that ends with the comment `# <marker>`."""
    lines = THIS_FILE.read_text().splitlines()
    hits = [number for number, line in enumerate(lines, 1) if line.rstrip().endswith(f"# {marker}")]
    assert len(hits) == 1, f"marker {marker!r} found {len(hits)} times"
    return hits[0]


def assert_points_at(err: FuserError, marker: str) -> None:
    assert err.location is not None
    assert Path(err.location.filename).resolve() == THIS_FILE
    assert err.location.lineno == line_of(marker)
    assert f"{THIS_FILE.name}:{line_of(marker)}" in str(err)  # the message starts with file:line
    assert err.location.line.strip() in str(err)  # and quotes the line


def tensor(fd: FusionDefinition, rank: int, dtype: DataType = DataType.Float):  # type: ignore[no-untyped-def]
    return fd.define_tensor(shape=[-1] * rank, contiguity=[True] * rank, dtype=dtype)


def static(fd: FusionDefinition, shape: list[int], dtype: DataType = DataType.Float):  # type: ignore[no-untyped-def]
    return fd.define_tensor(shape=shape, contiguity=[None if s == 1 else True for s in shape], dtype=dtype)


# -- the brief's headline case, spelled out ---------------------------------------------


def test_var_mean_axis_out_of_range_names_op_tensor_axis_and_line() -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        t0 = tensor(fd, 5)
        fd.ops.var_mean(t0, dims=[5], correction=0)  # var_mean-axis-5
    err = info.value
    assert err.op == "var_mean"
    assert err.tensor == "T0"
    assert "5" in err.message and "T0" in err.message
    assert "dims" in err.message  # the argument
    assert "5-D" in err.message
    assert_points_at(err, "var_mean-axis-5")


def test_var_mean_of_an_integer_tensor_names_the_users_tensor() -> None:
    """var_mean casts integers to Float: the error still names the input, T0."""
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        t0 = tensor(fd, 5, DataType.Int)
        fd.ops.var_mean(t0, [-6])  # var_mean-int-axis
    assert info.value.op == "var_mean"
    assert info.value.tensor == "T0"
    assert "-6" in info.value.message
    assert_points_at(info.value, "var_mean-int-axis")


def test_error_from_a_helper_points_at_the_user_line_not_the_library() -> None:
    def build(fd: FusionDefinition) -> None:
        fd.ops.sum(tensor(fd, 2), dims=[2])  # sum-in-helper

    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        build(fd)
    assert info.value.op == "sum"
    assert_points_at(info.value, "sum-in-helper")


def test_reshape_of_6_elements_into_5() -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        t0 = static(fd, [2, 3])
        fd.ops.reshape(t0, [5])  # reshape-6-into-5
    err = info.value
    assert err.op == "reshape"
    assert err.tensor == "T0"
    assert "6" in err.message and "[5]" in err.message
    assert_points_at(err, "reshape-6-into-5")


def test_reshape_with_an_impossible_wildcard() -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        t0 = static(fd, [2, 3])
        fd.ops.reshape(t0, [4, -1])  # reshape-wildcard
    assert info.value.op == "reshape"
    assert info.value.tensor == "T0"
    assert "-1" in info.value.message
    assert_points_at(info.value, "reshape-wildcard")


def test_permute_with_a_non_permutation() -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        t0 = tensor(fd, 3)
        fd.ops.permute(t0, [0, 0, 1])  # permute-repeat
    err = info.value
    assert err.op == "permute"
    assert err.tensor == "T0"
    assert "[0, 0, 1]" in err.message and "permutation" in err.message
    assert_points_at(err, "permute-repeat")


def test_broadcast_in_dim_with_a_bad_size() -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        t0 = static(fd, [2, 3])
        fd.ops.broadcast_in_dim(t0, [2, 4], [0, 1])  # bid-size
    err = info.value
    assert err.op == "broadcast_in_dim"
    assert err.tensor == "T0"
    assert "3" in err.message and "4" in err.message and "axis 1" in err.message
    assert_points_at(err, "bid-size")


def test_cat_of_mismatched_dtypes() -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        t0 = tensor(fd, 2)
        t1 = tensor(fd, 2, DataType.Half)
        fd.ops.cat([t0, t1], 0)  # cat-dtypes
    err = info.value
    assert err.op == "cat"
    assert "DataType.Float" in err.message and "DataType.Half" in err.message
    assert "T0" in err.message and "T1" in err.message
    assert_points_at(err, "cat-dtypes")


def test_slice_with_step_2() -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        t0 = tensor(fd, 2)
        fd.ops.slice(t0, [0, 0], [4, 6], [1, 2])  # slice-step
    err = info.value
    assert err.op == "slice"
    assert err.tensor == "T0"
    assert "strides must be of size 1" in err.message and "Strides: [1, 2]" in err.message
    assert_points_at(err, "slice-step")


def test_pad_with_an_odd_number_of_widths() -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        t0 = tensor(fd, 2)
        fd.ops.pad(t0, [1, 1, 1])  # pad-odd
    err = info.value
    assert err.op == "pad"
    assert err.tensor == "T0"
    assert "even" in err.message and "3" in err.message
    assert_points_at(err, "pad-odd")


# -- more bad axes, ranks and shapes ----------------------------------------------------

BAD_DEFINITIONS: list[tuple[str, Callable, str, list[str]]] = [
    ("sum-axis", lambda fd: fd.ops.sum(tensor(fd, 2), dims=[2]), "sum", ["dims 2", "2-D"]),
    ("sum-neg-axis", lambda fd: fd.ops.sum(tensor(fd, 2), [-3]), "sum", ["-3"]),
    ("sum-twice", lambda fd: fd.ops.sum(tensor(fd, 3), dims=[1, -2]), "sum", ["twice"]),
    ("max-axes", lambda fd: fd.ops.max(tensor(fd, 1), axes=[1]), "max", ["1"]),
    ("var-axis", lambda fd: fd.ops.var(tensor(fd, 3), [3]), "var", ["3"]),
    ("var_mean-neg", lambda fd: fd.ops.var_mean(tensor(fd, 2), [0], -1), "var_mean", ["correction", "-1"]),
    ("two-wildcards", lambda fd: fd.ops.reshape(static(fd, [2, 3]), [-1, -1]), "reshape", ["-1"]),
    ("permute-short", lambda fd: fd.ops.permute(tensor(fd, 3), [1, 0]), "permute", ["[1, 0]"]),
    ("permute-range", lambda fd: fd.ops.permute(tensor(fd, 3), [0, 1, 3]), "permute", ["3"]),
    ("bid-dims", lambda fd: fd.ops.broadcast_in_dim(tensor(fd, 2), [2, 3, 4], [0]), "broadcast_in_dim", ["[0]"]),
    ("bid-order", lambda fd: fd.ops.broadcast_in_dim(tensor(fd, 2), [2, 3, 4], [2, 0]), "broadcast_in_dim", ["[2, 0]"]),
    ("bid-rank", lambda fd: fd.ops.broadcast_in_dim(tensor(fd, 3), [2, 3], [0, 1, 2]), "broadcast_in_dim", ["rank"]),
    ("broadcast", lambda fd: fd.ops.broadcast(tensor(fd, 2), [True, False]), "broadcast", ["T0"]),
    ("squeeze", lambda fd: fd.ops.squeeze(static(fd, [4, 6]), [1]), "squeeze", ["size 6"]),
    ("squeeze-axis", lambda fd: fd.ops.squeeze(static(fd, [4, 1]), [2]), "squeeze", ["2"]),
    ("expand", lambda fd: fd.ops.expand(static(fd, [4, 6]), [4, 5]), "expand", ["6", "5"]),
    ("expand-rank", lambda fd: fd.ops.expand(static(fd, [4, 6]), [6]), "expand", ["fewer"]),
    ("add-shapes", lambda fd: static(fd, [4, 6]) + static(fd, [4, 5]), "add", ["6", "5"]),
    ("cat-sizes", lambda fd: fd.ops.cat([static(fd, [2, 3]), static(fd, [2, 4])], 0), "cat", ["3", "4"]),
    ("cat-rank", lambda fd: fd.ops.cat([tensor(fd, 2), tensor(fd, 1)]), "cat", ["axes"]),
    ("cat-dim", lambda fd: fd.ops.cat([tensor(fd, 2), tensor(fd, 2)], 2), "cat", ["2"]),
    (
        "slice-stop",
        lambda fd: fd.ops.slice(static(fd, [4, 6]), [0, 0], [4, 7], manual_normalization=True),
        "slice",
        ["7"],
    ),
    ("slice-rank", lambda fd: fd.ops.slice(tensor(fd, 2), [0], [4]), "slice", ["Tensor-dims: 2 Slice-dims: 1"]),
    ("pad-many", lambda fd: fd.ops.pad(tensor(fd, 2), [1, 1, 1, 1, 1, 1]), "pad", ["6"]),
    ("pad-float", lambda fd: fd.ops.pad(tensor(fd, 2), [1.0, 1.0]), "pad", ["integers"]),
    ("slice-float", lambda fd: fd.ops.slice(tensor(fd, 2), [0.5, 0], [2, 3]), "slice", ["start_indices", "integers"]),
    ("reshape-float", lambda fd: fd.ops.reshape(static(fd, [2, 2]), [2.0, 2]), "reshape", ["new_shape", "integers"]),
    ("full-float", lambda fd: fd.ops.full([2.5, 2], 1.0, DataType.Float), "full", ["shape", "integers"]),
    ("expand-negative", lambda fd: fd.ops.expand(static(fd, [1, 4]), [-3, -1]), "expand", ["-3"]),
    ("pad-below-zero", lambda fd: fd.ops.pad(static(fd, [4, 6]), [-4, -3]), "pad", ["size -1", "axis 1"]),
    ("size", lambda fd: fd.ops.size(tensor(fd, 2), 2), "size", ["dim 2"]),
    ("where", lambda fd: fd.ops.where(tensor(fd, 1), 1.0, 0.0), "where", ["Bool"]),
    ("unsupported", lambda fd: fd.ops.scaled_mm(tensor(fd, 1), 2, 0), "scaled_mm", ["not supported"]),
]


@pytest.mark.parametrize(
    ("marker", "build", "op", "fragments"), BAD_DEFINITIONS, ids=[case[0] for case in BAD_DEFINITIONS]
)
def test_bad_definitions_are_user_errors(marker: str, build: Callable, op: str, fragments: list[str]) -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        build(fd)
    err = info.value
    assert err.op == op
    for fragment in fragments:
        assert fragment in err.message, (fragment, err.message)
    assert err.location is not None  # the line of the lambda that made the call
    assert Path(err.location.filename).resolve() == THIS_FILE


def test_define_tensor_validates_its_arguments() -> None:
    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        fd.define_tensor(shape=[-1, -1], contiguity=[True])  # contiguity-length
    assert info.value.op == "define_tensor"
    assert "contiguity" in info.value.message
    assert_points_at(info.value, "contiguity-length")

    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        fd.define_tensor(shape=[-1, -1], contiguity=[True, True], stride_order=[0, 0])
    assert "stride_order" in info.value.message

    with pytest.raises(FuserError) as info, FusionDefinition() as fd:
        fd.define_tensor(shape=[1, -1], contiguity=[True, True])
    assert "size 1" in info.value.message


def test_nothing_can_be_added_after_the_definition() -> None:
    with FusionDefinition() as fd:
        t0 = tensor(fd, 1)
        fd.add_output(t0)
    with pytest.raises(FuserError) as info:
        fd.ops.exp(t0)  # after-definition
    assert info.value.op == "exp"
    assert "complete" in info.value.message
    assert_points_at(info.value, "after-definition")
