"""The C source of the window kernels of ``conv_kernels`` (which builds and calls them).

``PRELUDE`` holds the ``geometry`` struct and the helpers every kernel shares; ``KERNELS``
is the kernels of one dtype (``$T``, named with suffix ``$S``), substituted once per entry
of ``DTYPES``: the copies (``im2col``, ``col2im``), max pooling's ``pool_argmax``, and the
row gathers and scatters of its values and gradients. Apart from the loader so that each
module stays short; ``conv_kernels`` re-exports these names.
"""
import string

import numpy as np

DTYPES = {np.dtype(np.float32): ("float", "f32"), np.dtype(np.float64): ("double", "f64")}

PRELUDE = r"""
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t n, c;                   /* samples, channels (pooling: planes, 1) */
    int64_t size[3];                /* the image's spatial sizes */
    int64_t kernel[3], pos[3];      /* taps and output positions per dim */
    int64_t stride[3], pad[3], dilation[3];     /* pad: the low side's */
    int64_t n_stride, row_stride;   /* the column matrix's layout (see the module) */
} geometry;

/* The output positions [*lo, *hi) along dim d whose tap t reads inside the image:
   0 <= p*stride - pad + t*dilation < size. */
static void tap_range(const geometry *g, int d, int64_t t, int64_t *lo, int64_t *hi) {
    const int64_t off = t * g->dilation[d] - g->pad[d], s = g->stride[d], n = g->pos[d];
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t b = g->size[d] - off <= 0 ? 0 : (g->size[d] - off + s - 1) / s;
    *lo = a < n ? a : n;
    *hi = b < n ? b : n;
    if (*hi < *lo) *hi = *lo;
}

/* tap_range for every tap of dim d. */
static void tap_ranges(const geometry *g, int d, int64_t *lo, int64_t *hi) {
    for (int64_t t = 0; t < g->kernel[d]; t++) tap_range(g, d, t, &lo[t], &hi[t]);
}

/* tap_ranges of the three dims in one allocation (the caller frees it): box[2d] and
   box[2d + 1] point at dim d's lo and hi per tap. */
static int64_t *tap_boxes(const geometry *g, const int64_t *box[6]) {
    int64_t *ranges = malloc(2 * (g->kernel[0] + g->kernel[1] + g->kernel[2]) * sizeof(int64_t));
    int64_t *at = ranges;
    for (int d = 0; d < 3; d++) {
        tap_ranges(g, d, at, at + g->kernel[d]);
        box[2 * d] = at;
        box[2 * d + 1] = at + g->kernel[d];
        at += 2 * g->kernel[d];
    }
    return ranges;
}

/* Where tap t of position p reads along dim d (outside [0, size) in the padding). */
static int64_t tap_at(const geometry *g, int d, int64_t p, int64_t t) {
    return p * g->stride[d] - g->pad[d] + t * g->dilation[d];
}

static int inside(const geometry *g, int d, int64_t i) {
    return i >= 0 && i < g->size[d];
}

/* The flat index of the first tap of window (p0, p1, p2) inside the image. */
static int64_t first_inside(const geometry *g, int64_t p0, int64_t p1, int64_t p2) {
    const int64_t p[3] = {p0, p1, p2};
    int64_t i[3];
    for (int d = 0; d < 3; d++) {
        int64_t t = 0;
        while (t + 1 < g->kernel[d] && !inside(g, d, tap_at(g, d, p[d], t))) t++;
        i[d] = tap_at(g, d, p[d], t);
    }
    return (i[0] * g->size[1] + i[1]) * g->size[2] + i[2];
}
"""

KERNELS = string.Template(r"""
/* One row of the column matrix: tap (t0, t1, t2) of every position of one image plane
   (zeros where the tap falls in the padding). The positions whose tap is inside the image
   are a box [lo, hi) per dim (from tap_ranges), so the copy loops have no tests. */
static inline void gather_taps_$S(const $T *restrict img, $T *restrict row, const geometry *g,
                           int64_t t0, int64_t t1, int64_t t2, const int64_t *const box[6]) {
    const int64_t lo0 = box[0][t0], hi0 = box[1][t0], lo1 = box[2][t1], hi1 = box[3][t1];
    const int64_t lo2 = box[4][t2], hi2 = box[5][t2];
    const int64_t n1 = g->pos[1], n2 = g->pos[2], s2 = g->stride[2];
    const int64_t start2 = tap_at(g, 2, 0, t2);
    for (int64_t p0 = 0; p0 < g->pos[0]; p0++) {
        $T *out = row + p0 * n1 * n2;
        if (p0 < lo0 || p0 >= hi0) {
            memset(out, 0, n1 * n2 * sizeof($T));
            continue;
        }
        if (lo1 > 0) memset(out, 0, lo1 * n2 * sizeof($T));
        if (hi1 < n1) memset(out + hi1 * n2, 0, (n1 - hi1) * n2 * sizeof($T));
        const $T *plane = img + tap_at(g, 0, p0, t0) * g->size[1] * g->size[2] + start2;
        for (int64_t p1 = lo1; p1 < hi1; p1++) {
            const $T *restrict in = plane + tap_at(g, 1, p1, t1) * g->size[2];
            $T *restrict o = out + p1 * n2;
            for (int64_t p2 = 0; p2 < lo2; p2++) o[p2] = 0;
            if (s2 == 1)
                for (int64_t p2 = lo2; p2 < hi2; p2++) o[p2] = in[p2];
            else
                for (int64_t p2 = lo2; p2 < hi2; p2++) o[p2] = in[p2 * s2];
            for (int64_t p2 = hi2; p2 < n2; p2++) o[p2] = 0;
        }
    }
}

/* The adjoint of gather_taps: one row added into one image plane. */
static inline void scatter_taps_$S(const $T *restrict row, $T *restrict img, const geometry *g,
                                   int64_t t0, int64_t t1, int64_t t2,
                                   const int64_t *const box[6]) {
    const int64_t lo0 = box[0][t0], hi0 = box[1][t0], lo1 = box[2][t1], hi1 = box[3][t1];
    const int64_t lo2 = box[4][t2], hi2 = box[5][t2];
    const int64_t n1 = g->pos[1], n2 = g->pos[2], s2 = g->stride[2];
    for (int64_t p0 = lo0; p0 < hi0; p0++) {
        $T *plane = img + tap_at(g, 0, p0, t0) * g->size[1] * g->size[2] + tap_at(g, 2, 0, t2);
        for (int64_t p1 = lo1; p1 < hi1; p1++) {
            const $T *restrict in = row + (p0 * n1 + p1) * n2;
            $T *restrict out = plane + tap_at(g, 1, p1, t1) * g->size[2];
            if (s2 == 1)
                for (int64_t p2 = lo2; p2 < hi2; p2++) out[p2] += in[p2];
            else
                for (int64_t p2 = lo2; p2 < hi2; p2++) out[p2 * s2] += in[p2];
        }
    }
}

/* The column matrix of image x (N, C, *size): one row per (channel, tap). The loops run
   in the order the rows lie in memory: sample by sample where the layout is batch-major. */
void im2col_$S(const $T *x, $T *cols, const geometry *g, int nthreads) {
    const int64_t k0 = g->kernel[0], k1 = g->kernel[1], k2 = g->kernel[2];
    const int64_t plane = g->size[0] * g->size[1] * g->size[2], taps = k0 * k1 * k2;
    const int64_t *box[6];
    int64_t *ranges = tap_boxes(g, box);
    if (g->n_stride > g->row_stride) {      /* batch-major: (N, C*K, P) */
        #pragma omp parallel for collapse(2) num_threads(nthreads) if(nthreads > 1)
        for (int64_t n = 0; n < g->n; n++)
            for (int64_t c = 0; c < g->c; c++) {
                const $T *img = x + (n * g->c + c) * plane;
                $T *row = cols + n * g->n_stride + c * taps * g->row_stride;
                for (int64_t t0 = 0; t0 < k0; t0++)
                for (int64_t t1 = 0; t1 < k1; t1++)
                for (int64_t t2 = 0; t2 < k2; t2++, row += g->row_stride)
                    gather_taps_$S(img, row, g, t0, t1, t2, box);
            }
    } else {                                /* the GEMM's: (C*K, N*P) */
        #pragma omp parallel for collapse(2) num_threads(nthreads) if(nthreads > 1)
        for (int64_t c = 0; c < g->c; c++)
            for (int64_t t = 0; t < taps; t++) {
                const int64_t t0 = t / (k1 * k2), t1 = t / k2 % k1, t2 = t % k2;
                $T *row = cols + (c * taps + t) * g->row_stride;
                for (int64_t n = 0; n < g->n; n++)
                    gather_taps_$S(x + (n * g->c + c) * plane, row + n * g->n_stride, g,
                                   t0, t1, t2, box);
            }
    }
    free(ranges);
}

/* Adds the columns back into image x (N, C, *size), which it zeroes first. Each pixel's
   terms are added by tap (by_position = 0) or by output position (1), the order in which
   NumPy's loop over kernel offsets or over positions adds them. */
void col2im_$S(const $T *cols, $T *x, const geometry *g, int by_position, int nthreads) {
    const int64_t k0 = g->kernel[0], k1 = g->kernel[1], k2 = g->kernel[2], taps = k0 * k1 * k2;
    const int64_t plane = g->size[0] * g->size[1] * g->size[2];
    const int64_t *box[6];
    int64_t *ranges = tap_boxes(g, box);
    #pragma omp parallel for collapse(2) num_threads(nthreads) if(nthreads > 1)
    for (int64_t n = 0; n < g->n; n++)
        for (int64_t c = 0; c < g->c; c++) {
            $T *img = x + (n * g->c + c) * plane;
            const $T *rows = cols + c * taps * g->row_stride + n * g->n_stride;
            memset(img, 0, plane * sizeof($T));
            if (!by_position) {
                for (int64_t t0 = 0; t0 < k0; t0++)
                for (int64_t t1 = 0; t1 < k1; t1++)
                for (int64_t t2 = 0; t2 < k2; t2++, rows += g->row_stride)
                    scatter_taps_$S(rows, img, g, t0, t1, t2, box);
                continue;
            }
            for (int64_t p0 = 0; p0 < g->pos[0]; p0++)
            for (int64_t p1 = 0; p1 < g->pos[1]; p1++)
            for (int64_t p2 = 0; p2 < g->pos[2]; p2++) {
                const int64_t p = (p0 * g->pos[1] + p1) * g->pos[2] + p2;
                for (int64_t t = 0; t < taps; t++) {
                    const int64_t i0 = tap_at(g, 0, p0, t / (k1 * k2));
                    const int64_t i1 = tap_at(g, 1, p1, t / k2 % k1);
                    const int64_t i2 = tap_at(g, 2, p2, t % k2);
                    if (inside(g, 0, i0) && inside(g, 1, i1) && inside(g, 2, i2))
                        img[(i0 * g->size[1] + i1) * g->size[2] + i2] +=
                            rows[t * g->row_stride + p];
                }
            }
        }
    free(ranges);
}

/* Max pooling's flat per-plane index of each window's maximum, PyTorch's rule: taps in
   scan order, the first strict maximum wins, a NaN wins (the last one), padding is never
   chosen, and a window with nothing above -inf picks its first tap inside the image. A row
   of positions at a time, tap by tap, so the inner loop (over the row) has no branch. */
void pool_argmax_$S(const $T *x, int64_t *idx, const geometry *g, int nthreads) {
    const int64_t plane = g->size[0] * g->size[1] * g->size[2], n2 = g->pos[2];
    const int64_t rows = g->n * g->pos[0] * g->pos[1], s2 = g->stride[2];
    const int64_t *box[6];
    int64_t *ranges = tap_boxes(g, box);
    #pragma omp parallel num_threads(nthreads) if(nthreads > 1)
    {
        $T *best = malloc((n2 > 0 ? n2 : 1) * sizeof($T));
        #pragma omp for
        for (int64_t r = 0; r < rows; r++) {
            const int64_t n = r / (g->pos[0] * g->pos[1]);
            const int64_t p0 = r / g->pos[1] % g->pos[0], p1 = r % g->pos[1];
            const $T *img = x + n * plane;
            int64_t *at = idx + r * n2;
            for (int64_t p2 = 0; p2 < n2; p2++) { best[p2] = -INFINITY; at[p2] = -1; }
            for (int64_t t0 = 0; t0 < g->kernel[0]; t0++) {
                const int64_t i0 = tap_at(g, 0, p0, t0);
                if (!inside(g, 0, i0)) continue;
                for (int64_t t1 = 0; t1 < g->kernel[1]; t1++) {
                    const int64_t i1 = tap_at(g, 1, p1, t1);
                    if (!inside(g, 1, i1)) continue;
                    const int64_t line = (i0 * g->size[1] + i1) * g->size[2];
                    for (int64_t t2 = 0; t2 < g->kernel[2]; t2++) {
                        const int64_t base = line + tap_at(g, 2, 0, t2);
                        const int64_t lo = box[4][t2], hi = box[5][t2];
                        for (int64_t p2 = lo; p2 < hi; p2++) {
                            const $T v = img[base + p2 * s2];
                            const int take = v > best[p2] || v != v;
                            best[p2] = take ? v : best[p2];
                            at[p2] = take ? base + p2 * s2 : at[p2];
                        }
                    }
                }
            }
            for (int64_t p2 = 0; p2 < n2; p2++)
                if (at[p2] < 0) at[p2] = first_inside(g, p0, p1, p2);
        }
        free(best);
    }
    free(ranges);
}

/* out[r, j] = x[r, idx[r, j]] over rows of a plane each; returns how many indices fell
   outside [0, plane) (their outputs are left unwritten). */
int64_t gather_rows_$S(const $T *x, const int64_t *idx, $T *out, int64_t rows,
                       int64_t per_row, int64_t plane, int nthreads) {
    int64_t bad = 0;
    #pragma omp parallel for reduction(+:bad) num_threads(nthreads) if(nthreads > 1)
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < per_row; j++) {
            const int64_t i = idx[r * per_row + j];
            if (i < 0 || i >= plane) { bad++; continue; }
            out[r * per_row + j] = x[r * plane + i];
        }
    return bad;
}

/* The adjoint of gather_rows: out (rows, plane), zeroed first, gets g added at the indices,
   in order (np.add.at's); returns how many indices fell outside [0, plane). */
int64_t scatter_rows_$S(const $T *g, const int64_t *idx, $T *out, int64_t rows,
                        int64_t per_row, int64_t plane, int nthreads) {
    int64_t bad = 0;
    #pragma omp parallel for reduction(+:bad) num_threads(nthreads) if(nthreads > 1)
    for (int64_t r = 0; r < rows; r++) {
        memset(out + r * plane, 0, plane * sizeof($T));
        for (int64_t j = 0; j < per_row; j++) {
            const int64_t i = idx[r * per_row + j];
            if (i < 0 || i >= plane) { bad++; continue; }
            out[r * plane + i] += g[r * per_row + j];
        }
    }
    return bad;
}
""")

SOURCE = PRELUDE + "".join(KERNELS.substitute(T=t, S=s) for t, s in DTYPES.values())
JOBS = ("im2col", "col2im", "pool_argmax", "gather_rows", "scatter_rows")
