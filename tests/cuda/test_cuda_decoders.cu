/* test_cuda_decoders.cu — the GPU's GGUF weight decoders, run on the host against the CPU's
 * reference: no GPU needed, so CTest runs it on every machine that has nvcc (CI among them);
 * tests/cuda/run.sh runs it too, as every test_cuda_* binary.
 *
 * The decode kernels read weight blocks through two kinds of decoder, both SI_HD (host and
 * device code, cuda_common.cuh):
 *   - dequant.cuh's units (tq_*: the general GEMV, embeddings, prefill's dequantisation to f16):
 *     a unit's floats and the offsets in the block they belong to. Checked: every element of
 *     random blocks comes out exactly once, bit for bit the CPU dequantiser's
 *     (quant_get(t)->to_float).
 *   - gemv_q8x_units.cuh's units (tqx_*: the batch-1..8 GEMVs on q8 x): load() from a staged
 *     segment, dot() with a unit of q8 x. Each unit is staged and loaded as gemv_q8x_body does
 *     (segment u / 32 copied to a 16-aligned buffer at the source's offset mod 16, lane u % 32),
 *     in 4 consecutive rows, so rows start at every offset mod 16 the type's rows can have, and
 *     the last segment is partial. Checked: each unit's dot against sum w_i * xd * xq_i in
 *     double, w the CPU's dequantised weights, within 1e-5 of the unit's sum |w_i * xd * xq_i|
 *     (one wrong quant bit costs ~1e-3 of it).
 *   - gemv_mma_units.cuh's fragment builders (tmma_*: the int8 tensor-core GEMV and matmul):
 *     for every 32-block and lane column of random segments, sa (k < 16) or sb (k >= 16) times
 *     each int8 byte plus mn (Q2_K: plus mn times the byte of mins()), against the CPU's
 *     dequantised weight (equal as floats).
 *   - gemv_q8x_tc_units.cuh (tc_*: the 5-8-row q8x GEMV on tensor cores, which must give the
 *     1-row dp4a kernel's bits): each unit's block sums taken from its A fragments (as the
 *     tensor cores would sum them), through fold(), against the q8x unit's dot(), bit for bit;
 *     and all units added up as the two kernels add them (fold_add / q8x_dot_add).
 * The types and their units are weight_units.cuh's table, the one the kernels' dispatch reads.
 * Host and device compile these to different instructions (the device fuses multiply-adds), so
 * this checks the bit layouts and the integer sums; test_cuda_kernels checks the kernels' results
 * on the GPU.
 *
 * Usage: test_cuda_decoders [--small] [--no-bench] (both accepted and ignored: run.sh passes
 * them to every kernel test). Exit status 1 on any failure. */
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "backend/cuda/gemv_q8x_tc_units.cuh"
#include "backend/cuda/weight_units.cuh"
#include "test_blocks.cuh" /* fill_random_blocks, rnd_u32 */

static int g_fail = 0, g_checks = 0;

static void report(const char *what, const char *type, double err, double tol) {
    const bool ok = err <= tol && !std::isnan(err);
    g_checks++;
    if (!ok) g_fail++;
    printf("%-4s %-34s %-5s err %.3e  tol %.1e\n", ok ? "PASS" : "FAIL", what, type, err, tol);
}

/* tq_*: n_blocks random blocks, every unit decoded; err = the number of elements that are not
 * produced exactly once with the reference's bits */
template <class T> static void check_float_units(si_type t, const char *name) {
    const int n_blocks = 64, K = n_blocks * T::BE;
    const quant_traits *qt = quant_get(t);
    const size_t bytes = quant_row_size(t, K);
    std::vector<uint8_t> w(bytes);
    fill_random_blocks(t, w.data(), bytes);
    std::vector<float> ref(K);
    qt->to_float(w.data(), ref.data(), K);
    std::vector<int> seen(K, 0);
    int bad = 0;
    for (int blk = 0; blk < n_blocks; blk++)
        for (int u = 0; u < T::UPB; u++) {
            float v[4 * T::NG];
            int xo[T::NG];
            T::unit(w.data() + (size_t)blk * T::BB, u, v, xo);
            for (int g = 0; g < T::NG; g++)
                for (int j = 0; j < 4; j++) {
                    const int e = xo[g] + j;
                    if (e < 0 || e >= T::BE) {
                        bad++;
                        continue;
                    }
                    const int i = blk * T::BE + e;
                    seen[i]++;
                    if (memcmp(&v[4 * g + j], &ref[i], sizeof(float)) != 0) bad++;
                }
        }
    for (int i = 0; i < K; i++)
        bad += seen[i] != 1;
    report("dequant units (elements wrong)", name, bad, 0);
}

/* One row of K random weights of type t (16-aligned, row bytes == units x UBYTES) and one row of
 * q8 x (int8 values, fp16-rounded scales, integer block sums), as the q8x kernels take them. */
struct q8x_case {
    std::vector<uint8_t> buf;
    uint8_t *w;
    std::vector<int8_t> xq;
    std::vector<float> xd;
    std::vector<int> xs;
};

static void fill_q8x_x(q8x_case &c, int K) {
    const int nblk = K / 32;
    c.xq.resize(K);
    c.xd.resize(nblk);
    c.xs.resize(nblk);
    for (int b = 0; b < nblk; b++) {
        c.xd[b] = fp16_to_fp32(fp32_to_fp16(0.01f + 0.02f * std::fabs(rnd_f())));
        c.xs[b] = 0;
        for (int i = 0; i < 32; i++) {
            c.xq[32 * b + i] = (int8_t)(rnd_int(255) - 127);
            c.xs[b] += c.xq[32 * b + i];
        }
    }
}

/* tc_* against its q8x unit U: unit u's block sums from the fragments of its 4 sub-blocks (lanes
 * c = 0..3: k 4c..4c+3 from lo, 16+4c.. from hi) times x, folded; err = units whose result
 * differs in any bit from U::dot */
template <class T> static void check_tc_units(si_type t, const char *name) {
    using U = typename T::U;
    const int K = 21 * 256, units = K / (32 * U::UB);
    const size_t row_bytes = quant_row_size(t, K);
    q8x_case c;
    c.buf.resize(row_bytes + 16);
    c.w = c.buf.data() + (16 - (uintptr_t)c.buf.data() % 16) % 16;
    fill_random_blocks(t, c.w, row_bytes);
    fill_q8x_x(c, K);
    int bad = 0;
    float lane_got = 0.0f, lane_want = 0.0f; /* every unit added up, as a kernel's lane does */
    for (int u = 0; u < units; u++) {
        const int h = u & 1; /* half-block units (the k-quants): the half; unused by Q4_0 */
        const uint8_t *unit = T::unit(c.w, u, h); /* chunks hold whole blocks: unit u of the row */
        const typename T::P p = T::params(unit, h);
        int S[4 * T::NS], xt[4];
        for (int j = 0; j < 4; j++) {
            const int8_t *x = &c.xq[(size_t)u * 128 + 32 * j];
            int *Sj = &S[T::NS * j]; /* NS 2: the lo words' sum, then the hi words' */
            Sj[0] = Sj[T::NS - 1] = 0;
            for (int lane_c = 0; lane_c < 4; lane_c++) {
                uint32_t lo, hi;
                T::frag(unit, h, j, lane_c, lo, hi);
                for (int i = 0; i < 4; i++) {
                    const int a =
                        T::AU8 ? (int)(uint8_t)(lo >> (8 * i)) : (int)(int8_t)(lo >> (8 * i));
                    const int b =
                        T::AU8 ? (int)(uint8_t)(hi >> (8 * i)) : (int)(int8_t)(hi >> (8 * i));
                    Sj[0] += a * x[4 * lane_c + i];
                    Sj[T::NS - 1] += b * x[16 + 4 * lane_c + i];
                }
            }
            xt[j] = T::xterm(c.xs[u * 4 + j]);
            if constexpr (tc_has_xhalf<T>::value) { /* and the first 16's sum, as the kernel */
                int x0 = 0;
                for (int i = 0; i < 16; i++)
                    x0 += x[i];
                xt[j] = T::xhalf(xt[j], x0);
            }
        }
        const float got = T::fold(p, &c.xd[u * 4], xt, S);
        if constexpr (tc_has_fold_add<T>::value)
            lane_got = T::fold_add(lane_got, p, &c.xd[u * 4], xt, S);
        else
            lane_got += got;
        /* the dp4a kernel's: the unit loaded from its segment as gemv_q8x_body loads it */
        const int seg = u / 32, lane = u % 32;
        uint32_t wr[U::WORDS], xw[8 * U::UB];
        U::load(c.w + (size_t)seg * 32 * U::UBYTES, lane, wr);
        memcpy(xw, &c.xq[(size_t)u * 128], sizeof xw);
        const float want = U::dot(wr, xw, &c.xd[u * 4], &c.xs[u * 4]);
        lane_want = q8x_dot_add<U>(lane_want, wr, xw, &c.xd[u * 4], &c.xs[u * 4]);
        bad += memcmp(&got, &want, sizeof got) != 0;
    }
    bad += memcmp(&lane_got, &lane_want, sizeof lane_got) != 0;
    report("tensor-core q8x units (units not the same bits)", name, bad, 0);
}

/* tqx_*: 4 rows of K weights in one buffer, one row of q8 x; err = the largest error of a unit's
 * dot, relative to that unit's sum of |terms| */
template <class T> static void check_q8x_units(si_type t, const char *name) {
    /* K % 128 == 0 (and % 256 for the k-quants), rows of the 32-element types at offsets 8 mod
     * 16 where their size allows; units = K / (32 UB): the last segment of 32 is partial */
    const int K = T::BE == 256 ? 21 * 256 : 41 * 128;
    const int n_rows = 4, units = K / (32 * T::UB);
    const quant_traits *qt = quant_get(t);
    const size_t row_bytes = quant_row_size(t, K);
    if ((size_t)units * T::UBYTES != row_bytes) {
        report("q8x units (row bytes != units x UBYTES)", name, 1, 0);
        return;
    }
    std::vector<uint8_t> w(row_bytes * n_rows + 16);
    uint8_t *W = w.data() + (16 - (uintptr_t)w.data() % 16) % 16; /* 16-aligned, as on the GPU */
    fill_random_blocks(t, W, row_bytes * n_rows);

    q8x_case x;
    fill_q8x_x(x, K);
    const std::vector<int8_t> &xq = x.xq;
    const std::vector<float> &xd = x.xd;
    const std::vector<int> &xs = x.xs;

    constexpr int SEGB = 32 * T::UBYTES;
    alignas(16) uint8_t stage[SEGB + 32];
    std::vector<float> ref(K);
    double worst = 0;
    for (int r = 0; r < n_rows; r++) {
        const uint8_t *row = W + r * row_bytes;
        qt->to_float(row, ref.data(), K);
        for (int u = 0; u < units; u++) {
            const int seg = u / 32, lane = u % 32, n = std::min(32, units - seg * 32);
            const uint8_t *src = row + (size_t)seg * SEGB;
            const int off = (int)((uintptr_t)src % 16);
            memset(stage, 0, sizeof stage);
            memcpy(stage + off, src, (size_t)n * T::UBYTES);
            uint32_t wr[T::WORDS];
            T::load(stage + off, lane, wr);
            uint32_t xw[8 * T::UB];
            memcpy(xw, &xq[(size_t)u * 32 * T::UB], sizeof xw);
            const float got = T::dot(wr, xw, &xd[u * T::UB], &xs[u * T::UB]);
            double want = 0, mag = 0;
            for (int i = u * 32 * T::UB; i < (u + 1) * 32 * T::UB; i++) {
                const double term = (double)ref[i] * xd[i / 32] * xq[i];
                want += term;
                mag += std::fabs(term);
            }
            const double err = std::isnan(got) ? NAN : std::fabs(got - want) / std::max(mag, 1e-30);
            worst = std::isnan(err) || std::isnan(worst) ? NAN : std::max(worst, err);
        }
    }
    report("q8x units (a unit's dot, relative)", name, worst, 1e-5);
}

/* tmma_*: 16 random 256-element segments; err = the number of weights frag() gives wrong */
template <class T> static void check_mma_frags(si_type t, const char *name) {
    const int n_seg = 16, K = n_seg * 256;
    const size_t bytes = quant_row_size(t, K);
    if (bytes != (size_t)n_seg * T::SEGB) {
        report("mma fragments (segment bytes != SEGB)", name, 1, 0);
        return;
    }
    std::vector<uint8_t> w(bytes);
    fill_random_blocks(t, w.data(), bytes);
    std::vector<float> ref(K);
    quant_get(t)->to_float(w.data(), ref.data(), K);
    int bad = 0;
    for (int s = 0; s < n_seg; s++)
        for (int j = 0; j < 8; j++)
            for (int c = 0; c < 4; c++) {
                uint32_t lo, hi, ml = 0x01010101u, mh = 0x01010101u; /* min: mn x 1 */
                float sa, sb, mn;
                T::frag(w.data() + (size_t)s * T::SEGB, j, c, lo, hi, sa, sb, mn);
                if constexpr (mma_min16<T>::v) T::mins(w.data() + (size_t)s * T::SEGB, j, ml, mh);
                const float *r = &ref[256 * s + 32 * j + 4 * c];
                for (int i = 0; i < 4; i++) {
                    const float m0 = mn * (float)(int8_t)(ml >> (8 * i)),
                                m1 = mn * (float)(int8_t)(mh >> (8 * i));
                    bad += sa * (float)(int8_t)(lo >> (8 * i)) + m0 != r[i];
                    bad += (T::TWO ? sb : sa) * (float)(int8_t)(hi >> (8 * i)) + m1 != r[16 + i];
                }
            }
    report("mma fragments (weights wrong)", name, bad, 0);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--small") && strcmp(argv[i], "--no-bench")) {
            fprintf(stderr, "test_cuda_decoders: unknown argument '%s' (--small, --no-bench)\n",
                    argv[i]);
            return 2;
        }
    /* every weight type the GPU holds, with the units weight_units.cuh gives it: so the table's
     * entries are checked too (a unit of another type decodes the type's blocks wrongly) */
    static const si_type types[] = {SI_TYPE_F16,  SI_TYPE_BF16, SI_TYPE_Q8_0, SI_TYPE_Q4_0,
                                    SI_TYPE_Q4_1, SI_TYPE_Q5_0, SI_TYPE_Q5_1, SI_TYPE_Q2_K,
                                    SI_TYPE_Q3_K, SI_TYPE_Q4_K, SI_TYPE_Q5_K, SI_TYPE_Q6_K,
                                    SI_TYPE_IQ4_NL, SI_TYPE_IQ4_XS};
    for (si_type t : types) {
        const char *name = quant_get(t)->name;
        const int held = with_weight_units(t, 0, [&](auto u) {
            using U = decltype(u);
            check_float_units<typename U::tq>(t, name);
            if constexpr (!std::is_void<typename U::tqx>::value) {
                check_q8x_units<typename U::tqx>(t, name);
                using TC = typename q8x_tc_of<typename U::tqx>::type;
                if constexpr (!std::is_void<TC>::value) check_tc_units<TC>(t, name);
            }
            if constexpr (!std::is_void<typename U::tmma>::value)
                check_mma_frags<typename U::tmma>(t, name);
            return 1;
        });
        if (!held) report("weight_units.cuh (type missing)", name, 1, 0);
    }

    printf("==== summary: %d checks, %d failed\n", g_checks, g_fail);
    return g_fail ? 1 : 0;
}
