"""The CUDA C++ that every generated kernel includes ahead of its own code: our small
runtime header, and the random-number header kernels that draw random numbers add.

The runtime header holds the Tensor argument struct, 16-bit float types converted with
PTX `cvt`, vector types for 16-byte accesses, the device functions the element-wise ops
print as (`where`, `relu`, NaN-propagating `fuser_fmax`, ...), and the block and grid
reductions (`blockReduce`, `blockWelford`, `gridReduce`, ...). It is C++ text, kept
apart from the printer (`codegen.cuda`) that emits the calls into it, so a fault of a
device function is found here and one of the printed kernel there.
"""

RUNTIME_HEADER = r"""
// ---- Fuser Workbench runtime header ----
#define FUSER_INF __int_as_float(0x7f800000)
#define FUSER_NAN __int_as_float(0x7fffffff)
// NVRTC has no math.h: double infinity and NaN by their bits.
#define FUSER_INF_D __longlong_as_double(0x7ff0000000000000LL)
#define FUSER_NAN_D __longlong_as_double(0x7ff8000000000000LL)

template <typename T, int N, int A>
struct Tensor {
  T* data;
  nvfuser_index_t logical_size[N > 0 ? N : 1];
  nvfuser_index_t alloc_stride[A > 0 ? A : 1];
  __device__ T& operator[](nvfuser_index_t i) { return data[i]; }
};

template <typename T, int W>
struct alignas(sizeof(T) * W) Vec {
  T v[W];
};

template <typename T, int W>
__device__ __forceinline__ void vectorCopy(T* dst, const T* src) {
  *reinterpret_cast<Vec<T, W>*>(dst) = *reinterpret_cast<const Vec<T, W>*>(src);
}

// A vector stored to global memory evict-first (st.global.cs): lines L2 should give up
// before the rows a kernel has yet to re-read.
template <typename T, int W>
__device__ __forceinline__ void vectorStoreStreaming(T* dst, const T* src) {
  constexpr int bytes = sizeof(T) * W;
  if constexpr (bytes == 16) {
    __stcs(reinterpret_cast<uint4*>(dst), *reinterpret_cast<const uint4*>(src));
  } else if constexpr (bytes == 8) {
    __stcs(reinterpret_cast<uint2*>(dst), *reinterpret_cast<const uint2*>(src));
  } else if constexpr (bytes == 4) {
    __stcs(reinterpret_cast<unsigned int*>(dst), *reinterpret_cast<const unsigned int*>(src));
  } else {
    vectorCopy<T, W>(dst, src);
  }
}

struct alignas(2) __half { unsigned short x; };
struct alignas(2) __bfloat { unsigned short x; };

__device__ __forceinline__ __half __float2half(const float f) {
  __half h;
  asm("{ cvt.rn.f16.f32 %0, %1; }\n" : "=h"(h.x) : "f"(f));
  return h;
}
__device__ __forceinline__ float __half2float(const __half h) {
  float f;
  asm("{ cvt.f32.f16 %0, %1; }\n" : "=f"(f) : "h"(h.x));
  return f;
}
__device__ __forceinline__ __bfloat __float2bfloat(const float f) {
  __bfloat b;
  asm("{ cvt.rn.bf16.f32 %0, %1; }\n" : "=h"(b.x) : "f"(f));
  return b;
}
__device__ __forceinline__ float __bfloat2float(const __bfloat b) {
  return __uint_as_float(static_cast<unsigned int>(b.x) << 16);
}
// From double in one rounding, as NumPy (through float it would round twice).
__device__ __forceinline__ __half __double2half(const double d) {
  __half h;
  asm("{ cvt.rn.f16.f64 %0, %1; }\n" : "=h"(h.x) : "d"(d));
  return h;
}

template <typename T> __device__ __forceinline__ T where(bool c, T a, T b) { return c ? a : b; }
// Mixed operand types (an int64_t tensor value with an int literal, ...): C's common type.
template <typename A, typename B> __device__ __forceinline__ auto where(bool c, A a, B b) -> decltype(c ? a : b) {
  return c ? a : b;
}
__device__ __forceinline__ float relu(float x) { return x > 0.f ? x : 0.f; }
__device__ __forceinline__ double relu(double x) { return x > 0. ? x : 0.; }
__device__ __forceinline__ int relu(int x) { return x > 0 ? x : 0; }
__device__ __forceinline__ int64_t relu(int64_t x) { return x > 0 ? x : 0; }
__device__ __forceinline__ float sigmoid(float x) { return 1.f / (1.f + expf(-x)); }
__device__ __forceinline__ double sigmoid(double x) { return 1. / (1. + exp(-x)); }
__device__ __forceinline__ float silu(float x) { return x / (1.f + expf(-x)); }
__device__ __forceinline__ double silu(double x) { return x / (1. + exp(-x)); }
__device__ __forceinline__ float reciprocal(float x) { return 1.f / x; }
// a / b with the bits of IEEE division, for a divisor that stays the same across a loop (a
// row's sum): the reciprocal and the divisor's range check depend on b alone, so the compiler
// computes them once, outside the loop, and each element pays a product and two FMAs instead
// of a reciprocal, its refinement and FCHK. Markstein: with r = RN(1/b) and q = RN(a * r)
// (within an ulp of a / b), the remainder a - b * q is exact in one FMA and RN(q + rem * r)
// is RN(a / b), provided no step leaves the normal range; operands outside [2^-62, 2^62)
// (zeros, subnormals, infinities, NaNs) take the division itself.
__device__ __forceinline__ float fuser_div_invariant(float a, float b) {
  const float r = __frcp_rn(b);
  const bool b_in_range = fabsf(b) >= 2.168404344971009e-19f && fabsf(b) < 4.611686018427388e18f;
  if (b_in_range && fabsf(a) >= 2.168404344971009e-19f && fabsf(a) < 4.611686018427388e18f) {
    const float q = __fmul_rn(a, r);
    return __fmaf_rn(__fmaf_rn(-b, q, a), r, q);
  }
  return a / b;
}
__device__ __forceinline__ double reciprocal(double x) { return 1. / x; }
template <typename T> __device__ __forceinline__ T sign(T x) { return (T)((x > (T)0) - (x < (T)0)); }
template <typename T> __device__ __forceinline__ T fuser_fmax(T a, T b) {
  return (a != a) ? a : ((b != b) ? b : (a > b ? a : b));
}
template <typename T> __device__ __forceinline__ T fuser_fmin(T a, T b) {
  return (a != a) ? a : ((b != b) ? b : (a < b ? a : b));
}
#if __CUDA_ARCH__ >= 800
// One instruction where the hardware has it: max.NaN / min.NaN propagate a NaN operand.
template <> __device__ __forceinline__ float fuser_fmax<float>(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
template <> __device__ __forceinline__ float fuser_fmin<float>(float a, float b) {
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
#endif
__device__ __forceinline__ float remainder(float a, float b) {
  float r = fmodf(a, b);
  return (r != 0.f && ((r < 0.f) != (b < 0.f))) ? r + b : r;
}
__device__ __forceinline__ double remainder(double a, double b) {
  double r = fmod(a, b);
  return (r != 0. && ((r < 0.) != (b < 0.))) ? r + b : r;
}
// Integer fmod is C's truncating `%` (CUDA's fmod overloads are ambiguous for integers);
// a zero divisor gives 0, as the reference's NumPy does, not undefined behaviour.
template <typename T> __device__ __forceinline__ T fuser_ifmod(T a, T b) { return b == 0 ? T(0) : T(a % b); }
template <typename T> __device__ __forceinline__ T fuser_iremainder(T a, T b) {
  T r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
template <typename T, typename U> __device__ __forceinline__ auto ceilDiv(T a, U b) -> decltype(a + b) {
  return (a + b - 1) / b;
}
// A 32-bit index divided by a run-time extent: a GPU has no integer divider, and `/` or
// `%` by a variable is a ~20-instruction subroutine. The host computes the extent's magic
// numbers (fuser_core/codegen/magic_division.py): shift = ceil(log2 d),
// magic = floor(2^32 (2^shift - d) / d) + 1; exact for 0 <= n < 2^31, where the sum
// cannot overflow. Only kernels with 32-bit indices use it, on non-negative index math.
struct FastDivisor {
  unsigned int divisor;
  unsigned int magic;
  unsigned int shift;
};
__device__ __forceinline__ int fastDiv(int n, FastDivisor d) {
  return (int)((__umulhi((unsigned int)n, d.magic) + (unsigned int)n) >> d.shift);
}
__device__ __forceinline__ int fastMod(int n, FastDivisor d) { return n - fastDiv(n, d) * (int)d.divisor; }
template <typename T, typename U> __device__ __forceinline__ T fuser_ipow(T a, U b) {
  if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
  T r = 1;
  while (b) { if (b & 1) r *= a; a *= a; b >>= 1; }
  return r;
}
__device__ __forceinline__ bool fuser_ipow(bool a, bool b) { return a || !b; }
// Integer signbit: CUDA's float and double overloads are ambiguous for an integer.
__device__ __forceinline__ bool signbit(bool) { return false; }
__device__ __forceinline__ bool signbit(signed char x) { return x < 0; }
__device__ __forceinline__ bool signbit(unsigned char) { return false; }
__device__ __forceinline__ bool signbit(short x) { return x < 0; }
__device__ __forceinline__ bool signbit(unsigned short) { return false; }
__device__ __forceinline__ bool signbit(int x) { return x < 0; }
__device__ __forceinline__ bool signbit(unsigned int) { return false; }
__device__ __forceinline__ bool signbit(long x) { return x < 0; }
__device__ __forceinline__ bool signbit(unsigned long) { return false; }
__device__ __forceinline__ bool signbit(long long x) { return x < 0; }
__device__ __forceinline__ bool signbit(unsigned long long) { return false; }
// Shifts defined for every amount, as torch and nvFuser give them (C leaves an amount
// outside [0, bits) undefined): a left shift by too much gives 0, a right shift the sign
// fill (0 for unsigned types and non-negative values, -1 for negative ones).
template <typename T, typename U> __device__ __forceinline__ auto fuser_lshift(T a, U b) -> decltype(a << b) {
  using R = decltype(a << b);
  constexpr long long bits = sizeof(R) * 8;
  return (b < 0 || static_cast<long long>(b) >= bits) ? R(0) : static_cast<R>(a << b);
}
template <typename T, typename U> __device__ __forceinline__ auto fuser_rshift(T a, U b) -> decltype(a >> b) {
  using R = decltype(a >> b);
  constexpr long long bits = sizeof(R) * 8;
  return (b < 0 || static_cast<long long>(b) >= bits) ? (a < 0 ? R(-1) : R(0)) : static_cast<R>(a >> b);
}
__device__ __forceinline__ float lerp(float s, float e, float w) {
  return w < 0.5f ? s + w * (e - s) : e - (e - s) * (1.f - w);
}
__device__ __forceinline__ double lerp(double s, double e, double w) {
  return w < 0.5 ? s + w * (e - s) : e - (e - s) * (1. - w);
}
template <typename T> __device__ __forceinline__ T clamp(T x, T lo, T hi) {
  return fuser_fmin(fuser_fmax(x, lo), hi);
}
template <typename T> __device__ __forceinline__ T threshold(T x, T t, T v) { return x <= t ? v : x; }
__device__ __forceinline__ float frac(float x) { return x - truncf(x); }
__device__ __forceinline__ double frac(double x) { return x - trunc(x); }
template <typename T> __device__ __forceinline__ T gcd(T a, T b) {
  a = a < 0 ? -a : a;
  b = b < 0 ? -b : b;
  while (b != 0) { T t = a % b; a = b; b = t; }
  return a;
}
template <typename T> __device__ __forceinline__ bool isneginf(T x) { return isinf(x) && x < 0; }
template <typename T> __device__ __forceinline__ bool isposinf(T x) { return isinf(x) && x > 0; }
template <typename T> __device__ __forceinline__ bool isreal(T) { return true; }
// ---- reductions ----
template <typename T> __device__ __forceinline__ T fuser_shfl_xor(T v, int lane_mask) {
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
}
__device__ __forceinline__ bool fuser_shfl_xor(bool v, int lane_mask) {
  return __shfl_xor_sync(0xffffffffu, static_cast<int>(v), lane_mask) != 0;
}

// The position of this thread in its reduction group (threads along the reduced dims)
// and the group's number among the block's groups.
template <bool RX, bool RY, bool RZ>
__device__ __forceinline__ void reductionGroup(unsigned& rank, unsigned& size, unsigned& group) {
  size = (RX ? blockDim.x : 1) * (RY ? blockDim.y : 1) * (RZ ? blockDim.z : 1);
  rank = ((RZ ? threadIdx.z : 0) * (RY ? blockDim.y : 1) + (RY ? threadIdx.y : 0)) * (RX ? blockDim.x : 1) +
         (RX ? threadIdx.x : 0);
  group = ((RZ ? 0 : threadIdx.z) * (RY ? 1 : blockDim.y) + (RY ? 0 : threadIdx.y)) * (RX ? 1 : blockDim.x) +
          (RX ? 0 : threadIdx.x);
}

// Every thread of a group gets the group's result (an allreduce). `scratch` holds one
// element per thread of the block; every thread of the block must call it.
template <bool RX, bool RY, bool RZ, typename T, typename Op>
__device__ __forceinline__ T blockReduce(T value, T* scratch, Op op) {
  if (RX && !RY && !RZ && (blockDim.x & 31) == 0) {
    // Warps lie inside one group: shuffle within warps, then combine the warps' results.
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) value = op(value, fuser_shfl_xor(value, offset));
    if (blockDim.x == 32) return value;
    const unsigned warps = blockDim.x >> 5;
    const unsigned base = threadIdx.y * warps + threadIdx.z * blockDim.y * warps;
    __syncthreads();  // the previous reduction's readers are done with scratch
    if ((threadIdx.x & 31) == 0) scratch[base + (threadIdx.x >> 5)] = value;
    __syncthreads();
    if ((warps & (warps - 1)) == 0) {
      // Each run of `warps` lanes reads the warps' results and shuffles them together:
      // one load and log2(warps) shuffles instead of a load and an op per warp. Every lane
      // combines the same values in the same tree, so the lanes agree wherever op(a, b)
      // and op(b, a) have the same bits (sums, products; max and min but for signed zeros
      // and NaN payloads, as in the warp's own shuffles above).
      T result = scratch[base + (threadIdx.x & (warps - 1))];
#pragma unroll
      for (unsigned offset = 16; offset > 0; offset >>= 1) {
        if (offset < warps) result = op(result, fuser_shfl_xor(result, offset));
      }
      return result;
    }
    T result = scratch[base];
    for (unsigned w = 1; w < warps; ++w) result = op(result, scratch[base + w]);
    return result;
  }
  unsigned rank, size, group;
  reductionGroup<RX, RY, RZ>(rank, size, group);
  if (size == 1) return value;  // reduced thread axes of extent 1 (the same in every thread)
  T* mine = scratch + group * size;
  __syncthreads();
  mine[rank] = value;
  __syncthreads();
  unsigned half = 1;
  while (half * 2 <= size) half *= 2;
  if (rank + half < size) mine[rank] = op(mine[rank], mine[rank + half]);
  __syncthreads();
  for (unsigned stride = half / 2; stride > 0; stride >>= 1) {
    if (rank < stride) mine[rank] = op(mine[rank], mine[rank + stride]);
    __syncthreads();
  }
  return mine[0];
}

// Chan's combination of two partial (avg, M2, N) triples into the first.
template <typename T, typename N>
__device__ __forceinline__ void welfordCombine(T& avg, T& m2, N& n, T avg_b, T m2_b, N n_b) {
  if (n_b == 0) return;
  if (n == 0) { avg = avg_b; m2 = m2_b; n = n_b; return; }
  const N total = n + n_b;
  const T delta = avg_b - avg;
  const T weight = static_cast<T>(n_b) / static_cast<T>(total);
  avg += delta * weight;
  m2 += m2_b + delta * delta * static_cast<T>(n) * weight;
  n = total;
}

template <bool RX, bool RY, bool RZ, typename T, typename N>
__device__ __forceinline__ void blockWelford(T& avg, T& m2, N& n, T* s_avg, T* s_m2, N* s_n) {
  if (RX && !RY && !RZ && (blockDim.x & 31) == 0) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      const T avg_b = fuser_shfl_xor(avg, offset), m2_b = fuser_shfl_xor(m2, offset);
      const N n_b = fuser_shfl_xor(n, offset);
      welfordCombine(avg, m2, n, avg_b, m2_b, n_b);
    }
    if (blockDim.x == 32) return;
    const unsigned warps = blockDim.x >> 5;
    const unsigned base = (threadIdx.z * blockDim.y + threadIdx.y) * warps;
    __syncthreads();
    if ((threadIdx.x & 31) == 0) {
      s_avg[base + (threadIdx.x >> 5)] = avg; s_m2[base + (threadIdx.x >> 5)] = m2; s_n[base + (threadIdx.x >> 5)] = n;
    }
    __syncthreads();
    avg = s_avg[base]; m2 = s_m2[base]; n = s_n[base];
    for (unsigned w = 1; w < warps; ++w) welfordCombine(avg, m2, n, s_avg[base + w], s_m2[base + w], s_n[base + w]);
    return;
  }
  unsigned rank, size, group;
  reductionGroup<RX, RY, RZ>(rank, size, group);
  if (size == 1) return;  // reduced thread axes of extent 1 (the same in every thread)
  const unsigned base = group * size;
  __syncthreads();
  s_avg[base + rank] = avg; s_m2[base + rank] = m2; s_n[base + rank] = n;
  __syncthreads();
  unsigned half = 1;
  while (half * 2 <= size) half *= 2;
  for (unsigned stride = half; stride > 0; stride >>= 1) {
    if (rank < stride && rank + stride < size) {
      T a = s_avg[base + rank], m = s_m2[base + rank];
      N c = s_n[base + rank];
      welfordCombine(a, m, c, s_avg[base + rank + stride], s_m2[base + rank + stride], s_n[base + rank + stride]);
      s_avg[base + rank] = a; s_m2[base + rank] = m; s_n[base + rank] = c;
    }
    __syncthreads();
  }
  avg = s_avg[base]; m2 = s_m2[base]; n = s_n[base];
}

// Where a thread's partial results go in a grid reduction's work buffer: `blocks` blocks
// along the reduced grid dims combine into each `segment` (one per block along the others).
template <bool BX, bool BY, bool BZ>
struct GridSlot {
  unsigned blocks, segment, threads, tid, rank;
  unsigned long long stride, slot, first;
  __device__ __forceinline__ GridSlot() {
    blocks = (BX ? gridDim.x : 1) * (BY ? gridDim.y : 1) * (BZ ? gridDim.z : 1);
    rank = ((BZ ? blockIdx.z : 0) * (BY ? gridDim.y : 1) + (BY ? blockIdx.y : 0)) *
                              (BX ? gridDim.x : 1) + (BX ? blockIdx.x : 0);
    segment = ((BZ ? 0 : blockIdx.z) * (BY ? 1 : gridDim.y) + (BY ? 0 : blockIdx.y)) * (BX ? 1 : gridDim.x) +
              (BX ? 0 : blockIdx.x);
    threads = blockDim.x * blockDim.y * blockDim.z;
    tid = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    stride = static_cast<unsigned long long>(gridDim.x) * gridDim.y * gridDim.z * threads;
    slot = (static_cast<unsigned long long>(segment) * blocks + rank) * threads + tid;
    first = static_cast<unsigned long long>(segment) * blocks * threads + tid;
  }
};

// Every thread stores its block-reduced values[0..COUNT) to `work`.
template <bool BX, bool BY, bool BZ, int COUNT, typename T>
__device__ __forceinline__ void gridStore(const T* values, T* work) {
  const GridSlot<BX, BY, BZ> g;
#pragma unroll
  for (int c = 0; c < COUNT; ++c) work[c * g.stride + g.slot] = values[c];
}

// Blocks combine in a two-level tree, so that no block reads every block's partials
// (an inner-outer kernel's wave of 256 blocks x 4096 columns: about 8 MiB for one
// block). The blocks of a segment form groups of `fan` consecutive ranks; the last of a
// group to arrive folds its group's partials into the slots of the group's first rank,
// then arrives at the segment's top count; the last of those combines the groups' slots.
// Up to 64 blocks are one group (one level). The order of every combination is fixed by
// rank, whichever block arrives last: results are deterministic. Semaphores: 2 ints per
// block of the launch; a segment's group counts at [2 * segment * blocks + group], its top
// count at [2 * segment * blocks + blocks].
// Another block's partials: read from L2 (L1 is not coherent across blocks).
template <typename T>
__device__ __forceinline__ T loadGlobalCoherent(const T* p) { return *reinterpret_cast<const volatile T*>(p); }
template <> __device__ __forceinline__ float loadGlobalCoherent(const float* p) { return __ldcg(p); }
template <> __device__ __forceinline__ double loadGlobalCoherent(const double* p) { return __ldcg(p); }
template <> __device__ __forceinline__ int loadGlobalCoherent(const int* p) { return __ldcg(p); }
template <> __device__ __forceinline__ long long loadGlobalCoherent(const long long* p) { return __ldcg(p); }

__device__ __forceinline__ unsigned gridFan(unsigned blocks) {
  if (blocks <= 64) return blocks;
  unsigned fan = 1;
  while (fan * fan < blocks) ++fan;
  return fan;
}

// Arrival within the group: `group_last` is true in the last block of its group to arrive,
// which resets the group's count for the next launch.
template <bool BX, bool BY, bool BZ>
__device__ __forceinline__ void gridArriveGroup(int* semaphores, bool& group_last) {
  const GridSlot<BX, BY, BZ> g;
  const unsigned fan = gridFan(g.blocks), group = g.rank / fan;
  const unsigned members = min(fan, g.blocks - group * fan);
  __threadfence();
  __syncthreads();
  __shared__ bool block_is_last;
  if (g.tid == 0) {
    int* count = &semaphores[2ull * g.segment * g.blocks + group];
    block_is_last = atomicAdd(count, 1) == static_cast<int>(members) - 1;
    if (block_is_last) *count = 0;
  }
  __syncthreads();
  group_last = block_is_last;
  if (group_last) __threadfence();
}

// In a group's last block: its group's partials folded, in rank order, into the slots of
// its first rank. The slots are walked outermost and every value of a slot is loaded at
// once, so a thread waits for one L2 round trip a slot, not one a partial: this fold and
// gridCombine's are on the kernel's critical path (the last block to finish its rows
// waits through both), and layer_norm_bwd's 2 x 8 values a thread took about 30 us
// there. Each value is still combined in rank order. Not unrolled further: unrolling the
// slots by 4 cost that kernel 20 us (its row loop, at the register limit, got slower).
template <bool BX, bool BY, bool BZ, int COUNT, typename T, typename Op>
__device__ __forceinline__ void gridCombineGroup(T* work, Op op) {
  const GridSlot<BX, BY, BZ> g;
  const unsigned fan = gridFan(g.blocks), first = (g.rank / fan) * fan;
  if (fan == g.blocks) return;  // one group: the last block combines every partial itself
  const unsigned members = min(fan, g.blocks - first);
  T* at = work + g.first + static_cast<unsigned long long>(first) * g.threads;
  T result[COUNT];
#pragma unroll
  for (int c = 0; c < COUNT; ++c) result[c] = loadGlobalCoherent(at + c * g.stride);
#pragma unroll 1
  for (unsigned b = 1; b < members; ++b) {
    const T* other = at + static_cast<unsigned long long>(b) * g.threads;
#pragma unroll
    for (int c = 0; c < COUNT; ++c) result[c] = op(result[c], loadGlobalCoherent(other + c * g.stride));
  }
#pragma unroll
  for (int c = 0; c < COUNT; ++c) at[c * g.stride] = result[c];
}

template <bool BX, bool BY, bool BZ, int COUNT, typename T, typename N>
__device__ __forceinline__ void gridWelfordCombineGroup(T* w_avg, T* w_m2, N* w_n) {
  const GridSlot<BX, BY, BZ> g;
  const unsigned fan = gridFan(g.blocks), first = (g.rank / fan) * fan;
  if (fan == g.blocks) return;  // one group: the last block combines every partial itself
  const unsigned members = min(fan, g.blocks - first);
  const unsigned long long at = g.first + static_cast<unsigned long long>(first) * g.threads;
  T a[COUNT], m[COUNT];
  N count[COUNT];
#pragma unroll
  for (int c = 0; c < COUNT; ++c) {
    a[c] = loadGlobalCoherent(w_avg + at + c * g.stride);
    m[c] = loadGlobalCoherent(w_m2 + at + c * g.stride);
    count[c] = loadGlobalCoherent(w_n + at + c * g.stride);
  }
#pragma unroll 1
  for (unsigned b = 1; b < members; ++b) {
    const unsigned long long other = at + static_cast<unsigned long long>(b) * g.threads;
#pragma unroll
    for (int c = 0; c < COUNT; ++c) {
      welfordCombine(a[c], m[c], count[c], loadGlobalCoherent(w_avg + other + c * g.stride),
                     loadGlobalCoherent(w_m2 + other + c * g.stride), loadGlobalCoherent(w_n + other + c * g.stride));
    }
  }
#pragma unroll
  for (int c = 0; c < COUNT; ++c) {
    w_avg[at + c * g.stride] = a[c]; w_m2[at + c * g.stride] = m[c]; w_n[at + c * g.stride] = count[c];
  }
}

// After its group is folded, a group's last block arrives at the segment's top count;
// `last` is true in the last of them (with one group, in the group's last block).
template <bool BX, bool BY, bool BZ>
__device__ __forceinline__ void gridArriveTop(int* semaphores, bool group_last, bool& last) {
  const GridSlot<BX, BY, BZ> g;
  const unsigned fan = gridFan(g.blocks), groups = (g.blocks + fan - 1) / fan;
  if (groups == 1 || !group_last) {
    last = group_last && groups == 1;
    return;
  }
  __threadfence();
  __syncthreads();
  __shared__ bool block_is_last;
  if (g.tid == 0) {
    int* count = &semaphores[2ull * g.segment * g.blocks + g.blocks];
    block_is_last = atomicAdd(count, 1) == static_cast<int>(groups) - 1;
    if (block_is_last) *count = 0;
  }
  __syncthreads();
  last = block_is_last;
  if (last) __threadfence();
}

// In the last block: values[0..COUNT) become the combination of the groups' slots, walked
// as gridCombineGroup walks its group's.
template <bool BX, bool BY, bool BZ, int COUNT, typename T, typename Op>
__device__ __forceinline__ void gridCombine(T* values, const T* work, Op op) {
  const GridSlot<BX, BY, BZ> g;
  // With one group, every block's partials; else the slots each group was folded into.
  const unsigned fan = gridFan(g.blocks), groups = (g.blocks + fan - 1) / fan;
  const unsigned count = groups == 1 ? g.blocks : groups;
  const unsigned long long step = static_cast<unsigned long long>(groups == 1 ? 1 : fan) * g.threads;
  const T* at = work + g.first;
#pragma unroll
  for (int c = 0; c < COUNT; ++c) values[c] = loadGlobalCoherent(at + c * g.stride);
#pragma unroll 1
  for (unsigned i = 1; i < count; ++i) {
    const T* other = at + i * step;
#pragma unroll
    for (int c = 0; c < COUNT; ++c) values[c] = op(values[c], loadGlobalCoherent(other + c * g.stride));
  }
}

// Combines the block-reduced values[0..COUNT) of the blocks along the reduced grid dims;
// the result is in the last block to arrive, where `last` is true.
template <bool BX, bool BY, bool BZ, int COUNT, typename T, typename Op>
__device__ __forceinline__ void gridReduce(T* values, T* work, int* semaphores, Op op, bool& last) {
  gridStore<BX, BY, BZ, COUNT>(values, work);
  bool group_last;
  gridArriveGroup<BX, BY, BZ>(semaphores, group_last);
  if (group_last) gridCombineGroup<BX, BY, BZ, COUNT>(work, op);
  gridArriveTop<BX, BY, BZ>(semaphores, group_last, last);
  if (last) gridCombine<BX, BY, BZ, COUNT>(values, work, op);
}

// A grid reduction over blocks that are all resident at once (a one-wave grid, launched
// cooperatively) folds with every block, not in the last ones to arrive: each block
// stores its partials (gridStore), all wait at a grid barrier (gridSync), each folds a
// share of the segment's columns (gridFold), and the last to finish its share loads the
// folded values (gridArriveFolded, gridLoadFolded). The tree's folds ran serially after
// the last block's rows (layer_norm_bwd: two 1 MiB folds through one SM each). Semaphores
// as the tree's, per segment: the barrier's count at [2 * segment * blocks], the folds' at
// [2 * segment * blocks + blocks]; the last block resets both (every block has left the
// barrier by then). A grid whose blocks are not all resident would wait forever here.
template <bool BX, bool BY, bool BZ>
__device__ __forceinline__ void gridSync(int* semaphores) {
  const GridSlot<BX, BY, BZ> g;
  __threadfence();
  __syncthreads();
  if (g.tid == 0) {
    int* count = &semaphores[2ull * g.segment * g.blocks];
    atomicAdd(count, 1);
    while (*reinterpret_cast<volatile int*>(count) < static_cast<int>(g.blocks)) {
#if __CUDA_ARCH__ >= 700
      __nanosleep(32);
#endif
    }
    __threadfence();
  }
  __syncthreads();
}

// This block's share of the segment's partials folded into the first rank's slots. A
// slot's COUNT x threads values are columns, taken a warp's width (`lanes`) at a time:
// the chunks go to the segment's blocks in turn, `which` (the reduction's place among the
// kernel's cooperative ones) shifting where each reduction's chunks start. In a chunk,
// warp w folds ranks w, w + warps, ... and warp 0 folds the warps' results in warp order
// through `scratch` (an element a thread): the order is the launch's, not the arrivals'.
template <bool BX, bool BY, bool BZ, int COUNT, typename T, typename Op>
__device__ __forceinline__ void gridFold(T* work, T* scratch, Op op, unsigned which) {
  const GridSlot<BX, BY, BZ> g;
  const unsigned lanes = g.threads < 32 ? g.threads : 32;
  const unsigned warps = g.threads / lanes, warp = g.tid / lanes, lane = g.tid % lanes;
  const unsigned folding = warps < g.blocks ? warps : g.blocks;  // warps with a rank to fold
  const unsigned columns = COUNT * g.threads, chunks = (columns + lanes - 1) / lanes;
  const unsigned long long segment_first = static_cast<unsigned long long>(g.segment) * g.blocks * g.threads;
  for (unsigned chunk = (g.rank + g.blocks - (which * chunks) % g.blocks) % g.blocks; chunk < chunks;
       chunk += g.blocks) {
    const unsigned column = chunk * lanes + lane;
    const bool in_range = column < columns;
    T* at = work + (in_range ? (column / g.threads) * g.stride + segment_first + column % g.threads : 0ull);
    T result{};
    if (in_range && warp < folding) {
      result = loadGlobalCoherent(at + static_cast<unsigned long long>(warp) * g.threads);
#pragma unroll 4
      for (unsigned r = warp + warps; r < g.blocks; r += warps) {
        result = op(result, loadGlobalCoherent(at + static_cast<unsigned long long>(r) * g.threads));
      }
      scratch[g.tid] = result;
    }
    __syncthreads();
    if (in_range && warp == 0) {
      for (unsigned w = 1; w < folding; ++w) result = op(result, scratch[w * lanes + lane]);
      *at = result;
    }
    __syncthreads();
  }
}

// After its share is folded, each block arrives: `last` is true in the last to arrive.
template <bool BX, bool BY, bool BZ>
__device__ __forceinline__ void gridArriveFolded(int* semaphores, bool& last) {
  const GridSlot<BX, BY, BZ> g;
  __threadfence();
  __syncthreads();
  __shared__ bool block_is_last;
  if (g.tid == 0) {
    int* counts = &semaphores[2ull * g.segment * g.blocks];
    block_is_last = atomicAdd(&counts[g.blocks], 1) == static_cast<int>(g.blocks) - 1;
    if (block_is_last) {
      counts[g.blocks] = 0;
      counts[0] = 0;
    }
  }
  __syncthreads();
  last = block_is_last;
  if (last) __threadfence();
}

// In the last block: values[0..COUNT) are the folded values (the first rank's slots).
template <bool BX, bool BY, bool BZ, int COUNT, typename T>
__device__ __forceinline__ void gridLoadFolded(T* values, const T* work) {
  const GridSlot<BX, BY, BZ> g;
#pragma unroll
  for (int c = 0; c < COUNT; ++c) values[c] = loadGlobalCoherent(work + g.first + c * g.stride);
}

// Two block reductions at once (two independent row sums): the warps' results of both go
// through shared memory in one round of barriers. Along threadIdx.x alone, in warps that
// lie inside one group; elsewhere, one reduction after the other.
template <bool RX, bool RY, bool RZ, typename T, typename OpA, typename OpB>
__device__ __forceinline__ void blockReducePair(T& a, T& b, T* scratch, OpA op_a, OpB op_b) {
  if (RX && !RY && !RZ && (blockDim.x & 31) == 0) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      a = op_a(a, fuser_shfl_xor(a, offset));
      b = op_b(b, fuser_shfl_xor(b, offset));
    }
    if (blockDim.x == 32) return;
    const unsigned warps = blockDim.x >> 5;
    const unsigned base = 2 * (threadIdx.y * warps + threadIdx.z * blockDim.y * warps);
    __syncthreads();  // the previous reduction's readers are done with scratch
    if ((threadIdx.x & 31) == 0) {
      scratch[base + (threadIdx.x >> 5)] = a;
      scratch[base + warps + (threadIdx.x >> 5)] = b;
    }
    __syncthreads();
    if ((warps & (warps - 1)) == 0) {  // as in blockReduce: loads across lanes, then shuffles
      const unsigned warp = threadIdx.x & (warps - 1);  // the warp whose result this lane reads
      T ra = scratch[base + warp], rb = scratch[base + warps + warp];
#pragma unroll
      for (unsigned offset = 16; offset > 0; offset >>= 1) {
        if (offset < warps) {
          ra = op_a(ra, fuser_shfl_xor(ra, offset));
          rb = op_b(rb, fuser_shfl_xor(rb, offset));
        }
      }
      a = ra;
      b = rb;
      return;
    }
    T ra = scratch[base], rb = scratch[base + warps];
    for (unsigned w = 1; w < warps; ++w) {
      ra = op_a(ra, scratch[base + w]);
      rb = op_b(rb, scratch[base + warps + w]);
    }
    a = ra;
    b = rb;
    return;
  }
  a = blockReduce<RX, RY, RZ>(a, scratch, op_a);
  b = blockReduce<RX, RY, RZ>(b, scratch, op_b);
}

// COUNT elements of `a` (and of `b`, when B) reduced at once, each as blockReduce reduces
// one (the same shuffles, the same tree): the rows of a group loop (ParallelType Group),
// whose warps' results all go through shared memory in one round of barriers. Along
// threadIdx.x alone, in warps that lie inside one group; elsewhere one after the other.
// WARPS: blockDim.x / 32 where the launch fixes it (a power of two: the general paths
// compile away, with the registers they would hold), else 0. `scratch` holds one element
// per thread of the block (2 * COUNT * warps <= threads).
template <bool RX, bool RY, bool RZ, int COUNT, bool B, int WARPS, typename T, typename OpA, typename OpB>
__device__ __forceinline__ void blockReduceGroup(T* a, T* b, T* scratch, OpA op_a, OpB op_b) {
  constexpr bool fixed = RX && !RY && !RZ && WARPS > 0 && (WARPS & (WARPS - 1)) == 0;
  if (fixed || (RX && !RY && !RZ && (blockDim.x & 31) == 0)) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
#pragma unroll
      for (int c = 0; c < COUNT; ++c) {
        a[c] = op_a(a[c], fuser_shfl_xor(a[c], offset));
        if (B) b[c] = op_b(b[c], fuser_shfl_xor(b[c], offset));
      }
    }
    const unsigned warps = fixed ? WARPS : blockDim.x >> 5;
    if (warps == 1) return;
    const unsigned values = B ? 2 * COUNT : COUNT;
    const unsigned base = values * (threadIdx.y * warps + threadIdx.z * blockDim.y * warps);
    __syncthreads();  // the previous reduction's readers are done with scratch
    if ((threadIdx.x & 31) == 0) {
#pragma unroll
      for (int c = 0; c < COUNT; ++c) {
        scratch[base + c * warps + (threadIdx.x >> 5)] = a[c];
        if (B) scratch[base + (COUNT + c) * warps + (threadIdx.x >> 5)] = b[c];
      }
    }
    __syncthreads();
    if (fixed || (warps & (warps - 1)) == 0) {  // as in blockReduce: loads across lanes, then shuffles
      const unsigned warp = threadIdx.x & (warps - 1);  // the warp whose results this lane reads
#pragma unroll
      for (int c = 0; c < COUNT; ++c) {
        T ra = scratch[base + c * warps + warp];
        T rb = B ? scratch[base + (COUNT + c) * warps + warp] : ra;
#pragma unroll
        for (unsigned offset = 16; offset > 0; offset >>= 1) {
          if (offset < warps) {
            ra = op_a(ra, fuser_shfl_xor(ra, offset));
            if (B) rb = op_b(rb, fuser_shfl_xor(rb, offset));
          }
        }
        a[c] = ra;
        if (B) b[c] = rb;
      }
      return;
    }
#pragma unroll
    for (int c = 0; c < COUNT; ++c) {
      T ra = scratch[base + c * warps];
      T rb = B ? scratch[base + (COUNT + c) * warps] : ra;
      for (unsigned w = 1; w < warps; ++w) {
        ra = op_a(ra, scratch[base + c * warps + w]);
        if (B) rb = op_b(rb, scratch[base + (COUNT + c) * warps + w]);
      }
      a[c] = ra;
      if (B) b[c] = rb;
    }
    return;
  }
#pragma unroll
  for (int c = 0; c < COUNT; ++c) {
    a[c] = blockReduce<RX, RY, RZ>(a[c], scratch, op_a);
    if (B) b[c] = blockReduce<RX, RY, RZ>(b[c], scratch, op_b);
  }
}

// Welford's (avg, M2, N) partials combined across blocks, in the last block (Chan's rule),
// slots outermost as in gridCombine.
template <bool BX, bool BY, bool BZ, int COUNT, typename T, typename N>
__device__ __forceinline__ void gridWelfordCombine(T* avg, T* m2, N* n, const T* w_avg, const T* w_m2, const N* w_n) {
  const GridSlot<BX, BY, BZ> g;
  const unsigned fan = gridFan(g.blocks), groups = (g.blocks + fan - 1) / fan;
  const unsigned parts = groups == 1 ? g.blocks : groups;
  const unsigned long long step = static_cast<unsigned long long>(groups == 1 ? 1 : fan) * g.threads;
#pragma unroll
  for (int c = 0; c < COUNT; ++c) {
    const unsigned long long at = c * g.stride + g.first;
    avg[c] = loadGlobalCoherent(w_avg + at); m2[c] = loadGlobalCoherent(w_m2 + at); n[c] = loadGlobalCoherent(w_n + at);
  }
#pragma unroll 1
  for (unsigned i = 1; i < parts; ++i) {
#pragma unroll
    for (int c = 0; c < COUNT; ++c) {
      const unsigned long long other = c * g.stride + g.first + i * step;
      welfordCombine(avg[c], m2[c], n[c], loadGlobalCoherent(w_avg + other), loadGlobalCoherent(w_m2 + other),
                     loadGlobalCoherent(w_n + other));
    }
  }
}
// ---- end of runtime header ----
"""

# Included only in kernels that draw random numbers: Philox4x32-10 and nvFuser's
# conversions to uniform and normal values, in the reference's exact float operations
# (`__fmul_rn` and friends, so no multiply-add is contracted and a uniform draw, hence
# a dropout mask, is bit-identical to the reference's; normals go through logf, sinf
# and cosf, within an ulp or two of NumPy's).
RNG_HEADER = r"""
// ---- random numbers (Philox4x32-10 keyed by seed, counted by offset and index) ----
struct fuser_philox_block { unsigned int x[4]; };
__device__ __forceinline__ fuser_philox_block fuser_philox(
    unsigned long long seed, unsigned long long offset, unsigned long long subseq) {
  unsigned int c0 = (unsigned int)offset, c1 = (unsigned int)(offset >> 32);
  unsigned int c2 = (unsigned int)subseq, c3 = (unsigned int)(subseq >> 32);
  unsigned int k0 = (unsigned int)seed, k1 = (unsigned int)(seed >> 32);
  #pragma unroll
  for (int round = 0; round < 10; ++round) {
    unsigned long long p0 = 0xD2511F53ull * c0, p1 = 0xCD9E8D57ull * c2;
    unsigned int n0 = (unsigned int)(p1 >> 32) ^ c1 ^ k0, n2 = (unsigned int)(p0 >> 32) ^ c3 ^ k1;
    c0 = n0; c1 = (unsigned int)p1; c2 = n2; c3 = (unsigned int)p0;
    if (round < 9) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
  }
  fuser_philox_block b;
  b.x[0] = c0; b.x[1] = c1; b.x[2] = c2; b.x[3] = c3;
  return b;
}
__device__ __forceinline__ float fuser_raw_uniformf(unsigned int x) {
  return __fadd_rn(__fmul_rn(__uint2float_rn(x), 0x1p-32f), 0x1p-33f);
}
__device__ __forceinline__ float fuser_uniformf(unsigned int x) {
  float r = fuser_raw_uniformf(x);
  return r == 1.0f ? 0.0f : r;
}
__device__ __forceinline__ double fuser_uniformd(unsigned int x, unsigned int y) {
  unsigned long long z = (unsigned long long)x ^ ((unsigned long long)y << 21);
  double r = __dadd_rn(__dmul_rn(__ull2double_rn(z), 0x1p-53), 0x1p-54);
  return r == 1.0 ? 0.0 : r;
}
// One value of a Float (or Half, BFloat16) tensor per word, four per block.
__device__ __forceinline__ float fuser_rng_raw_f32(unsigned long long seed, unsigned long long offset,
                                                   unsigned long long i) {
  return fuser_raw_uniformf(fuser_philox(seed, offset, i >> 2).x[i & 3]);
}
__device__ __forceinline__ float fuser_rng_uniform_f32(unsigned long long seed, unsigned long long offset,
                                                       unsigned long long i) {
  return fuser_uniformf(fuser_philox(seed, offset, i >> 2).x[i & 3]);
}
__device__ __forceinline__ float fuser_lerp_rn(double low, double high, float u) {
  float l = (float)low, h = (float)high;
  return __fadd_rn(l, __fmul_rn(__fsub_rn(h, l), u));
}
__device__ __forceinline__ float fuser_rng_uniform_range_f32(unsigned long long seed, unsigned long long offset,
                                                             unsigned long long i, double low, double high) {
  return fuser_lerp_rn(low, high, fuser_rng_uniform_f32(seed, offset, i));
}
__device__ __forceinline__ float fuser_rng_normal_standard_f32(unsigned long long seed, unsigned long long offset,
                                                               unsigned long long i) {
  fuser_philox_block b = fuser_philox(seed, offset, i >> 2);
  unsigned int pair = (unsigned int)(i & 2);
  float u = fuser_uniformf(b.x[pair]), v = __fmul_rn(fuser_uniformf(b.x[pair + 1]), 6.2831855f);
  float r = sqrtf(__fmul_rn(-2.0f, logf(u)));
  return __fmul_rn(r, (i & 1) ? cosf(v) : sinf(v));
}
__device__ __forceinline__ float fuser_rng_normal_general_f32(unsigned long long seed, unsigned long long offset,
                                                              unsigned long long i, double mean, double std) {
  return __fadd_rn(__fmul_rn(fuser_rng_normal_standard_f32(seed, offset, i), (float)std), (float)mean);
}
// A Double takes two words, two values per block.
__device__ __forceinline__ double fuser_rng_uniform_f64(unsigned long long seed, unsigned long long offset,
                                                        unsigned long long i) {
  fuser_philox_block b = fuser_philox(seed, offset, i >> 1);
  unsigned int c = (unsigned int)(i & 1) * 2;
  return fuser_uniformd(b.x[c], b.x[c + 1]);
}
__device__ __forceinline__ double fuser_rng_uniform_range_f64(unsigned long long seed, unsigned long long offset,
                                                              unsigned long long i, double low, double high) {
  return __dadd_rn(low, __dmul_rn(__dsub_rn(high, low), fuser_rng_uniform_f64(seed, offset, i)));
}
__device__ __forceinline__ double fuser_rng_normal_standard_f64(unsigned long long seed, unsigned long long offset,
                                                                unsigned long long i) {
  fuser_philox_block b = fuser_philox(seed, offset, i >> 1);
  double u = fuser_uniformd(b.x[0], b.x[1]), v = __dmul_rn(fuser_uniformd(b.x[2], b.x[3]), 6.2831853071795860);
  double r = sqrt(__dmul_rn(-2.0, log(u)));
  return __dmul_rn(r, (i & 1) ? cos(v) : sin(v));
}
__device__ __forceinline__ double fuser_rng_normal_general_f64(unsigned long long seed, unsigned long long offset,
                                                               unsigned long long i, double mean, double std) {
  return __dadd_rn(__dmul_rn(fuser_rng_normal_standard_f64(seed, offset, i), std), mean);
}
// Half and BFloat16: drawn in float, rounded, and a value that rounds to the top of the
// range folded back to its bottom.
#define FUSER_RNG_NARROW(SUFFIX, T, TO, FROM)                                                         \
  __device__ __forceinline__ T fuser_rng_uniform_##SUFFIX(unsigned long long seed,                   \
                                                          unsigned long long offset,                 \
                                                          unsigned long long i) {                    \
    T h = TO(fuser_rng_raw_f32(seed, offset, i));                                                    \
    return FROM(h) == 1.0f ? TO(0.0f) : h;                                                           \
  }                                                                                                  \
  __device__ __forceinline__ T fuser_rng_uniform_range_##SUFFIX(                                     \
      unsigned long long seed, unsigned long long offset, unsigned long long i, double low,          \
      double high) {                                                                                 \
    T h = TO(fuser_lerp_rn(low, high, fuser_rng_raw_f32(seed, offset, i)));                          \
    return FROM(h) == FROM(TO((float)high)) ? TO((float)low) : h;                                   \
  }                                                                                                  \
  __device__ __forceinline__ T fuser_rng_normal_standard_##SUFFIX(unsigned long long seed,           \
                                                                  unsigned long long offset,         \
                                                                  unsigned long long i) {            \
    return TO(fuser_rng_normal_standard_f32(seed, offset, i));                                       \
  }                                                                                                  \
  __device__ __forceinline__ T fuser_rng_normal_general_##SUFFIX(                                    \
      unsigned long long seed, unsigned long long offset, unsigned long long i, double mean,         \
      double std) {                                                                                  \
    return TO(fuser_rng_normal_general_f32(seed, offset, i, mean, std));                             \
  }
FUSER_RNG_NARROW(f16, __half, __float2half, __half2float)
FUSER_RNG_NARROW(bf16, __bfloat, __float2bfloat, __bfloat2float)
"""
