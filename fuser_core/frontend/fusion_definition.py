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
import functools
from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

from fuser_core.errors import FuserError, FuserValueError, caller_location
from fuser_core.frontend.call_site import constant, dtype_arg, int_arg, user_call
from fuser_core.frontend.execution import (
    FusionProfile,
    convert_outputs,
    flatten_inputs,
    profile_of,
    seed_source_for,
    write_alias,
)
from fuser_core.frontend.fusion_cache import USER_SCHEDULE_MARK, CachedFusion, FusionCache
from fuser_core.frontend.handles import Scalar, Tensor, Vector
from fuser_core.frontend.operators import Operators
from fuser_core.frontend.recording import Recorder, print_definition, replay
from fuser_core.frontend.repro_script import repro_script
from fuser_core.frontend.user_schedule import UserSchedule
from fuser_core.ir.dtype import DataType, dtype_from_framework
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.layout import allocation_positions, describe_strides
from fuser_core.ir.printer import print_kernel, print_math
from fuser_core.ir.scalar import Scalar as IrScalar
from fuser_core.ir.tensor_view import TensorView
from fuser_core.ops.creation import tensor_input
from fuser_core.options import dump_sink
from fuser_core.runtime.dumps import print_kernel_texts, print_scheduled
from fuser_core.runtime.executor_cache import FusionExecutorCache
from fuser_core.runtime.kernel_runtime import FusionKernelRuntime
from fuser_core.runtime.launch_errors import CudaFaultError
from fuser_core.runtime.streams import torch_launch_stream

_SEQUENCES = (list, tuple)  # the inputs the fast path takes (a tuple: isinstance's quickest)


class FusionDefinition:
    """nvFuser's FusionDefinition: built in a `with` block, or by a subclass's
    `definition()`, or from a cached fusion by `FusionDefinition(id)`."""

    def __init__(self, id: int | None = None, max_length: int = 9999) -> None:
        """`id` names a fusion already in the FusionCache: the definition is then
        complete and executable at once. `max_length` is accepted for nvFuser
        compatibility and has no effect."""
        self._fusion: Fusion | None = None
        self._completed = False
        self._exit_stack: contextlib.ExitStack | None = None
        self._recorder = Recorder()
        self._entry: CachedFusion | None = None
        self.ops = Operators(self)
        self.sched = UserSchedule(self)
        # (output, input, output position): outputs written back into inputs, not returned
        self.aliases: list[tuple[TensorView, TensorView, int]] = []
        self._input_slots: list[int] = []  # per user-visible input: how many fusion inputs it is
        self._is_cpu: list[bool] = []  # per fusion input
        self._debug_output: str | None = None
        self._profile: FusionProfile | None = None
        self._user_scheduled = False  # a subclass's own schedule(): the user scheduler runs it
        if id is not None:
            self._bind_entry(FusionCache.get().entry(int_arg(id, "FusionDefinition", "id")))

    # -- the with-block ---------------------------------------------------------------
    def __enter__(self) -> FusionDefinition:
        if self._entry is not None:
            raise FuserError(
                f"FusionDefinition({self._entry.id}) is a fusion from the FusionCache and is already "
                "defined (Fusion Schedule is already found!)"
            )
        if self._fusion is not None:
            raise FuserError("this FusionDefinition was already defined; create a new one")
        self._fusion = Fusion()
        self._exit_stack = contextlib.ExitStack()
        self._exit_stack.enter_context(self._fusion.guard())
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        assert self._exit_stack is not None
        self._exit_stack.close()
        if exc_type is None:
            self._finalize()

    def _finalize(self) -> None:
        """Complete the definition and find it in the FusionCache by its structure."""
        self._completed = True
        records = tuple(self._recorder.records)
        key = self._recorder.body()
        if self._user_scheduled:  # its own kernel, never shared with the plain definition
            key = USER_SCHEDULE_MARK + key
            self.fusion.user_scheduled = True
        if self._recorder.unprintable is not None:  # no structural key: never shared
            key = f"# unprintable ({self._recorder.unprintable}) #{id(self)}\n" + key
        entry, _ = FusionCache.get().lookup_or_add(records, key)
        if not entry.built:
            entry.adopt(self.fusion, self.aliases, self._is_cpu, self._input_slots)
        self._entry = entry

    def _bind_entry(self, entry: CachedFusion) -> None:
        if not entry.built:
            rebuilt = FusionDefinition()
            with rebuilt:
                replay(rebuilt, entry.records)
            entry.adopt(rebuilt.fusion, rebuilt.aliases, rebuilt._is_cpu, rebuilt._input_slots)
        self._entry = entry
        self._completed = True

    def _active_fusion(self, op_name: str) -> Fusion:
        if self._completed:
            raise FuserError("Attempting to add to a completed definition!", op=op_name)
        if self._fusion is None:
            raise FuserError("use it inside `with FusionDefinition() as fd:`", op=op_name)
        return self._fusion

    def _defined(self, what: str) -> CachedFusion:
        """The cached fusion this definition runs, building a subclass's `definition()`
        on first use as nvFuser does."""
        if self._entry is None and self._fusion is None and self._has_own("definition"):
            self._build_from_methods()
        if self._entry is None:
            if self._fusion is None and not self._has_own("definition"):
                raise NotImplementedError(
                    f"{what}: this FusionDefinition has no definition: define it in a `with` block or "
                    "subclass FusionDefinition and implement definition()"
                )
            raise FuserError(f"Invalid fusion definition! {what} needs a complete definition")
        return self._entry

    def _has_own(self, method: str) -> bool:
        return getattr(type(self), method, None) is not getattr(FusionDefinition, method, None)

    def _build_from_methods(self) -> None:
        self._user_scheduled = self._has_own("schedule")
        with self:
            self.definition()
        if self._has_own("schedule"):
            self.sched.running = True
            try:
                self.schedule()
            finally:
                self.sched.running = False

    def definition(self) -> None:
        """Override in a subclass to define the fusion (`self.ops`, `self.define_tensor`...)."""
        raise NotImplementedError("subclass FusionDefinition and implement definition()")

    def schedule(self) -> None:
        """Override in a subclass to schedule the fusion by hand with `self.sched`."""

    @property
    def fusion(self) -> Fusion:
        """The Fusion IR this definition runs (the cached one, once complete)."""
        if self._entry is not None and self._entry.fusion is not None:
            return self._entry.fusion
        if self._fusion is None:
            raise FuserError("Invalid fusion definition! nothing has been defined yet")
        return self._fusion

    def id(self) -> int | None:
        """The fusion's id in the FusionCache; None until the definition is complete."""
        return self._entry.id if self._entry is not None else None

    def __repr__(self) -> str:
        records = self._entry.records if self._entry is not None else tuple(self._recorder.records)
        return print_definition(records, self.id())

    __str__ = __repr__

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
        return self._tensor_input(shape, contig, dtype, order, is_cpu)

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
        contiguity, order = describe_strides(list(sizes), list(strides))
        shape = [s if (static_sizes or s == 1) else -1 for s in sizes]
        return self._tensor_input(shape, contiguity, dtype, order, is_cpu)

    def _tensor_input(
        self, shape: list[int], contiguity: list[bool | None], dtype: DataType, order: list[int], is_cpu: bool
    ) -> Tensor:
        if is_cpu and shape:
            raise FuserError("is_cpu=True is only for 0-D scalar tensors", op="define_tensor")
        tv = tensor_input(shape, contiguity, dtype, order)
        self.fusion.add_input(tv)
        self._input_slots.append(1)
        self._is_cpu.append(bool(is_cpu))
        canonical_order = order or list(range(len(shape) - 1, -1, -1))
        self._recorder.canonical(
            "define_tensor",
            (),
            {
                "shape": shape,
                "contiguity": contiguity,
                "dtype": dtype,
                "is_cpu": bool(is_cpu),
                "stride_order": canonical_order,
            },
        )
        return Tensor(self, tv)

    def from_pytorch(self, tensor: Any, static_sizes: bool = False) -> Tensor:
        try:
            dtype = dtype_from_framework(tensor)
        except ValueError as err:
            raise FuserError(str(err), op="from_pytorch") from None
        is_cpu = _is_torch_cpu(tensor)
        if is_cpu and len(tensor.shape) != 0:
            raise FuserValueError(
                "Found unsupported device cpu, only cuda is supported: a CPU tensor is an input only as a 0-D scalar",
                op="from_pytorch",
            )
        return self.define_tensor(  # type: ignore[no-any-return]
            sizes=list(tensor.shape),
            strides=_element_strides(tensor),
            dtype=dtype,
            static_sizes=static_sizes,
            is_cpu=is_cpu,
        )

    @user_call("define_scalar")
    def define_scalar(self, value: Any = None, dtype: DataType | None = None) -> Scalar:
        if isinstance(value, DataType) and dtype is None:  # define_scalar(DataType.Int)
            value, dtype = None, value
        if value is None:
            val = IrScalar(dtype_arg(dtype, "define_scalar") if dtype is not None else DataType.Double)
            self.fusion.add_input(val)
            self._input_slots.append(1)
            self._is_cpu.append(False)
            self._recorder.canonical("define_scalar", (None,), {"dtype": val.dtype})
            return Scalar(self, val)
        val = constant(value, dtype, "define_scalar")
        self._recorder.canonical("define_scalar", (val.value,), {"dtype": val.dtype})
        return Scalar(self, val)

    def define_constant(self, value: Any, dtype: DataType | None = None) -> Scalar:
        return self.define_scalar(value, dtype)

    @user_call("define_vector")
    def define_vector(self, values: Any, dtype: DataType = DataType.Int) -> Vector:
        if isinstance(values, int):
            vals = []
            for _ in range(values):
                val = IrScalar(DataType.Int)
                self.fusion.add_input(val)
                self._is_cpu.append(False)
                vals.append(val)
            self._input_slots.append(values)
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
        if any(i is inp for _, i, _ in self.aliases):
            raise FuserError(f"T{inp.name} is already the alias of another output", op=op, tensor=f"T{inp.name}")
        self.fusion.add_output(out)
        self.aliases.append((out, inp, len(self.fusion.outputs) - 1))

    # -- printing and running ---------------------------------------------------------
    def fusion_ir(self) -> str:
        """The fusion's math, as `NVFUSER_DUMP=fusion_ir_math` prints it."""
        self._defined("fusion_ir()")
        return print_math(self.fusion)

    def fusion_ir_with_transforms(self) -> str:
        self._defined("fusion_ir_with_transforms()")
        return print_kernel(self.fusion, include_transforms=True)

    def execute(
        self,
        inputs: Sequence[Any],
        *,  # nvFuser's signature: options by keyword only
        device: Any = None,
        override_user_schedule: bool = False,
        capture_debug_output: bool = False,
        print_repro: bool = False,
        profile: bool = False,
        save_repro_inputs: bool = False,
        _enable_options: Sequence[str] = (),
        _disable_options: Sequence[str] = (),
    ) -> list[Any]:
        """Run the fusion and return its outputs: torch tensors on the inputs' device for
        torch inputs, NumPy or CuPy arrays for theirs. An aliased output
        (add_output(alias_input=), batch_norm's running stats) is written into its input
        in place and not returned, as nvFuser does. Torch inputs run on torch's current
        stream (runtime/streams.py)."""
        # A cache hit the fast path replays, its outputs the caller's as they are: no more
        # Python between the call and the launch than the replay itself.
        entry = self._entry
        hit = None
        plain = (
            entry is not None
            and entry.plain_call
            and device is None
            and not (print_repro or profile or capture_debug_output or _enable_options or _disable_options)
            and isinstance(inputs, _SEQUENCES)
        )
        executor = entry.executor_or_none if plain and entry is not None else None
        try:
            # The last plan replayed, if these inputs are like its own: no key made.
            outputs = executor.replay_final(inputs) if executor is not None else None
            if outputs is not None:
                return outputs
            # Torch inputs under a stream of torch's own (a replay declines them): this call
            # again, with that stream made CuPy's current one.
            stream = torch_launch_stream(inputs) if isinstance(inputs, _SEQUENCES) else None
            if stream is not None:
                with stream:
                    return self.execute(
                        inputs,
                        device=device,
                        override_user_schedule=override_user_schedule,
                        capture_debug_output=capture_debug_output,
                        print_repro=print_repro,
                        profile=profile,
                        save_repro_inputs=save_repro_inputs,
                        _enable_options=_enable_options,
                        _disable_options=_disable_options,
                    )
            if executor is not None and entry is not None and len(inputs) == len(entry.input_slots):
                hit = executor.fast_hit(inputs)
                if hit is not None and hit[0].final:
                    return executor.run_fast(hit, inputs)
        except CudaFaultError as err:
            err.location = err.location or caller_location()
            raise
        entry = self._defined("execute()")
        if print_repro:
            print(self.repro_script_for(inputs))
        args = flatten_inputs(inputs, entry.input_slots)
        enable = list(_enable_options) + (["kernel_profile"] if profile else [])
        # A hit whose outputs need converting is replayed by run, not looked up again.
        run = functools.partial(entry.executor().run, args, enable=enable, disable=list(_disable_options), hit=hit)
        captured: list[str] = []
        sink = dump_sink(lambda option, text: captured.append(text)) if capture_debug_output else nullcontext()
        with seed_source_for(args, device), sink:
            try:
                outputs = run()
            except CudaFaultError as err:  # kernels of several lines: point at this call
                err.location = err.location or caller_location()
                raise
        if capture_debug_output:
            self._debug_output = "".join(t if t.endswith("\n") else t + "\n" for t in captured)
        report = entry.executor().last_report
        if profile and report is not None:
            self._profile = profile_of(report, entry.id)
        fusion = entry.fusion
        assert fusion is not None
        outputs = convert_outputs(outputs, fusion.outputs, args, device)
        return _caller_outputs(fusion, entry.aliases, outputs, args)

    @property
    def _executor(self) -> FusionExecutorCache | None:
        return self._entry.executor_or_none if self._entry is not None else None

    def _last_runtime(self, what: str) -> FusionKernelRuntime:
        runtime = self._executor.last_runtime if self._executor is not None else None
        if runtime is None:
            raise FuserError(f"Invalid fusion definition! {what}: nothing has been executed yet")
        return runtime

    def _compiled_runtime_for(self, inputs: Sequence[Any], what: str) -> FusionKernelRuntime:
        """The runtime an earlier execution compiled for inputs like these (nvFuser's
        `*_for(inputs)` never compile)."""
        entry = self._defined(what)
        executor = entry.executor()
        if not executor.runtimes:
            raise FuserError(f"Invalid fusion definition! {what}: the fusion has not been executed")
        runtime = executor.compiled_runtime_for(flatten_inputs(inputs, entry.input_slots))
        if runtime is None:
            raise FuserError(f"Fusion is not compiled! {what}: no execution has compiled it for these inputs")
        return runtime

    def runtime_for(self, inputs: Sequence[Any]) -> FusionKernelRuntime:
        """The runtime these inputs would run with (passes, segments, schedules), built
        without running it (compiling it if no execution has)."""
        entry = self._defined("runtime_for()")
        return entry.executor().runtime_for(flatten_inputs(inputs, entry.input_slots))

    def scheduled_fusion_ir_for(self, inputs: Sequence[Any], tensor_transforms: bool = False) -> str:
        """Each segment's scheduled fusion for these inputs, as nvFuser's method prints it."""
        return print_scheduled(self._compiled_runtime_for(inputs, "scheduled_fusion_ir_for()"), tensor_transforms)

    def last_scheduled_fusion_ir(self, tensor_transforms: bool = False) -> str:
        """The scheduled fusion of the last execution's segments."""
        return print_scheduled(self._last_runtime("last_scheduled_fusion_ir()"), tensor_transforms)

    def last_cuda_code(self, intrinsic_code: bool = False, override_user_schedule: bool = False) -> str:
        """The CUDA of the last execution's generated kernels, in launch order; with
        `intrinsic_code`, each kernel's whole translation unit (our runtime header
        included), as nvFuser's `fd.last_cuda_code(intrinsic_code=True)`."""
        return print_kernel_texts(self._last_runtime("last_cuda_code()"), "full" if intrinsic_code else "cuda")

    def cuda_code_for(
        self, inputs: Sequence[Any], intrinsic_code: bool = False, override_user_schedule: bool = False
    ) -> str:
        """The CUDA an earlier execution compiled for inputs like these."""
        runtime = self._compiled_runtime_for(inputs, "cuda_code_for()")
        return print_kernel_texts(runtime, "full" if intrinsic_code else "cuda")

    def profile(self) -> FusionProfile:
        """The profile of the last `execute(..., profile=True)`."""
        if self._profile is None:
            raise FuserValueError("profile() needs an earlier execute(..., profile=True)", op="profile")
        return self._profile

    def debug_output(self) -> str | None:
        """What the last `execute(..., capture_debug_output=True)` dumped; None before."""
        return self._debug_output

    def repro_script_for(
        self, inputs: Sequence[Any] | None = None, *, enable: Sequence[str] = (), disable: Sequence[str] = ()
    ) -> str:
        """A self-contained script that rebuilds this fusion and inputs like these (and
        runs it with these enable/disable options): the text users paste into bug reports."""
        self._defined("repro_script_for()")
        return repro_script(repr(self), self.id(), inputs, enable, disable)

    @property
    def executor_cache(self) -> FusionExecutorCache | None:
        """The FusionExecutorCache behind `execute` (None before the first run)."""
        return self._executor


def _caller_outputs(
    fusion: Fusion, aliases: Sequence[tuple[TensorView, TensorView, int]], outputs: list[Any], args: list[Any]
) -> list[Any]:
    """What execute returns, as nvFuser does: an aliased output is written into its input
    and not returned at its own position; elsewhere the same tensor, or an input given as
    an output, comes back as the caller's input object itself (same storage)."""
    position_of = {id(v): i for i, v in enumerate(fusion.inputs)}
    holder: dict[int, Any] = {}
    for out, inp, position in aliases:
        target = args[position_of[id(inp)]]
        write_alias(target, outputs[position], f"input T{inp.name}")
        holder[id(out)] = target
    hidden = {position for _, _, position in aliases}
    result = []
    for i, (value, val) in enumerate(zip(outputs, fusion.outputs, strict=True)):
        if i in hidden:
            continue
        if id(val) in holder:
            value = holder[id(val)]
        elif id(val) in position_of and hasattr(args[position_of[id(val)]], "shape"):
            value = args[position_of[id(val)]]
        result.append(value)
    return result


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


def _is_torch_cpu(tensor: Any) -> bool:
    """A torch tensor on the CPU (NumPy arrays are this project's host inputs, not CPU tensors)."""
    return type(tensor).__module__.split(".")[0] == "torch" and not getattr(tensor, "is_cuda", True)


def _element_strides(tensor: Any) -> list[int]:
    stride = tensor.stride() if callable(getattr(tensor, "stride", None)) else None
    if stride is not None:
        return list(stride)
    itemsize = tensor.dtype.itemsize if hasattr(tensor.dtype, "itemsize") else 1
    return [s // itemsize for s in tensor.strides]
