#include "lib/session/session.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include "lib/common/parse.hpp"

namespace scout::session {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

milliseconds left(Clock::time_point deadline) {
  return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
}

std::string encode_view(const std::vector<std::int64_t>& ids, std::int64_t op_index) {
  std::string s;
  for (auto x : ids) s += fmt::format("{},", x);
  return s + fmt::format("@{}", op_index);
}

std::vector<char> text_value(const std::string& s) {
  return std::vector<char>(s.begin(), s.end());
}

// Polls `keys` until all exist, `until`, or `stop` (when not empty) exists; returns which exist.
// `stop` is read before the keys on each pass, so every key written before it is seen.
Result<std::vector<bool>> await_keys(transport::KeyValueStore& kv, const std::vector<std::string>& keys,
                                     Clock::time_point until, const std::string& stop = {}) {
  std::vector<bool> have(keys.size(), false);
  while (true) {
    bool stopped = false;
    if (!stop.empty()) {
      auto c = kv.check(stop);
      if (!c) return c.error();
      stopped = *c;
    }
    bool all = true;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (have[i]) continue;
      auto c = kv.check(keys[i]);
      if (!c) return c.error();
      have[i] = *c;
      all = all && have[i];
    }
    if (all || stopped || Clock::now() >= until) return have;
    std::this_thread::sleep_for(milliseconds(10));
  }
}

// Bytes <-> 64-bit words, for the size and duration exchanges.
std::uint64_t to_word(std::int64_t v) {
  return static_cast<std::uint64_t>(v);
}

}  // namespace

std::string_view contribution_state_name(Contribution::State state) {
  switch (state) {
    case Contribution::State::ok:
      return "ok";
    case Contribution::State::absent:
      return "absent";
    case Contribution::State::lost:
      return "lost";
    case Contribution::State::rejected:
      return "rejected";
    case Contribution::State::over_limit:
      return "over_limit";
  }
  return "unknown";
}

Session::Session(transport::KeyValueStore& store, SessionOptions options)
    : m_store(store), m_options(std::move(options)), m_traffic(std::make_shared<transport::TrafficCounters>()) {}

Session::~Session() {
  close();
}

std::vector<Absence> Session::absent() const {
  std::vector<Absence> out;
  for (const auto& [id, a] : m_gone) out.push_back(a);
  return out;
}

std::string Session::context_for(const std::string& op, std::int64_t id) const {
  // The session's name is part of it, so a contribution cannot be replayed in another group.
  if (m_options.name.empty()) return fmt::format("{}/{}/{}", m_options.key_namespace, op, id);
  return fmt::format("{}/{}/{}/{}", m_options.key_namespace, m_options.name, op, id);
}

Result<std::unique_ptr<Session>> Session::open(transport::KeyValueStore& store, const SessionOptions& o) {
  if (o.id_space < 1) return usage_error(fmt::format("a session needs at least one member id, not {}", o.id_space));
  if (o.member < 0 || o.member >= o.id_space)
    return usage_error(fmt::format("member id {} is outside 0..{}", o.member, o.id_space - 1));
  if (o.max_rounds < 1) return usage_error("a session needs at least one formation round");
  SessionOptions opts = o;
  if (opts.expected.empty())
    for (std::int64_t i = 0; i < o.id_space; ++i) opts.expected.push_back(i);
  std::sort(opts.expected.begin(), opts.expected.end());
  opts.expected.erase(std::unique(opts.expected.begin(), opts.expected.end()), opts.expected.end());
  if (opts.expected.front() < 0 || opts.expected.back() >= o.id_space)
    return usage_error(fmt::format("expected member ids must lie in 0..{}", o.id_space - 1));
  if (!std::binary_search(opts.expected.begin(), opts.expected.end(), o.member))
    return usage_error(fmt::format("member {} is not among the expected members", o.member));

  std::unique_ptr<Session> s(new Session(store, opts));
  if (opts.traffic) s->m_traffic = opts.traffic;
  s->m_members = opts.expected;
  if (opts.expected.size() <= 1) {
    s->m_members = {o.member};
    s->m_closed = true;  // nothing was written: nothing to close
    return s;
  }
  // The first generation nobody closed.
  const std::string root = opts.name.empty() ? opts.key_namespace : opts.key_namespace + "/" + opts.name;
  std::int64_t gen = 0;
  for (; gen < 100000; ++gen) {
    bool closed = false;
    for (std::size_t i = 0; i < opts.expected.size() && !closed; ++i) {
      auto c = store.check(fmt::format("{}/g{}/closed/{}", root, gen, opts.expected[i]));
      if (!c) return c.error();
      closed = *c;
    }
    if (!closed) break;
  }
  s->m_generation = gen;
  s->m_base = fmt::format("{}/g{}", root, gen);
  if (opts.device) {
    s->m_device = opts.device;
  } else {
    auto device = transport::make_tcp_device(opts.listen_address);
    if (!device) return device.error();
    s->m_device = std::move(*device);
  }
  const auto deadline = Clock::now() + opts.timeout;
  s->m_close_by = deadline;
  // Round 0 waits longest: that is where members started at different times meet.
  auto formed = s->form(deadline, milliseconds(opts.timeout.count() * 45 / 100), 0);
  if (!formed) {
    s->m_store.cleanup();
    s->m_closed = true;
    return formed.error();
  }
  return s;
}

void Session::drop_to_alone(const std::string& why) {
  m_group.reset();
  for (auto id : m_members)
    if (id != m_options.member) m_gone[id] = Absence{id, Absence::Why::lost, why};
  m_members = {m_options.member};
}

Status Session::form(Clock::time_point deadline, milliseconds arrival, std::int64_t op_index) {
  const auto me = m_options.member;
  std::vector<std::int64_t> candidates = m_members;
  m_group.reset();  // the old group's pairs close, so peers still on it fail at once
  // When this member's connect failed fast, a peer may still be waiting in
  // that round for a pair that will never connect (up to the pair wait):
  // the next round waits for it at least that long.
  Clock::time_point peers_may_leave_by{};
  while (candidates.size() > 1) {
    if (m_rounds >= m_options.max_rounds || (m_rounds > 0 && left(deadline) < milliseconds(50))) {
      m_notes.push_back(fmt::format("no formation round left (after {}); continuing alone", m_rounds));
      m_members = candidates;
      drop_to_alone(fmt::format("not reached within {} formation round(s)", m_rounds));
      return Ok{};
    }
    const std::int64_t round = m_next_round++;
    ++m_rounds;
    const std::string pfx = fmt::format("{}/r{}", m_base, round);
    auto set_here = m_store.set(fmt::format("{}/here/{}", pfx, me), text_value(std::to_string(op_index)));
    if (!set_here) {
      m_notes.push_back(fmt::format("round {}: {}", round, set_here.error().message()));
      return set_here.error();
    }
    spdlog::info("session: member {} of {} registered in round {} of generation {}{}", me, m_options.expected.size(),
                 round, m_generation, m_options.name.empty() ? "" : " (" + m_options.name + ")");
    auto here_until = Clock::now() + (round == 0 ? arrival : std::min(arrival, left(deadline) / 4));
    if (round > 0) here_until = std::max(here_until, std::min(peers_may_leave_by, deadline - left(deadline) / 4));
    std::vector<std::string> here_keys;
    for (auto m : candidates) here_keys.push_back(fmt::format("{}/here/{}", pfx, m));
    // The round's arrival ends for every member when the first one's ends: its view holds only the
    // members it saw by then, so a member still waiting could at best see more and disagree. Members
    // wait different times (each from its own start, within its own timeout; a store's host waits a
    // whole timeout from when its store came up); where one waited for a peer's view less than the
    // gap between their waits, both were left alone: 3 namespace nodes, one lost with its observer,
    // under load 15 (CI seed 794057962): observer 1 closed round 0 at 15.7 s, gave up on observer 0's
    // view at 18.6 s and re-formed, while observer 0 closed at 18.8 s and waited in round 0's connect
    // for it.
    const std::string closed_key = fmt::format("{}/arrival_closed", pfx);
    auto have = await_keys(m_store, here_keys, here_until, closed_key);
    if (!have) return have.error();
    // Every member marks it; a write that races another member's may fail (Gloo's FileStore renames one
    // temporary file per key) while the mark stands, which is all that counts.
    if (auto c = m_store.set(closed_key, text_value(std::to_string(me))); !c) {
      auto marked = m_store.check(closed_key);
      if (!marked || !*marked) {
        m_notes.push_back(fmt::format("round {}: {}", round, c.error().message()));
        return c.error();
      }
    }
    std::vector<std::int64_t> present;
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      const auto id = candidates[i];
      if (id == me) {
        present.push_back(id);
        continue;
      }
      if (!(*have)[i]) {
        const bool seen = m_seen.count(id) > 0;
        m_gone[id] = Absence{id, seen ? Absence::Why::lost : Absence::Why::never_arrived,
                             seen ? fmt::format("left the session (not back in round {})", round)
                                  : fmt::format("did not arrive within {} ms (round {})", arrival.count(), round)};
        continue;
      }
      m_seen.insert(id);
      auto value = m_store.get(here_keys[i], std::max(milliseconds(1), std::min(milliseconds(500), left(deadline))));
      auto at = value ? parse_int(std::string_view(value->data(), value->size()), "operation index")
                      : Result<std::int64_t>(value.error());
      if (!at || *at != op_index) {
        m_gone[id] =
            Absence{id, Absence::Why::lost,
                    at ? fmt::format("it is at operation {}, this member at {} (round {})", *at, op_index, round)
                       : fmt::format("unreadable registration in round {}", round)};
        continue;
      }
      present.push_back(id);
    }
    if (present.size() < candidates.size())
      m_notes.push_back(fmt::format("round {}: {} of {} observers arrived", round, present.size(), candidates.size()));
    for (auto id : present) m_gone.erase(id);
    if (present.size() <= 1) {
      m_members = present;
      return Ok{};
    }
    // Agree on who is there before forming the group.
    const std::string view = encode_view(present, op_index);
    auto set_view = m_store.set(fmt::format("{}/view/{}", pfx, me), text_value(view));
    if (!set_view) return set_view.error();
    auto view_until = Clock::now() + left(deadline) / 4;
    bool agreed = true;
    for (auto m : present) {
      if (m == me) continue;
      auto theirs = m_store.get(fmt::format("{}/view/{}", pfx, m), std::max(milliseconds(1), left(view_until)));
      if (!theirs || std::string(theirs->begin(), theirs->end()) != view) {
        agreed = false;
        break;
      }
    }
    if (!agreed) {
      m_notes.push_back(fmt::format("round {}: observers saw different sets; re-forming", round));
      candidates = present;
      continue;
    }
    const int rank = static_cast<int>(std::find(present.begin(), present.end(), me) - present.begin());
    const auto total = m_options.timeout;
    auto connect_timeout = std::max(
        milliseconds(100), round == 0 ? std::min(left(deadline) / 2, left(deadline) - total / 5) : left(deadline));
    peers_may_leave_by = Clock::now() + transport::pair_connect_wait(connect_timeout) + milliseconds(1000);
    auto group = transport::GlooGroup::connect(m_store, pfx + "/gloo/", rank, static_cast<int>(present.size()),
                                               m_device, connect_timeout, m_traffic.get());
    if (!group) {
      m_notes.push_back(fmt::format("round {}: gloo: {}", round, group.error().message()));
      spdlog::info("session round {} failed: {}", round, group.error().message());
      candidates = present;
      continue;
    }
    m_group = std::move(*group);
    m_members = present;
    return Ok{};
  }
  m_members = candidates;
  return Ok{};
}

template <typename T, typename F>
Result<T> Session::with_reform(const OpOptions& op, F&& attempt) {
  if (m_closed && m_options.expected.size() > 1)
    return internal_error(fmt::format("{}: the session is closed", op.name));
  const auto deadline = Clock::now() + op.timeout;
  m_close_by = std::max(m_close_by, deadline);
  bool first = true;
  while (true) {
    if (!m_group) return attempt(milliseconds(0));  // alone: the attempt answers for this member only
    auto t = std::max(milliseconds(100),
                      first ? std::min(left(deadline) / 2, left(deadline) - op.timeout / 5) : left(deadline));
    auto r = attempt(t);
    if (r) {
      ++m_op_index;
      return r;
    }
    if (r.error().code != ExitCode::unavailable)
      return r;  // agreed refusals (limits) are final, not transport failures
    m_notes.push_back(fmt::format("round {}: gloo: {}", m_next_round - 1, r.error().message()));
    spdlog::info("session: {} failed in round {}: {}", op.name, m_next_round - 1, r.error().message());
    first = false;
    if (left(deadline) < milliseconds(50) || m_rounds >= m_options.max_rounds) {
      drop_to_alone(fmt::format("lost during {} (no time or round left to re-form)", op.name));
      continue;
    }
    auto formed = form(deadline, left(deadline) / 4, m_op_index);
    if (!formed) return formed.error();
  }
}

Result<GatherResult> Session::gather_once(const Bytes& mine, const Bytes& signed_mine, const OpOptions& op,
                                          milliseconds timeout) {
  GatherResult out;
  out.from.assign(static_cast<std::size_t>(m_options.id_space), Contribution{});
  for (const auto& [id, a] : m_gone) {
    out.from[static_cast<std::size_t>(id)].state =
        a.why == Absence::Why::lost ? Contribution::State::lost : Contribution::State::absent;
    out.from[static_cast<std::size_t>(id)].reason = a.reason;
  }
  auto& own = out.from[static_cast<std::size_t>(m_options.member)];
  if (signed_mine.size() > op.limits.max_bytes_per_member) {
    own.state = Contribution::State::over_limit;
    own.reason = fmt::format("this member's contribution to {} is {} bytes; the limit is {} bytes per member", op.name,
                             signed_mine.size(), op.limits.max_bytes_per_member);
  } else {
    own.state = Contribution::State::ok;
    own.data = mine;
  }
  if (!m_group) return out;
  // Sizes and limits first: every member applies the smallest limits any member asked for.
  auto words = m_group->all_gather_words(
      {signed_mine.size(), op.limits.max_bytes_per_member, op.limits.max_total_bytes}, timeout);
  if (!words) return words.error();
  const std::size_t n = m_members.size();
  std::vector<std::uint64_t> sizes(n);
  std::uint64_t per = UINT64_MAX, total_limit = UINT64_MAX;
  for (std::size_t i = 0; i < n; ++i) {
    sizes[i] = (*words)[3 * i];
    per = std::min(per, (*words)[3 * i + 1]);
    total_limit = std::min(total_limit, (*words)[3 * i + 2]);
  }
  std::vector<std::string> refused(n);
  for (std::size_t i = 0; i < n; ++i)
    if (sizes[i] > per)
      refused[i] = fmt::format("contributed {} bytes to {}; the limit is {} bytes per member", sizes[i], op.name, per);
  // Over the total: drop the largest contributions first (ties: the higher id), the same on every member.
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (refused[i].empty()) total += sizes[i];
  if (total > total_limit) {
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < n; ++i)
      if (refused[i].empty()) order.push_back(i);
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return sizes[a] != sizes[b] ? sizes[a] > sizes[b] : a > b; });
    for (auto i : order) {
      if (total <= total_limit) break;
      total -= sizes[i];
      refused[i] = fmt::format("contributed {} bytes to {}; all contributions together exceed the limit of {} bytes",
                               sizes[i], op.name, total_limit);
    }
  }
  std::vector<std::uint64_t> used(n);
  for (std::size_t i = 0; i < n; ++i) used[i] = refused[i].empty() ? sizes[i] : 0;
  const std::size_t my_rank =
      static_cast<std::size_t>(std::find(m_members.begin(), m_members.end(), m_options.member) - m_members.begin());
  static const Bytes k_nothing;
  auto all = m_group->all_gather_bytes(used[my_rank] ? signed_mine : k_nothing, used, timeout);
  if (!all) return all.error();
  std::size_t off = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto id = m_members[i];
    auto& c = out.from[static_cast<std::size_t>(id)];
    Bytes blob(all->begin() + static_cast<std::ptrdiff_t>(off),
               all->begin() + static_cast<std::ptrdiff_t>(off + used[i]));
    off += used[i];
    if (!refused[i].empty()) {
      c.state = Contribution::State::over_limit;
      c.data.clear();
      c.reason = refused[i];
      continue;
    }
    if (id == m_options.member) continue;
    if (m_options.signer) {
      auto plain = m_options.signer->verify(blob, context_for(op.name, id));
      if (!plain) {
        c.state = Contribution::State::rejected;
        c.reason = "contribution failed authentication (wrong job token or forged)";
        continue;
      }
      c.data = std::move(*plain);
    } else {
      c.data = std::move(blob);
    }
    c.state = Contribution::State::ok;
    c.reason.clear();
  }
  return out;
}

Result<GatherResult> Session::all_gather(const Bytes& mine, const OpOptions& op) {
  const Bytes signed_mine =
      m_options.signer ? m_options.signer->sign(mine, context_for(op.name, m_options.member)) : mine;
  const std::int64_t rounds_before = m_rounds;
  auto r = with_reform<GatherResult>(op, [&](milliseconds t) { return gather_once(mine, signed_mine, op, t); });
  if (r) r->rounds = m_rounds - rounds_before;
  return r;
}

Result<Bytes> Session::broadcast(std::int64_t root, const Bytes& data, const OpOptions& op) {
  const bool i_am_root = root == m_options.member;
  const Bytes signed_data =
      i_am_root && m_options.signer ? m_options.signer->sign(data, context_for(op.name, root)) : data;
  return with_reform<Bytes>(op, [&](milliseconds t) -> Result<Bytes> {
    auto it = std::find(m_members.begin(), m_members.end(), root);
    if (it == m_members.end()) {
      auto gone = m_gone.find(root);
      return unavailable_error(fmt::format("{}: its root, member {}, is not in the session", op.name, root),
                               gone != m_gone.end() ? gone->second.reason : "it is not an expected member");
    }
    if (!m_group) return data;  // alone and the root
    auto words = m_group->all_gather_words({i_am_root ? signed_data.size() : 0, op.limits.max_bytes_per_member}, t);
    if (!words) return words.error();
    const int root_rank = static_cast<int>(it - m_members.begin());
    const std::uint64_t size = (*words)[2 * static_cast<std::size_t>(root_rank)];
    std::uint64_t per = UINT64_MAX;
    for (std::size_t i = 0; i < m_members.size(); ++i) per = std::min(per, (*words)[2 * i + 1]);
    if (size > per)
      return input_error(
          fmt::format("{}: member {} broadcasts {} bytes; the limit is {} bytes", op.name, root, size, per), {},
          "raise the operation's limit, or send less");
    auto got = m_group->broadcast_bytes(root_rank, signed_data, size, t);
    if (!got) return got.error();
    if (i_am_root) return data;
    if (!m_options.signer) return std::move(*got);
    auto plain = m_options.signer->verify(*got, context_for(op.name, root));
    if (!plain)
      return input_error(fmt::format("{}: the broadcast from member {} failed authentication", op.name, root),
                         "wrong job token or forged");
    return std::move(*plain);
  });
}

Status Session::barrier(const OpOptions& op) {
  return with_reform<Ok>(op, [&](milliseconds t) -> Status {
    if (!m_group) return Ok{};
    return m_group->barrier(t);
  });
}

Result<Timed<GatherResult>> Session::timed_all_gather(const Bytes& mine, const OpOptions& op) {
  const auto t0 = Clock::now();
  auto r = all_gather(mine, op);
  if (!r) return r.error();
  Timed<GatherResult> out{std::move(*r), Clock::now() - t0, {}};
  out.durations_ns.assign(static_cast<std::size_t>(m_options.id_space), -1);
  out.durations_ns[static_cast<std::size_t>(m_options.member)] = out.duration.count();
  if (m_group) {
    // The durations travel once, on the group that ran the operation; a failure here loses them, not the result.
    auto words =
        m_group->all_gather_words({to_word(out.duration.count())}, std::max(milliseconds(100), op.timeout / 4));
    if (words) {
      for (std::size_t i = 0; i < m_members.size(); ++i)
        out.durations_ns[static_cast<std::size_t>(m_members[i])] = static_cast<std::int64_t>((*words)[i]);
    } else {
      m_notes.push_back(fmt::format("{}: durations not exchanged: {}", op.name, words.error().message()));
    }
  }
  return out;
}

Result<Timed<Bytes>> Session::timed_broadcast(std::int64_t root, const Bytes& data, const OpOptions& op) {
  const auto t0 = Clock::now();
  auto r = broadcast(root, data, op);
  if (!r) return r.error();
  Timed<Bytes> out{std::move(*r), Clock::now() - t0, {}};
  out.durations_ns.assign(static_cast<std::size_t>(m_options.id_space), -1);
  out.durations_ns[static_cast<std::size_t>(m_options.member)] = out.duration.count();
  if (m_group) {
    auto words =
        m_group->all_gather_words({to_word(out.duration.count())}, std::max(milliseconds(100), op.timeout / 4));
    if (words)
      for (std::size_t i = 0; i < m_members.size(); ++i)
        out.durations_ns[static_cast<std::size_t>(m_members[i])] = static_cast<std::int64_t>((*words)[i]);
  }
  return out;
}

Result<std::unique_ptr<Session>> Session::subgroup(const std::string& name, const std::vector<std::int64_t>& subset,
                                                   milliseconds timeout) {
  if (name.empty() || name.find('/') != std::string::npos)
    return usage_error(fmt::format("subgroup name '{}' must be non-empty and contain no '/'", name));
  if (std::find(subset.begin(), subset.end(), m_options.member) == subset.end())
    return usage_error(fmt::format("member {} is not in subgroup {}", m_options.member, name));
  for (auto id : subset)
    if (id < 0 || id >= m_options.id_space)
      return usage_error(fmt::format("subgroup {}: member id {} is out of range", name, id));
  SessionOptions so = m_options;
  so.expected = subset;
  so.timeout = timeout;
  so.name = m_options.name.empty() ? name : m_options.name + "/" + name;
  std::sort(so.expected.begin(), so.expected.end());
  so.expected.erase(std::unique(so.expected.begin(), so.expected.end()), so.expected.end());
  std::unique_ptr<Session> s(new Session(m_store, so));
  s->m_is_sub = true;
  s->m_traffic = m_traffic;
  s->m_members = so.expected;
  if (so.expected.size() <= 1) {
    s->m_closed = true;
    return s;
  }
  const std::int64_t k = m_subgroups[name]++;
  // Under this session's fresh prefix: unique per generation without a scan. Ids of the
  // parent that are gone are expected all the same: they are reported, not waited for long.
  s->m_base = fmt::format("{}/sub/{}.{}", m_base.empty() ? m_options.key_namespace : m_base, name, k);
  s->m_generation = m_generation;
  if (!m_device) {
    auto device = transport::make_tcp_device(m_options.listen_address);
    if (!device) return device.error();
    m_device = std::move(*device);
  }
  s->m_device = m_device;
  auto formed = s->form(Clock::now() + timeout, milliseconds(timeout.count() * 45 / 100), 0);
  if (!formed) return formed.error();
  return s;
}

namespace {

void put_word(Bytes& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

}  // namespace

Bytes encode_ids(const std::vector<std::int64_t>& ids) {
  Bytes out;
  for (auto id : ids) put_word(out, static_cast<std::uint64_t>(id));
  return out;
}

Result<std::vector<std::int64_t>> decode_ids(const Bytes& bytes, std::int64_t id_space) {
  if (bytes.size() % 8 != 0)
    return input_error(fmt::format("a list of member ids of {} bytes (not a multiple of 8)", bytes.size()));
  std::vector<std::int64_t> ids;
  for (std::size_t off = 0; off < bytes.size(); off += 8) {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(bytes[off + static_cast<std::size_t>(i)]) << (8 * i);
    const auto id = static_cast<std::int64_t>(v);
    if (id < 0 || id >= id_space) return input_error(fmt::format("member id {} outside 0..{}", id, id_space - 1));
    ids.push_back(id);
  }
  return ids;
}

std::vector<std::int64_t> normalized_selection(std::vector<std::int64_t> ids, std::int64_t id_space) {
  std::erase_if(ids, [&](std::int64_t id) { return id < 0 || id >= id_space; });
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

Result<TwoPhaseResult> Session::two_phase(const TwoPhaseRequest& rq) {
  if (rq.position.size() != rq.position_bytes)
    return usage_error(
        fmt::format("{}: this member's position is {} bytes, not {}", rq.name, rq.position.size(), rq.position_bytes));
  if (!rq.select || !rq.decide || !rq.details)
    return usage_error(fmt::format("{}: select, decide and details are required", rq.name));
  OpOptions op = rq.op;
  op.name = rq.name + "/positions";
  auto pos = all_gather(rq.position, op);
  if (!pos) return pos.error();
  TwoPhaseResult out;
  PositionTable table;
  table.position_bytes = rq.position_bytes;
  table.positions.assign(pos->from.size(), std::nullopt);
  for (std::size_t i = 0; i < pos->from.size(); ++i)
    if (pos->from[i].state == Contribution::State::ok && pos->from[i].data.size() == rq.position_bytes)
      table.positions[i] = std::move(pos->from[i].data);
  out.positions_from = std::move(pos->from);
  out.selected = normalized_selection(rq.select(table), m_options.id_space);
  const bool me_selected = std::binary_search(out.selected.begin(), out.selected.end(), m_options.member);
  op.name = rq.name + "/details";
  auto det = all_gather(me_selected ? rq.details() : Bytes{}, op);
  if (!det) return det.error();
  for (auto id : out.selected) {
    auto& c = det->from[static_cast<std::size_t>(id)];
    if (c.state == Contribution::State::ok) out.details[id] = std::move(c.data);
  }
  out.details_from = std::move(det->from);
  out.decision = rq.decide(table, out.details);
  out.table = std::move(table);
  return out;
}

void Session::close() {
  if (m_closed) return;
  m_closed = true;
  m_group.reset();
  if (m_is_sub) return;  // the parent's close removes what the subgroup wrote
  m_store.cleanup();
  (void)m_store.set(fmt::format("{}/closed/{}", m_base, m_options.member), text_value("1"));
  // Leave only when the others are done with the store too: a member that hosts it takes it
  // down on exit, and a peer still cleaning up would then wait out its timeout. Bounded.
  std::vector<std::string> closed_keys;
  for (auto m : m_members)
    if (m != m_options.member) closed_keys.push_back(fmt::format("{}/closed/{}", m_base, m));
  (void)await_keys(m_store, closed_keys, Clock::now() + std::min(milliseconds(2000), left(m_close_by)));
  spdlog::info("session: generation {} closed", m_generation);
}

}  // namespace scout::session
