#include "lib/replay/runner.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "lib/plugin/module_loader.hpp"
#include "lib/replay/torch_abi.hpp"
#include "lib/session/oneshot.hpp"

namespace scout::replay {

namespace {

using Clock = std::chrono::steady_clock;

std::string base_id(const std::string& name) {
  return name.substr(0, name.find('#'));
}

bool applies(const Injection& in, std::int64_t peer, const std::string& recipe) {
  return in.peer == peer && (in.recipe.empty() || in.recipe == recipe || in.recipe == base_id(recipe));
}

struct Module {
  ReplayEnvironmentFn env = nullptr;
  ReplayRunFn run = nullptr;
  ReplayFreeFn free = nullptr;
};

Result<Module> load_module() {
  Module m;
  auto e = torch_module_symbol(k_replay_environment_symbol);
  if (!e) return e.error();
  auto r = torch_module_symbol(k_replay_run_symbol);
  if (!r) return r.error();
  auto f = torch_module_symbol(k_replay_free_symbol);
  if (!f) return f.error();
  m.env = reinterpret_cast<ReplayEnvironmentFn>(*e);
  m.run = reinterpret_cast<ReplayRunFn>(*r);
  m.free = reinterpret_cast<ReplayFreeFn>(*f);
  return m;
}

nlohmann::json specs_json(const std::vector<TensorSpec>& ts) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& t : ts) a.push_back({{"name", t.name}, {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}});
  return a;
}

// Several byte strings as one: u32 count, then u64 length + bytes each.
std::vector<std::uint8_t> join(const std::vector<std::vector<std::uint8_t>>& parts) {
  std::vector<std::uint8_t> out(4);
  const std::uint32_t n = static_cast<std::uint32_t>(parts.size());
  std::memcpy(out.data(), &n, 4);
  for (const auto& p : parts) {
    const std::uint64_t len = p.size();
    const auto* l = reinterpret_cast<const std::uint8_t*>(&len);
    out.insert(out.end(), l, l + 8);
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}

Result<std::vector<std::vector<std::uint8_t>>> unjoin(const std::vector<std::uint8_t>& b) {
  auto bad = input_error("replay broadcast: malformed data from the source peer", "the source peer's blob is damaged",
                         "rerun; if it repeats, replace the source peer");
  if (b.size() < 4) return bad;
  std::uint32_t n = 0;
  std::memcpy(&n, b.data(), 4);
  std::size_t off = 4;
  std::vector<std::vector<std::uint8_t>> out;
  for (std::uint32_t i = 0; i < n; ++i) {
    std::uint64_t len = 0;
    if (b.size() - off < 8) return bad;
    std::memcpy(&len, b.data() + off, 8);
    off += 8;
    if (b.size() - off < len) return bad;
    out.emplace_back(b.begin() + static_cast<std::ptrdiff_t>(off), b.begin() + static_cast<std::ptrdiff_t>(off + len));
    off += len;
  }
  if (off != b.size()) return bad;
  return out;
}

// flock(2) on a file for the scope (blocking; released when the process dies).
class ComputeLock {
 public:
  explicit ComputeLock(const std::string& path) {
    if (path.empty()) return;
    m_fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (m_fd >= 0 && ::flock(m_fd, LOCK_EX) != 0) {
      ::close(m_fd);
      m_fd = -1;
    }
  }
  ~ComputeLock() { release(); }
  void release() {
    if (m_fd >= 0) ::close(m_fd);
    m_fd = -1;
  }
  ComputeLock(const ComputeLock&) = delete;
  ComputeLock& operator=(const ComputeLock&) = delete;

 private:
  int m_fd = -1;
};

}  // namespace

double slow_factor(const std::vector<Injection>& injections, std::int64_t peer, const std::string& recipe) {
  double f = 1;
  for (const auto& in : injections)
    if (in.kind == Injection::Kind::slow && applies(in, peer, recipe)) f = std::max(f, in.factor);
  return f;
}

std::map<Quantity, std::uint64_t> hash_results(std::vector<PackedTensor>& results, const std::string& recipe,
                                               std::int64_t peer, const std::vector<Injection>& injections,
                                               nlohmann::json& injected) {
  std::map<Quantity, std::vector<PackedTensor*>> by_q;
  for (auto& t : results) {
    const auto slash = t.name.find('/');
    auto q = parse_quantity(t.name.substr(0, slash));
    if (q) by_q[*q].push_back(&t);
  }
  for (const auto& in : injections) {
    if (in.kind != Injection::Kind::sdc || !applies(in, peer, recipe)) continue;
    auto it = by_q.find(in.tensor);
    if (it == by_q.end()) continue;
    std::vector<std::vector<std::uint8_t>*> bufs;
    for (auto* t : it->second) bufs.push_back(&t->data);
    auto pos = flip_bit(bufs, in.word, in.bit);
    if (!pos) continue;
    const auto* t = it->second[pos->tensor];
    injected.push_back({{"kind", "sdc"},
                        {"recipe", recipe},
                        {"quantity", quantity_name(in.tensor)},
                        {"tensor", t->name},
                        {"word", pos->word},
                        {"tensor_word", pos->tensor_word},
                        {"bit", pos->bit},
                        {"element", t->dtype == DType::f32 ? nlohmann::json(pos->tensor_word * 2 +
                                                                            static_cast<std::uint64_t>(pos->bit / 32))
                                                           : nlohmann::json()},
                        {"spec", in.text}});
  }
  std::map<Quantity, std::uint64_t> out;
  for (const auto& [q, ts] : by_q) {
    std::vector<const PackedTensor*> cts(ts.begin(), ts.end());
    out[q] = hash_list(cts);
  }
  return out;
}

Result<std::string> probe_module_device_isolated(const std::string& device, std::int64_t threads,
                                                 std::chrono::milliseconds timeout) {
  int fds[2];
  if (pipe(fds) != 0) return unavailable_error("cannot create a pipe", std::strerror(errno), "check the fd limit");
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return unavailable_error("cannot fork the device probe", std::strerror(errno), "check the process limit");
  }
  if (pid == 0) {
    close(fds[0]);
    auto r = probe_module_device(device, threads);
    const std::string out = r ? "0" + *r : "1" + r.error().message();
    std::size_t done = 0;
    while (done < out.size()) {
      const ssize_t n = write(fds[1], out.data() + done, out.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000))) < 0 && errno != EINTR) break;
    if (!(p.revents & (POLLIN | POLLHUP))) continue;
    char buf[4096];
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, static_cast<std::size_t>(n));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    return unavailable_error(fmt::format("the LibTorch module did not set up {} within {} s", device,
                                         std::chrono::duration_cast<std::chrono::seconds>(timeout).count()),
                             "the device probe was killed", "check the GPU with nvidia-smi");
  if (got.empty())
    return unavailable_error(fmt::format("the LibTorch module's device probe for {} died", device),
                             WIFSIGNALED(status) ? fmt::format("signal {}", WTERMSIG(status)) : "it wrote nothing",
                             "check the GPU and driver (nvidia-smi), or use --device cpu");
  if (got[0] == '0') return got.substr(1);
  return unavailable_error(got.substr(1));
}

Result<std::string> probe_module_device(const std::string& device, std::int64_t threads) {
  auto mod = load_module();
  if (!mod) return mod.error();
  char msg[512] = {};
  ScoutReplayBuffer eb{nullptr, 0};
  if (mod->env(static_cast<int>(threads), device.c_str(), &eb, msg, sizeof msg) != 0)
    return unavailable_error(fmt::format("the LibTorch module cannot set up {}: {}", device, msg));
  std::string env(reinterpret_cast<char*>(eb.data), eb.size);
  mod->free(&eb);
  return env;
}

Result<PeerRunResult> run_peer(transport::KeyValueStore& store, const PeerRunOptions& o) {
  PeerRunResult res;
  res.mine.peer = o.peer;
  res.mine.rank = o.rank >= 0 ? o.rank : o.peer;
  res.mine.node = o.node;
  auto mod = load_module();
  if (!mod) return mod.error();
  char msg[512] = {};
  ScoutReplayBuffer eb{nullptr, 0};
  if (mod->env(o.threads, o.device.c_str(), &eb, msg, sizeof msg) != 0)
    return unavailable_error(fmt::format("replay: the LibTorch module cannot set up {}: {}", o.device, msg), {},
                             "check --device and --threads");
  nlohmann::json env = nlohmann::json::parse(std::string(reinterpret_cast<char*>(eb.data), eb.size), nullptr, false);
  mod->free(&eb);
  for (const auto& in : o.injections)
    if (in.kind == Injection::Kind::contract && in.peer == o.peer) env["threads"] = env.value("threads", 1) + 1;

  std::int64_t step = 0;
  auto gather = [&](const std::vector<std::uint8_t>& blob) -> Result<session::OneShotResult> {
    session::OneShotOptions go;
    go.key_namespace = fmt::format("{}/s{}", o.key_namespace, step++);
    go.member = o.peer;
    go.members = o.peers;
    go.timeout = o.timeout;
    go.listen_address = o.listen_address;
    auto g = session::gather_once(store, go, blob);
    if (g)
      for (const auto& n : g->notes) res.notes.push_back(n);
    return g;
  };

  // 1. Broadcast of the source's inputs and RNG state.
  std::vector<std::uint8_t> mine;
  if (o.peer == o.source) {
    std::vector<std::vector<std::uint8_t>> parts;
    for (const auto& r : o.recipes)
      parts.push_back(encode_pack(r.module_path.empty() ? generate_inputs(r.spec, o.seed) : r.exported_inputs));
    mine = join(parts);
  }
  auto b = gather(mine);
  if (!b) return b.error();
  std::vector<std::vector<std::uint8_t>> inputs;
  std::string broadcast_error;
  if (!b->blobs[static_cast<std::size_t>(o.source)]) {
    broadcast_error = "the source peer's inputs never arrived";
  } else {
    auto u = unjoin(*b->blobs[static_cast<std::size_t>(o.source)]);
    if (!u || u->size() != o.recipes.size())
      broadcast_error = u ? "the source peer sent inputs for another recipe list" : u.error().message();
    else
      inputs = std::move(*u);
  }

  for (std::size_t ri = 0; ri < o.recipes.size(); ++ri) {
    const auto& r = o.recipes[ri];
    RecipeEvidence ev;
    ev.recipe = r.name;
    ev.contract = env;
    ev.contract["recipe"] = r.spec.id;
    ev.contract["size"] = r.spec.size;
    ev.contract["config"] = r.spec.config;
    ev.contract["inputs"] = specs_json(r.spec.inputs);
    ev.contract["params"] = specs_json(r.spec.params);
    ev.contract["quantities"] = nlohmann::json::array();
    for (auto q : r.spec.quantities) ev.contract["quantities"].push_back(quantity_name(q));
    std::vector<PackedTensor> in_tensors;
    if (broadcast_error.empty()) {
      auto d = decode_pack(inputs[ri]);
      if (!d)
        ev.error = d.error().message();
      else
        in_tensors = std::move(*d);
      std::vector<const PackedTensor*> ptrs;
      for (const auto& t : in_tensors) ptrs.push_back(&t);
      ev.input_hash = hash_list(ptrs);
    } else {
      ev.error = broadcast_error;
    }
    // 2. Barrier, then the timed parameter gather.
    auto bar = gather({});
    if (!bar) return bar.error();
    const auto t0 = Clock::now();
    auto pg = gather(r.module_path.empty() ? param_shard(r.spec, o.seed, o.peer, o.peers)
                                           : tensors_shard(r.exported_params, o.peer, o.peers));
    if (!pg) return pg.error();
    ev.gather_s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::vector<std::vector<std::uint8_t>> shards;
    for (const auto& s : pg->blobs) {
      if (!s) {
        if (ev.error.empty()) ev.error = "a peer's parameter shard never arrived";
        break;
      }
      shards.push_back(*s);
    }
    std::vector<PackedTensor> params;
    if (ev.error.empty()) {
      auto a = assemble_params(r.spec, shards);
      if (!a)
        ev.error = a.error().message();
      else
        params = std::move(*a);
    }
    if (ev.error.empty()) {
      const auto in_bytes = encode_pack(in_tensors), par_bytes = encode_pack(params);
      const double slow = slow_factor(o.injections, o.peer, r.name);
      if (slow > 1) ev.injected.push_back({{"kind", "slow"}, {"factor", slow}});
      nlohmann::json req = {{"recipe", r.spec.id},
                            {"config", r.spec.config},
                            {"repeat", o.repeat},
                            {"slow_factor", slow},
                            {"device", o.device}};
      if (!r.module_path.empty()) req["module"] = r.module_path;
      const std::string reqs = req.dump();
      ScoutReplayBuffer rb{nullptr, 0}, ib{nullptr, 0};
      ComputeLock lock(o.compute_lock);
      if (mod->run(reqs.c_str(), in_bytes.data(), in_bytes.size(), par_bytes.data(), par_bytes.size(), &rb, &ib, msg,
                   sizeof msg) != 0) {
        lock.release();
        ev.error = fmt::format("module: {}", msg);
      } else {
        lock.release();
        auto results = decode_pack(std::span(rb.data, rb.size));
        auto info = nlohmann::json::parse(std::string(reinterpret_cast<char*>(ib.data), ib.size), nullptr, false);
        mod->free(&rb);
        mod->free(&ib);
        if (!results) {
          ev.error = results.error().message();
        } else {
          ev.forward_s = info.value("forward_s", 0.0);
          ev.backward_s = info.value("backward_s", 0.0);
          if (!info.value("repeats_agree", true))
            res.notes.push_back(
                fmt::format("{}: repeats on this peer gave different results (nondeterminism)", r.name));
          ev.hashes = hash_results(*results, r.name, o.peer, o.injections, ev.injected);
        }
      }
    }
    res.mine.recipes.push_back(std::move(ev));
  }

  // 3. Everyone's evidence.
  const std::string js = to_json(res.mine).dump();
  auto all = gather(std::vector<std::uint8_t>(js.begin(), js.end()));
  if (!all) return all.error();
  for (std::size_t i = 0; i < all->blobs.size(); ++i) {
    if (!all->blobs[i]) {
      res.all.emplace_back(std::nullopt);
      continue;
    }
    auto j = nlohmann::json::parse(all->blobs[i]->begin(), all->blobs[i]->end(), nullptr, false);
    auto e = peer_evidence_from_json(j);
    if (!e || e->peer != static_cast<std::int64_t>(i)) {
      res.notes.push_back(fmt::format("peer {}: {}", i, e ? "evidence names another peer" : e.error().message()));
      res.all.emplace_back(std::nullopt);
    } else {
      res.all.emplace_back(std::move(*e));
    }
  }
  return res;
}

}  // namespace scout::replay
