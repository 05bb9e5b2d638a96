#include "lib/session/hierarchy.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace scout::session {

namespace {

void put_u64(Bytes& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

bool get_u64(const Bytes& in, std::size_t& off, std::uint64_t& v) {
  if (in.size() - off < 8 || off > in.size()) return false;
  v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(in[off + static_cast<std::size_t>(i)]) << (8 * i);
  off += 8;
  return true;
}

// The most of a refused contribution's reason a block carries up.
constexpr std::size_t k_max_reason = 200;

// A group's block: (id, state, length, bytes) per entry; the bytes are the data of an ok
// contribution, the reason of any other (so a refusal seen in a group reaches the leaders).
Bytes encode_block(const std::map<std::int64_t, Contribution>& entries) {
  Bytes out;
  for (const auto& [id, c] : entries) {
    put_u64(out, static_cast<std::uint64_t>(id));
    put_u64(out, static_cast<std::uint64_t>(c.state));
    if (c.state == Contribution::State::ok) {
      put_u64(out, c.data.size());
      out.insert(out.end(), c.data.begin(), c.data.end());
    } else {
      const std::string r = c.reason.substr(0, k_max_reason);
      put_u64(out, r.size());
      out.insert(out.end(), r.begin(), r.end());
    }
  }
  return out;
}

// Entries of a block from group `g`; ids outside that group make the block malformed.
Result<std::map<std::int64_t, Contribution>> decode_block(const Bytes& in, std::int64_t g,
                                                          const std::vector<std::int64_t>& group_of) {
  std::map<std::int64_t, Contribution> out;
  std::size_t off = 0;
  while (off < in.size()) {
    std::uint64_t id = 0, state = 0, len = 0;
    if (!get_u64(in, off, id) || !get_u64(in, off, state) || !get_u64(in, off, len) || len > in.size() - off)
      return input_error(fmt::format("the block of group {} is truncated", g));
    if (id >= group_of.size() || group_of[id] != g)
      return input_error(fmt::format("the block of group {} names member {}, which is not in it", g, id));
    if (state > static_cast<std::uint64_t>(Contribution::State::over_limit))
      return input_error(fmt::format("the block of group {} gives member {} an unknown state {}", g, id, state));
    Contribution c;
    c.state = static_cast<Contribution::State>(state);
    if (c.state != Contribution::State::ok && len > k_max_reason)
      return input_error(fmt::format("the block of group {} gives member {} a reason of {} bytes", g, id, len));
    const auto first = in.begin() + static_cast<std::ptrdiff_t>(off);
    if (c.state == Contribution::State::ok)
      c.data = Bytes(first, first + static_cast<std::ptrdiff_t>(len));
    else
      c.reason.assign(first, first + static_cast<std::ptrdiff_t>(len));
    off += len;
    out[static_cast<std::int64_t>(id)] = std::move(c);
  }
  return out;
}

}  // namespace

Hierarchy::~Hierarchy() {
  close();
}

Result<std::unique_ptr<Hierarchy>> Hierarchy::open(transport::KeyValueStore& store, const HierarchyOptions& o) {
  const auto n = o.member.id_space;
  if (n < 1) return usage_error("a hierarchy needs at least one member");
  std::unique_ptr<Hierarchy> h(new Hierarchy());
  h->m_id_space = n;
  if (o.group_of.empty()) {
    if (o.group_size < 1) return usage_error(fmt::format("group size {} must be at least 1", o.group_size));
    for (std::int64_t i = 0; i < n; ++i) h->m_group_of.push_back(i / o.group_size);
  } else {
    if (static_cast<std::int64_t>(o.group_of.size()) != n)
      return usage_error(fmt::format("{} group labels for {} members", o.group_of.size(), n));
    h->m_group_of = o.group_of;
  }
  for (auto g : h->m_group_of)
    if (g < 0 || g >= n) return usage_error(fmt::format("group label {} outside 0..{}", g, n - 1));
  if (o.member.member < 0 || o.member.member >= n)
    return usage_error(fmt::format("member id {} outside 0..{}", o.member.member, n - 1));
  h->m_groups = *std::max_element(h->m_group_of.begin(), h->m_group_of.end()) + 1;
  h->m_group_index = h->m_group_of[static_cast<std::size_t>(o.member.member)];
  h->m_traffic = o.member.traffic ? o.member.traffic : std::make_shared<transport::TrafficCounters>();

  SessionOptions g = o.member;
  g.traffic = h->m_traffic;
  if (!g.device) {
    auto device = transport::make_tcp_device(g.listen_address);
    if (!device) return device.error();
    g.device = std::move(*device);
  }
  g.name = fmt::format("hier/grp{}", h->m_group_index);
  g.expected.clear();
  for (std::int64_t i = 0; i < n; ++i)
    if (h->m_group_of[static_cast<std::size_t>(i)] == h->m_group_index) g.expected.push_back(i);
  auto level1 = Session::open(store, g);
  if (!level1) return level1.error();
  h->m_group = std::move(*level1);
  if (h->m_group->members().front() != o.member.member) return h;  // not the leader
  SessionOptions t = g;
  t.name = "hier/top";
  t.member = h->m_group_index;
  t.id_space = h->m_groups;
  // The leaders meet after their groups formed, and a group missing a member spends up to its
  // arrival window (45% of the timeout) first: the leaders wait twice as long for each other.
  t.timeout = 2 * g.timeout;
  t.expected.clear();
  std::vector<bool> used(static_cast<std::size_t>(h->m_groups), false);
  for (auto label : h->m_group_of) used[static_cast<std::size_t>(label)] = true;
  for (std::int64_t k = 0; k < h->m_groups; ++k)
    if (used[static_cast<std::size_t>(k)]) t.expected.push_back(k);
  auto level2 = Session::open(store, t);
  if (!level2) return level2.error();
  h->m_top = std::move(*level2);
  return h;
}

std::vector<std::string> Hierarchy::notes() const {
  std::vector<std::string> out;
  if (m_group)
    for (const auto& n : m_group->notes()) out.push_back(fmt::format("group {}: {}", m_group_index, n));
  if (m_top)
    for (const auto& n : m_top->notes()) out.push_back(fmt::format("leaders: {}", n));
  return out;
}

Result<TwoPhaseResult> Hierarchy::two_phase(const TwoPhaseRequest& rq) {
  if (rq.position.size() != rq.position_bytes)
    return usage_error(
        fmt::format("{}: this member's position is {} bytes, not {}", rq.name, rq.position.size(), rq.position_bytes));
  if (!rq.select || !rq.decide || !rq.details)
    return usage_error(fmt::format("{}: select, decide and details are required", rq.name));
  const std::int64_t me = m_group->member();
  OpOptions op = rq.op;
  TwoPhaseResult out;

  // Phase 1: positions, in the group, then among the leaders.
  op.name = rq.name + "/positions";
  auto pos = m_group->all_gather(rq.position, op);
  if (!pos) return pos.error();
  const std::int64_t leader = m_group->members().front();
  PositionTable table;
  table.position_bytes = rq.position_bytes;
  table.positions.assign(static_cast<std::size_t>(m_id_space), std::nullopt);
  std::vector<std::string> refused;
  if (m_top) {
    // Every member of this group, with what it gave: the leaders see who was refused and why.
    std::map<std::int64_t, Contribution> mine;
    for (std::int64_t id = 0; id < m_id_space; ++id) {
      if (m_group_of[static_cast<std::size_t>(id)] != m_group_index) continue;
      auto& c = pos->from[static_cast<std::size_t>(id)];
      if (c.state == Contribution::State::ok && c.data.size() != rq.position_bytes) {
        c.state = Contribution::State::rejected;
        c.reason = fmt::format("its position is {} bytes, not {}", c.data.size(), rq.position_bytes);
        c.data.clear();
      }
      mine[id] = std::move(c);
    }
    OpOptions top_op = op;
    top_op.limits.max_bytes_per_member = std::max<std::uint64_t>(
        op.limits.max_bytes_per_member,
        (std::max<std::uint64_t>(rq.position_bytes, k_max_reason) + 24) * static_cast<std::uint64_t>(mine.size()) + 64);
    auto blocks = m_top->all_gather(encode_block(mine), top_op);
    if (!blocks) return blocks.error();
    out.positions_from.assign(static_cast<std::size_t>(m_id_space), Contribution{});
    for (std::int64_t g = 0; g < m_groups; ++g) {
      auto& c = blocks->from[static_cast<std::size_t>(g)];
      if (c.state != Contribution::State::ok) continue;
      auto entries = decode_block(c.data, g, m_group_of);
      if (!entries) continue;  // a malformed block counts as that group missing
      for (auto& [id, e] : *entries) {
        auto& kept = out.positions_from[static_cast<std::size_t>(id)];
        kept.state = e.state;
        kept.reason = std::move(e.reason);
        if (e.state == Contribution::State::ok) table.positions[static_cast<std::size_t>(id)] = std::move(e.data);
      }
    }
    out.selected = normalized_selection(rq.select(table), m_id_space);
  }
  // The selection travels down; only the selected send details.
  op.name = rq.name + "/selection";
  auto sel = m_group->broadcast(leader, m_top ? encode_ids(out.selected) : Bytes{}, op);
  if (!sel) return sel.error();
  auto ids = decode_ids(*sel, m_id_space);
  if (!ids) return ids.error();
  out.selected = *ids;
  const bool me_selected = std::binary_search(out.selected.begin(), out.selected.end(), me);
  op.name = rq.name + "/details";
  auto det = m_group->all_gather(me_selected ? rq.details() : Bytes{}, op);
  if (!det) return det.error();
  Bytes decision;
  if (m_top) {
    std::map<std::int64_t, Contribution> mine;
    for (auto id : out.selected) {
      if (id < 0 || m_group_of[static_cast<std::size_t>(id)] != m_group_index) continue;
      mine[id] = std::move(det->from[static_cast<std::size_t>(id)]);
    }
    OpOptions top_op = op;
    auto blocks = m_top->all_gather(encode_block(mine), top_op);
    if (!blocks) return blocks.error();
    out.details_from.assign(static_cast<std::size_t>(m_id_space), Contribution{});
    for (std::int64_t g = 0; g < m_groups; ++g) {
      auto& c = blocks->from[static_cast<std::size_t>(g)];
      if (c.state != Contribution::State::ok) continue;
      auto entries = decode_block(c.data, g, m_group_of);
      if (!entries) continue;
      for (auto& [id, e] : *entries) {
        if (!std::binary_search(out.selected.begin(), out.selected.end(), id)) continue;
        auto& kept = out.details_from[static_cast<std::size_t>(id)];
        kept.state = e.state;
        kept.reason = std::move(e.reason);
        if (e.state == Contribution::State::ok) out.details[id] = std::move(e.data);
      }
    }
    decision = rq.decide(table, out.details);
    out.table = std::move(table);
  }
  op.name = rq.name + "/decision";
  auto got = m_group->broadcast(leader, decision, op);
  if (!got) return got.error();
  out.decision = std::move(*got);
  return out;
}

void Hierarchy::close() {
  if (m_top) m_top->close();
  if (m_group) m_group->close();
}

}  // namespace scout::session
