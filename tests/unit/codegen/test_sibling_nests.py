"""Adjacent loop nests merged into one (`merge_sibling_nests`): which merge, which do not
and why, on hand-built kernel IR; and the layer-norm-backward kernel whose row steps now
share one loop, interpreted against the reference."""

from __future__ import annotations

import sys
from pathlib import Path

from fuser_core.codegen import kernel_ir as k
from fuser_core.codegen.lower import lower_group
from fuser_core.codegen.lower.sibling_nests import merge_sibling_nests
from fuser_core.ir.dtype import DataType
from fuser_core.runtime.group_lowering import generates_kernel, index_dtype

sys.path.insert(0, str(Path(__file__).parent))
from kernels_check import SAMPLES_DIR, check_generated_kernels, runtime_and_inputs

F, IDX = DataType.Float, DataType.Index
i = k.Var(IDX, "i")
row_ok = k.Bin(DataType.Bool, "<", k.Var(IDX, "row"), k.TensorField(IDX, "T0", "logical_size", 0))
GLOBALS = {"T0", "T9"}


def read(buffer: str, index: k.Node) -> k.Read:
    return k.Read(F, buffer, index)


def c(value: int) -> k.Const:
    return k.Const(IDX, value)


def plus(a: k.Node, b: k.Node) -> k.Bin:
    return k.Bin(a.dtype, "+", a, b)


def loop(*body: k.Stmt, extent: int = 8, kind: k.LoopKind = k.LoopKind.unroll) -> k.For:
    return k.For(i, c(extent), kind, list(body))


def guarded(*body: k.Stmt, cond: k.Node = row_ok) -> k.If:
    return k.If(cond, list(body))


def merged(*stmts: k.Stmt) -> list[k.Stmt]:
    body = list(stmts)
    merge_sibling_nests(body, GLOBALS)
    return body


def test_element_wise_steps_of_one_loop_merge_and_their_ifs_with_them():
    first = loop(guarded(k.Store("a", i, read("x", i))))
    second = loop(guarded(k.Store("b", i, plus(read("a", i), read("x", i)))))
    (one,) = merged(first, second)
    assert isinstance(one, k.For)
    (cond,) = one.body
    assert isinstance(cond, k.If)
    assert [s.buffer for s in cond.then] == ["a", "b"]


def test_a_step_reading_another_iteration_of_the_first_does_not_merge():
    first = loop(k.Store("a", i, read("x", i)))
    shifted = loop(k.Store("b", i, read("a", plus(i, c(1)))))  # iteration i reads what i + 1 writes
    assert len(merged(first, shifted)) == 2


def test_a_step_reading_an_accumulator_the_first_loop_is_still_summing_does_not_merge():
    summing = loop(k.Store("acc", c(0), plus(read("acc", c(0)), read("x", i))))
    using = loop(k.Store("b", i, plus(read("acc", c(0)), read("x", i))))
    assert len(merged(summing, using)) == 2
    # Two accumulators that do not read each other merge.
    other = loop(k.Store("acc2", c(0), plus(read("acc2", c(0)), read("x", i))))
    assert len(merged(summing, other)) == 1


def test_loops_that_load_or_store_global_memory_stay_apart():
    compute = loop(k.Store("a", i, read("x", i)))
    store = loop(k.Store("T9", i, read("a", i)))
    load = loop(k.Store("y", i, read("T0", i)))
    assert len(merged(compute, store)) == 2
    assert len(merged(load, compute)) == 2
    assert len(merged(guarded(k.Store("a", c(0), read("T0", c(0)))), guarded(k.Store("b", c(0), read("x", c(0)))))) == 2


def test_an_if_whose_condition_the_first_body_changes_does_not_merge():
    flag = k.Bin(DataType.Bool, "<", read("f", c(0)), k.Const(F, 1.0))
    sets_flag = guarded(k.Store("f", c(0), k.Const(F, 2.0)), cond=flag)
    after = guarded(k.Store("b", c(0), k.Const(F, 3.0)), cond=flag)
    assert len(merged(sets_flag, after)) == 2
    unrelated = guarded(k.Store("g", c(0), k.Const(F, 2.0)), cond=flag)
    assert len(merged(unrelated, after)) == 1


def test_ifs_whose_conditions_differ_only_in_how_a_mapped_extent_is_spelled_merge():
    # rstd's rows checked against T3's size, dy's against T0's: the lowering's spelling
    # reads both as T0's (the runtime checks they are equal), so they are one condition
    through_t3 = k.Bin(DataType.Bool, "<", k.Var(IDX, "row"), k.TensorField(IDX, "T3", "logical_size", 0))
    first = guarded(k.Store("a", c(0), read("x", c(0))), cond=through_t3)
    second = guarded(k.Store("b", c(0), read("a", c(0))))
    assert len(merged(first, second)) == 2  # spelled as written: two conditions

    def spelled(node: k.Node) -> str:
        return k.expr_text(node).replace("T3.logical_size[0]", "T0.logical_size[0]")

    body: list[k.Stmt] = [first, second]
    merge_sibling_nests(body, GLOBALS, spelled)
    (one,) = body
    assert isinstance(one, k.If) and one.cond is through_t3
    assert [s.buffer for s in one.then] == ["a", "b"]  # type: ignore[attr-defined]


def test_nothing_merges_across_or_around_a_barrier_or_a_reduction():
    first = loop(k.Store("a", i, read("x", i)))
    second = loop(k.Store("b", i, read("a", i)))
    assert len(merged(first, k.Sync(), second)) == 3
    with_sync = loop(k.Store("a", i, read("x", i)), k.Sync())
    assert len(merged(with_sync, second)) == 2


def test_scopes_that_run_once_merge_only_where_their_insides_then_merge():
    def once(*body: k.Stmt) -> k.For:
        return k.For(k.Var(IDX, "tid"), c(128), k.LoopKind.thread, list(body), hardware="threadIdx.x")

    # Straight-line code either way: left as emitted (ptxas allocates registers differently).
    a = once(k.Store("a", c(0), read("x", c(0))))
    b = once(k.Store("b", c(0), read("y", c(0))))
    assert len(merged(a, b)) == 2
    # Two steps of one element loop inside them: the scopes merge so the loops can.
    a = once(loop(k.Store("a", i, read("x", i))))
    b = once(loop(k.Store("b", i, read("a", i))))
    (scope,) = merged(a, b)
    assert isinstance(scope, k.For) and len(scope.body) == 1


def test_names_declared_on_both_sides_keep_the_scopes_apart():
    t = k.Var(F, "t")
    first = loop(k.Define(t, read("x", i)), k.Store("a", i, t))
    second = loop(k.Define(t, read("y", i)), k.Store("b", i, t))
    assert len(merged(first, second)) == 2


def test_a_step_between_two_loops_that_merge_moves_after_them():
    first = loop(k.Store("a", i, read("x", i)))
    between = k.Store("s", c(0), read("p", c(0)))  # reads and writes nothing the second loop does
    second = loop(k.Store("b", i, read("a", i)))
    body = merged(first, between, second)
    assert len(body) == 2 and body[1] is between
    # Not when the second loop reads what the step writes.
    reads_it = loop(k.Store("b", i, plus(read("a", i), read("s", c(0)))))
    assert len(merged(first, between, reads_it)) == 3
    # Nor a store to global memory moved ahead of anything.
    store = k.For(i, c(8), k.LoopKind.unroll, [k.Store("T9", i, read("a", i))])
    assert len(merged(first, k.Store("s", c(0), read("T0", c(0))), store)) == 3


def _row_loop_of(kernel: k.Kernel, buffer: str) -> k.For:
    """The innermost loop holding the store to `buffer`."""
    found = None

    def visit(stmts: list[k.Stmt], enclosing: k.For | None) -> None:
        nonlocal found
        for s in stmts:
            if isinstance(s, k.Store) and s.buffer == buffer:
                found = enclosing
            elif isinstance(s, k.For):
                visit(s.body, s)
            elif isinstance(s, k.If):
                visit(s.then, enclosing)
                visit(s.orelse, enclosing)

    visit(kernel.body, None)
    assert found is not None
    return found


def test_layer_norm_backward_computes_its_row_in_one_loop_and_matches_the_reference():
    # 2,000 rows: enough to take the inner-outer kernel, few enough for the interpreter.
    script = (SAMPLES_DIR / "layer_norm_bwd.py").read_text().replace("16384", "2000").replace("4096", "1024")
    runtime, inputs = runtime_and_inputs(script)
    (group,) = [g for g in runtime.segmented.groups if generates_kernel(g)]
    kernel = lower_group(group.fusion, "k", index_dtype(runtime.signature.index_type))
    stores = {s.buffer for s in k.walk(kernel.body) if isinstance(s, k.Store)}
    # Both row sums' partials and both column partials: one loop over the row's elements
    # (x_hat is computed there from x, not stored: the rows are grouped, row_groups.py).
    partial = _row_loop_of(kernel, "T43")
    together = {b for b in stores if _row_loop_of(kernel, b) is partial}
    assert {"T42", "T43", "T44", "T45"} <= together, together
    assert "T9" not in stores
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]


def test_an_index_that_an_inner_loop_moves_keeps_the_loops_apart():
    j = k.Var(IDX, "j")
    # a[i + j]: iteration i + 1 overwrites what iteration i wrote at a[i + 1] before the
    # second loop reads it there; merged, the second loop would read iteration i's value.
    first = loop(k.For(j, c(2), k.LoopKind.unroll, [k.Store("a", plus(i, j), read("x", plus(i, j)))]))
    second = loop(k.For(j, c(2), k.LoopKind.unroll, [k.Store("b", plus(i, j), read("a", plus(i, j)))]))
    assert len(merged(first, second)) == 2
    # a[i * 2 + j], j < 2: each iteration has its own two elements; the loops merge.
    pair = plus(k.Bin(IDX, "*", i, c(2)), j)
    first = loop(k.For(j, c(2), k.LoopKind.unroll, [k.Store("a", pair, read("x", pair))]))
    second = loop(k.For(j, c(2), k.LoopKind.unroll, [k.Store("b", pair, read("a", pair))]))
    assert len(merged(first, second)) == 1


def test_an_index_read_from_a_buffer_the_loops_write_keeps_them_apart():
    # b[i + off[0]] where the first loop moves off[0]: no telling which element an
    # iteration reaches.
    moved = plus(i, read("off", c(0)))
    first = loop(k.Store("a", moved, read("x", i)), k.Store("off", c(0), read("y", i)))
    second = loop(k.Store("b", i, read("a", moved)))
    assert len(merged(first, second)) == 2


def test_a_name_the_first_scope_declares_does_not_capture_the_seconds_outer_one():
    # float t (outer); for i { float t = 2; a[i] = t; } for i { b[i] = t; }: merged, b
    # would read the inner t.
    t = k.Var(F, "t")
    first = loop(k.Define(t, k.Const(F, 2.0)), k.Store("a", i, t))
    second = loop(k.Store("b", i, t))
    assert len(merged(first, second)) == 2


def test_inner_loops_of_one_name_and_different_extents_are_spanned_by_the_longest():
    # A: a[2i + j] for j < 4 (iterations overlap); B reads a[2i + j] for j < 4 and has a
    # j < 1 loop too: the span is 3 * 1, not 0, against the coefficient 2.
    j = k.Var(IDX, "j")
    slot = plus(k.Bin(IDX, "*", i, c(2)), j)
    first = loop(k.For(j, c(4), k.LoopKind.unroll, [k.Store("a", slot, read("x", i))]), extent=4)
    second = loop(
        k.For(j, c(4), k.LoopKind.unroll, [k.Store("b", i, plus(read("b", i), read("a", slot)))]),
        k.For(j, c(1), k.LoopKind.unroll, []),
        extent=4,
    )
    assert len(merged(first, second)) == 2
