// Execution-path model of a persistent tiled grouped GEMM (the kernel an MoE
// layer runs), after the SCOUT paper's shape catalog (ANCHORS.md "MoE catalog").
//
// One kernel invocation serves E experts with row counts rows[0..E). Three
// kernels run per step:
//   forward      Y_e  = X_e  W_e    (rows x hidden -> rows x output_dim)
//   input_grad   dX_e = dY_e W_e^T  (rows x output_dim -> rows x hidden)
//   weight_grad  dW_e = X_e^T dY_e  (hidden x output_dim, reduced over rows)
// The grid is `sms` persistent CTAs that take work from one global queue:
// CTA b takes queue slots b, b + sms, b + 2 sms, ...
//
// Linear kernels (forward, input_grad): a work item is one tile_m x tile_n
// output tile; expert e has ceil(rows/tile_m) x ceil(N/tile_n) tiles (N is
// output_dim for forward, hidden for input_grad), numbered row-major, and the
// queue slot is the tile's index in one counter running across experts.
// Role = (m_tail: the tile is in the last, partial row block; n_tail: the tile
// is in the last, partial column block; position of the tile among its
// expert's tiles: single | first | last | interior; queue_repeat: slot >= sms,
// i.e. the CTA already ran a tile before this one).
//
// weight_grad: the queue holds output tiles (ceil(hidden/tile_m) x
// ceil(output_dim/tile_n) per expert, slot = expert * tiles + tile); a CTA
// walks its tile's reduction over rows in ceil(rows/tile_k) chunks, and one
// work item is one (output tile, reduction chunk) step. Role = (reduction_tail:
// the chunk is the last, partial one; reduction position: single | first |
// last | interior among the tile's chunks; output-tile position among the
// expert's tiles; queue_repeat: the tile's slot >= sms).
//
// Pressure of a kernel, from its number of work items W: underfilled when
// W < sms, one_repeat when W <= 2 sms, multi_repeat otherwise. The
// fingerprint F(shape) is the three pressures (the regime). The count vector
// c(shape) holds, per kernel, its work items and the count of each role.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lib/common/error.hpp"

namespace scout::catalog {

// The kernel configuration a catalog is computed for.
struct KernelConfig {
  std::int64_t tile_m = 64;
  std::int64_t tile_n = 64;
  std::int64_t tile_k = 32;
  std::int64_t sms = 108;         // persistent CTAs (grid size), usually the SM count
  std::int64_t hidden = 128;      // H: input features of forward
  std::int64_t output_dim = 128;  // O: output features of forward
  std::int64_t experts = 1;       // E: experts served by one kernel invocation
};

// Upper bounds that keep every count inside 64 bits with room to spare.
inline constexpr std::int64_t k_max_tile = 4096;
inline constexpr std::int64_t k_max_sms = 1 << 20;
inline constexpr std::int64_t k_max_features = std::int64_t{1} << 24;
inline constexpr std::int64_t k_max_experts = 4096;
inline constexpr std::int64_t k_max_rows = std::int64_t{1} << 31;

// Checks every field of `config` against its documented range.
Status validate(const KernelConfig& config);

// Parses "64x64x32" (tile M x N x K); every part a positive integer <= k_max_tile.
Result<KernelConfig> parse_tile(std::string_view text, KernelConfig base);

// The three kernels of one MoE expert layer step, in count-vector order.
enum class Kernel { forward = 0, input_grad = 1, weight_grad = 2 };
inline constexpr std::array<Kernel, 3> k_all_kernels{Kernel::forward, Kernel::input_grad, Kernel::weight_grad};
// JSON and text name of `kernel`: "forward", "input_grad", "weight_grad".
std::string_view kernel_name(Kernel kernel);

// Where an item sits in its sequence (tiles of an expert, chunks of a reduction).
enum class Position { single = 0, first = 1, last = 2, interior = 3 };
// Name of `position`: "single", "first", "last", "interior".
std::string_view position_name(Position position);
// Position of item `index` among `count` items.
constexpr Position position_of(std::int64_t index, std::int64_t count) {
  if (count == 1) return Position::single;
  if (index == 0) return Position::first;
  if (index == count - 1) return Position::last;
  return Position::interior;
}

// Role of one linear-kernel work item.
struct LinearRole {
  bool m_tail = false;
  bool n_tail = false;
  Position position = Position::single;
  bool queue_repeat = false;
};

// Role of one weight-gradient work item.
struct WeightGradRole {
  bool reduction_tail = false;
  Position reduction_position = Position::single;
  Position tile_position = Position::single;
  bool queue_repeat = false;
};

inline constexpr int k_linear_roles = 32;
inline constexpr int k_weight_grad_roles = 64;

// Dense role indices (0..k_linear_roles) and (0..k_weight_grad_roles).
constexpr int role_index(const LinearRole& r) {
  return (((r.m_tail ? 2 : 0) + (r.n_tail ? 1 : 0)) * 4 + static_cast<int>(r.position)) * 2 + (r.queue_repeat ? 1 : 0);
}
constexpr int role_index(const WeightGradRole& r) {
  return (((r.reduction_tail ? 4 : 0) + static_cast<int>(r.reduction_position)) * 4 +
          static_cast<int>(r.tile_position)) *
             2 +
         (r.queue_repeat ? 1 : 0);
}
// Inverses of role_index: the role with dense index `index`.
LinearRole linear_role(int index);
WeightGradRole weight_grad_role(int index);

// Canonical role names, e.g. "first+m_tail+queue_repeat" and
// "reduction_last+reduction_tail/tile_first+queue_repeat" (flags in this order).
std::string role_name(Kernel kernel, int index);
// Inverse of role_name for `kernel`; -1 when `name` is not a role of it.
int parse_role_name(Kernel kernel, std::string_view name);

// Number of roles of `kernel`.
constexpr int role_count(Kernel kernel) {
  return kernel == Kernel::weight_grad ? k_weight_grad_roles : k_linear_roles;
}

// c(shape): per kernel, [work items, role counts...], kernels in k_all_kernels order.
inline constexpr int k_count_dims = 3 + 2 * k_linear_roles + k_weight_grad_roles;
using CountVector = std::array<std::uint64_t, k_count_dims>;

// Offset of `kernel`'s work-item count in a CountVector; its roles follow it.
constexpr int kernel_offset(Kernel kernel) {
  return kernel == Kernel::forward ? 0 : kernel == Kernel::input_grad ? 1 + k_linear_roles : 2 + 2 * k_linear_roles;
}
// Index of (kernel, role) in a CountVector.
constexpr int count_index(Kernel kernel, int role) {
  return kernel_offset(kernel) + 1 + role;
}

// How a kernel's work items load the persistent grid (see the file comment).
enum class Pressure { underfilled = 0, one_repeat = 1, multi_repeat = 2 };
// Name of `pressure`: "underfilled", "one_repeat", "multi_repeat".
std::string_view pressure_name(Pressure pressure);
// Inverse of pressure_name; input_error for any other `name`.
Result<Pressure> parse_pressure(std::string_view name);
// Pressure of a kernel with `work_items` work items on `sms` persistent CTAs.
constexpr Pressure pressure_of(std::uint64_t work_items, std::int64_t sms) {
  const auto s = static_cast<std::uint64_t>(sms);
  if (work_items < s) return Pressure::underfilled;
  if (work_items <= 2 * s) return Pressure::one_repeat;
  return Pressure::multi_repeat;
}

// F(shape): the pressure of each kernel, in k_all_kernels order.
struct Fingerprint {
  std::array<Pressure, 3> pressures{};
  // Dense id in 0..26 (forward most significant), for ordering and grouping.
  int id() const {
    return static_cast<int>(pressures[0]) * 9 + static_cast<int>(pressures[1]) * 3 + static_cast<int>(pressures[2]);
  }
  friend bool operator==(const Fingerprint&, const Fingerprint&) = default;
};
inline constexpr int k_fingerprint_ids = 27;
// Inverse of Fingerprint::id for `id` in 0..k_fingerprint_ids.
Fingerprint fingerprint_from_id(int id);
// Short label, e.g. "underfilled/underfilled/one_repeat".
std::string fingerprint_label(const Fingerprint& fingerprint);

// Work items of `kernel` in a vector.
inline std::uint64_t work_items(const CountVector& counts, Kernel kernel) {
  return counts[kernel_offset(kernel)];
}
// Work items of all three kernels (the replay obligations of one shape).
std::uint64_t total_work_items(const CountVector& counts);
// F(shape) of a count vector under `sms`.
Fingerprint fingerprint_of(const CountVector& counts, std::int64_t sms);

// c(shape) in closed form, O(experts): `rows` has one entry per expert
// (config.experts of them), each in 0..k_max_rows. The caller validates.
CountVector count_vector(const KernelConfig& config, std::span<const std::int64_t> rows);

// True when `a` covers `b` (every component of a >= b's). Fingerprints are
// compared by the caller.
bool covers(const CountVector& a, const CountVector& b);

// One work item, as the persistent scheduler hands it out.
struct WorkItem {
  Kernel kernel = Kernel::forward;
  std::int64_t expert = 0;
  std::int64_t slot = 0;       // queue slot (linear: tile counter; weight_grad: output-tile counter)
  std::int64_t cta = 0;        // slot % sms
  std::int64_t iteration = 0;  // slot / sms: how many queue entries this CTA ran before
  std::int64_t tile = 0;       // tile index within the expert
  std::int64_t chunk = 0;      // reduction chunk (weight_grad), else 0
  int role = 0;                // role_index of the item's role
};

// Every work item of `kernel` by explicit simulation of the scheduler (the
// reference the closed form and the GPU kernel are checked against). Cost is
// proportional to the number of items: for tests and small shapes.
std::vector<WorkItem> enumerate_work_items(const KernelConfig& config, std::span<const std::int64_t> rows,
                                           Kernel kernel);

// Counts `items` into a count vector (work items and roles per kernel).
CountVector count_items(const std::vector<WorkItem>& items);

}  // namespace scout::catalog
