#include "lib/catalog/model.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "lib/common/parse.hpp"

namespace scout::catalog {

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return a <= 0 ? 0 : (a + b - 1) / b;
}

// Number of t in [0, z) with t % m == r (0 <= r < m).
std::int64_t count_mod_below(std::int64_t z, std::int64_t m, std::int64_t r) {
  return z <= r ? 0 : (z - r + m - 1) / m;
}

// Number of t in [x, y) with t % m == r.
std::int64_t count_mod(std::int64_t x, std::int64_t y, std::int64_t m, std::int64_t r) {
  return y <= x ? 0 : count_mod_below(y, m, r) - count_mod_below(x, m, r);
}

Status check_range(std::string_view what, std::int64_t value, std::int64_t lo, std::int64_t hi, std::string_view hint) {
  if (value < lo || value > hi)
    return usage_error(fmt::format("{} is {}", what, value), fmt::format("it must be between {} and {}", lo, hi),
                       std::string(hint));
  return Ok{};
}

// Adds the linear-kernel tiles t in [x, y) of one expert, all at `position`,
// split by queue repeat (t >= q), m-tail region (t >= m_start) and n-tail column.
struct LinearExpert {
  std::int64_t tiles = 0, n_tiles = 0, m_start = 0, q = 0;
  bool m_tail = false, n_tail = false;
};

void add_linear_range(CountVector& c, Kernel kernel, const LinearExpert& e, std::int64_t x, std::int64_t y,
                      Position position) {
  for (int rep = 0; rep < 2; ++rep) {
    const std::int64_t x1 = rep ? std::max(x, e.q) : x;
    const std::int64_t y1 = rep ? y : std::min(y, e.q);
    if (y1 <= x1) continue;
    for (int in_m = 0; in_m < 2; ++in_m) {
      const std::int64_t x2 = in_m ? std::max(x1, e.m_start) : x1;
      const std::int64_t y2 = in_m ? y1 : std::min(y1, e.m_start);
      if (y2 <= x2) continue;
      const bool m_tail = in_m && e.m_tail;
      const std::int64_t n_last = e.n_tail ? count_mod(x2, y2, e.n_tiles, e.n_tiles - 1) : 0;
      const LinearRole with_n{m_tail, true, position, rep == 1};
      const LinearRole without_n{m_tail, false, position, rep == 1};
      c[count_index(kernel, role_index(with_n))] += static_cast<std::uint64_t>(n_last);
      c[count_index(kernel, role_index(without_n))] += static_cast<std::uint64_t>(y2 - x2 - n_last);
    }
  }
}

void add_linear(CountVector& c, Kernel kernel, const KernelConfig& cfg, std::span<const std::int64_t> rows) {
  const std::int64_t n = kernel == Kernel::forward ? cfg.output_dim : cfg.hidden;
  const std::int64_t n_tiles = ceil_div(n, cfg.tile_n);
  std::int64_t offset = 0;  // tiles of earlier experts in the global counter
  for (std::int64_t r : rows) {
    const std::int64_t m_tiles = ceil_div(r, cfg.tile_m);
    LinearExpert e;
    e.tiles = m_tiles * n_tiles;
    if (e.tiles == 0) continue;
    e.n_tiles = n_tiles;
    e.m_start = (m_tiles - 1) * n_tiles;
    e.m_tail = r % cfg.tile_m != 0;
    e.n_tail = n % cfg.tile_n != 0;
    e.q = std::clamp<std::int64_t>(cfg.sms - offset, 0, e.tiles);
    c[kernel_offset(kernel)] += static_cast<std::uint64_t>(e.tiles);
    if (e.tiles == 1) {
      add_linear_range(c, kernel, e, 0, 1, Position::single);
    } else {
      add_linear_range(c, kernel, e, 0, 1, Position::first);
      add_linear_range(c, kernel, e, 1, e.tiles - 1, Position::interior);
      add_linear_range(c, kernel, e, e.tiles - 1, e.tiles, Position::last);
    }
    offset += e.tiles;
  }
}

void add_weight_grad(CountVector& c, const KernelConfig& cfg, std::span<const std::int64_t> rows) {
  const std::int64_t tiles = ceil_div(cfg.hidden, cfg.tile_m) * ceil_div(cfg.output_dim, cfg.tile_n);
  const Kernel k = Kernel::weight_grad;
  for (std::size_t e = 0; e < rows.size(); ++e) {
    const std::int64_t r = rows[e];
    const std::int64_t chunks = ceil_div(r, cfg.tile_k);
    if (chunks == 0) continue;
    const bool tail = r % cfg.tile_k != 0;
    c[kernel_offset(k)] += static_cast<std::uint64_t>(tiles * chunks);
    // The reduction chunks every output tile walks, by (tail, position).
    struct Chunks {
      bool tail;
      Position position;
      std::int64_t count;
    };
    std::array<Chunks, 3> pattern{};
    std::size_t n_pattern = 0;
    if (chunks == 1) {
      pattern[n_pattern++] = {tail, Position::single, 1};
    } else {
      pattern[n_pattern++] = {false, Position::first, 1};
      if (chunks > 2) pattern[n_pattern++] = {false, Position::interior, chunks - 2};
      pattern[n_pattern++] = {tail, Position::last, 1};
    }
    // Output tiles by (position, queue repeat): slot = e * tiles + t >= sms.
    const std::int64_t q = std::clamp<std::int64_t>(cfg.sms - static_cast<std::int64_t>(e) * tiles, 0, tiles);
    auto add_tiles = [&](std::int64_t x, std::int64_t y, Position tile_position) {
      for (int rep = 0; rep < 2; ++rep) {
        const std::int64_t lo = rep ? std::max(x, q) : x;
        const std::int64_t hi = rep ? y : std::min(y, q);
        if (hi <= lo) continue;
        for (std::size_t p = 0; p < n_pattern; ++p) {
          WeightGradRole role{pattern[p].tail, pattern[p].position, tile_position, rep == 1};
          c[count_index(k, role_index(role))] += static_cast<std::uint64_t>((hi - lo) * pattern[p].count);
        }
      }
    };
    if (tiles == 1) {
      add_tiles(0, 1, Position::single);
    } else {
      add_tiles(0, 1, Position::first);
      add_tiles(1, tiles - 1, Position::interior);
      add_tiles(tiles - 1, tiles, Position::last);
    }
  }
}

}  // namespace

Status validate(const KernelConfig& c) {
  const char* tile_hint = "give --tile MxNxK with positive sizes, e.g. --tile 64x64x32";
  if (auto s = check_range("tile M", c.tile_m, 1, k_max_tile, tile_hint); !s) return s;
  if (auto s = check_range("tile N", c.tile_n, 1, k_max_tile, tile_hint); !s) return s;
  if (auto s = check_range("tile K", c.tile_k, 1, k_max_tile, tile_hint); !s) return s;
  if (auto s = check_range("the number of SMs (persistent CTAs)", c.sms, 1, k_max_sms,
                           "give --sms, e.g. --sms 108 for an A100");
      !s)
    return s;
  if (auto s = check_range("hidden", c.hidden, 1, k_max_features, "give --hidden H"); !s) return s;
  if (auto s = check_range("output dim", c.output_dim, 1, k_max_features, "give --output-dim O"); !s) return s;
  if (auto s = check_range("experts per kernel", c.experts, 1, k_max_experts, "give --experts E"); !s) return s;
  return Ok{};
}

Result<KernelConfig> parse_tile(std::string_view text, KernelConfig base) {
  auto parts = split(text, 'x');
  if (parts.size() != 3)
    return usage_error(fmt::format("tile '{}' is not MxNxK", text), "expected three sizes separated by 'x'",
                       "e.g. --tile 64x64x32");
  std::array<std::int64_t, 3> v{};
  const char* names[3] = {"tile M", "tile N", "tile K"};
  for (int i = 0; i < 3; ++i) {
    auto x = parse_int(trim(parts[static_cast<std::size_t>(i)]), names[i]);
    if (!x) return usage_error(x.error().what, x.error().why, "e.g. --tile 64x64x32");
    if (*x < 1 || *x > k_max_tile)
      return usage_error(fmt::format("{} is {}", names[i], *x),
                         fmt::format("tile sizes must be between 1 and {}", k_max_tile), "e.g. --tile 64x64x32");
    v[static_cast<std::size_t>(i)] = *x;
  }
  base.tile_m = v[0];
  base.tile_n = v[1];
  base.tile_k = v[2];
  return base;
}

std::string_view kernel_name(Kernel kernel) {
  switch (kernel) {
    case Kernel::forward:
      return "forward";
    case Kernel::input_grad:
      return "input_grad";
    case Kernel::weight_grad:
      return "weight_grad";
  }
  return "forward";
}

std::string_view position_name(Position position) {
  switch (position) {
    case Position::single:
      return "single";
    case Position::first:
      return "first";
    case Position::last:
      return "last";
    case Position::interior:
      return "interior";
  }
  return "single";
}

LinearRole linear_role(int index) {
  LinearRole r;
  r.queue_repeat = index % 2 != 0;
  r.position = static_cast<Position>((index / 2) % 4);
  r.n_tail = (index / 8) % 2 != 0;
  r.m_tail = (index / 16) % 2 != 0;
  return r;
}

WeightGradRole weight_grad_role(int index) {
  WeightGradRole r;
  r.queue_repeat = index % 2 != 0;
  r.tile_position = static_cast<Position>((index / 2) % 4);
  r.reduction_position = static_cast<Position>((index / 8) % 4);
  r.reduction_tail = (index / 32) % 2 != 0;
  return r;
}

std::string role_name(Kernel kernel, int index) {
  if (kernel == Kernel::weight_grad) {
    WeightGradRole r = weight_grad_role(index);
    return fmt::format("reduction_{}{}/tile_{}{}", position_name(r.reduction_position),
                       r.reduction_tail ? "+reduction_tail" : "", position_name(r.tile_position),
                       r.queue_repeat ? "+queue_repeat" : "");
  }
  LinearRole r = linear_role(index);
  return fmt::format("{}{}{}{}", position_name(r.position), r.m_tail ? "+m_tail" : "", r.n_tail ? "+n_tail" : "",
                     r.queue_repeat ? "+queue_repeat" : "");
}

int parse_role_name(Kernel kernel, std::string_view name) {
  for (int i = 0; i < role_count(kernel); ++i)
    if (role_name(kernel, i) == name) return i;
  return -1;
}

std::string_view pressure_name(Pressure pressure) {
  switch (pressure) {
    case Pressure::underfilled:
      return "underfilled";
    case Pressure::one_repeat:
      return "one_repeat";
    case Pressure::multi_repeat:
      return "multi_repeat";
  }
  return "underfilled";
}

Result<Pressure> parse_pressure(std::string_view name) {
  for (Pressure p : {Pressure::underfilled, Pressure::one_repeat, Pressure::multi_repeat})
    if (pressure_name(p) == name) return p;
  return input_error(fmt::format("unknown pressure class '{}'", name),
                     "expected underfilled, one_repeat or multi_repeat");
}

Fingerprint fingerprint_from_id(int id) {
  Fingerprint f;
  f.pressures[0] = static_cast<Pressure>(id / 9);
  f.pressures[1] = static_cast<Pressure>((id / 3) % 3);
  f.pressures[2] = static_cast<Pressure>(id % 3);
  return f;
}

std::string fingerprint_label(const Fingerprint& f) {
  return fmt::format("{}/{}/{}", pressure_name(f.pressures[0]), pressure_name(f.pressures[1]),
                     pressure_name(f.pressures[2]));
}

std::uint64_t total_work_items(const CountVector& c) {
  return work_items(c, Kernel::forward) + work_items(c, Kernel::input_grad) + work_items(c, Kernel::weight_grad);
}

Fingerprint fingerprint_of(const CountVector& c, std::int64_t sms) {
  Fingerprint f;
  for (Kernel k : k_all_kernels) f.pressures[static_cast<std::size_t>(k)] = pressure_of(work_items(c, k), sms);
  return f;
}

CountVector count_vector(const KernelConfig& config, std::span<const std::int64_t> rows) {
  CountVector c{};
  add_linear(c, Kernel::forward, config, rows);
  add_linear(c, Kernel::input_grad, config, rows);
  add_weight_grad(c, config, rows);
  return c;
}

bool covers(const CountVector& a, const CountVector& b) {
  for (int i = 0; i < k_count_dims; ++i)
    if (a[static_cast<std::size_t>(i)] < b[static_cast<std::size_t>(i)]) return false;
  return true;
}

std::vector<WorkItem> enumerate_work_items(const KernelConfig& cfg, std::span<const std::int64_t> rows, Kernel kernel) {
  std::vector<WorkItem> items;
  if (kernel == Kernel::weight_grad) {
    const std::int64_t tm = ceil_div(cfg.hidden, cfg.tile_m), tn = ceil_div(cfg.output_dim, cfg.tile_n),
                       tiles = tm * tn;
    // The persistent loop: CTA b takes output-tile slots b, b + sms, ...
    const std::int64_t slots = tiles * static_cast<std::int64_t>(rows.size());
    for (std::int64_t cta = 0; cta < cfg.sms; ++cta) {
      for (std::int64_t slot = cta, it = 0; slot < slots; slot += cfg.sms, ++it) {
        const std::int64_t e = slot / tiles, t = slot % tiles;
        const std::int64_t r = rows[static_cast<std::size_t>(e)];
        const std::int64_t chunks = ceil_div(r, cfg.tile_k);
        for (std::int64_t k = 0; k < chunks; ++k) {
          const std::int64_t depth = std::min(cfg.tile_k, r - k * cfg.tile_k);
          WeightGradRole role{depth<cfg.tile_k, position_of(k, chunks), position_of(t, tiles), it> 0};
          items.push_back({kernel, e, slot, cta, it, t, k, role_index(role)});
        }
      }
    }
    return items;
  }
  const std::int64_t n = kernel == Kernel::forward ? cfg.output_dim : cfg.hidden;
  const std::int64_t tn = ceil_div(n, cfg.tile_n);
  std::vector<std::int64_t> first_slot;  // first global slot of each expert
  std::int64_t total = 0;
  for (std::int64_t r : rows) {
    first_slot.push_back(total);
    total += ceil_div(r, cfg.tile_m) * tn;
  }
  for (std::int64_t cta = 0; cta < cfg.sms; ++cta) {
    for (std::int64_t slot = cta, it = 0; slot < total; slot += cfg.sms, ++it) {
      // The expert owning this slot: the last one whose first slot is <= slot
      // (never an expert without tiles: the next expert starts at the same slot).
      const std::int64_t e = std::upper_bound(first_slot.begin(), first_slot.end(), slot) - first_slot.begin() - 1;
      const std::int64_t r = rows[static_cast<std::size_t>(e)];
      const std::int64_t t = slot - first_slot[static_cast<std::size_t>(e)];
      const std::int64_t tiles = ceil_div(r, cfg.tile_m) * tn;
      const std::int64_t m = t / tn, c = t % tn;
      const std::int64_t height = std::min(cfg.tile_m, r - m * cfg.tile_m);
      const std::int64_t width = std::min(cfg.tile_n, n - c * cfg.tile_n);
      LinearRole role{height < cfg.tile_m, width<cfg.tile_n, position_of(t, tiles), it> 0};
      items.push_back({kernel, e, slot, cta, it, t, 0, role_index(role)});
    }
  }
  return items;
}

CountVector count_items(const std::vector<WorkItem>& items) {
  CountVector c{};
  for (const WorkItem& w : items) {
    c[kernel_offset(w.kernel)] += 1;
    c[count_index(w.kernel, w.role)] += 1;
  }
  return c;
}

}  // namespace scout::catalog
