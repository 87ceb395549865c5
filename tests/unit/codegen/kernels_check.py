"""Shared by the codegen tests: run a fusion group by group with the reference, and each
generated kernel on the kernel-IR interpreter, and compare what the kernel wrote."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from fuser_core import load_repro, use_options
from fuser_core.codegen import print_kernel
from fuser_core.codegen.interpreter import LaneWrites, TensorBinding, interpret
from fuser_core.codegen.lower import lower_group
from fuser_core.ir.rng import bind_run_seed
from fuser_core.ir.tensor_view import TensorView
from fuser_core.runtime.arguments import bind_args, convert_inputs
from fuser_core.runtime.group_lowering import generates_kernel, index_dtype, lowered_groups
from fuser_core.runtime.reference import bind_leaves, evaluate_fusion, leaf_values

SAMPLES_DIR = Path(__file__).resolve().parents[3] / "sample_fusions"

# Every bundled sample: each has kernels codegen generates (pointwise, transpose,
# reduction, inner and outer persistent); expr_eval groups (matmul, linear) run on the host.
SAMPLES = sorted(p.stem for p in SAMPLES_DIR.glob("*.py"))

# The samples' big sizes, scaled down so the interpreter runs every thread in seconds;
# the constants a fusion slices or pads by (head dims, 1, 2, 8...) are kept.
SHRINK = {"16384": "72", "8192": "48", "4096": "40", "65536": "7", "1024": "24", "512": "12"}


# Leading batch and head counts a sample only broadcasts over, made smaller still.
SHRINK_TEXT = {"rope_litgpt": [("8, 32, ", "2, 3, ")]}


def shrunk_sample(name: str) -> str:
    text = (SAMPLES_DIR / f"{name}.py").read_text()
    for old, new in SHRINK_TEXT.get(name, []):
        text = text.replace(old, new)
    return re.sub(r"\b(" + "|".join(SHRINK) + r")\b", lambda m: SHRINK[m.group(1)], text)


def runtime_and_inputs(script: str, seed: int = 0) -> tuple[Any, list[Any]]:
    (loaded,) = load_repro(script).definitions
    inputs = loaded.materialize_inputs(seed=seed)
    with use_options(device_model="h100_sxm", backend="reference"):
        runtime = loaded.fd.runtime_for(inputs)
    return runtime, inputs


def kernel_text(script: str) -> tuple[str, Any, list[Any]]:
    """The CUDA of a script's one generated kernel, with its runtime and inputs."""
    runtime, inputs = runtime_and_inputs(script)
    (group,) = [g for g in runtime.segmented.groups if generates_kernel(g)]
    kernel = lower_group(group.fusion, "k", index_dtype(runtime.signature.index_type))
    return print_kernel(kernel), runtime, inputs


def alloc_order(tv: TensorView) -> list[int]:
    logical = tv.logical_no_reductions()
    alloc = [d for d in tv.domain.maybe_allocation if not d.is_reduction]
    return [next(i for i, d in enumerate(logical) if d is a) for a in alloc]


def bind(array: np.ndarray, order: list[int], tv: TensorView | None = None) -> TensorBinding:
    """The array laid out contiguously in its allocation order, as the runtime passes it;
    an axis of stride 0 (an expanded input, `as_strided(..., (16, 1, 0))`), or an expanded
    broadcast axis of `tv` (an intermediate the runtime keeps compact), keeps stride 0
    and one element of storage, as on the GPU."""
    expanded = {a for a in range(array.ndim) if array.strides[a] == 0 and array.shape[a] > 1}
    if tv is not None:
        logical = tv.logical_no_reductions()
        expanded |= {a for a, d in enumerate(logical) if d.is_broadcast and d.expanded_extent is not None}
    compact = array[tuple(slice(0, 1) if a in expanded else slice(None) for a in range(array.ndim))]
    # (np.ascontiguousarray makes a 0-d array 1-d: a scalar tensor is copied as it is)
    laid = np.ascontiguousarray(np.transpose(compact, order)) if array.ndim else np.array(array, order="C")
    strides = [0 if order[k] in expanded else s // max(laid.itemsize, 1) for k, s in enumerate(laid.strides)]
    return TensorBinding(laid.reshape(-1), tuple(array.shape), tuple(strides))


def expanded_axes(tv: TensorView) -> set[int]:
    """The logical axes of `tv` that are broadcasts expanded to a size (stride 0 when output)."""
    return {a for a, d in enumerate(tv.logical_no_reductions()) if d.is_broadcast and d.has_expanded_extent}


def check_generated_kernels(
    runtime: Any, inputs: list[Any], vectorize: bool = True, exact: bool = False, scheduled_fusion: Any = None
) -> list[str]:
    """Every generated kernel of `runtime`, interpreted on the values the reference gives its
    inputs, against the reference's outputs of that group (bit for bit if `exact`).
    `scheduled_fusion(group)` picks the scheduled fusion a group is lowered from (default: the
    group's own; a kernel choice candidate's). Returns the kernels checked."""
    segmented = runtime.segmented
    complete = segmented.complete
    args = convert_inputs(complete, inputs)
    ev = bind_args(complete, args)
    bind_run_seed(complete.exprs(), ev)  # one Philox state for every group, as a run has
    leaves = leaf_values(complete, ev)
    tensors: dict[int, Any] = {tv.name: ev.evaluate(tv) for tv in complete.inputs if isinstance(tv, TensorView)}
    scalars_by_name = {v.name: a for v, a in zip(complete.inputs, args, strict=True) if not isinstance(v, TensorView)}
    checked = []
    # Groups codegen refuses run on the host reference in a cuda run (their reason is tested apart).
    refused = lowered_groups(segmented, runtime.name, runtime.signature.index_type)[1]
    for group in segmented.groups:
        fusion = group.unscheduled
        group_ev = bind_leaves(fusion, leaves)
        for val in fusion.inputs:
            if isinstance(val, TensorView):
                group_ev.bind(val, tensors[val.name])
        expected = evaluate_fusion(fusion, group_ev)
        if generates_kernel(group) and group.id not in refused:
            scheduled = group.fusion if scheduled_fusion is None else scheduled_fusion(group)
            kernel = lower_group(scheduled, f"kernel_g{group.id}", index_dtype(runtime.signature.index_type), vectorize)
            bindings, outputs = {}, {}
            for tv in scheduled.inputs:
                if isinstance(tv, TensorView):
                    bindings[f"T{tv.name}"] = bind(np.asarray(tensors[tv.name]), alloc_order(tv), tv)
            for tv, value in zip(scheduled.outputs, expected, strict=True):
                value = np.asarray(value)
                order = alloc_order(tv)
                # An expanded broadcast axis is allocated with one element and stride 0, as
                # the runtime allocates it: the kernel writes the compact data only.
                expanded = expanded_axes(tv)
                compact = value[tuple(slice(0, 1) if a in expanded else slice(None) for a in range(value.ndim))]
                storage = np.empty(compact.size, value.dtype)
                storage[...] = np.nan if value.dtype.kind == "f" else -12345
                laid_shape = [compact.shape[a] for a in order]
                strides = [
                    0 if order[i] in expanded else int(s)
                    for i, s in enumerate(np.cumprod([1, *laid_shape[::-1]])[:-1][::-1])
                ]
                bindings[f"T{tv.name}"] = TensorBinding(storage, tuple(value.shape), tuple(strides))
                outputs[tv.name] = (storage, laid_shape, order, compact)
            scalars = {f"s{v.name}": scalars_by_name[v.name] for v in scheduled.inputs if not isinstance(v, TensorView)}
            scalars.update({s.name: leaves[s.leaf] for s in kernel.scalars if s.leaf is not None})
            writes = LaneWrites()
            interpret(kernel, bindings, scalars, lane_writes=writes)
            for name, (storage, laid_shape, order, value) in outputs.items():
                # One write per element: a reduced or broadcast value is stored by one thread,
                # and no store runs inside a loop it does not index.
                count = writes.count[f"T{name}"]
                assert (count == 1).all(), (
                    f"{kernel.name} T{name}: elements written {sorted(set(count.tolist()))} times"
                )
                got = np.transpose(storage.reshape(laid_shape), np.argsort(order)) if order else storage.reshape(())
                if exact:
                    np.testing.assert_array_equal(got, value, err_msg=f"{kernel.name} T{name}")
                else:
                    _assert_close(got, value, f"{kernel.name} T{name}")
            checked.append(kernel.name)
        for out, value in zip(fusion.outputs, expected, strict=True):
            tensors[out.name] = value
    return checked


def _assert_close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    rtol = 1e-5 if want.dtype.itemsize >= 4 else 2**-7
    np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol, err_msg=what)


def reduction_fusion(shape: list[int], axes: list[int], op: str, keepdim: bool, dtype: Any, normalize: bool) -> Any:
    """A reduction (sum, max, min or var_mean) of a `dtype` input over `axes`, computed in
    float; with `normalize`, also the input minus the last result broadcast back over its
    rows (a persistent normalization)."""
    from fuser_core import DataType, FusionDefinition

    rank = len(shape)
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1] * rank, contiguity=True, dtype=dtype)
        x = fd.ops.cast(t0, DataType.Float) if dtype != DataType.Float else t0
        if op == "var_mean":
            outs = list(fd.ops.var_mean(x, axes, correction=0, keepdim=keepdim))
        else:
            outs = [getattr(fd.ops, op)(x, axes, keepdim=keepdim)]
        if normalize:
            kept = list(range(rank)) if keepdim else [i for i in range(rank) if i not in axes]
            back = fd.ops.broadcast_in_dim(outs[-1], shape=t0.shape(), broadcast_dims=kept)
            outs.append(fd.ops.cast(fd.ops.sub(x, back), dtype))
        for out in outs:
            fd.add_output(out)
    return fd
