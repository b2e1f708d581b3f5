/* Linear layers on the device over weights in their stored encodings (runtime/cuda/cuda.h):
 * one row per encoding, like the CPU's table; the integer rows are fused dequantising GEMVs,
 * the float rows cuBLAS GEMMs, W8A8 integer products. */
#include "runtime/cuda/internal.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef lmq_code (*rtc_linear_fn)(rtc_ctx *c, const float *x, int n, const rtc_weight *W, float *y, lmq_err *err);

/* One encoding the backend multiplies. */
typedef struct {
    lmq_dtype dtype;
    unsigned grans;      /* granularities it takes: bit (1u << lmq_gran) each */
    lmq_act_scheme act;  /* the activation quantisation it takes (per token only) */
    cudaDataType_t type; /* float rows: the weights' and rounded activations' type for cuBLAS */
    rtc_linear_fn run;
} rtc_row;

struct rtc_weight {
    char name[LMQ_NAME_MAX];
    lmq_qparams q;
    lmq_layout L;
    int out, in;
    const rtc_row *row;
    uint8_t *dev;          /* one allocation: scales (and zero points) | padding | codes | bias */
    const __half *scales;  /* integer rows: L.n_scales IEEE halves */
    const int16_t *zeros;  /* asymmetric integer rows: L.n_scales zero codes; else NULL */
    const uint8_t *codes;  /* at a 256-byte boundary */
    const float *bias;     /* [out] or NULL */
    size_t bytes;
};

/* ---- the fused integer GEMV ------------------------------------------------------------ */

#define GEMV_WARPS 4 /* output rows per block, one warp each */

/* The code at bit `bit` of the codes' LSB-first stream (code c of row r is at bit (r·in + c)·bits;
 * a 3-bit code may span two bytes, and only then is the second read). */
__device__ __forceinline__ int code_at(const uint8_t *__restrict__ codes, uint64_t bit, int bits)
{
    const uint8_t *b = codes + (bit >> 3);
    const int sh = (int)(bit & 7);
    unsigned v = (unsigned)b[0] >> sh;
    if (sh + bits > 8)
        v |= (unsigned)b[1] << (8 - sh);
    return (int)(v & ((1u << bits) - 1));
}

/* The zero code of the weight whose parameters are at index i: the group's stored one
 * (asymmetric), else 2^(bits−1). */
__device__ __forceinline__ int zero_at(const int16_t *__restrict__ zeros, size_t i, int bits)
{
    return zeros ? zeros[i] : 1 << (bits - 1);
}

/* The 32/BITS codes of one little-endian word as signed integers (offset binary: code − 2^(BITS−1)). */
template <int BITS>
__device__ __forceinline__ void decode_word(uint32_t w, float *q)
{
    constexpr int per = 32 / BITS, half = 1 << (BITS - 1);
    constexpr uint32_t mask = (1u << BITS) - 1;
#pragma unroll
    for (int j = 0; j < per; j++)
        q[j] = (float)((int)(w >> (j * BITS) & mask) - half);
}

/* The sum of a over the warp, every lane getting it (butterfly order). */
template <typename T>
__device__ __forceinline__ T warp_sum(T a)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        a += __shfl_xor_sync(0xffffffffu, a, o);
    return a;
}

/* Σ_{j<N} q[j]·x[j], x on a 16-byte boundary, in order. */
template <int N>
__device__ __forceinline__ float dot(const float *q, const float *x)
{
    const float4 *xv = reinterpret_cast<const float4 *>(x);
    float s = 0;
#pragma unroll
    for (int j = 0; j < N / 4; j++) {
        const float4 a = xv[j];
        s += q[4 * j] * a.x;
        s += q[4 * j + 1] * a.y;
        s += q[4 * j + 2] * a.z;
        s += q[4 * j + 3] * a.w;
    }
    return s;
}

/* y[t, r] = Σ_c (code − z)·s[r·s_stride + (c >> s_shift)]·x[t, c] (+ b[r]) for the NR
 * activation rows t, z the group's zero code (zeros, same index as the scale) or 2^(BITS−1):
 * warp threadIdx.y of block x takes row r and reads its codes once for all of them. VEC (BITS
 * dividing 32): every row starts on a 16-byte boundary (in a multiple of 128 / BITS), read 16
 * bytes per lane per step; the scale is fetched once per load when a group spans it (groups of
 * 32 or more for int4, every int8 group), else once per 32-bit word (int4 g16: groups are powers
 * of two >= 16, so a word's 8 codes never straddle two). Otherwise one code per lane per step at
 * its bit position. */
template <int BITS, bool VEC, int NR>
__global__ void __launch_bounds__(32 * GEMV_WARPS)
    gemv_int(const uint8_t *__restrict__ codes, const __half *__restrict__ scales, const int16_t *__restrict__ zeros,
             int s_stride, int s_shift, const float *__restrict__ x, const float *__restrict__ bias,
             float *__restrict__ y, int out, int in)
{
    constexpr int half = 1 << (BITS - 1);
    const int r = blockIdx.x * GEMV_WARPS + threadIdx.y, lane = threadIdx.x;
    if (r >= out)
        return;
    float acc[NR];
#pragma unroll
    for (int t = 0; t < NR; t++)
        acc[t] = 0;
    if (VEC) {
        constexpr int per_vec = 128 / BITS, per_word = 32 / BITS;
        const uint4 *row = reinterpret_cast<const uint4 *>(codes + (size_t)r * in / (8 / BITS));
        const int nvec = in / per_vec;
        const bool one_scale = (1ll << s_shift) >= per_vec; /* the same for the whole warp */
#pragma unroll 4
        for (int v = lane; v < nvec; v += 32) {
            const uint4 qv = __ldg(row + v);
            const int c = v * per_vec;
            float q[per_vec];
            decode_word<BITS>(qv.x, q);
            decode_word<BITS>(qv.y, q + per_word);
            decode_word<BITS>(qv.z, q + 2 * per_word);
            decode_word<BITS>(qv.w, q + 3 * per_word);
            if (one_scale) {
                const size_t g = (size_t)r * s_stride + (c >> s_shift);
                const float s = __half2float(scales[g]);
                if (zeros) /* code − z = (code − half) − (z − half), small integers: exact */
#pragma unroll
                    for (int j = 0; j < per_vec; j++)
                        q[j] -= (float)(zeros[g] - half);
#pragma unroll
                for (int t = 0; t < NR; t++)
                    acc[t] += dot<per_vec>(q, x + (size_t)t * in + c) * s;
            } else {
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    const size_t g = (size_t)r * s_stride + ((c + k * per_word) >> s_shift);
                    const float s = __half2float(scales[g]);
                    if (zeros)
#pragma unroll
                        for (int j = 0; j < per_word; j++)
                            q[k * per_word + j] -= (float)(zeros[g] - half);
#pragma unroll
                    for (int t = 0; t < NR; t++)
                        acc[t] += dot<per_word>(q + k * per_word, x + (size_t)t * in + c + k * per_word) * s;
                }
            }
        }
    } else {
        const uint64_t base = (uint64_t)r * (uint64_t)in * BITS;
        for (int c = lane; c < in; c += 32) {
            const size_t g = (size_t)r * s_stride + (c >> s_shift);
            const int q = code_at(codes, base + (uint64_t)c * BITS, BITS) - zero_at(zeros, g, BITS);
            const float w = (float)q * __half2float(scales[g]);
#pragma unroll
            for (int t = 0; t < NR; t++)
                acc[t] += w * x[(size_t)t * in + c];
        }
    }
#pragma unroll
    for (int t = 0; t < NR; t++) {
        const float a = warp_sum(acc[t]);
        if (lane == 0)
            y[(size_t)t * out + r] = a + (bias ? bias[r] : 0.0f);
    }
}

/* The GEMV for 1..RTC_GEMV_MAX_ROWS activation rows: [vec][rows − 1]. */
typedef void (*gemv_fn)(const uint8_t *, const __half *, const int16_t *, int, int, const float *, const float *, float *,
                        int, int);
#define GEMV_ROWS(B, V)                                                                                              \
    { gemv_int<B, V, 1>, gemv_int<B, V, 2>, gemv_int<B, V, 3>, gemv_int<B, V, 4>, gemv_int<B, V, 5>,                 \
      gemv_int<B, V, 6>, gemv_int<B, V, 7>, gemv_int<B, V, 8> }
static_assert(RTC_GEMV_MAX_ROWS == 8, "one kernel per row count");
template <int BITS> /* int3 has no VEC kernel: [1] is the per-code one again */
static const gemv_fn gemv_kernels[2][RTC_GEMV_MAX_ROWS] = { GEMV_ROWS(BITS, false), GEMV_ROWS(BITS, 32 % BITS == 0) };

/* Rows [r0, r0 + rows) of W as fp16, each weight (code − z)·s rounded once to fp32 (as the
 * scheme table does), then to fp16: what the prefill GEMM reads. */
template <int BITS>
__global__ void dequant_rows(const uint8_t *__restrict__ codes, const __half *__restrict__ scales,
                             const int16_t *__restrict__ zeros, int s_stride, int s_shift, int r0, int rows, int in,
                             __half *__restrict__ out)
{
    const size_t n = (size_t)rows * in;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const int r = r0 + (int)(i / in), c = (int)(i % in);
        const size_t g = (size_t)r * s_stride + (c >> s_shift);
        const int q = code_at(codes, ((uint64_t)r * in + c) * BITS, BITS) - zero_at(zeros, g, BITS);
        out[i] = __float2half_rn((float)q * __half2float(scales[g]));
    }
}

/* ---- cuBLAS and the small kernels around it ------------------------------------------ */

template <typename T>
__global__ void round_to(const float *__restrict__ x, T *__restrict__ out, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = T(x[i]);
}

__global__ void add_bias(float *__restrict__ y, const float *__restrict__ b, int out, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] += b[i % out];
}

static unsigned blocks_for(size_t n)
{
    const size_t b = (n + 255) / 256;
    return (unsigned)(b < 4096 ? (b ? b : 1) : 4096);
}

static lmq_code round_x(rtc_ctx *c, const float *x, size_t nx, cudaDataType_t type, void *out, const char *name,
                        lmq_err *err)
{
    if (type == CUDA_R_16F)
        round_to<__half><<<blocks_for(nx), 256, 0, c->stream>>>(x, (__half *)out, nx);
    else
        round_to<__nv_bfloat16><<<blocks_for(nx), 256, 0, c->stream>>>(x, (__nv_bfloat16 *)out, nx);
    return rtc_check(cudaGetLastError(), name, err);
}

/* Row-major y[n × ldy] (columns [0, rows)) = x[n × in]·w[rows × in]ᵀ is column-major
 * Y(rows × n, ldy) = W(in × rows)ᵀ·X(in × n): w and x of the same type, fp32 accumulation. */
static lmq_code gemm_nt(rtc_ctx *c, const void *w, cudaDataType_t type, int rows, int in, const void *x, int n,
                          float *y, int ldy, const char *name, lmq_err *err)
{
    const float one = 1, zero = 0;
    return rtc_check_blas(cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, rows, n, in, &one, w, type, in, x, type,
                                       in, &zero, y, CUDA_R_32F, ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                          name, err);
}

static lmq_code add_bias_to(rtc_ctx *c, float *y, int n, const rtc_weight *W, lmq_err *err)
{
    if (!W->bias)
        return LMQ_OK;
    const size_t ny = (size_t)n * W->out;
    add_bias<<<blocks_for(ny), 256, 0, c->stream>>>(y, W->bias, W->out, ny);
    return rtc_check(cudaGetLastError(), W->name, err);
}

/* Prefill of integer weights: blocks of rows dequantised to fp16 (at most this many bytes at a
 * time), each multiplied by cuBLAS with x rounded to fp16 too, fp32 accumulation. */
#define DEQUANT_BLOCK_BYTES ((size_t)64 << 20)

/* Where the scale of code c of row r is: s[r·stride + (c >> shift)]. */
static void scale_index(const rtc_weight *W, int *stride, int *shift)
{
    *stride = 0;
    *shift = 31;
    if (W->q.gran == LMQ_GRAN_CHANNEL)
        *stride = 1;
    else if (W->q.gran == LMQ_GRAN_GROUP) {
        *stride = (int)W->L.groups_per_row;
        for (*shift = 0; (1u << *shift) < W->q.group; ++*shift)
            ;
    }
}

template <int BITS>
static lmq_code linear_int(rtc_ctx *c, const float *x, int n, const rtc_weight *W, float *y, lmq_err *err)
{
    int stride, shift;
    scale_index(W, &stride, &shift);
    if (n > RTC_GEMV_MAX_ROWS) {
        const size_t xs = ((size_t)n * W->in * 2 + 255) & ~(size_t)255;
        size_t rows = DEQUANT_BLOCK_BYTES / ((size_t)W->in * 2);
        rows = rows < 1 ? 1 : rows > (size_t)W->out ? (size_t)W->out : rows;
        lmq_code code = rtc_scratch(c, xs + rows * W->in * 2, err);
        if (!code)
            code = round_x(c, x, (size_t)n * W->in, CUDA_R_16F, c->scratch, W->name, err);
        __half *wb = (__half *)((uint8_t *)c->scratch + xs);
        for (int r0 = 0; r0 < W->out && !code; r0 += (int)rows) {
            const int nr = W->out - r0 < (int)rows ? W->out - r0 : (int)rows;
            dequant_rows<BITS><<<blocks_for((size_t)nr * W->in), 256, 0, c->stream>>>(W->codes, W->scales, W->zeros,
                                                                                      stride, shift, r0, nr, W->in, wb);
            code = rtc_check(cudaGetLastError(), W->name, err);
            if (!code)
                code = gemm_nt(c, wb, CUDA_R_16F, nr, W->in, c->scratch, n, y + r0, W->out, W->name, err);
        }
        return code ? code : add_bias_to(c, y, n, W, err);
    }
    const dim3 block(32, GEMV_WARPS), grid((unsigned)((W->out + GEMV_WARPS - 1) / GEMV_WARPS));
    const gemv_fn k = gemv_kernels<BITS>[W->in % (128 / BITS) == 0][n - 1];
    k<<<grid, block, 0, c->stream>>>(W->codes, W->scales, W->zeros, stride, shift, x, W->bias, y, W->out, W->in);
    return rtc_check(cudaGetLastError(), W->name, err);
}

/* The float rows: the stored matrix straight into cuBLAS. */
static lmq_code linear_float(rtc_ctx *c, const float *x, int n, const rtc_weight *W, float *y, lmq_err *err)
{
    const void *xb = x;
    lmq_code code = LMQ_OK;
    if (W->row->type != CUDA_R_32F) {
        const size_t nx = (size_t)n * W->in;
        code = rtc_scratch(c, nx * 2, err);
        if (!code)
            code = round_x(c, x, nx, W->row->type, c->scratch, W->name, err);
        xb = c->scratch;
    }
    if (!code)
        code = gemm_nt(c, W->codes, W->row->type, W->out, W->in, xb, n, y, W->out, W->name, err);
    return code ? code : add_bias_to(c, y, n, W, err);
}

static size_t align256(size_t n)
{
    return (n + 255) & ~(size_t)255;
}

/* ---- W8A8: int8 activations per token times int8 weights per channel, as integers ------- */

/* The CPU's integer path (runtime/linear.h), bit for bit: codes and scale of each row of x as
 * runtime/kernels_scalar.c's act_codes_scalar makes them, the sums Σ q_x·(code − 128) exact in int32,
 * then ((float)sum · s_x) · s_w (+ b) with each operation rounded on its own (no contraction). */

/* The largest of v over the block; every thread gets it. red: 32 slots of shared memory. v is
 * never NaN here (act_codes passes NaN over as the CPU does). */
__device__ float block_max(float v, float *red)
{
    for (int o = 16; o > 0; o >>= 1) {
        const float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = w > v ? w : v;
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    if (lane == 0)
        red[warp] = v;
    __syncthreads();
    v = red[0];
    for (int w = 1; w < warps; w++)
        v = red[w] > v ? red[w] : v;
    return v;
}

/* Row blockIdx.x of x [· × in]: its codes into q[· × ldq] (zeros from in to ldq), its scale
 * max|x| / 127 into sx; a zero scale gives zero codes. */
__global__ void act_codes(const float *__restrict__ x, int in, int ldq, int8_t *__restrict__ q, float *__restrict__ sx)
{
    __shared__ float red[32];
    const float *xr = x + (size_t)blockIdx.x * in;
    float m = 0;
    for (int k = threadIdx.x; k < in; k += blockDim.x) {
        const float a = fabsf(xr[k]);
        m = a > m ? a : m;
    }
    const float s = __fdiv_rn(block_max(m, red), 127.0f);
    if (threadIdx.x == 0)
        sx[blockIdx.x] = s;
    int8_t *qr = q + (size_t)blockIdx.x * ldq;
    for (int k = threadIdx.x; k < ldq; k += blockDim.x) {
        int r = 0;
        if (k < in && s > 0.0f) { /* round_clamp127 */
            float v = __fdiv_rn(xr[k], s);
            v = v > -127.5f ? v : -127.5f;
            v = v < 127.5f ? v : 127.5f;
            const int t = (int)v;
            const float f = __fsub_rn(v, (float)t);
            r = t + (f >= 0.5f) - (f <= -0.5f);
            r = r > 127 ? 127 : r < -127 ? -127 : r;
        }
        qr[k] = (int8_t)r;
    }
}

/* y[t, r] of the sum: ((float)sum · s_x[t]) · s_w[r] (+ b[r]). */
__device__ __forceinline__ float w8a8_out(int sum, float sx, const __half *scales, const float *bias, int r)
{
    const float v = __fmul_rn(__fmul_rn((float)sum, sx), __half2float(scales[r]));
    return bias ? __fadd_rn(v, bias[r]) : v;
}

/* NR activation rows against the stored codes (offset binary: code − 128 is the weight's
 * integer), one warp per output row. VEC: in a multiple of 16, 16 codes a lane a step, four
 * bytes at a time through dp4a (code ^ 0x80 is code − 128 as a signed byte); otherwise one code
 * a lane a step. */
template <bool VEC, int NR>
__global__ void __launch_bounds__(32 * GEMV_WARPS)
    gemv_w8a8(const uint8_t *__restrict__ codes, const __half *__restrict__ scales, const int8_t *__restrict__ q,
              int ldq, const float *__restrict__ sx, const float *__restrict__ bias, float *__restrict__ y, int out,
              int in)
{
    const int r = blockIdx.x * GEMV_WARPS + threadIdx.y, lane = threadIdx.x;
    if (r >= out)
        return;
    int acc[NR];
#pragma unroll
    for (int t = 0; t < NR; t++)
        acc[t] = 0;
    if (VEC) {
        const uint4 *row = reinterpret_cast<const uint4 *>(codes + (size_t)r * in);
        for (int v = lane; v < in / 16; v += 32) {
            const uint4 w = __ldg(row + v);
            const int w0 = (int)(w.x ^ 0x80808080u), w1 = (int)(w.y ^ 0x80808080u), w2 = (int)(w.z ^ 0x80808080u),
                      w3 = (int)(w.w ^ 0x80808080u);
#pragma unroll
            for (int t = 0; t < NR; t++) {
                const int4 a = *reinterpret_cast<const int4 *>(q + (size_t)t * ldq + 16 * (size_t)v);
                acc[t] = __dp4a(w3, a.w, __dp4a(w2, a.z, __dp4a(w1, a.y, __dp4a(w0, a.x, acc[t]))));
            }
        }
    } else {
        const uint8_t *row = codes + (size_t)r * in;
        for (int c = lane; c < in; c += 32) {
            const int w = (int)row[c] - 128;
#pragma unroll
            for (int t = 0; t < NR; t++)
                acc[t] += w * q[(size_t)t * ldq + c];
        }
    }
#pragma unroll
    for (int t = 0; t < NR; t++) {
        const int a = warp_sum(acc[t]);
        if (lane == 0)
            y[(size_t)t * out + r] = w8a8_out(a, sx[t], scales, bias, r);
    }
}

typedef void (*gemv_w8a8_fn)(const uint8_t *, const __half *, const int8_t *, int, const float *, const float *,
                             float *, int, int);
#define GEMV_W8A8_ROWS(V)                                                                                             \
    { gemv_w8a8<V, 1>, gemv_w8a8<V, 2>, gemv_w8a8<V, 3>, gemv_w8a8<V, 4>, gemv_w8a8<V, 5>,                           \
      gemv_w8a8<V, 6>, gemv_w8a8<V, 7>, gemv_w8a8<V, 8> }
static const gemv_w8a8_fn gemv_w8a8_kernels[2][RTC_GEMV_MAX_ROWS] = { GEMV_W8A8_ROWS(false), GEMV_W8A8_ROWS(true) };

/* The stored codes as signed weights (code − 128), for cuBLAS. */
__global__ void signed_codes(const uint8_t *__restrict__ codes, int8_t *__restrict__ out, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = (int8_t)((int)codes[i] - 128);
}

/* y[t, r] from the int32 products c[t × out]. */
__global__ void w8a8_epilogue(const int32_t *__restrict__ c, const float *__restrict__ sx,
                              const __half *__restrict__ scales, const float *__restrict__ bias, float *__restrict__ y,
                              int out, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = w8a8_out(c[i], sx[i / out], scales, bias, (int)(i % out));
}

/* Up to RTC_GEMV_MAX_ROWS rows at a time by the GEMV. More, where cuBLAS's int8 GEMM takes the
 * shape (rows of x and W in multiples of 4 bytes, as its tensor-core kernels want), by that GEMM
 * (int32 accumulation) over blocks of rows made signed in scratch; otherwise the GEMV in steps. */
static lmq_code linear_w8a8(rtc_ctx *c, const float *x, int n, const rtc_weight *W, float *y, lmq_err *err)
{
    const size_t ldq = ((size_t)W->in + 15) & ~(size_t)15, qb = align256((size_t)n * ldq),
                 sb = align256((size_t)n * sizeof(float));
    const bool gemm = n > RTC_GEMV_MAX_ROWS && W->in % 4 == 0 && W->out % 4 == 0;
    size_t rows = gemm ? DEQUANT_BLOCK_BYTES / (size_t)W->in / 4 * 4 : 0;
    rows = rows < 4 ? 4 : rows > (size_t)W->out ? (size_t)W->out : rows;
    const size_t wb = gemm ? align256(rows * W->in) : 0, cb = gemm ? (size_t)n * W->out * sizeof(int32_t) : 0;
    lmq_code code = rtc_scratch(c, qb + sb + wb + cb, err);
    if (code)
        return code;
    int8_t *q = (int8_t *)c->scratch, *ws = (int8_t *)c->scratch + qb + sb;
    float *sx = (float *)((uint8_t *)c->scratch + qb);
    int32_t *acc = (int32_t *)((uint8_t *)c->scratch + qb + sb + wb);
    act_codes<<<n, 256, 0, c->stream>>>(x, W->in, (int)ldq, q, sx);
    if ((code = rtc_check(cudaGetLastError(), W->name, err)))
        return code;
    if (!gemm) {
        const dim3 block(32, GEMV_WARPS), grid((unsigned)((W->out + GEMV_WARPS - 1) / GEMV_WARPS));
        for (int t0 = 0; t0 < n && !code; t0 += RTC_GEMV_MAX_ROWS) {
            const int nt = n - t0 < RTC_GEMV_MAX_ROWS ? n - t0 : RTC_GEMV_MAX_ROWS;
            gemv_w8a8_kernels[W->in % 16 == 0][nt - 1]<<<grid, block, 0, c->stream>>>(
                W->codes, W->scales, q + (size_t)t0 * ldq, (int)ldq, sx + t0, W->bias, y + (size_t)t0 * W->out,
                W->out, W->in);
            code = rtc_check(cudaGetLastError(), W->name, err);
        }
        return code;
    }
    const int one = 1, zero = 0;
    for (int r0 = 0; r0 < W->out && !code; r0 += (int)rows) {
        const int nr = W->out - r0 < (int)rows ? W->out - r0 : (int)rows;
        const size_t nw = (size_t)nr * W->in;
        signed_codes<<<blocks_for(nw), 256, 0, c->stream>>>(W->codes + (size_t)r0 * W->in, ws, nw);
        code = rtc_check(cudaGetLastError(), W->name, err);
        if (!code) /* column-major C(nr × n, ldc out) = W_block(in × nr)ᵀ · Q(in × n, ldq) */
            code = rtc_check_blas(cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, nr, n, W->in, &one, ws, CUDA_R_8I,
                                               W->in, q, CUDA_R_8I, (int)ldq, &zero, acc + r0, CUDA_R_32I, W->out,
                                               CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT),
                                  W->name, err);
    }
    const size_t ny = (size_t)n * W->out;
    if (!code) {
        w8a8_epilogue<<<blocks_for(ny), 256, 0, c->stream>>>(acc, sx, W->scales, W->bias, y, W->out, ny);
        code = rtc_check(cudaGetLastError(), W->name, err);
    }
    return code;
}

/* ---- the table --------------------------------------------------------------------------- */

/* grans 0: every granularity the encoding's row allows. */
static const rtc_row rows[] = {
    { LMQ_T_F32, 0, LMQ_ACT_NONE, CUDA_R_32F, linear_float },
    { LMQ_T_F16, 0, LMQ_ACT_NONE, CUDA_R_16F, linear_float },
    { LMQ_T_BF16, 0, LMQ_ACT_NONE, CUDA_R_16BF, linear_float },
    { LMQ_T_INT8, 0, LMQ_ACT_NONE, CUDA_R_8I, linear_int<8> },
    { LMQ_T_INT4, 0, LMQ_ACT_NONE, CUDA_R_4I, linear_int<4> },
    { LMQ_T_INT3, 0, LMQ_ACT_NONE, CUDA_R_8I, linear_int<3> }, /* type: float rows only */
    { LMQ_T_INT2, 0, LMQ_ACT_NONE, CUDA_R_8I, linear_int<2> },
    { LMQ_T_INT8, 1u << LMQ_GRAN_CHANNEL, LMQ_ACT_INT8, CUDA_R_8I, linear_w8a8 },
};

/* The row for W, or NULL with why. */
static const rtc_row *row_for(const rt_weight *W, char *why, size_t size)
{
    const lmq_encoding *e = lmq_encoding_of(W->q.dtype);
    const char *name = W->name ? W->name : "weight";
    const rtc_row *row = NULL;
    int encoded = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (rows[i].dtype == W->q.dtype) {
            encoded = 1;
            if (rows[i].act == W->act.scheme)
                row = &rows[i];
        }
    if (!encoded)
        snprintf(why, size, "%s: %s: no CUDA kernel for this encoding", name, e ? e->name : "?");
    else if (!row)
        snprintf(why, size, "%s: %s with activation quantisation: no CUDA kernel (W8A8: int8 per channel)", name,
                 e->name);
    else if (!((row->grans ? row->grans : e->grans) >> W->q.gran & 1))
        snprintf(why, size, "%s: %s per %s: no CUDA kernel for this granularity", name, e->name,
                 lmq_gran_name(W->q.gran));
    else if (W->q.asym && row->act != LMQ_ACT_NONE)
        snprintf(why, size, "%s: %s asymmetric with activation quantisation: no CUDA kernel (W8A8: symmetric)", name,
                 e->name);
    else if (W->act.scheme != LMQ_ACT_NONE && W->act.gran != LMQ_ACT_TOKEN)
        snprintf(why, size, "%s: activation quantisation per %s: no CUDA kernel (per token only)", name,
                 lmq_act_gran_names[W->act.gran]);
    else if (W->act.scheme != LMQ_ACT_NONE && W->in > 65536)
        snprintf(why, size, "%s: W8A8 over %d inputs: int32 sums could overflow (at most 65536)", name, W->in);
    else
        return row;
    return NULL;
}

int rtc_supports(const rt_weight *W, char *why, size_t size)
{
    char none[1];
    return row_for(W, why ? why : none, why ? size : sizeof none) != NULL;
}

lmq_code rtc_upload(rtc_ctx *c, const rt_weight *W, rtc_weight **out, lmq_err *err)
{
    *out = NULL;
    char why[LMQ_NAME_MAX + 128];
    const rtc_row *row = row_for(W, why, sizeof why);
    if (!row)
        return lmq_fail(err, LMQ_E_UNSUPPORTED, "cuda: %s", why);
    rtc_weight *w = (rtc_weight *)calloc(1, sizeof *w);
    if (!w)
        return lmq_fail(err, LMQ_E_NOMEM, "cuda: out of memory");
    snprintf(w->name, sizeof w->name, "%s", W->name ? W->name : "weight");
    w->q = W->q;
    w->L = W->L;
    w->out = W->out;
    w->in = W->in;
    w->row = row;
    const size_t head = W->L.code_offset, codes = W->L.bytes - head, code_at = align256(head),
                 bias_at = align256(code_at + codes);
    w->bytes = bias_at + (W->b ? (size_t)W->out * sizeof(float) : 0);
    lmq_code code = rtc_check(cudaMalloc((void **)&w->dev, w->bytes), w->name, err);
    if (!code && head)
        code = rtc_check(cudaMemcpyAsync(w->dev, W->data, head, cudaMemcpyHostToDevice, c->stream), w->name, err);
    if (!code)
        code = rtc_check(cudaMemcpyAsync(w->dev + code_at, W->data + head, codes, cudaMemcpyHostToDevice, c->stream),
                         w->name, err);
    if (!code && W->b)
        code = rtc_check(cudaMemcpyAsync(w->dev + bias_at, W->b, (size_t)W->out * sizeof(float),
                                         cudaMemcpyHostToDevice, c->stream),
                         w->name, err);
    if (!code)
        code = rtc_sync(c, err); /* W's bytes may go once this returns */
    if (code) {
        rtc_weight_free(w);
        return code;
    }
    w->scales = (const __half *)w->dev;
    w->zeros = W->q.asym ? (const int16_t *)(w->dev + W->L.zero_offset) : NULL;
    w->codes = w->dev + code_at;
    w->bias = W->b ? (const float *)(w->dev + bias_at) : NULL;
    *out = w;
    return LMQ_OK;
}

void rtc_weight_free(rtc_weight *w)
{
    if (!w)
        return;
    cudaFree(w->dev);
    free(w);
}

size_t rtc_weight_bytes(const rtc_weight *w)
{
    return w->bytes;
}

lmq_code rtc_linear(rtc_ctx *c, const float *x, int n, const rtc_weight *W, float *y, lmq_err *err)
{
    if (n < 1)
        return lmq_fail(err, LMQ_E_ARG, "cuda: %s: %d activation rows", W->name, n);
    return W->row->run(c, x, n, W, y, err);
}

/* ---- rows of a weight (embedding lookups) ---------------------------------------------- */

/* out[i·in + c] (+)= W[rows[i], c] for i < n, decoded as the stored encoding says: the float
 * formats widened, integer codes (bits each) minus their zero code times their fp16 scale in
 * fp32 (as the scheme table does). */
__global__ void weight_rows(lmq_dtype dtype, int bits, const uint8_t *__restrict__ codes,
                            const __half *__restrict__ scales, const int16_t *__restrict__ zeros, int s_stride,
                            int s_shift, int in, const int32_t *__restrict__ rows, int n, int add,
                            float *__restrict__ out)
{
    const int i = blockIdx.x;
    if (i >= n)
        return;
    const size_t r = (size_t)rows[i];
    for (int c = threadIdx.x; c < in; c += blockDim.x) {
        const size_t k = r * in + c;
        float v;
        if (dtype == LMQ_T_F32)
            v = reinterpret_cast<const float *>(codes)[k];
        else if (dtype == LMQ_T_F16)
            v = __half2float(reinterpret_cast<const __half *>(codes)[k]);
        else if (dtype == LMQ_T_BF16)
            v = __bfloat162float(reinterpret_cast<const __nv_bfloat16 *>(codes)[k]);
        else {
            const size_t g = r * s_stride + (c >> s_shift);
            v = (float)(code_at(codes, (uint64_t)k * bits, bits) - zero_at(zeros, g, bits)) * __half2float(scales[g]);
        }
        out[(size_t)i * in + c] = add ? out[(size_t)i * in + c] + v : v;
    }
}

lmq_code rtc_weight_rows(rtc_ctx *c, const rtc_weight *W, const int32_t *rows, int n, int add, float *out,
                         lmq_err *err)
{
    int stride, shift;
    scale_index(W, &stride, &shift);
    weight_rows<<<n, 256, 0, c->stream>>>((lmq_dtype)W->q.dtype, (int)lmq_encoding_of(W->q.dtype)->bits, W->codes,
                                          W->scales, W->zeros, stride, shift, W->in, rows, n, add, out);
    return rtc_check(cudaGetLastError(), W->name, err);
}

int rtc_weight_out(const rtc_weight *W)
{
    return W->out;
}

int rtc_weight_in(const rtc_weight *W)
{
    return W->in;
}
