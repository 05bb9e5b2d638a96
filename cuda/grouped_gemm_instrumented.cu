// An instrumented persistent grouped GEMM (fp32): the three kernels of an MoE
// expert layer (forward, input_grad, weight_grad) scheduled the way the
// catalog model (lib/catalog/model.hpp) describes, each recording every work
// item it executes: which CTA and SM ran it, in which pass of the persistent
// loop, and its role as the kernel observed it from its own loop bounds.
// The catalog's GPU test compares these records with the model.
//
// Interface: lib/catalog/gpu_abi.hpp. No exception crosses this file's
// functions: every CUDA error becomes a status code and message.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "lib/catalog/gpu_abi.hpp"
#include "scout/config.hpp"

#if SCOUT_WITH_NCCL && __has_include(<nccl.h>)
#include <nccl.h>
#define SCOUT_NCCL_CODE NCCL_VERSION_CODE
#else
#define SCOUT_NCCL_CODE 0
#endif

namespace scout::catalog::gpu_abi {

namespace {

constexpr int k_threads = 256;

__host__ __device__ int position_code(long long index, long long count) {
  if (count == 1) return 0;
  if (index == 0) return 1;
  if (index == count - 1) return 2;
  return 3;
}

__device__ int current_smid() {
  unsigned int id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return static_cast<int>(id);
}

struct DeviceProblem {
  long long tile_m, tile_n, tile_k, hidden, output_dim, experts;
  const long long* rows;         // [experts]
  const long long* row_offset;   // [experts]: first row of each expert in the stacked activations
  const long long* tile_offset;  // [experts + 1]: first linear slot of each expert (per kernel)
  const long long* item_offset;  // [experts]: first weight_grad record of each expert
};

// Linear kernel: C[r, n] = sum_k A[r, k] * B_e(k, n) per expert, where A is the
// stacked activations (sum rows x K), B_e is W_e (K x N) for forward and W_e^T
// for input_grad (W_e stored hidden x output_dim). One work item = one output tile.
__global__ void linear_kernel(DeviceProblem p, int kernel, const float* a, const float* w, float* c,
                              long long total_slots, ItemRecord* records) {
  const bool transpose_w = kernel == 1;
  const long long k_dim = transpose_w ? p.output_dim : p.hidden;
  const long long n_dim = transpose_w ? p.hidden : p.output_dim;
  const long long n_tiles = (n_dim + p.tile_n - 1) / p.tile_n;
  int iteration = 0;
  for (long long slot = blockIdx.x; slot < total_slots; slot += gridDim.x, ++iteration) {
    long long e = 0;
    while (e + 1 < p.experts && p.tile_offset[e + 1] <= slot) ++e;
    const long long t = slot - p.tile_offset[e];
    const long long rows = p.rows[e];
    const long long tiles = p.tile_offset[e + 1] - p.tile_offset[e];
    const long long m0 = (t / n_tiles) * p.tile_m, n0 = (t % n_tiles) * p.tile_n;
    const long long height = min(p.tile_m, rows - m0), width = min(p.tile_n, n_dim - n0);
    const float* we = w + e * p.hidden * p.output_dim;
    for (long long i = threadIdx.x; i < height * width; i += blockDim.x) {
      const long long r = m0 + i / width, n = n0 + i % width;
      const float* arow = a + (p.row_offset[e] + r) * k_dim;
      float acc = 0.f;
      for (long long k = 0; k < k_dim; ++k)
        acc += arow[k] * (transpose_w ? we[n * p.output_dim + k] : we[k * p.output_dim + n]);
      c[(p.row_offset[e] + r) * n_dim + n] = acc;
    }
    if (threadIdx.x == 0) {
      ItemRecord& rec = records[slot];
      rec.kernel = kernel;
      rec.expert = static_cast<int>(e);
      rec.slot = slot;
      rec.tile = t;
      rec.chunk = 0;
      rec.cta = blockIdx.x;
      rec.iteration = iteration;
      rec.smid = current_smid();
      rec.tail_a = height < p.tile_m;
      rec.tail_b = width < p.tile_n;
      rec.position_a = position_code(t, tiles);
      rec.position_b = 0;
      rec.queue_repeat = iteration > 0;
      rec.written = 1;
    }
  }
}

// weight_grad: dW_e[h, o] = sum_r X_e[r, h] * dY_e[r, o]. The queue holds output
// tiles (slot = e * tiles + t); the CTA walks the reduction over rows in
// chunks of tile_k, one work item per chunk.
__global__ void weight_grad_kernel(DeviceProblem p, const float* x, const float* dy, float* dw, ItemRecord* records) {
  const long long tm = (p.hidden + p.tile_m - 1) / p.tile_m, tn = (p.output_dim + p.tile_n - 1) / p.tile_n;
  const long long tiles = tm * tn, slots = tiles * p.experts;
  extern __shared__ float acc[];  // tile_m * tile_n partial sums
  int iteration = 0;
  for (long long slot = blockIdx.x; slot < slots; slot += gridDim.x, ++iteration) {
    const long long e = slot / tiles, t = slot % tiles;
    const long long h0 = (t / tn) * p.tile_m, o0 = (t % tn) * p.tile_n;
    const long long height = min(p.tile_m, p.hidden - h0), width = min(p.tile_n, p.output_dim - o0);
    const long long rows = p.rows[e], chunks = (rows + p.tile_k - 1) / p.tile_k;
    for (long long i = threadIdx.x; i < height * width; i += blockDim.x) acc[i] = 0.f;
    __syncthreads();
    for (long long k = 0; k < chunks; ++k) {
      const long long r0 = k * p.tile_k, depth = min(p.tile_k, rows - r0);
      for (long long i = threadIdx.x; i < height * width; i += blockDim.x) {
        const long long h = h0 + i / width, o = o0 + i % width;
        float s = acc[i];
        for (long long r = r0; r < r0 + depth; ++r) {
          const long long row = p.row_offset[e] + r;
          s += x[row * p.hidden + h] * dy[row * p.output_dim + o];
        }
        acc[i] = s;
      }
      if (threadIdx.x == 0) {
        ItemRecord& rec = records[p.item_offset[e] + t * chunks + k];
        rec.kernel = 2;
        rec.expert = static_cast<int>(e);
        rec.slot = slot;
        rec.tile = t;
        rec.chunk = k;
        rec.cta = blockIdx.x;
        rec.iteration = iteration;
        rec.smid = current_smid();
        rec.tail_a = depth < p.tile_k;
        rec.tail_b = 0;
        rec.position_a = position_code(k, chunks);
        rec.position_b = position_code(t, tiles);
        rec.queue_repeat = iteration > 0;
        rec.written = 1;
      }
      __syncthreads();
    }
    for (long long i = threadIdx.x; i < height * width; i += blockDim.x)
      dw[e * p.hidden * p.output_dim + (h0 + i / width) * p.output_dim + (o0 + i % width)] = acc[i];
    __syncthreads();
  }
}

void set_error(RunResult* out, int status, const char* what) {
  out->status = status;
  std::snprintf(out->error, sizeof out->error, "%s", what);
}

// Device buffers freed on every exit path.
struct DeviceBuffers {
  std::vector<void*> ptrs;
  ~DeviceBuffers() {
    for (void* p : ptrs) cudaFree(p);
  }
  template <typename T>
  cudaError_t alloc(T** p, size_t count) {
    void* raw = nullptr;
    cudaError_t err = cudaMalloc(&raw, std::max<size_t>(count, 1) * sizeof(T));
    if (err == cudaSuccess) ptrs.push_back(raw);
    *p = static_cast<T*>(raw);
    return err;
  }
};

std::uint64_t splitmix(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void fill(std::vector<float>& v, std::uint64_t& state) {
  for (float& x : v)
    x = static_cast<float>(static_cast<double>(splitmix(state) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

}  // namespace

void query_device(DeviceInfo* out) noexcept {
  *out = DeviceInfo{};
  cudaDriverGetVersion(&out->driver_version);
  cudaRuntimeGetVersion(&out->runtime_version);
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaSuccess && count == 0) err = cudaErrorNoDevice;
  cudaDeviceProp prop{};
  if (err == cudaSuccess) err = cudaGetDeviceProperties(&prop, 0);
  if (err != cudaSuccess) {
    out->status = static_cast<int>(err);
    std::snprintf(out->error, sizeof out->error, "%s", cudaGetErrorString(err));
    cudaGetLastError();  // clear the (non-sticky) error so later runtime calls start clean
    return;
  }
  out->status = 0;
  std::snprintf(out->name, sizeof out->name, "%s", prop.name);
  out->sm_count = prop.multiProcessorCount;
  out->cc_major = prop.major;
  out->cc_minor = prop.minor;
}

int nccl_header_version_code() noexcept {
  return SCOUT_NCCL_CODE;
}

void run_instrumented(const Problem& p, RunResult* out) noexcept {
  try {
    out->items.clear();
    if (p.experts < 1 || static_cast<long long>(p.rows.size()) != p.experts || p.tile_m < 1 || p.tile_n < 1 ||
        p.tile_k < 1 || p.sms < 1 || p.hidden < 1 || p.output_dim < 1)
      return set_error(out, -1, "invalid problem");
    if (p.tile_m * p.tile_n * static_cast<long long>(sizeof(float)) > 48 * 1024)
      return set_error(out, -1,
                       "tile_m * tile_n is too large for the instrumented kernel's shared accumulator (48 KiB)");
    const long long E = p.experts, H = p.hidden, O = p.output_dim;
    std::vector<long long> rows(p.rows.begin(), p.rows.end()), row_offset(E), item_offset(E);
    long long total_rows = 0;
    for (long long e = 0; e < E; ++e) {
      if (rows[e] < 0) return set_error(out, -1, "negative row count");
      row_offset[e] = total_rows;
      total_rows += rows[e];
    }
    auto tile_offsets = [&](long long n_dim) {
      std::vector<long long> off(E + 1, 0);
      const long long nt = (n_dim + p.tile_n - 1) / p.tile_n;
      for (long long e = 0; e < E; ++e) off[e + 1] = off[e] + (rows[e] + p.tile_m - 1) / p.tile_m * nt;
      return off;
    };
    const std::vector<long long> fwd_off = tile_offsets(O), dgrad_off = tile_offsets(H);
    const long long wg_tiles = ((H + p.tile_m - 1) / p.tile_m) * ((O + p.tile_n - 1) / p.tile_n);
    long long wg_items = 0;
    for (long long e = 0; e < E; ++e) {
      item_offset[e] = wg_items;
      wg_items += wg_tiles * ((rows[e] + p.tile_k - 1) / p.tile_k);
    }
    const long long n_fwd = fwd_off[E], n_dgrad = dgrad_off[E];

    std::uint64_t state = p.seed;
    std::vector<float> x(total_rows * H), w(E * H * O), dy(total_rows * O);
    fill(x, state);
    fill(w, state);
    fill(dy, state);

    DeviceBuffers buf;
    float *d_x, *d_w, *d_dy, *d_y, *d_dx, *d_dw;
    long long *d_rows, *d_row_off, *d_fwd_off, *d_dgrad_off, *d_item_off;
    ItemRecord* d_rec;
    const long long n_records = n_fwd + n_dgrad + wg_items;
    cudaError_t err = cudaSuccess;
    auto check = [&](cudaError_t e) {
      if (err == cudaSuccess && e != cudaSuccess) err = e;
    };
    check(buf.alloc(&d_x, x.size()));
    check(buf.alloc(&d_w, w.size()));
    check(buf.alloc(&d_dy, dy.size()));
    check(buf.alloc(&d_y, total_rows * O));
    check(buf.alloc(&d_dx, total_rows * H));
    check(buf.alloc(&d_dw, E * H * O));
    check(buf.alloc(&d_rows, E));
    check(buf.alloc(&d_row_off, E));
    check(buf.alloc(&d_fwd_off, E + 1));
    check(buf.alloc(&d_dgrad_off, E + 1));
    check(buf.alloc(&d_item_off, E));
    check(buf.alloc(&d_rec, n_records));
    if (err != cudaSuccess) return set_error(out, static_cast<int>(err), cudaGetErrorString(err));
    check(cudaMemcpy(d_x, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
    check(cudaMemcpy(d_w, w.data(), w.size() * sizeof(float), cudaMemcpyHostToDevice));
    check(cudaMemcpy(d_dy, dy.data(), dy.size() * sizeof(float), cudaMemcpyHostToDevice));
    check(cudaMemcpy(d_rows, rows.data(), E * sizeof(long long), cudaMemcpyHostToDevice));
    check(cudaMemcpy(d_row_off, row_offset.data(), E * sizeof(long long), cudaMemcpyHostToDevice));
    check(cudaMemcpy(d_fwd_off, fwd_off.data(), (E + 1) * sizeof(long long), cudaMemcpyHostToDevice));
    check(cudaMemcpy(d_dgrad_off, dgrad_off.data(), (E + 1) * sizeof(long long), cudaMemcpyHostToDevice));
    check(cudaMemcpy(d_item_off, item_offset.data(), E * sizeof(long long), cudaMemcpyHostToDevice));
    check(cudaMemset(d_rec, 0, std::max<long long>(n_records, 1) * sizeof(ItemRecord)));
    if (err != cudaSuccess) return set_error(out, static_cast<int>(err), cudaGetErrorString(err));

    DeviceProblem dp{p.tile_m, p.tile_n, p.tile_k, H, O, E, d_rows, d_row_off, d_fwd_off, d_item_off};
    const unsigned grid = static_cast<unsigned>(p.sms);
    linear_kernel<<<grid, k_threads>>>(dp, 0, d_x, d_w, d_y, n_fwd, d_rec);
    check(cudaGetLastError());
    dp.tile_offset = d_dgrad_off;
    linear_kernel<<<grid, k_threads>>>(dp, 1, d_dy, d_w, d_dx, n_dgrad, d_rec + n_fwd);
    check(cudaGetLastError());
    weight_grad_kernel<<<grid, k_threads, p.tile_m * p.tile_n * sizeof(float)>>>(dp, d_x, d_dy, d_dw,
                                                                                 d_rec + n_fwd + n_dgrad);
    check(cudaGetLastError());
    check(cudaDeviceSynchronize());
    if (err != cudaSuccess) return set_error(out, static_cast<int>(err), cudaGetErrorString(err));

    std::vector<float> y(total_rows * O), dx(total_rows * H), dw(E * H * O);
    out->items.resize(n_records);
    check(cudaMemcpy(y.data(), d_y, y.size() * sizeof(float), cudaMemcpyDeviceToHost));
    check(cudaMemcpy(dx.data(), d_dx, dx.size() * sizeof(float), cudaMemcpyDeviceToHost));
    check(cudaMemcpy(dw.data(), d_dw, dw.size() * sizeof(float), cudaMemcpyDeviceToHost));
    check(cudaMemcpy(out->items.data(), d_rec, n_records * sizeof(ItemRecord), cudaMemcpyDeviceToHost));
    if (err != cudaSuccess) return set_error(out, static_cast<int>(err), cudaGetErrorString(err));

    // Double-precision CPU reference of the three products.
    for (int k = 0; k < 3; ++k) out->max_abs_error[k] = out->max_abs_reference[k] = 0;
    auto note = [&](int k, double ref, float got) {
      out->max_abs_error[k] = std::max(out->max_abs_error[k], std::fabs(ref - static_cast<double>(got)));
      out->max_abs_reference[k] = std::max(out->max_abs_reference[k], std::fabs(ref));
    };
    for (long long e = 0; e < E; ++e) {
      const float* we = w.data() + e * H * O;
      for (long long r = row_offset[e]; r < row_offset[e] + rows[e]; ++r) {
        for (long long o = 0; o < O; ++o) {
          double s = 0;
          for (long long h = 0; h < H; ++h) s += static_cast<double>(x[r * H + h]) * we[h * O + o];
          note(0, s, y[r * O + o]);
        }
        for (long long h = 0; h < H; ++h) {
          double s = 0;
          for (long long o = 0; o < O; ++o) s += static_cast<double>(dy[r * O + o]) * we[h * O + o];
          note(1, s, dx[r * H + h]);
        }
      }
      for (long long h = 0; h < H; ++h)
        for (long long o = 0; o < O; ++o) {
          double s = 0;
          for (long long r = row_offset[e]; r < row_offset[e] + rows[e]; ++r)
            s += static_cast<double>(x[r * H + h]) * dy[r * O + o];
          note(2, s, dw[e * H * O + h * O + o]);
        }
    }
    out->status = 0;
  } catch (...) {
    set_error(out, -1, "host allocation failed");
  }
}

}  // namespace scout::catalog::gpu_abi
