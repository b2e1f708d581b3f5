/* Linear layers on the device over weights in their stored encodings (runtime/cuda/cuda.h):
 * one row per encoding, like the CPU's table; the integer rows are fused dequantising GEMVs,
 * the float rows cuBLAS GEMMs. */
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
    const uint8_t *codes;  /* at a 256-byte boundary */
    const float *bias;     /* [out] or NULL */
    size_t bytes;
};

/* ---- the fused integer GEMV ------------------------------------------------------------ */

#define GEMV_WARPS 4 /* output rows per block, one warp each */

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

/* y[t, r] = Σ_c (code − 2^(BITS−1))·s[r·s_stride + (c >> s_shift)]·x[t, c] (+ b[r]) for the NR
 * activation rows t: warp threadIdx.y of block x takes row r and reads its codes once for all of
 * them. VEC: every row starts on a 16-byte boundary (in a multiple of 128 / BITS), read 16 bytes
 * per lane per step; the scale is fetched once per load when a group spans it (groups of 32 or
 * more for int4, every int8 group), else once per 32-bit word (int4 g16: groups are powers of
 * two >= 16, so a word's 8 codes never straddle two). Otherwise one code per lane per step at
 * its bit position. */
template <int BITS, bool VEC, int NR>
__global__ void __launch_bounds__(32 * GEMV_WARPS)
    gemv_int(const uint8_t *__restrict__ codes, const __half *__restrict__ scales, int s_stride, int s_shift,
             const float *__restrict__ x, const float *__restrict__ bias, float *__restrict__ y, int out, int in)
{
    const int r = blockIdx.x * GEMV_WARPS + threadIdx.y, lane = threadIdx.x;
    if (r >= out)
        return;
    const __half *sr = scales + (size_t)r * s_stride;
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
                const float s = __half2float(sr[c >> s_shift]);
#pragma unroll
                for (int t = 0; t < NR; t++)
                    acc[t] += dot<per_vec>(q, x + (size_t)t * in + c) * s;
            } else {
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    const float s = __half2float(sr[(c + k * per_word) >> s_shift]);
#pragma unroll
                    for (int t = 0; t < NR; t++)
                        acc[t] += dot<per_word>(q + k * per_word, x + (size_t)t * in + c + k * per_word) * s;
                }
            }
        }
    } else {
        constexpr uint32_t mask = (1u << BITS) - 1;
        const uint64_t base = (uint64_t)r * (uint64_t)in * BITS;
        for (int c = lane; c < in; c += 32) {
            const uint64_t bit = base + (uint64_t)c * BITS;
            const int q = (int)(codes[bit >> 3] >> (bit & 7) & mask) - (1 << (BITS - 1));
            const float w = (float)q * __half2float(sr[c >> s_shift]);
#pragma unroll
            for (int t = 0; t < NR; t++)
                acc[t] += w * x[(size_t)t * in + c];
        }
    }
#pragma unroll
    for (int t = 0; t < NR; t++) {
        float a = acc[t];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            a += __shfl_xor_sync(0xffffffffu, a, o);
        if (lane == 0)
            y[(size_t)t * out + r] = a + (bias ? bias[r] : 0.0f);
    }
}

/* The GEMV for 1..RTC_GEMV_MAX_ROWS activation rows: [vec][rows − 1]. */
typedef void (*gemv_fn)(const uint8_t *, const __half *, int, int, const float *, const float *, float *, int, int);
#define GEMV_ROWS(B, V)                                                                                              \
    { gemv_int<B, V, 1>, gemv_int<B, V, 2>, gemv_int<B, V, 3>, gemv_int<B, V, 4>, gemv_int<B, V, 5>,                 \
      gemv_int<B, V, 6>, gemv_int<B, V, 7>, gemv_int<B, V, 8> }
static_assert(RTC_GEMV_MAX_ROWS == 8, "one kernel per row count");
template <int BITS>
static const gemv_fn gemv_kernels[2][RTC_GEMV_MAX_ROWS] = { GEMV_ROWS(BITS, false), GEMV_ROWS(BITS, true) };

/* Rows [r0, r0 + rows) of W as fp16, each weight q·s rounded once: what the prefill GEMM reads. */
template <int BITS>
__global__ void dequant_rows(const uint8_t *__restrict__ codes, const __half *__restrict__ scales, int s_stride,
                             int s_shift, int r0, int rows, int in, __half *__restrict__ out)
{
    constexpr uint32_t mask = (1u << BITS) - 1;
    const size_t n = (size_t)rows * in;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const int r = r0 + (int)(i / in), c = (int)(i % in);
        const uint64_t bit = ((uint64_t)r * in + c) * BITS;
        const int q = (int)(codes[bit >> 3] >> (bit & 7) & mask) - (1 << (BITS - 1));
        out[i] = __float2half_rn((float)q * __half2float(scales[(size_t)r * s_stride + (c >> s_shift)]));
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
            dequant_rows<BITS><<<blocks_for((size_t)nr * W->in), 256, 0, c->stream>>>(W->codes, W->scales, stride,
                                                                                      shift, r0, nr, W->in, wb);
            code = rtc_check(cudaGetLastError(), W->name, err);
            if (!code)
                code = gemm_nt(c, wb, CUDA_R_16F, nr, W->in, c->scratch, n, y + r0, W->out, W->name, err);
        }
        return code ? code : add_bias_to(c, y, n, W, err);
    }
    const dim3 block(32, GEMV_WARPS), grid((unsigned)((W->out + GEMV_WARPS - 1) / GEMV_WARPS));
    const gemv_fn k = gemv_kernels<BITS>[W->in % (128 / BITS) == 0][n - 1];
    k<<<grid, block, 0, c->stream>>>(W->codes, W->scales, stride, shift, x, W->bias, y, W->out, W->in);
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

/* ---- the table --------------------------------------------------------------------------- */

#define SCALED ((1u << LMQ_GRAN_TENSOR) | (1u << LMQ_GRAN_CHANNEL) | (1u << LMQ_GRAN_GROUP))

static const rtc_row rows[] = {
    { LMQ_T_F32, 1u << LMQ_GRAN_NONE, CUDA_R_32F, linear_float },
    { LMQ_T_F16, 1u << LMQ_GRAN_NONE, CUDA_R_16F, linear_float },
    { LMQ_T_BF16, 1u << LMQ_GRAN_NONE, CUDA_R_16BF, linear_float },
    { LMQ_T_INT8, SCALED, CUDA_R_8I, linear_int<8> },
    { LMQ_T_INT4, SCALED, CUDA_R_4I, linear_int<4> },
};

/* The row for W, or NULL with why. */
static const rtc_row *row_for(const rt_weight *W, char *why, size_t size)
{
    const lmq_encoding *e = lmq_encoding_of(W->q.dtype);
    const char *name = W->name ? W->name : "weight";
    const rtc_row *row = NULL;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (rows[i].dtype == W->q.dtype)
            row = &rows[i];
    if (!row)
        snprintf(why, size, "%s: %s: no CUDA kernel for this encoding", name, e ? e->name : "?");
    else if (!(row->grans >> W->q.gran & 1))
        snprintf(why, size, "%s: %s per %s: no CUDA kernel for this granularity", name, e->name,
                 lmq_gran_name(W->q.gran));
    else if (W->q.asym)
        snprintf(why, size, "%s: %s asymmetric: no CUDA kernel (symmetric only)", name, e->name);
    else if (W->act.scheme != LMQ_ACT_NONE)
        snprintf(why, size, "%s: activation quantisation (W8A8): no CUDA kernel", name);
    else
        return row;
    return NULL;
}

int rtc_supports(const rt_weight *W, char *why, size_t size)
{
    char none[1];
    return row_for(W, why ? why : none, why ? size : sizeof none) != NULL;
}

static size_t align256(size_t n)
{
    return (n + 255) & ~(size_t)255;
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
 * formats widened, integer codes times their fp16 scale in fp32 (as the scheme table does). */
__global__ void weight_rows(lmq_dtype dtype, const uint8_t *__restrict__ codes, const __half *__restrict__ scales,
                            int s_stride, int s_shift, int in, const int32_t *__restrict__ rows, int n, int add,
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
            const int bits = dtype == LMQ_T_INT8 ? 8 : 4;
            const uint64_t bit = (uint64_t)k * bits;
            const int q = (int)(codes[bit >> 3] >> (bit & 7) & ((1u << bits) - 1)) - (1 << (bits - 1));
            v = (float)q * __half2float(scales[r * s_stride + (c >> s_shift)]);
        }
        out[(size_t)i * in + c] = add ? out[(size_t)i * in + c] + v : v;
    }
}

lmq_code rtc_weight_rows(rtc_ctx *c, const rtc_weight *W, const int32_t *rows, int n, int add, float *out,
                         lmq_err *err)
{
    int stride, shift;
    scale_index(W, &stride, &shift);
    weight_rows<<<n, 256, 0, c->stream>>>((lmq_dtype)W->q.dtype, W->codes, W->scales, stride, shift, W->in, rows, n,
                                          add, out);
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
