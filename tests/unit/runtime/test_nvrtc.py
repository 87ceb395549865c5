"""NVRTC through ctypes, compile errors, and the kernel cache: all on CI, with no GPU.

These compile real kernels with the NVRTC of the dev extra (nvidia-cuda-nvrtc); they are
never skipped: a machine without a loadable libnvrtc fails them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fuser_core.errors import FuserError
from fuser_core.runtime import kernel_cache, nvrtc, nvrtc_library
from fuser_core.runtime.kernel_cache import KernelCache, cache_key, compile_kernel, decode_entry
from fuser_core.runtime.nvrtc import CompiledModule, KernelCompileError
from fuser_core.runtime.nvrtc_library import NvrtcNotFoundError
from fuser_core.scheduler.device import select_device

ROOT = Path(__file__).resolve().parents[3]

AXPY = textwrap.dedent(
    """\
    extern "C" __global__ void axpy(const float* x, float* y, float a, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) {
        y[i] = a * x[i] + y[i];
      }
    }
    """
)

TEMPLATED = textwrap.dedent(
    """\
    namespace CudaCodeGen {
    template <typename T, int N>
    __global__ void scale(T* x, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) x[i] = x[i] * T(N);
    }
    }  // namespace CudaCodeGen
    """
)

HALF = textwrap.dedent(
    """\
    #include <cuda_fp16.h>
    #include <cuda_bf16.h>
    extern "C" __global__ void half_add(const __half* a, const __nv_bfloat16* b, __half* out, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) out[i] = __hadd(a[i], __float2half(__bfloat162float(b[i])));
    }
    """
)

# A ~100-line kernel of the shape the codegen emits: our own half type and Tensor struct,
# vectorized loads and stores with a predicated fallback, a namespace, a mangled name.
POINTWISE_NAME = "CudaCodeGen::nvfuser_pointwise_f0_c1_r0_g0"
POINTWISE = textwrap.dedent(
    """\
    typedef int nvfuser_index_t;

    struct __align__(2) __half {
      unsigned short __x;
      __half() = default;
    };

    __device__ __forceinline__ __half __float2half(const float f) {
      __half val;
      asm("{  cvt.rn.f16.f32 %0, %1;}\\n" : "=h"(val.__x) : "f"(f));
      return val;
    }

    template <typename T, int N>
    struct Tensor {
      __device__ T& operator[](nvfuser_index_t ind) { return data[ind]; }
      T* data;
      nvfuser_index_t logical_size[N];
      nvfuser_index_t alloc_stride[N];
    };

    template <typename T, int N>
    struct alignas(sizeof(T) * N) Array {
      T array[N];
      __device__ T& operator[](unsigned int i) { return array[i]; }
      __device__ const T& operator[](unsigned int i) const { return array[i]; }
    };

    template <typename T, int N>
    __device__ __forceinline__ void loadGlobalToLocal(Array<T, N>& dst, const T* src) {
      if constexpr (sizeof(T) * N == 16) {
        *reinterpret_cast<uint4*>(&dst) = *reinterpret_cast<const uint4*>(src);
      } else {
    #pragma unroll
        for (int i = 0; i < N; ++i) dst[i] = src[i];
      }
    }

    template <typename T, int N>
    __device__ __forceinline__ void storeLocalToGlobal(T* dst, const Array<T, N>& src) {
      if constexpr (sizeof(T) * N == 16) {
        *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(&src);
      } else {
    #pragma unroll
        for (int i = 0; i < N; ++i) dst[i] = src[i];
      }
    }

    __device__ __forceinline__ float relu(float x) { return x > 0.f ? x : 0.f; }

    namespace CudaCodeGen {

    __global__ void __launch_bounds__(128) nvfuser_pointwise_f0_c1_r0_g0(
        Tensor<float, 2> T0, Tensor<float, 1> T1, float s2, Tensor<__half, 2> T4) {
      nvfuser_index_t i0 = ((nvfuser_index_t)threadIdx.x) + 128 * ((nvfuser_index_t)blockIdx.x);
      nvfuser_index_t i1 = 8 * i0;
      nvfuser_index_t i2 = i1 / T0.logical_size[1];
      nvfuser_index_t i3 = i1 % T0.logical_size[1];
      bool b4 = (i1 + 7) < (T0.logical_size[0] * T0.logical_size[1]);
      bool b5 = (T0.logical_size[1] % 8) == 0 && T0.alloc_stride[1] == 1;
      if (b4 && b5) {
        Array<float, 8> T5;
        loadGlobalToLocal<float, 4>(*reinterpret_cast<Array<float, 4>*>(&T5[0]),
                                    &T0[i2 * T0.alloc_stride[0] + i3]);
        loadGlobalToLocal<float, 4>(*reinterpret_cast<Array<float, 4>*>(&T5[4]),
                                    &T0[i2 * T0.alloc_stride[0] + i3 + 4]);
        Array<float, 8> T6;
        loadGlobalToLocal<float, 4>(*reinterpret_cast<Array<float, 4>*>(&T6[0]), &T1[i3]);
        loadGlobalToLocal<float, 4>(*reinterpret_cast<Array<float, 4>*>(&T6[4]), &T1[i3 + 4]);
        Array<__half, 8> T7;
    #pragma unroll
        for (nvfuser_index_t i8 = 0; i8 < 8; ++i8) {
          T7[i8] = __float2half(relu(T5[i8] * s2 + T6[i8]));
        }
        storeLocalToGlobal<__half, 8>(&T4[i1], T7);
      } else {
    #pragma unroll
        for (nvfuser_index_t i8 = 0; i8 < 8; ++i8) {
          nvfuser_index_t i9 = i1 + i8;
          if (i9 < T0.logical_size[0] * T0.logical_size[1]) {
            nvfuser_index_t i10 = i9 / T0.logical_size[1];
            nvfuser_index_t i11 = i9 % T0.logical_size[1];
            float v = T0[i10 * T0.alloc_stride[0] + i11 * T0.alloc_stride[1]] * s2 + T1[i11];
            T4[i9] = __float2half(relu(v));
          }
        }
      }
    }

    }  // namespace CudaCodeGen
    """
)


@pytest.fixture
def cache(tmp_path: Path) -> KernelCache:
    return KernelCache(tmp_path / "kernels")


def entry_of(ptx: str, symbol: str) -> bool:
    """A kernel entry: `.visible` for a plain kernel, `.weak` for a template instantiation."""
    return f".visible .entry {symbol}(" in ptx or f".weak .entry {symbol}(" in ptx


# --- the library ----------------------------------------------------------------------


def test_nvrtc_is_found_and_reports_its_version_and_architectures():
    lib = nvrtc_library.load_nvrtc()
    assert Path(lib.path).name.startswith("libnvrtc")
    major, minor = nvrtc_library.nvrtc_version()
    assert (major, minor) == lib.version and major >= 12
    assert 90 in nvrtc_library.supported_archs()


def test_the_dev_extras_nvrtc_wheel_is_the_one_used_and_bundles_the_cuda_headers():
    from importlib import metadata

    try:
        metadata.version("nvidia-cuda-nvrtc")
    except metadata.PackageNotFoundError:
        pytest.fail("nvidia-cuda-nvrtc is not installed: install the dev extras (pip install -e '.[dev]')")
    if os.environ.get(nvrtc_library.LIBRARY_ENV):
        pytest.skip(f"{nvrtc_library.LIBRARY_ENV} chooses the library")
    lib = nvrtc_library.load_nvrtc()
    assert f"{os.sep}nvidia{os.sep}" in lib.path, lib.path
    # The dev extra pins >=13.3, the first NVRTC that bundles cuda_fp16.h and friends.
    assert lib.version >= (13, 3) and lib.has_bundled_headers
    assert nvrtc_library.header_source(lib) == f"bundled:{lib.version[0]}.{lib.version[1]}"


@pytest.fixture
def fresh_library_search():
    nvrtc_library.load_nvrtc.cache_clear()
    yield
    nvrtc_library.load_nvrtc.cache_clear()


def test_no_library_is_a_fuser_error_naming_every_place_searched(monkeypatch, tmp_path, fresh_library_search):
    empty = tmp_path / "empty-lib"
    empty.mkdir()
    monkeypatch.delenv(nvrtc_library.LIBRARY_ENV, raising=False)
    places = [("test dir", empty), ("gone", tmp_path / "nowhere")]
    monkeypatch.setattr(nvrtc_library, "library_candidates", lambda: places)
    monkeypatch.setattr(nvrtc_library.ctypes.util, "find_library", lambda name: None)
    with pytest.raises(NvrtcNotFoundError) as info:
        compile_kernel(AXPY, "axpy", cache=KernelCache(disk=False))
    assert isinstance(info.value, FuserError)
    message = str(info.value)
    assert f"{empty} (test dir): no libnvrtc there" in message
    assert f"{tmp_path / 'nowhere'} (gone): does not exist" in message
    assert "find_library" in message and "nvidia-cuda-nvrtc" in message


def test_an_explicit_library_that_does_not_load_is_reported_not_bypassed(monkeypatch, tmp_path, fresh_library_search):
    bogus = tmp_path / "libnvrtc.so.13"
    bogus.write_text("not a shared object")
    monkeypatch.setenv(nvrtc_library.LIBRARY_ENV, str(bogus))
    with pytest.raises(NvrtcNotFoundError, match=r"cannot load it") as info:
        nvrtc_library.load_nvrtc()
    assert f"{bogus} (${nvrtc_library.LIBRARY_ENV})" in str(info.value)


def test_library_files_are_ordered_newest_first_and_skip_the_builtins(tmp_path):
    for name in ("libnvrtc.so.12", "libnvrtc.so.13", "libnvrtc-builtins.so.13.5", "libnvrtc_static.a", "libnvrtc.so"):
        (tmp_path / name).write_text("")
    found = nvrtc_library._libraries_in(tmp_path)
    assert [p.name for p in found] == ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"]


# --- architectures and options ----------------------------------------------------------


@pytest.mark.parametrize(
    ("capability", "expected"),
    [
        ((9, 0), "sm_90"),
        ((8, 6), "sm_86"),
        ((8, 9), "sm_89"),
        ((9, 1), "sm_90"),  # a cubin for 9.0 runs on 9.x
        ((10, 3), "sm_100"),
        ((13, 0), "compute_120"),  # newer than NVRTC: PTX for the driver to compile
    ],
)
def test_arch_for_a_compute_capability(capability, expected):
    assert nvrtc.arch_for(capability, supported=(75, 80, 86, 89, 90, 100, 120)) == expected


def test_arch_for_device_properties_and_a_too_old_device():
    assert nvrtc.arch_for(select_device("h100")) == "sm_90"
    with pytest.raises(FuserError, match="older than any architecture"):
        nvrtc.arch_for((6, 0), supported=(75, 90))


def test_default_options_leave_fast_math_off():
    assert nvrtc.DEFAULT_OPTIONS == ("--std=c++17", "-default-device")
    assert "--use_fast_math" not in nvrtc.default_options()
    assert nvrtc.default_options(line_info=True, fast_math=True)[-2:] == ("-lineinfo", "--use_fast_math")


# --- compiling ---------------------------------------------------------------------------


def test_extern_c_kernel_compiles_to_ptx_and_cubin_for_sm_90():
    module = nvrtc.compile_program(AXPY, "axpy", arch="sm_90")
    assert module.lowered_names == {"axpy": "axpy"} and module.symbol() == "axpy"
    assert ".visible .entry axpy(" in module.ptx
    assert ".target sm_90" in module.ptx
    assert module.cubin is not None and module.cubin.startswith(b"\x7fELF")
    assert module.image() == module.cubin
    assert module.compile_seconds > 0 and module.cache == "compiled" and not module.cache_hit
    assert module.nvrtc_version == nvrtc_library.nvrtc_version()


def test_a_virtual_architecture_gives_ptx_only():
    module = nvrtc.compile_program(AXPY, "axpy", arch="compute_90")
    assert entry_of(module.ptx, "axpy") and module.cubin is None
    assert module.image().endswith(b"\x00") and module.image()[:-1].decode() == module.ptx


def test_template_instantiations_get_their_mangled_names():
    names = ["CudaCodeGen::scale<float, 2>", "CudaCodeGen::scale<double, 3>"]
    module = nvrtc.compile_program(TEMPLATED, names, arch="sm_90")
    assert module.lowered_names == {
        "CudaCodeGen::scale<float, 2>": "_ZN11CudaCodeGen5scaleIfLi2EEEvPT_i",
        "CudaCodeGen::scale<double, 3>": "_ZN11CudaCodeGen5scaleIdLi3EEEvPT_i",
    }
    for name in names:
        assert f".weak .entry {module.symbol(name)}(" in module.ptx
    with pytest.raises(FuserError, match="name one"):
        module.symbol()
    with pytest.raises(FuserError, match="no kernel"):
        module.symbol("scale<int, 1>")


def test_cuda_fp16_and_bf16_headers_come_from_nvrtcs_bundled_headers():
    module = nvrtc.compile_program(HALF, "half_add", arch="sm_90")
    assert entry_of(module.ptx, "half_add")
    assert ".f16" in module.ptx  # the __hadd is a half-precision add


def test_a_typical_pointwise_kernel_compiles_with_and_without_lineinfo():
    module = nvrtc.compile_program(POINTWISE, POINTWISE_NAME, arch="sm_90")
    symbol = module.symbol(POINTWISE_NAME)
    assert symbol.startswith("_ZN11CudaCodeGen29nvfuser_pointwise_f0_c1_r0_g0")
    assert f".visible .entry {symbol}(" in module.ptx
    assert "ld.global.v4.f32" in module.ptx or "ld.global.v4.u32" in module.ptx  # vectorized loads
    assert ".loc" not in module.ptx
    with_lines = nvrtc.compile_program(POINTWISE, POINTWISE_NAME, options=nvrtc.default_options(line_info=True))
    assert ".loc" in with_lines.ptx


def test_a_syntax_error_is_a_fuser_error_showing_the_failing_line():
    source = AXPY.replace("y[i] = a * x[i] + y[i];", "y[i] = a * x[i] + y[i]")  # line 4 lacks its ';'
    with pytest.raises(KernelCompileError) as info:
        nvrtc.compile_program(source, "axpy", arch="sm_90")
    error = info.value
    assert isinstance(error, FuserError)
    message = str(error)
    assert "kernel.cu(5): error" in message  # NVRTC reports it where the next token is
    assert error.failing_lines == (5,)
    assert ">  5 |   }" not in message and "> 5 |   }" in message
    assert "  4 |     y[i] = a * x[i] + y[i]" in message  # the context around it, numbered
    assert "  3 |   if (i < n) {" in message
    assert error.log in message


def test_several_errors_show_each_failing_line_with_gaps_between():
    lines = ['extern "C" __global__ void k(float* x) {'] + [f"  x[{i}] = {i};" for i in range(20)] + ["}"]
    lines[3] = "  x[2] = undefined_a;"
    lines[17] = "  x[16] = undefined_b;"
    with pytest.raises(KernelCompileError) as info:
        nvrtc.compile_program("\n".join(lines) + "\n", "k")
    assert info.value.failing_lines == (4, 18)
    message = str(info.value)
    assert '"undefined_a" is undefined' in message and '"undefined_b" is undefined' in message
    assert ">  4 |   x[2] = undefined_a;" in message and "> 18 |   x[16] = undefined_b;" in message
    assert "   ..." in message  # lines 7 to 15 are not shown


def test_an_unknown_kernel_name_an_option_or_an_architecture_is_a_fuser_error():
    with pytest.raises(KernelCompileError, match=r"not defined in the source: \['axpy2'\]"):
        nvrtc.compile_program(AXPY, "axpy2")
    with pytest.raises(KernelCompileError, match="unrecognized option --no-such-option"):
        nvrtc.compile_program(AXPY, "axpy", options=["--no-such-option"])
    with pytest.raises(KernelCompileError, match="This NVRTC supports sm_"):
        nvrtc.compile_program(AXPY, "axpy", arch="sm_91")
    with pytest.raises(FuserError, match="not of the form"):
        nvrtc.compile_program(AXPY, "axpy", arch="hopper")
    with pytest.raises(FuserError, match="pass the architecture as arch"):
        nvrtc.compile_program(AXPY, "axpy", options=["--gpu-architecture=sm_80"])


def test_failing_lines_reads_only_errors_of_the_kernel_file():
    log = (
        "kernel.cu(7): warning #177-D: variable x was declared but never referenced\n"
        "kernel.cu(12): error: expected a ;\n"
        "__nv_name_map(2): error: identifier k is undefined\n"
        "kernel.cu(3): catastrophic error: cannot open source file foo.h\n"
        "kernel.cu(12): error: another one on the same line\n"
    )
    assert nvrtc.failing_lines(log) == (12, 3)


def test_source_excerpt_numbers_and_marks_lines():
    source = "\n".join(f"line {i}" for i in range(1, 11))
    assert nvrtc.source_excerpt(source, [1], context=1) == "> 1 | line 1\n  2 | line 2"
    excerpt = nvrtc.source_excerpt(source, [2, 9], context=1)
    assert excerpt.splitlines() == [
        "   1 | line 1",
        ">  2 | line 2",
        "   3 | line 3",
        "     ...",
        "   8 | line 8",
        ">  9 | line 9",
        "  10 | line 10",
    ]


# --- the cache -----------------------------------------------------------------------------


def test_cache_keys_differ_in_every_input_and_only_then():
    def key(
        source: str = AXPY,
        arch: str = "sm_90",
        version: tuple[int, int] = (13, 5),
        options: tuple[str, ...] = ("--std=c++17",),
        names: tuple[str, ...] = ("axpy",),
        headers: str = "",
    ) -> str:
        return cache_key(source, arch, version, options, names, headers)

    base = key()
    assert base == key() and len(base) == 64
    variants = {
        key(source=AXPY + "\n"),
        key(arch="sm_80"),
        key(version=(13, 4)),
        key(options=("--std=c++17", "-lineinfo")),
        key(options=()),
        key(names=("axpy", "other")),
        key(headers="bundled:13.5"),
    }
    assert len(variants) == 7 and base not in variants


def test_compiles_with_different_options_or_arch_are_different_entries(cache):
    first = cache.compile(AXPY, "axpy", arch="sm_90")
    assert cache.compile(AXPY, "axpy", arch="sm_90", options=nvrtc.default_options(line_info=True)).key != first.key
    assert cache.compile(AXPY, "axpy", arch="sm_80").key != first.key
    assert cache.compiles == 3
    assert len(list(cache.directory.rglob("*.kernel"))) == 3


def test_a_second_compile_in_this_process_is_a_memory_hit_without_nvrtc(cache, monkeypatch):
    compiled = cache.compile(AXPY, "axpy")
    assert compiled.cache == "compiled"

    def no_nvrtc(*args, **kwargs):
        raise AssertionError("NVRTC was called on a cache hit")

    monkeypatch.setattr(nvrtc_library.NvrtcLibrary, "compile", no_nvrtc)
    hit = cache.compile(AXPY, "axpy")
    assert hit.cache == "memory" and hit.cache_hit
    assert (hit.ptx, hit.cubin, hit.key) == (compiled.ptx, compiled.cubin, compiled.key)
    assert (cache.compiles, cache.memory_hits, cache.disk_hits) == (1, 1, 0)


def test_the_entry_is_written_atomically_and_leaves_no_temporary_file(cache):
    module = cache.compile(AXPY, "axpy")
    path = cache.entry_path(module.key)
    assert path is not None and path.is_file()
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    stored = decode_entry(path.read_bytes(), module.key)
    assert (stored.ptx, stored.cubin, stored.lowered_names, stored.options) == (
        module.ptx,
        module.cubin,
        module.lowered_names,
        module.options,
    )
    assert stored.cache == "disk" and stored.compile_seconds == module.compile_seconds


_CHILD = textwrap.dedent(
    """\
    import hashlib, json, sys
    from fuser_core.runtime import kernel_cache, nvrtc_library

    calls = []
    if sys.argv[1] == "forbid":
        def no_nvrtc(*args, **kwargs):
            calls.append(args)
            raise AssertionError("NVRTC was called on a cache hit")
        nvrtc_library.NvrtcLibrary.compile = no_nvrtc
    source = open(sys.argv[2]).read()
    module = kernel_cache.compile_kernel(source, sys.argv[3], arch="sm_90")
    print(json.dumps({
        "cache": module.cache,
        "key": module.key,
        "ptx": hashlib.sha256(module.ptx.encode()).hexdigest(),
        "cubin": hashlib.sha256(module.cubin or b"").hexdigest(),
        "symbol": module.symbol(),
        "nvrtc_calls": len(calls),
    }))
    """
)


def run_child(tmp_path: Path, mode: str, cache_dir: Path) -> dict:
    script, source = tmp_path / "child.py", tmp_path / "kernel.cu"
    script.write_text(_CHILD)
    source.write_text(POINTWISE)
    env = {**os.environ, "FUSER_KERNEL_CACHE": str(cache_dir), "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, str(script), mode, str(source), POINTWISE_NAME],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_new_process_finds_the_kernel_on_disk_and_compiles_nothing(tmp_path):
    cache_dir = tmp_path / "kernels"
    first = run_child(tmp_path, "compile", cache_dir)
    assert first["cache"] == "compiled"
    second = run_child(tmp_path, "forbid", cache_dir)  # NVRTC's compile raises in this process
    assert second["cache"] == "disk" and second["nvrtc_calls"] == 0
    assert {k: second[k] for k in ("key", "ptx", "cubin", "symbol")} == {
        k: first[k] for k in ("key", "ptx", "cubin", "symbol")
    }
    # The forbidding child would fail on a miss: prove that it can, with an empty cache.
    result = subprocess.run(
        [sys.executable, str(tmp_path / "child.py"), "forbid", str(tmp_path / "kernel.cu"), POINTWISE_NAME],
        capture_output=True,
        text=True,
        env={**os.environ, "FUSER_KERNEL_CACHE": str(tmp_path / "empty"), "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode != 0 and "NVRTC was called on a cache hit" in result.stderr


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda data: b"garbage" + data, "bad magic"),
        (lambda data: data[: len(data) // 2], "truncated"),
        (lambda data: data[:-1] + bytes([data[-1] ^ 0xFF]), "checksum mismatch"),
        (lambda data: data[:30] + b"\xff\xfe" + data[32:], "unreadable header"),
        (lambda data: b"", "bad magic"),
    ],
)
def test_a_corrupt_entry_is_recompiled_and_rewritten(tmp_path, damage, reason):
    directory = tmp_path / "kernels"
    module = KernelCache(directory).compile(AXPY, "axpy")
    path = KernelCache(directory).entry_path(module.key)
    assert path is not None
    path.write_bytes(damage(path.read_bytes()))

    again = KernelCache(directory)
    recompiled = again.compile(AXPY, "axpy")
    assert recompiled.cache == "compiled" and again.compiles == 1
    assert reason in recompiled.cache_note and "recompiled" in recompiled.cache_note
    assert recompiled.ptx == module.ptx
    assert KernelCache(directory).compile(AXPY, "axpy").cache == "disk"  # the rewrite is good


def test_an_entry_of_another_key_is_not_used(tmp_path):
    directory = tmp_path / "kernels"
    axpy = KernelCache(directory).compile(AXPY, "axpy")
    other = KernelCache(directory).compile(AXPY.replace("a * x[i]", "2.0f * a * x[i]"), "axpy")
    other_path, axpy_path = KernelCache(directory).entry_path(other.key), KernelCache(directory).entry_path(axpy.key)
    assert other_path is not None and axpy_path is not None
    axpy_path.write_bytes(other_path.read_bytes())
    recompiled = KernelCache(directory).compile(AXPY, "axpy")
    assert recompiled.cache == "compiled" and "entry of another key" in recompiled.cache_note


def test_an_unreadable_and_unwritable_entry_costs_only_the_caching(tmp_path):
    directory = tmp_path / "kernels"
    key = KernelCache(directory).compile(AXPY, "axpy").key
    path = KernelCache(directory).entry_path(key)
    assert path is not None
    path.unlink()
    (path / "in-the-way").mkdir(parents=True)  # the entry is now a non-empty directory
    cache = KernelCache(directory)
    with pytest.warns(RuntimeWarning, match="could not write"):
        module = cache.compile(AXPY, "axpy")
    assert module.cache == "compiled" and "unreadable" in module.cache_note
    assert entry_of(module.ptx, "axpy")
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # the temporary file is gone


def test_the_cache_directory_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("FUSER_KERNEL_CACHE", str(tmp_path / "mine"))
    assert kernel_cache.default_cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("FUSER_KERNEL_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert kernel_cache.default_cache_dir() == tmp_path / "xdg" / "fuser-workbench" / "kernels"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert kernel_cache.default_cache_dir() == tmp_path / "home" / ".cache" / "fuser-workbench" / "kernels"
    monkeypatch.setenv("FUSER_KERNEL_CACHE", "off")
    assert kernel_cache.default_cache_dir() is None


def test_with_the_disk_cache_off_nothing_is_written(monkeypatch, tmp_path):
    monkeypatch.setenv("FUSER_KERNEL_CACHE", "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    cache = KernelCache()
    assert cache.compile(AXPY, "axpy").cache == "compiled"
    assert cache.compile(AXPY, "axpy").cache == "memory"
    assert not (tmp_path / "xdg" / "fuser-workbench" / "kernels").exists()


def test_compile_kernel_takes_device_properties_and_uses_the_default_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("FUSER_KERNEL_CACHE", str(tmp_path / "kernels"))
    source = AXPY.replace("axpy", "axpy_default_cache")
    module = compile_kernel(source, "axpy_default_cache", arch=select_device("h200"))
    assert isinstance(module, CompiledModule) and module.arch == "sm_90"
    assert kernel_cache.default_cache().entry_path(module.key) == next((tmp_path / "kernels").rglob("*.kernel"))
    assert compile_kernel(source, "axpy_default_cache", arch=(9, 0)).cache == "memory"


def test_a_compile_error_through_the_cache_is_the_same_fuser_error_and_caches_nothing(cache):
    with pytest.raises(KernelCompileError, match=r"kernel.cu\(2\): error"):
        cache.compile('extern "C" __global__ void k() {\n  undefined_name;\n}\n', "k")
    assert cache.compiles == 0 and not list(cache.directory.rglob("*.kernel"))
