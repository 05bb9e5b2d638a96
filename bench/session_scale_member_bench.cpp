// One observer of the session scale simulation (bench/session_scale.py runs N
// of them on loopback over one FileStore directory). Synthetic records: every
// node publishes `ranks` fixed-size positions; `outliers` nodes (chosen from
// the seed) have one rank at another position. Modes:
//   flat-full  today's probe: one flat session, every node's full evidence
//              (ranks x evidence-bytes) all-gathered to every observer
//   flat       one flat session, two-phase: positions, then details of the
//              selected nodes only
//   hier       two-level Hierarchy (groups of --group-size), two-phase
//   hier-stall the same in a stall, as probe-hang gathers one (lib/hang/position.hpp):
//              positions; every node's compact evidence (ranks x compact-bytes);
//              then a second two-phase gather of the full evidence (ranks x
//              evidence-bytes) of the nodes holding a distinct ring (the outliers)
// Prints one JSON line: formation time, time per probe, payload bytes in/out
// per probe (session counters), bytes written to sockets (/proc/self/io
// wchar: Gloo writes with writev, which it counts; its reads use recv, which
// it does not), store operations while forming, Gloo pairs and open sockets.
//
//   session_scale_member_bench --store DIR --member I --members N --mode M [--group-size G]
//       [--ranks R] [--position-bytes P] [--evidence-bytes E] [--details-bytes D] [--compact-bytes C]
//       [--outliers K] [--probes P] [--timeout-ms T] [--seed S]
#include <dirent.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>

#include "lib/session/hierarchy.hpp"
#include "lib/session/session.hpp"
#include "lib/transport/auth.hpp"

namespace {

using namespace scout;
using namespace scout::session;
using Clock = std::chrono::steady_clock;

struct Args {
  std::string store, mode = "hier";
  std::int64_t member = 0, members = 1, group_size = 16, ranks = 8, position_bytes = 32, evidence_bytes = 600,
               details_bytes = 4096, compact_bytes = 240, outliers = 1, probes = 5, timeout_ms = 60000;
  std::uint64_t seed = 1;
};

std::pair<std::uint64_t, std::uint64_t> socket_io() {
  std::ifstream in("/proc/self/io");
  std::string k;
  std::uint64_t v = 0, r = 0, w = 0;
  while (in >> k >> v) {
    if (k == "rchar:") r = v;
    if (k == "wchar:") w = v;
  }
  return {r, w};
}

int open_sockets() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  while (auto* e = readdir(d)) {
    char link[256] = {};
    std::string p = std::string("/proc/self/fd/") + e->d_name;
    if (readlink(p.c_str(), link, sizeof link - 1) > 0 && std::strncmp(link, "socket:", 7) == 0) ++n;
  }
  closedir(d);
  return n;
}

std::set<std::int64_t> outlier_nodes(const Args& a) {
  std::mt19937_64 rng(a.seed);
  std::set<std::int64_t> out;
  while (static_cast<std::int64_t>(out.size()) < std::min(a.outliers, a.members))
    out.insert(static_cast<std::int64_t>(rng() % a.members));
  return out;
}

Bytes position_of(const Args& a, std::int64_t node, bool odd) {
  Bytes p(static_cast<std::size_t>(a.ranks * a.position_bytes), 0);
  for (std::int64_t r = 0; r < a.ranks; ++r) {
    auto* slot = p.data() + r * a.position_bytes;
    std::uint64_t step = 1000, seq = 77;
    if (odd && r == node % a.ranks) seq = 76;  // one rank is one call behind
    std::memcpy(slot, &step, 8);
    std::memcpy(slot + 8, &seq, 8);
  }
  return p;
}

std::vector<std::int64_t> select_odd(const PositionTable& t) {
  std::map<Bytes, std::int64_t> count;
  for (const auto& p : t.positions)
    if (p) ++count[*p];
  Bytes majority;
  std::int64_t best = -1;
  for (const auto& [b, c] : count)
    if (c > best) best = c, majority = b;
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < t.positions.size(); ++i)
    if (t.positions[i] && *t.positions[i] != majority) out.push_back(static_cast<std::int64_t>(i));
  return out;
}

Bytes decide_ids(const std::vector<std::int64_t>& ids) {
  return encode_ids(ids);
}

// Counts what this observer asks of the rendezvous store (the load on one shared store).
class CountingStore final : public transport::KeyValueStore {
 public:
  explicit CountingStore(transport::KeyValueStore& inner) : m_inner(inner) {}
  Status set(const std::string& k, const std::vector<char>& v) override {
    ++ops;
    return m_inner.set(k, v);
  }
  Result<std::vector<char>> get(const std::string& k, std::chrono::milliseconds t) override {
    ++ops;
    return m_inner.get(k, t);
  }
  Result<bool> check(const std::string& k) override {
    ++ops;
    return m_inner.check(k);
  }
  Result<std::int64_t> add(const std::string& k, std::int64_t d, std::chrono::milliseconds t) override {
    ++ops;
    return m_inner.add(k, d, t);
  }
  void keep(const std::string& k) override { m_inner.keep(k); }
  void cleanup() override { m_inner.cleanup(); }
  std::string describe() const override { return m_inner.describe(); }
  std::uint64_t ops = 0;

 private:
  transport::KeyValueStore& m_inner;
};

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--store")
      a.store = v;
    else if (k == "--mode")
      a.mode = v;
    else if (k == "--member")
      a.member = std::stoll(v);
    else if (k == "--members")
      a.members = std::stoll(v);
    else if (k == "--group-size")
      a.group_size = std::stoll(v);
    else if (k == "--ranks")
      a.ranks = std::stoll(v);
    else if (k == "--position-bytes")
      a.position_bytes = std::stoll(v);
    else if (k == "--evidence-bytes")
      a.evidence_bytes = std::stoll(v);
    else if (k == "--details-bytes")
      a.details_bytes = std::stoll(v);
    else if (k == "--compact-bytes")
      a.compact_bytes = std::stoll(v);
    else if (k == "--outliers")
      a.outliers = std::stoll(v);
    else if (k == "--probes")
      a.probes = std::stoll(v);
    else if (k == "--timeout-ms")
      a.timeout_ms = std::stoll(v);
    else if (k == "--seed")
      a.seed = std::stoull(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (a.store.empty() || a.members < 1 || a.position_bytes < 16) {
    std::fprintf(stderr, "usage: see the comment at the top of bench/session_scale_member_bench.cpp\n");
    return 2;
  }
  auto uri = transport::parse_store_uri("file://" + a.store);
  if (!uri) return 2;
  auto real_store = transport::open_store(*uri, false, std::chrono::milliseconds(a.timeout_ms));
  if (!real_store) {
    std::fprintf(stderr, "%s\n", real_store.error().message().c_str());
    return 5;
  }
  CountingStore counting(**real_store);
  transport::KeyValueStore* store_ptr = &counting;
  auto* store = &store_ptr;
  const auto token = transport::JobToken::from_secret("scale", "0", "bench-secret", true);
  SessionOptions so;
  so.key_namespace = token.key_namespace();
  so.member = a.member;
  so.id_space = a.members;
  so.timeout = std::chrono::milliseconds(a.timeout_ms);
  so.listen_address = "127.0.0.1";
  so.signer = &token;

  const auto odd = outlier_nodes(a);
  const bool i_am_odd = odd.count(a.member) > 0;
  const std::vector<std::int64_t> want(odd.begin(), odd.end());
  const auto t0 = Clock::now();
  std::unique_ptr<Session> flat;
  std::unique_ptr<Hierarchy> hier;
  const bool stall = a.mode == "hier-stall";
  if (a.mode == "hier" || stall) {
    HierarchyOptions ho;
    ho.member = so;
    ho.group_size = a.group_size;
    auto h = Hierarchy::open(**store, ho);
    if (!h) {
      std::fprintf(stderr, "%s\n", h.error().message().c_str());
      return 5;
    }
    hier = std::move(*h);
  } else {
    auto s = Session::open(**store, so);
    if (!s) {
      std::fprintf(stderr, "%s\n", s.error().message().c_str());
      return 5;
    }
    flat = std::move(*s);
  }
  const double form_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const std::uint64_t store_ops = counting.ops;
  const transport::TrafficCounters& traffic = hier ? hier->traffic() : flat->traffic();
  const auto after_form = traffic;

  OpOptions sync;
  sync.name = "sync";
  sync.timeout = std::chrono::milliseconds(a.timeout_ms);
  std::vector<double> probe_s;
  std::uint64_t in = 0, out = 0, io_w = 0, coll = 0;
  bool right = true;
  for (std::int64_t p = 0; p < a.probes; ++p) {
    // Start every probe together (the barrier is not counted).
    Status synced = hier ? hier->group().barrier(sync) : flat->barrier(sync);
    if (hier && hier->leaders()) synced = hier->leaders()->barrier(sync);
    if (hier) synced = hier->group().barrier(sync);
    if (!synced) {
      std::fprintf(stderr, "%s\n", synced.error().message().c_str());
      return 5;
    }
    const auto before = traffic;
    const auto w0 = socket_io().second;
    const auto start = Clock::now();
    Bytes decision;
    if (a.mode == "flat-full") {
      OpOptions op;
      op.name = "evidence";
      op.timeout = std::chrono::milliseconds(a.timeout_ms);
      Bytes evidence = position_of(a, a.member, i_am_odd);
      evidence.resize(static_cast<std::size_t>(a.ranks * a.evidence_bytes), 0x5a);
      auto g = flat->all_gather(evidence, op);
      if (!g) {
        std::fprintf(stderr, "%s\n", g.error().message().c_str());
        return 5;
      }
      PositionTable t;
      t.position_bytes = static_cast<std::size_t>(a.ranks * a.position_bytes);
      t.positions.assign(g->from.size(), std::nullopt);
      for (std::size_t i = 0; i < g->from.size(); ++i)
        if (g->from[i].state == Contribution::State::ok)
          t.positions[i] =
              Bytes(g->from[i].data.begin(), g->from[i].data.begin() + static_cast<std::ptrdiff_t>(t.position_bytes));
      decision = decide_ids(select_odd(t));
    } else {
      TwoPhaseRequest rq;
      rq.name = "hang";
      rq.position_bytes = static_cast<std::size_t>(a.ranks * a.position_bytes);
      rq.position = position_of(a, a.member, i_am_odd);
      rq.details = [&] { return Bytes(static_cast<std::size_t>(a.ranks * a.details_bytes), 0x3c); };
      rq.select = select_odd;
      rq.decide = [](const PositionTable&, const std::map<std::int64_t, Bytes>& details) {
        std::vector<std::int64_t> ids;
        for (const auto& [id, b] : details) ids.push_back(id);
        return decide_ids(ids);
      };
      rq.op.timeout = std::chrono::milliseconds(a.timeout_ms);
      if (stall) {
        // Every node's compact evidence, then the rings of the selected nodes.
        rq.details = [&] { return Bytes(static_cast<std::size_t>(a.ranks * a.compact_bytes), 0x3c); };
        rq.select = [&a](const PositionTable&) {
          std::vector<std::int64_t> all(static_cast<std::size_t>(a.members));
          for (std::int64_t i = 0; i < a.members; ++i) all[static_cast<std::size_t>(i)] = i;
          return all;
        };
        rq.decide = [](const PositionTable&, const std::map<std::int64_t, Bytes>&) { return Bytes{1}; };
      }
      auto r = hier ? hier->two_phase(rq) : flat->two_phase(rq);
      if (!r) {
        std::fprintf(stderr, "%s\n", r.error().message().c_str());
        return 5;
      }
      decision = r->decision;
      if (stall) {
        TwoPhaseRequest rings;
        rings.name = "rings";
        rings.position_bytes = 1;
        rings.position = Bytes{0};
        rings.details = [&] { return Bytes(static_cast<std::size_t>(a.ranks * a.evidence_bytes), 0x5a); };
        rings.select = [&want](const PositionTable&) { return want; };
        rings.decide = [](const PositionTable&, const std::map<std::int64_t, Bytes>& details) {
          std::vector<std::int64_t> ids;
          for (const auto& [id, b] : details) ids.push_back(id);
          return decide_ids(ids);
        };
        rings.op.timeout = rq.op.timeout;
        auto r2 = hier->two_phase(rings);
        if (!r2) {
          std::fprintf(stderr, "%s\n", r2.error().message().c_str());
          return 5;
        }
        decision = r2->decision;
      }
    }
    probe_s.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    const auto w1 = socket_io().second;
    in += traffic.bytes_in - before.bytes_in;
    out += traffic.bytes_out - before.bytes_out;
    coll += traffic.collectives - before.collectives;
    io_w += w1 - w0;
    right = right && decision == decide_ids(want);
  }
  const int sockets = open_sockets();
  nlohmann::json j = {{"member", a.member},
                      {"members", a.members},
                      {"mode", a.mode},
                      {"leads", hier ? hier->leads() : a.member == 0},
                      {"form_s", form_s},
                      {"probe_s", probe_s},
                      {"bytes_in", in / std::max<std::int64_t>(1, a.probes)},
                      {"bytes_out", out / std::max<std::int64_t>(1, a.probes)},
                      {"store_ops", store_ops},
                      {"socket_write", io_w / std::max<std::int64_t>(1, a.probes)},
                      {"collectives", coll / std::max<std::int64_t>(1, a.probes)},
                      {"connections", after_form.connections},
                      {"sockets", sockets},
                      {"right", right}};
  if (hier)
    hier->close();
  else
    flat->close();
  std::printf("%s\n", j.dump().c_str());
  return right ? 0 : 1;
}
