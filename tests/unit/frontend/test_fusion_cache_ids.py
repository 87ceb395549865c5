"""FusionCache: definitions are cached by structure, so the same ops on the same input
signatures share one id and one executor (a second identical definition compiles
nothing); ids count up from 0 and restart on reset(); serialize/deserialize rebuild
definitions with their ids; FusionDefinition(id) is executable at once; kernel names
carry the real id."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition
from fuser_core.frontend.fusion_cache import FusionCache


def exp_sum(dtype: DataType = DataType.Float, contiguity=(True, True)) -> FusionDefinition:
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=list(contiguity), dtype=dtype)
        t1 = fd.ops.exp(fd.ops.cast(t0, DataType.Float))
        fd.add_output(fd.ops.sum(t1, dims=[1]))
    return fd


def scaled(factor: float) -> FusionDefinition:
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=[True])
        fd.add_output(fd.ops.mul(t0, fd.define_scalar(factor)))
    return fd


@pytest.fixture
def rng():
    return np.random.default_rng(20240611)


def test_get_returns_one_cache_and_reset_starts_ids_again_at_zero():
    cache = FusionCache.get()
    assert FusionCache.get() is cache and cache.num_fusions() == 0
    assert [exp_sum().id(), scaled(2.0).id(), scaled(3.0).id()] == [0, 1, 2]
    assert cache.num_fusions() == 3
    FusionCache.reset()
    fresh = FusionCache.get()
    assert fresh is not cache and fresh.num_fusions() == 0
    assert scaled(3.0).id() == 0


def test_an_incomplete_definition_has_no_id_and_is_not_in_the_cache():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=[True])
        assert fd.id() is None
        fd.add_output(fd.ops.neg(t0))
    assert fd.id() == 0 and FusionCache.get().num_fusions() == 1


def test_the_same_ops_on_the_same_signature_share_the_id_and_the_executor_and_compile_nothing(rng):
    first = exp_sum()
    x = rng.standard_normal((6, 10)).astype(np.float32)
    np.testing.assert_allclose(first.execute([x])[0], np.exp(x).sum(axis=1), rtol=1e-5)
    executor = first.executor_cache
    assert executor is not None and len(executor.runtimes) == 1

    second = exp_sum()
    assert second.id() == first.id() == 0
    assert FusionCache.get().num_fusions() == 1 and FusionCache.get().hits == 1
    assert second.executor_cache is executor
    y = rng.standard_normal((6, 10)).astype(np.float32)
    np.testing.assert_allclose(second.execute([y])[0], np.exp(y).sum(axis=1), rtol=1e-5)
    assert [e.hit for e in executor.events] == [False, True]
    assert executor.events[-1].runtime == executor.events[0].runtime == "f0_c1_r0"
    assert len(executor.runtimes) == 1
    assert executor.last_report.compiles == ()


@pytest.mark.parametrize(
    "other",
    [
        lambda: exp_sum(dtype=DataType.Half),  # another input dtype
        lambda: exp_sum(contiguity=(False, True)),  # another contiguity
        lambda: scaled(2.0),  # other ops
    ],
    ids=["dtype", "contiguity", "ops"],
)
def test_a_different_definition_gets_its_own_id_and_executor(other, rng):
    base = exp_sum()
    base.execute([rng.standard_normal((3, 4)).astype(np.float32)])
    fd = other()
    assert fd.id() == 1 and FusionCache.get().num_fusions() == 2
    assert fd.executor_cache is None  # nothing ran it yet: it shares nothing with base


def test_constants_are_part_of_the_structure(rng):
    two, three, two_again = scaled(2.0), scaled(3.0), scaled(2.0)
    assert (two.id(), three.id(), two_again.id()) == (0, 1, 0)
    x = rng.standard_normal(7).astype(np.float32)
    np.testing.assert_allclose(three.execute([x])[0], x * 3.0)
    np.testing.assert_allclose(two_again.execute([x])[0], x * 2.0)


def test_kernel_names_carry_the_fusion_id(rng):
    for factor in (1.5, 2.5, 3.5):
        fd = scaled(factor)
    assert fd.id() == 2
    x = rng.standard_normal(33).astype(np.float32)
    fd.execute([x], profile=True)
    assert [k.name for k in fd.profile().kernel_profiles] == ["nvfuser_pointwise_f2_c1_r0_g0"]
    assert "__global__ void nvfuser_pointwise_f2_c1_r0_g0(" in fd.last_cuda_code()


def test_serialize_then_deserialize_rebuilds_every_definition_with_its_id(tmp_path, rng):
    defs = [exp_sum(), scaled(2.0), scaled(float("inf"))]
    printed = [repr(fd) for fd in defs]
    irs = [fd.fusion_ir() for fd in defs]
    path = tmp_path / "fusion_cache.json"
    FusionCache.get().serialize(path)
    data = json.loads(path.read_text())
    assert data["format"] == "fuser-workbench-fusion-cache" and [f["id"] for f in data["fusions"]] == [0, 1, 2]

    FusionCache.reset()
    cache = FusionCache.get()
    cache.deserialize(path)
    assert cache.num_fusions() == 3
    rebuilt = [FusionDefinition(i) for i in range(3)]
    assert [repr(fd) for fd in rebuilt] == printed
    assert [fd.fusion_ir() for fd in rebuilt] == irs
    assert [fd.id() for fd in rebuilt] == [0, 1, 2]
    x = rng.standard_normal(5).astype(np.float32)
    np.testing.assert_allclose(rebuilt[1].execute([x])[0], x * 2.0)
    # a definition made again after deserializing finds the deserialized entry
    assert scaled(2.0).id() == 1 and exp_sum().id() == 0 and cache.num_fusions() == 3


class UserScheduledScale(FusionDefinition):
    def definition(self) -> None:
        t0 = self.define_tensor(shape=[-1], contiguity=[True])
        self.add_output(self.ops.mul(t0, self.define_scalar(2.0)))

    def schedule(self) -> None:
        pass


def test_a_user_scheduled_definition_keeps_its_own_entry_and_scheduler_through_serialization(tmp_path, rng):
    x = rng.standard_normal(11).astype(np.float32)
    plain, user = scaled(2.0), UserScheduledScale()
    user.execute([x])
    assert (plain.id(), user.id()) == (0, 1)
    path = tmp_path / "fusion_cache.json"
    FusionCache.get().serialize(path)
    FusionCache.reset()
    FusionCache.get().deserialize(path)

    rebuilt = FusionDefinition(1)
    np.testing.assert_allclose(rebuilt.execute([x], profile=True)[0], x * 2.0)
    assert [k.scheduler for k in rebuilt.profile().kernel_profiles] == ["user"]
    again = UserScheduledScale()
    again.execute([x])
    assert again.id() == 1 and again.executor_cache is rebuilt.executor_cache and scaled(2.0).id() == 0
    assert FusionCache.get().num_fusions() == 2


def test_deserialize_needs_an_empty_cache_and_a_file_of_ours(tmp_path):
    scaled(2.0)
    path = tmp_path / "c.json"
    FusionCache.get().serialize(path)
    with pytest.raises(FuserError, match=r"needs an empty cache: call FusionCache.reset\(\) first"):
        FusionCache.get().deserialize(path)
    FusionCache.reset()
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(FuserError, match="is not a serialized FusionCache of fuser-workbench"):
        FusionCache.get().deserialize(foreign)
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({"format": "fuser-workbench-fusion-cache", "version": 99, "fusions": []}))
    with pytest.raises(FuserError, match="written by a newer fuser-workbench"):
        FusionCache.get().deserialize(newer)


def test_fusion_definition_of_an_id_is_executable_at_once_and_cannot_be_redefined(rng):
    original = exp_sum()
    x = rng.standard_normal((4, 9)).astype(np.float32)
    expected = original.execute([x])[0]
    again = FusionDefinition(0)
    assert again.id() == 0 and repr(again) == repr(original)
    np.testing.assert_allclose(again.execute([x])[0], expected)
    assert again.executor_cache is original.executor_cache
    assert [e.hit for e in again.executor_cache.events] == [False, True]
    with pytest.raises(FuserError, match=r"FusionDefinition\(0\) is a fusion from the FusionCache"), again:
        pass
    with pytest.raises(FuserError, match=r"fusion id 3 is not in the FusionCache \(1 fusions\)"):
        FusionDefinition(3)


def test_adding_to_a_completed_definition_is_refused():
    fd = scaled(2.0)
    with pytest.raises(FuserError, match="Attempting to add to a completed definition!"):
        fd.define_tensor(shape=[-1], contiguity=[True])
