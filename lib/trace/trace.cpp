#include "lib/trace/trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "lib/common/hex.hpp"
#include "lib/records/json.hpp"

namespace scout::trace {
namespace {

struct Slice {
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::string name;
  std::string category = "collective";
  std::string cname;  // "" none
  nlohmann::ordered_json args;
  bool open = false;
  std::int64_t lane = 0;
};

std::string host_label(const std::string& host) {
  return host.empty() ? std::string("unknown host") : host;
}

// A track's process: its host, or "node K (host)" where the node index is known.
std::string process_label(const Track& t) {
  if (t.node < 0) return host_label(t.host);
  return t.host.empty() ? fmt::format("node {}", t.node) : fmt::format("node {} ({})", t.node, t.host);
}

// A track's thread name: "rank N (host)", or "rank N (node K: host)".
std::string track_label(const Track& t) {
  if (t.node < 0) return fmt::format("rank {} ({})", t.rank, host_label(t.host));
  return t.host.empty() ? fmt::format("rank {} (node {})", t.rank, t.node)
                        : fmt::format("rank {} (node {}: {})", t.rank, t.node, t.host);
}

std::string state_of(const records::CollectiveEvent& e, const Track& t) {
  if (e.failed) return "failed";
  if (e.exit_ns != 0) return "done";
  if (e.fingerprint == t.pending &&
      (t.state == records::CollectiveState::entering || t.state == records::CollectiveState::inside))
    return std::string(records::collective_state_name(t.state));
  return "inside";
}

nlohmann::ordered_json call_args(const records::CollectiveEvent& e, const std::string& state) {
  const auto& f = e.fingerprint;
  nlohmann::ordered_json a;
  a["group"] = hex64(f.group);
  a["seq"] = f.group_seq;
  a["op"] = records::collective_type_name(f.type);
  a["count"] = f.count;
  a["dtype"] = records::dtype_text(f.dtype);
  a["state"] = state;
  a["root_or_op"] = f.root_or_op;
  a["op_seq"] = e.op_seq;
  if (e.exit_ns != 0) a["exit_kind"] = records::exit_kind_name(e.exit_kind);
  return a;
}

// Lays the slices of one track onto lanes on which every pair nests or is disjoint.
std::int64_t assign_lanes(std::vector<Slice>& slices, std::int64_t& dropped) {
  std::stable_sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) {
    return a.start != b.start ? a.start < b.start : a.end > b.end;
  });
  std::vector<std::vector<std::int64_t>> stacks;  // per lane, the ends of the open enclosing slices
  std::vector<Slice> kept;
  for (auto& s : slices) {
    bool placed = false;
    for (std::size_t l = 0; l < stacks.size() && !placed; ++l) {
      auto& st = stacks[l];
      while (!st.empty() && st.back() <= s.start) st.pop_back();
      if (st.empty() || st.back() >= s.end) {
        st.push_back(s.end);
        s.lane = static_cast<std::int64_t>(l);
        placed = true;
      }
    }
    if (!placed) {
      if (static_cast<std::int64_t>(stacks.size()) >= k_max_lanes) {
        ++dropped;
        continue;
      }
      stacks.push_back({s.end});
      s.lane = static_cast<std::int64_t>(stacks.size()) - 1;
    }
    kept.push_back(std::move(s));
  }
  slices = std::move(kept);
  return static_cast<std::int64_t>(stacks.size());
}

void add_category(Slice& s, const std::string& cat) {
  if (s.category.find(cat) == std::string::npos) s.category += "," + cat;
}

}  // namespace

Track track_of(const records::RankSnapshot& s) {
  Track t;
  t.rank = s.rank;
  t.host = s.host;
  t.events = s.recent;
  t.pending = s.pending;
  t.state = s.collective_state;
  t.phase = s.phase;
  t.step = s.step;
  t.progress_ns = s.progress_ns;
  return t;
}

nlohmann::ordered_json build(const TraceInput& in, TraceStats* stats_out) {
  TraceStats stats;
  // The end: the probe's time, else the latest time the evidence shows.
  std::int64_t end_ns = in.end_ns;
  if (end_ns <= 0)
    for (const auto& t : in.tracks) {
      end_ns = std::max(end_ns, t.progress_ns);
      for (const auto& e : t.events) end_ns = std::max({end_ns, e.enter_ns, e.exit_ns});
    }

  // Tracks in rank order; hosts numbered in order of their lowest rank.
  std::vector<const Track*> tracks;
  for (const auto& t : in.tracks) tracks.push_back(&t);
  std::stable_sort(tracks.begin(), tracks.end(), [](const Track* a, const Track* b) { return a->rank < b->rank; });
  std::map<std::string, std::int64_t> pid_by_label;
  std::vector<std::string> hosts;  // process labels, by pid - 1
  for (const auto* t : tracks)
    if (pid_by_label.emplace(process_label(*t), static_cast<std::int64_t>(hosts.size()) + 1).second)
      hosts.push_back(process_label(*t));
  auto pid_of = [&pid_by_label](const Track& t) { return pid_by_label.at(process_label(t)); };

  std::map<std::int64_t, const SuspectMark*> suspect_of;  // rank -> mark
  std::vector<Mark> marks = in.marks;
  for (const auto& s : in.suspects) {
    bool shown = false;
    for (const auto* t : tracks)
      if (s.rank >= 0 ? t->rank == s.rank : !s.node.empty() && t->host == s.node) {
        suspect_of.emplace(t->rank, &s);
        shown = true;
      }
    if (shown) continue;
    // A suspect without a track (an unreachable node, a rank whose record was not read): a global mark.
    Mark m;
    m.name = s.rank >= 0 ? fmt::format("suspect: rank {} ({})", s.rank, s.reason)
                         : fmt::format("suspect: node {} ({})", s.node, s.reason);
    m.category = "suspect";
    m.args = s.args;
    m.args["suspect"] = true;
    m.args["reason"] = s.reason;
    m.args["rank"] = s.rank;
    m.args["node"] = s.node;
    marks.push_back(std::move(m));
  }

  struct Built {
    const Track* track;
    std::vector<Slice> slices;
    std::int64_t lanes = 1;
  };
  std::vector<Built> built;
  std::map<std::size_t, std::int64_t> window_start;  // mark index -> its window's start (args.window_start_us)
  for (const auto* t : tracks) {
    Built b{t, {}, 1};
    std::int64_t last_activity = t->progress_ns;
    if (t->ring_known) {
      for (const auto& e : t->events) {
        if (e.enter_ns <= 0 || (e.exit_ns != 0 && e.exit_ns < e.enter_ns)) {
          ++stats.dropped;
          continue;
        }
        Slice s;
        s.open = e.exit_ns == 0;
        s.start = e.enter_ns;
        s.end = s.open ? std::max(end_ns, e.enter_ns) : e.exit_ns;
        s.name = std::string(records::collective_type_name(e.fingerprint.type));
        s.args = call_args(e, state_of(e, *t));
        if (e.failed) s.cname = "bad";
        last_activity = std::max(last_activity, s.open ? s.start : s.end);
        b.slices.push_back(std::move(s));
      }
    } else {
      // No ring: the rank's position, from its last progress to the end (a suspect's "stalled" call).
      Slice s;
      s.open = true;
      s.end = end_ns;
      s.start = t->progress_ns > 0 ? std::min(t->progress_ns, end_ns) : end_ns;
      s.name = !t->position.empty() ? t->position
                                    : fmt::format("{} step {} ({})", records::phase_name(t->phase), t->step,
                                                  records::collective_state_name(t->state));
      s.category = "position";
      s.args["phase"] = records::phase_name(t->phase);
      s.args["step"] = t->step;
      s.args["state"] = records::collective_state_name(t->state);
      if (end_ns > 0) b.slices.push_back(std::move(s));
    }
    // Straggler windows: the calls that ended inside a flagged round.
    for (const auto& w : in.windows) {
      if (w.rank != t->rank) continue;
      for (auto& s : b.slices)
        if (!s.open && s.end > w.start_ns && s.end <= w.end_ns) {
          add_category(s, "straggler");
          s.cname = "bad";
          s.args["flagged_round"] = w.round;
        }
      Mark m;
      m.rank = t->rank;
      m.ts_ns = w.end_ns;
      m.name = w.name;
      m.category = "straggler";
      m.args = w.args;
      m.args["round"] = w.round;
      window_start.emplace(marks.size(), w.start_ns);
      marks.push_back(std::move(m));
    }
    // The suspect: its stalled call, or a "stalled" slice from its last activity to the end.
    if (auto it = suspect_of.find(t->rank); it != suspect_of.end()) {
      const SuspectMark& sm = *it->second;
      Slice* stalled = nullptr;
      for (auto& s : b.slices)
        if (sm.stalled && s.open && (!stalled || s.start >= stalled->start)) stalled = &s;
      std::int64_t at = last_activity > 0 && sm.stalled ? last_activity : end_ns;
      if (sm.stalled && !stalled && t->ring_known && end_ns > 0) {
        Slice s;
        s.open = true;
        s.start = std::min(at, end_ns);
        s.end = end_ns;
        s.name = fmt::format("stalled ({})", records::phase_name(t->phase));
        s.category = "stall";
        s.args["phase"] = records::phase_name(t->phase);
        s.args["step"] = t->step;
        s.args["state"] = records::collective_state_name(t->state);
        b.slices.push_back(std::move(s));
        stalled = &b.slices.back();
      }
      if (stalled) {
        add_category(*stalled, "suspect");
        stalled->cname = "terrible";
        stalled->args["suspect"] = true;
        stalled->args["reason"] = sm.reason;
        at = stalled->start;
      }
      Mark m;
      m.rank = t->rank;
      m.ts_ns = at;
      m.name = fmt::format("suspect: {}", sm.reason);
      m.category = "suspect";
      m.args = sm.args;
      m.args["suspect"] = true;
      m.args["reason"] = sm.reason;
      m.args["rank"] = t->rank;
      m.args["node"] = sm.node.empty() ? t->host : sm.node;
      marks.push_back(std::move(m));
    }
    b.lanes = std::max<std::int64_t>(1, assign_lanes(b.slices, stats.dropped));
    built.push_back(std::move(b));
  }

  // The base: the earliest time shown.
  std::int64_t base = std::numeric_limits<std::int64_t>::max();
  for (const auto& b : built)
    for (const auto& s : b.slices) base = std::min(base, s.start);
  for (const auto& m : marks)
    if (m.ts_ns > 0) base = std::min(base, m.ts_ns);
  for (const auto& w : in.windows)
    if (w.start_ns > 0) base = std::min(base, w.start_ns);
  if (end_ns > 0) base = std::min(base, end_ns);
  if (base == std::numeric_limits<std::int64_t>::max()) base = 0;
  auto us = [base](std::int64_t ns) {
    const std::int64_t d = std::max<std::int64_t>(0, ns - base);
    return static_cast<double>(d / 1000) + static_cast<double>(d % 1000) / 1000.0;
  };

  nlohmann::ordered_json events = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const auto pid = static_cast<std::int64_t>(i) + 1;
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", hosts[i]}}}});
    events.push_back(
        {{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", 0}, {"args", {{"sort_index", pid}}}});
  }
  auto tid_of = [](std::int64_t rank, std::int64_t lane) {
    return lane == 0 ? rank : k_lane_tid_base + rank * k_max_lanes + lane;
  };
  for (const auto& b : built) {
    const Track& t = *b.track;
    const auto pid = pid_of(t);
    for (std::int64_t lane = 0; lane < b.lanes; ++lane) {
      std::string name = track_label(t);
      if (lane > 0) name += fmt::format(" lane {}", lane);
      nlohmann::ordered_json args = {{"name", name}};
      events.push_back(
          {{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", tid_of(t.rank, lane)}, {"args", args}});
      events.push_back({{"name", "thread_sort_index"},
                        {"ph", "M"},
                        {"pid", pid},
                        {"tid", tid_of(t.rank, lane)},
                        {"args", {{"sort_index", t.rank * k_max_lanes + lane}}}});
    }
    stats.lanes += b.lanes - 1;
    ++stats.tracks;
  }
  for (const auto& b : built) {
    const Track& t = *b.track;
    const auto pid = pid_of(t);
    for (const auto& s : b.slices) {
      nlohmann::ordered_json e;
      e["name"] = s.name;
      e["cat"] = s.category;
      e["ph"] = "X";
      e["ts"] = us(s.start);
      e["dur"] = us(s.end) - us(s.start);
      e["pid"] = pid;
      e["tid"] = tid_of(t.rank, s.lane);
      if (!s.cname.empty()) e["cname"] = s.cname;
      nlohmann::ordered_json args = s.args;
      args["rank"] = t.rank;
      if (s.open) args["open"] = true;
      e["args"] = std::move(args);
      events.push_back(std::move(e));
      ++stats.slices;
      stats.open_slices += s.open ? 1 : 0;
    }
  }
  for (std::size_t mi = 0; mi < marks.size(); ++mi) {
    Mark& m = marks[mi];
    nlohmann::ordered_json e;
    e["name"] = m.name;
    e["cat"] = m.category;
    e["ph"] = "i";
    e["ts"] = us(m.ts_ns > 0 ? m.ts_ns : end_ns);
    if (auto w = window_start.find(mi); w != window_start.end()) m.args["window_start_us"] = us(w->second);
    const auto it = std::find_if(built.begin(), built.end(), [&](const Built& b) { return b.track->rank == m.rank; });
    if (m.rank >= 0 && it != built.end()) {
      e["s"] = "t";
      e["pid"] = pid_of(*it->track);
      e["tid"] = m.rank;
    } else {
      e["s"] = "g";
      e["pid"] = built.empty() ? 1 : pid_of(*built.front().track);
      e["tid"] = built.empty() ? 0 : built.front().track->rank;
    }
    e["args"] = m.args;
    events.push_back(std::move(e));
    ++stats.marks;
  }

  nlohmann::ordered_json other;
  other["schema"] = k_trace_schema;
  other["version"] = k_trace_version;
  other["job"] = in.job;
  other["command"] = in.command;
  other["base_ns"] = std::to_string(base);
  other["end_us"] = us(end_ns);
  other["ranks"] = stats.tracks;
  other["slices"] = stats.slices;
  other["dropped"] = stats.dropped;
  nlohmann::ordered_json facts = nlohmann::ordered_json::array();  // what each track's source said beyond its calls
  for (const auto& b : built) {
    nlohmann::ordered_json f = {{"rank", b.track->rank},
                                {"pid", pid_of(*b.track)},
                                {"tid", b.track->rank},
                                {"host", b.track->host},
                                {"step", b.track->step},
                                {"phase", records::phase_name(b.track->phase)},
                                {"collective_state", records::collective_state_name(b.track->state)},
                                {"ring", b.track->ring_known},
                                {"lanes", b.lanes}};
    if (b.track->node >= 0) f["node"] = b.track->node;
    for (const auto& [k, v] : b.track->args.items()) f[k] = v;
    facts.push_back(std::move(f));
  }
  other["tracks"] = std::move(facts);
  for (const auto& [k, v] : in.other.items()) other[k] = v;

  nlohmann::ordered_json doc;
  doc["traceEvents"] = std::move(events);
  doc["displayTimeUnit"] = "ms";
  doc["otherData"] = std::move(other);
  if (stats_out) *stats_out = stats;
  return doc;
}

}  // namespace scout::trace
