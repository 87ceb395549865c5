"""Printed forms of values, domains and transforms (the pre-2024-09 nvFuser era)."""

from fuser_core import DataType, FusionDefinition
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.iter_domain import IterDomain, IterType
from fuser_core.ir.printer import print_kernel, tensor_transforms
from fuser_core.ir.scalar import Scalar
from fuser_core.ir.tensor_view import TensorDomain, TensorView


def test_constants_print_as_nvfuser_prints_them():
    fusion = Fusion()
    with fusion.guard():
        assert str(Scalar(DataType.Float, 0)) == "float(0)"
        assert str(Scalar(DataType.Double, 0.5)) == "double(0.5)"
        assert str(Scalar(DataType.Double, 0.044715)) == "double(0.044714999999999998)"
        assert str(Scalar(DataType.Float, 0.1)) == "float(0.100000001)"
        assert str(Scalar(DataType.Double, float("-inf"))) == "double(-inf)"
        assert str(Scalar(DataType.Bool, True)) == "true"
        assert str(Scalar(DataType.Int, -4)) == "-4"
        # One counter numbers all scalars, the seven constants above included.
        assert str(Scalar(DataType.Index)) == "i7"
        assert str(Scalar(DataType.Double)) == "d8"
        assert str(Scalar(DataType.Bool)) == "b9"
        assert str(Scalar(DataType.Float)) == "f10"


def test_iter_domain_forms():
    fusion = Fusion()
    with fusion.guard():
        n = Scalar(DataType.Index)
        # IterDomains have their own counter; the shared 0 (every start) is scalar 1.
        assert str(IterDomain(n)) == "iS0{i0}"
        assert str(IterDomain(fusion.one_val(), iter_type=IterType.Broadcast, expanded_extent=n)) == "bS1{1 ex i0}"
        assert str(IterDomain(n, iter_type=IterType.Symbolic, is_rfactor_product=True)) == "?S2{i0}rf"
        assert str(IterDomain(n, start=Scalar(DataType.Index, 2))) == "iS3{2 : i0}"


def test_an_empty_tensor_prints_empty_brackets():
    fusion = Fusion()
    with fusion.guard():
        tv = TensorView(TensorDomain([]), DataType.Float)
        fusion.add_input(tv)
    assert str(tv) == "T0_g[ ]"


def test_scheduling_transforms_print_between_logical_and_loop():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True)
        t1 = fd.ops.exp(t0)
        fd.add_output(t1)
    tv = t1.tv
    with fd.fusion.guard():
        tv.merge(0).split(0, 128).split(0, 4, inner_split=False)
        tv.compute_at_pos = 1
    text = tensor_transforms(tv)
    assert text.splitlines() == [
        "T1_g[ iS7{4}, iS8{( ceilDiv(( ceilDiv(( i0 * i1 ), 128) ), 4) )}, iS6{128} ] ca_pos( 1 )",
        " logical domain : (iS2{i0}, iS3{i1})",
        " contiguity: t t",
        "  Merge: iS2{i0} and iS3{i1} -> iS4{( i0 * i1 )}",
        "  Split: iS4{( i0 * i1 )} by factor 128 -> iS5{( ceilDiv(( i0 * i1 ), 128) )}, iS6{128}",
        "  Outer split: iS5{( ceilDiv(( i0 * i1 ), 128) )} by factor 4 -> iS7{4}, "
        "iS8{( ceilDiv(( ceilDiv(( i0 * i1 ), 128) ), 4) )}",
        " loop domain : (iS7{4}, iS8{( ceilDiv(( ceilDiv(( i0 * i1 ), 128) ), 4) )}, iS6{128})",
    ]


def test_reorder_moves_loop_axes():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=True)
        fd.add_output(t0)
    tv = t0.tv
    tv.reorder({0: 2})
    assert [d.name for d in tv.loop] == [1, 2, 0]


def test_allocation_domain_and_contiguity_of_a_stride_ordered_input():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, 1, -1], contiguity=[True, None, False], stride_order=[0, 1, 2])
        fd.add_output(fd.ops.neg(t0))
    block = tensor_transforms(t0.tv)
    assert " allocation domain : (iS2{i2}, bS1{1}, iS0{i0})\n" in block
    assert " contiguity: t n f\n" in block


def test_kernel_print_wraps_math_and_transforms():
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.neg(fd.define_tensor(shape=[-1], contiguity=True)))
    text = print_kernel(fd.fusion)
    assert text.startswith("\n%kernel {\nT1_g[ iS1{i0} ]\n   = -T0_g[ iS0{i0} ];\n\nTransformPrinter : \nT0_g[")
    assert text.endswith(" loop domain : (iS1{i0})\n} // %kernel\n")


def test_scalar_expressions_print_inline_in_extents_and_as_lines_when_used():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=True)
        w = fd.define_scalar(None, dtype=DataType.Int)
        fd.add_output(fd.ops.pad(t0, [w, 2]))
    text = fd.fusion_ir()
    assert "i5 = (nvfuser_index_t)(i2);" in text  # 3 and 4: the pad value and the literal 2
    assert "?S2{( ( i0 + ( (nvfuser_index_t)(i2) ) ) + 2 )}rf" in text
    assert "= pad( T0_g[ iS0{i0} ], {i5, 2} )" in text
