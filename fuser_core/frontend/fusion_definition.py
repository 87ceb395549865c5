"""`FusionDefinition`: nvFuser's Python frontend, building our Fusion IR.

    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True])
        t1 = fd.ops.sum(t0, dims=[1])
        fd.add_output(t1)
    out = fd.execute([x])

Every call records the user's line, so a definition-time FuserError names it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from fuser_core.errors import FuserError
from fuser_core.frontend.call_site import constant, dtype_arg, int_arg, user_call
from fuser_core.frontend.handles import Scalar, Tensor, Vector
from fuser_core.frontend.operators import Operators
from fuser_core.ir.dtype import DataType, dtype_from_framework
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.layout import allocation_positions, describe_strides
from fuser_core.ir.printer import print_kernel, print_math
from fuser_core.ir.scalar import Scalar as IrScalar
from fuser_core.ir.tensor_view import TensorView
from fuser_core.ops.creation import tensor_input
from fuser_core.runtime.dumps import print_kernel_texts, print_scheduled
from fuser_core.runtime.executor_cache import FusionExecutorCache
from fuser_core.runtime.kernel_runtime import FusionKernelRuntime


class FusionDefinition:
    def __init__(self, id: int | None = None, max_length: int = 9999) -> None:
        """`id` numbers this fusion's kernels (`nvfuser_..._f<id>_...`); `max_length`
        is accepted for nvFuser compatibility and has no effect."""
        self.id = id
        self._fusion: Fusion | None = None
        self._completed = False
        self._exit_stack: contextlib.ExitStack | None = None
        self._executor: FusionExecutorCache | None = None
        self.ops = Operators(self)
        # (output, input) pairs: outputs written back into inputs and not returned
        self.aliases: list[tuple[TensorView, TensorView]] = []

    # -- the with-block ---------------------------------------------------------------
    def __enter__(self) -> FusionDefinition:
        if self._fusion is not None:
            raise FuserError("this FusionDefinition was already defined; create a new one")
        self._fusion = Fusion()
        self._exit_stack = contextlib.ExitStack()
        self._exit_stack.enter_context(self._fusion.guard())
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        assert self._exit_stack is not None
        self._exit_stack.close()
        self._completed = exc_type is None

    def _active_fusion(self, op_name: str) -> Fusion:
        if self._fusion is None:
            raise FuserError("use it inside `with FusionDefinition() as fd:`", op=op_name)
        if self._completed:
            raise FuserError("the definition is complete; nothing can be added to it", op=op_name)
        return self._fusion

    @property
    def fusion(self) -> Fusion:
        """The Fusion IR this definition built."""
        if self._fusion is None:
            raise FuserError("nothing has been defined yet")
        return self._fusion

    # -- inputs -----------------------------------------------------------------------
    @user_call("define_tensor")
    def define_tensor(
        self,
        shape: Sequence[int] | None = None,
        contiguity: Sequence[bool | None] | bool | None = None,
        dtype: DataType = DataType.Float,
        is_cpu: bool = False,
        stride_order: Sequence[int] | None = None,
        *,
        sizes: Sequence[int] | None = None,
        strides: Sequence[int] | None = None,
        static_sizes: bool = False,
    ) -> Tensor:
        dtype = dtype_arg(dtype, "define_tensor")
        if sizes is not None or strides is not None:
            return self._define_from_strides(sizes, strides, dtype, static_sizes, is_cpu)
        if shape is None:
            raise FuserError("needs a shape", op="define_tensor")
        shape = [int_arg(s, "define_tensor", "shape") for s in shape]
        for s in shape:
            if s < -1:
                raise FuserError(f"invalid size {s} in shape {shape}: use -1 for a symbolic size", op="define_tensor")
        order = _stride_order_arg(stride_order, len(shape), "define_tensor")
        contig = _contiguity_arg(contiguity, shape, order)
        if is_cpu and shape:
            raise FuserError("is_cpu=True is only for 0-D scalar tensors", op="define_tensor")
        tv = tensor_input(shape, contig, dtype, order)
        self.fusion.add_input(tv)
        return Tensor(self, tv)

    def _define_from_strides(
        self,
        sizes: Sequence[int] | None,
        strides: Sequence[int] | None,
        dtype: DataType,
        static_sizes: bool,
        is_cpu: bool,
    ) -> Tensor:
        if sizes is None or strides is None or len(sizes) != len(strides):
            raise FuserError("sizes and strides must both be given, with one entry per axis", op="define_tensor")
        if is_cpu and sizes:
            raise FuserError("is_cpu=True is only for 0-D scalar tensors", op="define_tensor")
        contiguity, order = describe_strides(list(sizes), list(strides))
        shape = [s if (static_sizes or s == 1) else -1 for s in sizes]
        tv = tensor_input(shape, contiguity, dtype, order)
        self.fusion.add_input(tv)
        return Tensor(self, tv)

    def from_pytorch(self, tensor: Any, static_sizes: bool = False) -> Tensor:
        try:
            dtype = dtype_from_framework(tensor)
        except ValueError as err:
            raise FuserError(str(err), op="from_pytorch") from None
        return self.define_tensor(  # type: ignore[no-any-return]
            sizes=list(tensor.shape), strides=_element_strides(tensor), dtype=dtype, static_sizes=static_sizes
        )

    @user_call("define_scalar")
    def define_scalar(self, value: Any = None, dtype: DataType | None = None) -> Scalar:
        if isinstance(value, DataType) and dtype is None:  # define_scalar(DataType.Int)
            value, dtype = None, value
        if value is None:
            val = IrScalar(dtype_arg(dtype, "define_scalar") if dtype is not None else DataType.Double)
            self.fusion.add_input(val)
            return Scalar(self, val)
        return Scalar(self, constant(value, dtype, "define_scalar"))

    def define_constant(self, value: Any, dtype: DataType | None = None) -> Scalar:
        return self.define_scalar(value, dtype)

    @user_call("define_vector")
    def define_vector(self, values: Any, dtype: DataType = DataType.Int) -> Vector:
        if isinstance(values, int):
            vals = []
            for _ in range(values):
                val = IrScalar(DataType.Int)
                self.fusion.add_input(val)
                vals.append(val)
            return Vector(self, vals)
        return Vector(self, [self.ops._scalar(v, "define_vector", dtype) for v in values])

    # -- outputs ----------------------------------------------------------------------
    @user_call("add_output")
    def add_output(
        self,
        output: Tensor | Scalar,
        alias_input: Tensor | None = None,
        stride_order: Sequence[int] | None = None,
    ) -> None:
        if isinstance(alias_input, (list, tuple)):  # add_output(t, [1, 0]) positional stride order
            alias_input, stride_order = None, alias_input
        if isinstance(output, Scalar):
            self.fusion.add_output(output.val)
            return
        if not isinstance(output, Tensor):
            raise FuserError(f"output must be a tensor or scalar, got {type(output).__name__}", op="add_output")
        tv = output.tv
        if stride_order:
            self.fusion.output_stride_order[tv] = _stride_order_arg(stride_order, tv.ndim, "add_output")
        if alias_input is not None:
            if not isinstance(alias_input, Tensor):
                raise FuserError(f"alias_input must be a tensor, got {type(alias_input).__name__}", op="add_output")
            self._alias_output(tv, alias_input.tv, "add_output")
            return
        self.fusion.add_output(tv)

    def _alias_output(self, out: TensorView, inp: TensorView, op: str) -> None:
        """`out` is written back into the fusion input `inp` by each execution, and not
        returned (nvFuser's aliasOutputToInput, as batch_norm's running stats use it)."""
        if not any(v is inp for v in self.fusion.inputs):
            raise FuserError(f"T{inp.name} is not a fusion input, so T{out.name} cannot be written into it", op=op)
        if inp.dtype != out.dtype or inp.ndim != out.ndim:
            raise FuserError(
                f"T{out.name} ({out.dtype!r}, {out.ndim}-D) cannot be written into T{inp.name} "
                f"({inp.dtype!r}, {inp.ndim}-D): aliased tensors must have the same dtype and rank",
                op=op,
                tensor=f"T{out.name}",
            )
        if any(i is inp for _, i in self.aliases):
            raise FuserError(f"T{inp.name} is already the alias of another output", op=op, tensor=f"T{inp.name}")
        self.fusion.add_output(out)
        self.aliases.append((out, inp))

    # -- printing and running ---------------------------------------------------------
    def fusion_ir(self) -> str:
        """The fusion's math, as `NVFUSER_DUMP=fusion_ir_math` prints it."""
        return print_math(self.fusion)

    def fusion_ir_with_transforms(self) -> str:
        return print_kernel(self.fusion, include_transforms=True)

    def execute(
        self,
        inputs: Sequence[Any],
        *,
        device: Any = None,
        override_user_schedule: bool = False,
        capture_debug_output: bool = False,
        print_repro: bool = False,
        profile: bool = False,
        save_repro_inputs: bool = False,
        _enable_options: Sequence[str] = (),
        _disable_options: Sequence[str] = (),
    ) -> list[Any]:
        """Run the fusion on `inputs` and return its outputs as NumPy arrays; an aliased
        output (add_output(alias_input=), batch_norm's running stats) is written into its
        input array instead of being returned, as nvFuser updates it in place."""
        executor = self._executor_for("execute()")
        outputs = executor.run(inputs, enable=list(_enable_options), disable=list(_disable_options))
        if not self.aliases:
            return outputs
        hidden = set()
        for out, inp in self.aliases:
            position = next(i for i, v in enumerate(self.fusion.outputs) if v is out)
            target = inputs[next(i for i, v in enumerate(self.fusion.inputs) if v is inp)]
            if not (isinstance(target, np.ndarray) and target.flags.writeable):
                raise FuserError(
                    f"input T{inp.name} must be a writable NumPy array: T{out.name} is written into it",
                    op="execute",
                    tensor=f"T{inp.name}",
                )
            np.copyto(target, np.asarray(outputs[position]).astype(target.dtype, copy=False))
            hidden.add(position)
        return [o for i, o in enumerate(outputs) if i not in hidden]

    def _executor_for(self, what: str) -> FusionExecutorCache:
        if not self._completed:
            raise FuserError(f"{what} needs a complete definition: call it after the `with` block")
        if self._executor is None:
            self._executor = FusionExecutorCache(self.fusion, fusion_id=self.id or 0)
        return self._executor

    def runtime_for(self, inputs: Sequence[Any]) -> FusionKernelRuntime:
        """The runtime these inputs would run with (passes, segments, schedules), built
        without running it."""
        return self._executor_for("runtime_for()").runtime_for(inputs)

    def scheduled_fusion_ir_for(self, inputs: Sequence[Any], tensor_transforms: bool = False) -> str:
        """Each segment's scheduled fusion for these inputs, as nvFuser's method prints it."""
        return print_scheduled(self.runtime_for(inputs), tensor_transforms)

    def last_scheduled_fusion_ir(self, tensor_transforms: bool = False) -> str:
        """The scheduled fusion of the last execution's segments."""
        runtime = self._executor.last_runtime if self._executor is not None else None
        if runtime is None:
            raise FuserError("nothing has been executed yet", op="last_scheduled_fusion_ir")
        return print_scheduled(runtime, tensor_transforms)

    def last_cuda_code(self, intrinsic_code: bool = False, override_user_schedule: bool = False) -> str:
        """The CUDA of the last execution's generated kernels, in launch order; with
        `intrinsic_code`, each kernel's whole translation unit (our runtime header
        included), as nvFuser's `fd.last_cuda_code(intrinsic_code=True)`."""
        runtime = self._executor.last_runtime if self._executor is not None else None
        if runtime is None:
            raise FuserError("nothing has been executed yet", op="last_cuda_code")
        return print_kernel_texts(runtime, "full" if intrinsic_code else "cuda")

    def cuda_code_for(self, inputs: Sequence[Any], intrinsic_code: bool = False) -> str:
        """The CUDA these inputs would run, without running it."""
        return print_kernel_texts(self.runtime_for(inputs), "full" if intrinsic_code else "cuda")

    @property
    def executor_cache(self) -> FusionExecutorCache | None:
        """The FusionExecutorCache behind `execute` (None before the first run)."""
        return self._executor


def _stride_order_arg(order: Sequence[int] | None, rank: int, op: str) -> list[int]:
    if not order:
        return []
    order = [int_arg(o, op, "stride_order") for o in order]
    if sorted(order) != list(range(rank)):
        raise FuserError(f"stride_order {order} is not a permutation of 0..{rank - 1}", op=op)
    return order


def _contiguity_arg(contiguity: Any, shape: list[int], order: list[int]) -> list[bool | None]:
    rank = len(shape)
    alloc_of = allocation_positions(order, rank)
    if contiguity is None or isinstance(contiguity, bool):
        flag = bool(contiguity)
        result: list[bool | None] = [None] * rank
        for pos, size in enumerate(shape):
            result[alloc_of[pos]] = None if size == 1 else flag
        return result
    contig = list(contiguity)
    if len(contig) != rank:
        raise FuserError(f"contiguity has {len(contig)} entries for a {rank}-D shape {shape}", op="define_tensor")
    for pos, size in enumerate(shape):
        c = contig[alloc_of[pos]]
        if size == 1 and c is not None:
            raise FuserError(
                f"axis {pos} has size 1 (a broadcast), so its contiguity must be None, not {c}",
                op="define_tensor",
            )
        if c is not None and not isinstance(c, bool):
            raise FuserError(f"contiguity entries must be True, False or None, got {c!r}", op="define_tensor")
    return contig


def _element_strides(tensor: Any) -> list[int]:
    stride = tensor.stride() if callable(getattr(tensor, "stride", None)) else None
    if stride is not None:
        return list(stride)
    itemsize = tensor.dtype.itemsize if hasattr(tensor.dtype, "itemsize") else 1
    return [s // itemsize for s in tensor.strides]
