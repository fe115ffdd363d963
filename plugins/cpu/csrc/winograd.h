// 3x3 convolutions of stride 1 by Winograd's minimal filtering F(2x2, 3x3) (Lavin and
// Gray, "Fast Algorithms for Convolutional Neural Networks", 2016): each 2x2 block of
// outputs is A^T [(G g G^T) * (B^T d B)] A for its 4x4 input tile d and each 3x3 filter g,
// so a layer's products become 16 GEMMs of (O, C) x (C, tiles), 16 multiply-adds per 2x2
// outputs and channel pair where im2col's one GEMM does 36. ResNet's 3x3 layers (64-512
// channels on 2x2-16x16 planes) were GEMM-bound at MKL's speed; the transforms are a few
// additions per element, in loops the compiler vectorizes across tiles.
//
// Rounding: the transforms add and subtract neighbouring inputs and halve filter sums
// (exact in binary), so a result differs from the direct sum by a few ulps of the
// magnitudes involved, as cuDNN's and oneDNN's Winograd kernels do.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "gemm.h"
#include "vecmath.h"

namespace winograd {

using std::int64_t;

// Whether F(2x2, 3x3) pays for a layer: the transforms cost about as much as the
// products they save when either channel count is small, and the filters' transform
// (16 values a channel pair) as much as the products with fewer than a few hundred tiles.
// Its GEMMs' strides (o * c, channels * tiles) must also fit BLAS's 32-bit integers.
inline bool worth(int64_t n, int64_t c, int64_t o, int64_t oh, int64_t ow) {
  const int64_t tiles = n * ((oh + 1) / 2) * ((ow + 1) / 2), most = (int64_t(1) << 31) - 1;
  return c >= 8 && o >= 8 && tiles >= 256 && o * c <= most / 16 &&
         std::max(c, o) * tiles <= most / 16;
}

// U (16, O, C): each filter's G g G^T. With `flipped` the weight is a transposed
// convolution's (C, O, 3, 3), read rotated by 180 degrees: the correlation that is its
// gradient (and conv_transpose2d of stride 1). An output channel's nine taps are gathered
// into rows over the input channels first, so that the transform is loops over the
// channels that the compiler vectorizes.
template <typename T>
TORCIA_CLONES static void filters_of(const T* __restrict__ taps, int64_t c_count,
                                     int64_t plane, T* __restrict__ u) {
  const T* g[3][3];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) g[i][j] = taps + (i * 3 + j) * c_count;
  for (int i = 0; i < 4; ++i) {
    T* u0 = u + (i * 4) * plane;
    T* u1 = u0 + plane;
    T* u2 = u1 + plane;
    T* u3 = u2 + plane;
    for (int64_t c = 0; c < c_count; ++c) {
      // row i of G g: rows 0 and 3 are g's first and last, rows 1 and 2 half sums
      T r[3];
      for (int j = 0; j < 3; ++j) {
        const T a = g[0][j][c], b = g[1][j][c], d = g[2][j][c];
        r[j] = i == 0 ? a : i == 3 ? d : i == 1 ? T(0.5) * (a + b + d) : T(0.5) * (a - b + d);
      }
      u0[c] = r[0];
      u1[c] = T(0.5) * (r[0] + r[1] + r[2]);
      u2[c] = T(0.5) * (r[0] - r[1] + r[2]);
      u3[c] = r[2];
    }
  }
}

template <typename T>
void filters(const T* wt, int64_t o_count, int64_t c_count, bool flipped, T* u) {
#pragma omp parallel if (o_count * c_count > (1 << 14))
  {
    std::vector<T> taps(9 * c_count);
#pragma omp for schedule(static)
    for (int64_t o = 0; o < o_count; ++o) {
      for (int64_t c = 0; c < c_count; ++c)
        for (int k = 0; k < 9; ++k)
          taps[k * c_count + c] = flipped ? wt[(c * o_count + o) * 9 + 8 - k]
                                          : wt[(o * c_count + c) * 9 + k];
      filters_of(taps.data(), c_count, o_count * c_count, u + o * c_count);
    }
  }
}

// One channel's tiles B^T d B from its zero-padded plane (rows of pw, 2 * th + 2 of
// them): tile (ty, tx) reads rows 2ty..2ty+3, columns 2tx..2tx+3, and lands in column
// t0 + ty * tw + tx of each of the 16 rows v[k * stride]. B^T is applied down the rows
// first, into four whole rows, then along them: each step a loop over the tiles that
// the compiler vectorizes (a tile at a time, with its 16 scattered stores, stays scalar
// and cost 3x the GEMMs).
template <typename T>
TORCIA_CLONES static void input_tiles(const T* __restrict__ plane, int64_t pw, int64_t th,
                                      int64_t tw, T* __restrict__ v, int64_t stride,
                                      T* __restrict__ rows) {
  T* s0 = rows;
  T* s1 = s0 + pw;
  T* s2 = s1 + pw;
  T* s3 = s2 + pw;
  for (int64_t ty = 0; ty < th; ++ty) {
    const T* r0 = plane + 2 * ty * pw;
    const T* r1 = r0 + pw;
    const T* r2 = r1 + pw;
    const T* r3 = r2 + pw;
    for (int64_t x = 0; x < pw; ++x) {
      s0[x] = r0[x] - r2[x];
      s1[x] = r1[x] + r2[x];
      s2[x] = r2[x] - r1[x];
      s3[x] = r1[x] - r3[x];
    }
    T* out = v + ty * tw;
    const T* s[4] = {s0, s1, s2, s3};
    for (int i = 0; i < 4; ++i) {
      const T* si = s[i];
      T* o0 = out + (i * 4) * stride;
      T* o1 = o0 + stride;
      T* o2 = o1 + stride;
      T* o3 = o2 + stride;
      for (int64_t tx = 0; tx < tw; ++tx) {
        const T a = si[2 * tx], b = si[2 * tx + 1], c = si[2 * tx + 2], d = si[2 * tx + 3];
        o0[tx] = a - c;
        o1[tx] = b + c;
        o2[tx] = c - b;
        o3[tx] = b - d;
      }
    }
  }
}

// One output channel's 2x2 blocks A^T m A from the products' 16 rows m[k * stride] into a
// plane of 2 * th rows of 2 * tw, plus the bias.
template <typename T>
TORCIA_CLONES static void output_tiles(const T* __restrict__ m, int64_t stride, int64_t th,
                                       int64_t tw, T bias, T* __restrict__ plane) {
  const int64_t w = 2 * tw;
  for (int64_t ty = 0; ty < th; ++ty) {
    const T* in = m + ty * tw;
    T* y0 = plane + 2 * ty * w;
    T* y1 = y0 + w;
    for (int64_t tx = 0; tx < tw; ++tx) {
      T a[4][4];
      for (int k = 0; k < 16; ++k) a[k / 4][k % 4] = in[k * stride + tx];
      T t[2][4];
      for (int j = 0; j < 4; ++j) {
        t[0][j] = a[0][j] + a[1][j] + a[2][j];
        t[1][j] = a[1][j] - a[2][j] - a[3][j];
      }
      y0[2 * tx] = t[0][0] + t[0][1] + t[0][2] + bias;
      y0[2 * tx + 1] = t[0][1] - t[0][2] - t[0][3] + bias;
      y1[2 * tx] = t[1][0] + t[1][1] + t[1][2] + bias;
      y1[2 * tx + 1] = t[1][1] - t[1][2] - t[1][3] + bias;
    }
  }
}

// Fills the zero-padded plane (rows x cols) of one input channel read from row -ph and
// column -pw.
template <typename T>
static void pad_plane(const T* src, int64_t h, int64_t w, int64_t ph, int64_t pw, int64_t rows,
                      int64_t cols, T* plane) {
  for (int64_t r = 0; r < rows; ++r) {
    T* line = plane + r * cols;
    const int64_t y = r - ph;
    if (y < 0 || y >= h) {
      std::fill(line, line + cols, T(0));
      continue;
    }
    const int64_t lo = std::clamp<int64_t>(pw, 0, cols);
    const int64_t hi = std::clamp<int64_t>(pw + w, lo, cols);
    std::fill(line, line + lo, T(0));
    if (hi > lo) std::copy_n(src + y * w + (lo - pw), hi - lo, line + lo);
    std::fill(line + hi, line + cols, T(0));
  }
}

// One sample's tiles, channel by channel (each through its zero-padded plane, read from
// row -ph and column -pw), into v: channel ch's tiles at v + ch * tiles, row k of the
// transform at k * c * tiles.
template <typename T>
static void sample_tiles(const T* sample, int64_t c, int64_t h, int64_t w, int64_t ph,
                         int64_t pw, int64_t th, int64_t tw, T* v, int64_t tiles, T* plane,
                         T* lines) {
  const int64_t rows = 2 * th + 2, cols = 2 * tw + 2;
  for (int64_t ch = 0; ch < c; ++ch) {
    pad_plane(sample + ch * h * w, h, w, ph, pw, rows, cols, plane);
    input_tiles(plane, cols, th, tw, v + ch * tiles, c * tiles, lines);
  }
}

// Tiles per chunk: about 1 MB of transformed values per operand, so that they stay in
// cache between the transforms and the products; fewer where threads need a chunk each.
inline int64_t chunk_samples(int64_t n, int64_t c, int64_t o, int64_t per_sample,
                             int threads) {
  const int64_t target = std::max<int64_t>(32, 16384 / std::max(c, o));
  int64_t nb = std::max<int64_t>(1, (target + per_sample - 1) / per_sample);
  if (threads > 1) nb = std::min<int64_t>(nb, (n + threads - 1) / threads);
  return std::max<int64_t>(1, std::min(nb, n));
}

// out (N, O, oh, ow) = the correlation of x (N, C, h, w) with the 3x3 filters (stride 1,
// no dilation), the input read from row -ph and column -pw (zero outside it), plus bias
// (or none). The caller has checked every size; out is written whole.
template <typename T>
void conv3x3(const T* x, int64_t n, int64_t c, int64_t h, int64_t w, const T* wt, bool flipped,
             int64_t o, const T* bias, int64_t ph, int64_t pw, int64_t oh, int64_t ow, T* out,
             int threads_wanted) {
  const int64_t th = (oh + 1) / 2, tw = (ow + 1) / 2, per_sample = th * tw;
  const int64_t rows = 2 * th + 2, cols = 2 * tw + 2;
  std::vector<T> u(16 * o * c);
  filters(wt, o, c, flipped, u.data());
  const bool threads = threads_wanted > 1 && n > 1 && n * o * c * per_sample > (1 << 16);
  const int64_t nb = chunk_samples(n, c, o, per_sample, threads ? threads_wanted : 1);
#pragma omp parallel if (threads)
  {
    std::vector<T> plane(rows * cols), lines(4 * cols), v(16 * c * nb * per_sample),
        prod(16 * o * nb * per_sample), block(4 * per_sample);
#pragma omp for schedule(static)
    for (int64_t b0 = 0; b0 < n; b0 += nb) {
      const int64_t m = std::min(nb, n - b0), tiles = m * per_sample;
      for (int64_t j = 0; j < m; ++j)
        sample_tiles(x + (b0 + j) * c * h * w, c, h, w, ph, pw, th, tw,
                     v.data() + j * per_sample, tiles, plane.data(), lines.data());
      for (int64_t k = 0; k < 16; ++k)
        gemm<T>(CblasNoTrans, CblasNoTrans, o, tiles, c, u.data() + k * o * c, c,
                v.data() + k * c * tiles, tiles, T(0), prod.data() + k * o * tiles, tiles);
      for (int64_t j = 0; j < m; ++j) {
        for (int64_t oc = 0; oc < o; ++oc) {
          output_tiles(prod.data() + oc * tiles + j * per_sample, o * tiles, th, tw,
                       bias ? bias[oc] : T(0), block.data());
          T* dst = out + ((b0 + j) * o + oc) * oh * ow;
          for (int64_t r = 0; r < oh; ++r)
            std::copy_n(block.data() + r * 2 * tw, ow, dst + r * ow);
        }
      }
    }
  }
}

// One output channel's gradient blocks A g A^T (A = [1 0; 1 1; 1 -1; 0 -1]) from its
// plane of 2 * th rows of 2 * tw (zero past the outputs) into the 16 rows z[k * stride]:
// the other factor of the filters' gradient, G^T [sum over tiles of
// (A g A^T) * (B^T d B)] G.
template <typename T>
TORCIA_CLONES static void gradient_tiles(const T* __restrict__ plane, int64_t th, int64_t tw,
                                         T* __restrict__ z, int64_t stride,
                                         T* __restrict__ rows) {
  const int64_t w = 2 * tw;
  T* r[4] = {rows, rows + w, rows + 2 * w, rows + 3 * w};
  for (int64_t ty = 0; ty < th; ++ty) {
    const T* y0 = plane + 2 * ty * w;
    const T* y1 = y0 + w;
    // A down the block's two rows, then along the four results (as input_tiles does)
    for (int64_t x = 0; x < w; ++x) {
      r[0][x] = y0[x];
      r[1][x] = y0[x] + y1[x];
      r[2][x] = y0[x] - y1[x];
      r[3][x] = -y1[x];
    }
    T* out = z + ty * tw;
    for (int i = 0; i < 4; ++i) {
      const T* ri = r[i];
      T* zi = out + i * 4 * stride;
      for (int64_t tx = 0; tx < tw; ++tx) {
        const T a = ri[2 * tx], b = ri[2 * tx + 1];
        zi[tx] = a;
        zi[stride + tx] = a + b;
        zi[2 * stride + tx] = a - b;
        zi[3 * stride + tx] = -b;
      }
    }
  }
}

// dw (O, C, 3, 3) = the gradient of conv3x3's filters (stride 1, no dilation, padding ph,
// pw) for x (N, C, h, w) and the output gradient gy (N, O, oh, ow). dw is written whole.
template <typename T>
void conv3x3_weight(const T* x, int64_t n, int64_t c, int64_t h, int64_t w, const T* gy,
                    int64_t o, int64_t ph, int64_t pw, int64_t oh, int64_t ow, T* dw,
                    int threads_wanted) {
  const int64_t th = (oh + 1) / 2, tw = (ow + 1) / 2, per_sample = th * tw;
  const int64_t rows = 2 * th + 2, cols = 2 * tw + 2;
  const bool threads = threads_wanted > 1 && n > 1 && n * o * c * per_sample > (1 << 16);
  const int64_t nb = chunk_samples(n, c, o, per_sample, threads ? threads_wanted : 1);
  // each thread sums its chunks' products into its own (16, O, C), added up at the end
  const int team = threads ? threads_wanted : 1;
  std::vector<std::vector<T>> sums(team, std::vector<T>());
#pragma omp parallel if (threads) num_threads(team)
  {
    int tid = 0;
#ifdef _OPENMP
    tid = omp_get_thread_num();
#endif
    std::vector<T>& s = sums[tid];
    s.assign(16 * o * c, T(0));
    std::vector<T> plane(rows * cols), lines(4 * cols), block(4 * per_sample),
        v(16 * c * nb * per_sample), z(16 * o * nb * per_sample);
#pragma omp for schedule(static)
    for (int64_t b0 = 0; b0 < n; b0 += nb) {
      const int64_t m = std::min(nb, n - b0), tiles = m * per_sample;
      for (int64_t j = 0; j < m; ++j) {
        sample_tiles(x + (b0 + j) * c * h * w, c, h, w, ph, pw, th, tw,
                     v.data() + j * per_sample, tiles, plane.data(), lines.data());
        for (int64_t oc = 0; oc < o; ++oc) {
          // the gradient's plane padded to whole blocks with zeros
          std::fill(block.begin(), block.end(), T(0));
          const T* src = gy + ((b0 + j) * o + oc) * oh * ow;
          for (int64_t r = 0; r < oh; ++r)
            std::copy_n(src + r * ow, ow, block.data() + r * 2 * tw);
          gradient_tiles(block.data(), th, tw, z.data() + oc * tiles + j * per_sample,
                         o * tiles, lines.data());
        }
      }
      for (int64_t k = 0; k < 16; ++k)
        gemm<T>(CblasNoTrans, CblasTrans, o, c, tiles, z.data() + k * o * tiles, tiles,
                v.data() + k * c * tiles, tiles, T(1), s.data() + k * o * c, c);
    }
  }
  std::vector<T>& s = sums[0];
  for (int t = 1; t < team; ++t)
    if (!sums[t].empty())  // a thread the runtime did not start
      for (size_t i = 0; i < s.size(); ++i) s[i] += sums[t][i];
  const int64_t plane_size = o * c;
  for (int64_t oc = 0; oc < o; ++oc) {
    for (int64_t ch = 0; ch < c; ++ch) {
      T a[4][4];
      for (int k = 0; k < 16; ++k) a[k / 4][k % 4] = s[k * plane_size + oc * c + ch];
      // G^T a G, G^T = [1 1/2 1/2 0; 0 1/2 -1/2 0; 0 1/2 1/2 1]
      T q[3][4];
      for (int j = 0; j < 4; ++j) {
        q[0][j] = a[0][j] + T(0.5) * (a[1][j] + a[2][j]);
        q[1][j] = T(0.5) * (a[1][j] - a[2][j]);
        q[2][j] = T(0.5) * (a[1][j] + a[2][j]) + a[3][j];
      }
      T* out = dw + (oc * c + ch) * 9;
      for (int i = 0; i < 3; ++i) {
        out[i * 3 + 0] = q[i][0] + T(0.5) * (q[i][1] + q[i][2]);
        out[i * 3 + 1] = T(0.5) * (q[i][1] - q[i][2]);
        out[i * 3 + 2] = T(0.5) * (q[i][1] + q[i][2]) + q[i][3];
      }
    }
  }
}

}  // namespace winograd
