// scout's trainer-side collective hooks for torch >= 2.15 (libscout_torch_hooks.so).
//
// torch 2.15's ProcessGroup fires pre/post hooks from the c10d dispatcher
// kernels (Ops.cpp), so every collective issued through a process group is
// seen here whatever issued it: eager torch.distributed calls (all argument
// forms), point-to-point ops and batch_isend_irecv, _coalescing_manager
// batches, DDP's Reducer (gradient all-reduce, buffer broadcast), FSDP2,
// functional collectives (_c10d_functional ops, DTensor), pipelining
// schedules and torch.compile'd graphs (they dispatch the same ops). The
// hooks call the trainer's libscout_publisher.so through function pointers
// handed over by scout_publisher (Python), so this library links LibTorch only
// and is loaded into the trainer process beside the torch it was built for.
//
// Exit time is completion, never issue: a Work's future (gloo completes it when
// the operation finished) or, where the backend supports them (NCCL's
// watchdog), backend completion hooks keyed by Work::getCompletionKey(). A
// failed operation is published as "failed" (scout_hooks_set_fail), never as
// done; a timed-out one whose future never completes stays "inside". A Work with neither (gloo's
// point-to-point works, some coalesced batches) is watched: gloo marks such a Work completed when the
// trainer's wait() on it returns, so one watcher thread polls Work::isCompleted() every 2 ms while any is
// outstanding and publishes the exit then (done, or failed when the Work holds an exception; counted as
// `exits_waited`; the time is within the poll period of the wait's return). Some Works never report
// completion (gloo's reduce_scatter_tensor: no future, isCompleted() false even after wait()): a watched
// Work is closed when a later call of its process group completes (`exits_by_order`; the time is then
// an upper bound). A Work never waited and never followed stays "inside" (at most 4096 watched; beyond,
// counted as `exits_at_issue` and left inside). An exit taken at
// issue would say "done" of a rank still blocked in its wait(), and the hang decision would read that
// rank as outside every call, silent, and name it for its peers' wait (a pipeline stage waiting in a
// send); publishing nothing, as before, left the rank "inside" for good after its first send or recv.
//
// Nothing here throws across the C ABI; a hook never throws into torch.
#include <torch/version.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>
#include <torch/csrc/distributed/c10d/Hooks.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <unordered_map>
#include <vector>

#include "lib/records/layout.hpp"

namespace {

using EnterFn = int (*)(void*, std::uint64_t, std::uint8_t, std::uint8_t, std::uint64_t, std::int64_t, std::uint64_t,
                        std::uint64_t*);
using ExitFn = int (*)(void*, std::uint64_t);
using ExitKindFn = int (*)(void*, std::uint64_t, std::uint8_t);  // scout_collective_exit_kind

// The kind of an exit time (enum scout_exit_kind, integrations/publisher/scout_publisher.h).
enum : std::uint8_t { k_exit_completed = 2, k_exit_waited = 3, k_exit_ordered = 4 };

// scout's collective codes (integrations/publisher/scout_publisher.h).
enum : std::uint8_t {
  k_all_reduce = 1,
  k_all_gather = 2,
  k_all_gather_into_tensor = 3,
  k_reduce_scatter = 4,
  k_reduce_scatter_tensor = 5,
  k_all_to_all = 6,
  k_all_to_all_single = 7,
  k_broadcast = 8,
  k_reduce = 9,
  k_gather = 10,
  k_scatter = 11,
  k_barrier = 12,
  k_send = 13,
  k_recv = 14,
  k_other = 15,
};
constexpr std::size_t k_kinds = 16;
// Ordered by id: scout's hook fires before hooks with larger ids (the
// publisher's testing hook uses a larger one).
constexpr std::int64_t k_hook_id = 0x5c0;

struct Sink {
  std::atomic<void*> record{nullptr};
  std::atomic<EnterFn> enter{nullptr};
  std::atomic<ExitFn> exit{nullptr};
  std::atomic<ExitFn> fail{nullptr};           // scout_collective_fail: same signature as exit
  std::atomic<ExitKindFn> exit_kind{nullptr};  // scout_collective_exit_kind, when the publisher has it
};
Sink g_sink;

struct Stats {
  std::array<std::atomic<std::uint64_t>, k_kinds> enters{};
  std::atomic<std::uint64_t> exits_completed{0};
  std::atomic<std::uint64_t> exits_at_issue{0};
  std::atomic<std::uint64_t> failed{0};
  std::atomic<std::uint64_t> hook_errors{0};
  std::atomic<std::uint64_t> exits_waited{0};
  std::atomic<std::uint64_t> exits_by_order{0};
};
Stats g_stats;

std::mutex g_groups_mutex;

// One call counter per scout group id, shared by every process group with that id: process groups over
// the same members ("twins": DeepSpeed's pipeline grid makes a group over the whole world beside the
// default one, and a model group over a pipeline group's members) get the same id (group_id over the
// members), so they count their calls together, and (gid, seq) names one call on every member as long
// as the members issue their calls on the twins in the same order (blocking calls must: a member that
// enters another twin first waits for its peers there, and they for it; see docs/torch.md). The same
// for point-to-point pairs: a pair's id ([lo, hi, -2]) is the same in every group holding both ranks.
// torch 1.13's wrappers count the same way (_torch.py: _next_seq(gid)). Counters live for the process's
// life (the hooks point at them), created under g_groups_mutex.
std::unordered_map<std::uint64_t, std::unique_ptr<std::atomic<std::uint64_t>>> g_counters;

std::atomic<std::uint64_t>* counter_of(std::uint64_t gid) {  // g_groups_mutex held
  auto& c = g_counters[gid];
  if (!c) c = std::make_unique<std::atomic<std::uint64_t>>(0);
  return c.get();
}

struct GroupState {
  std::string name;
  std::uint64_t gid = 0;
  std::vector<std::int64_t> ranks;  // global rank of each group rank
  std::int64_t my_group_rank = -1;
  std::atomic<std::uint64_t>* seq = nullptr;         // the counter of gid (g_counters)
  std::vector<std::uint64_t> p2p_gid;                // per peer group rank
  std::vector<std::atomic<std::uint64_t>*> p2p_seq;  // per peer group rank: the counter of its pair id
  bool completion_hooks = false;
  std::mutex pending_mutex;  // completion key -> token (completion hooks only)
  std::unordered_map<std::uint64_t, std::uint64_t> pending;
};

std::unordered_map<std::string, std::shared_ptr<GroupState>> g_groups;

std::uint8_t scout_type(c10d::HookOpName n) {
  using H = c10d::HookOpName;
  switch (n) {
    case H::SEND:
      return k_send;
    case H::RECV:
      return k_recv;
    case H::BROADCAST:
      return k_broadcast;
    case H::ALLREDUCE:
      return k_all_reduce;
    case H::REDUCE:
      return k_reduce;
    case H::ALLGATHER:
      return k_all_gather;
    case H::REDUCE_SCATTER:
      return k_reduce_scatter;
    case H::ALLTOALL:
      return k_all_to_all;
    case H::BARRIER:
      return k_barrier;
    case H::SCATTER:
      return k_scatter;
    case H::GATHER:
      return k_gather;
    case H::ALLREDUCE_COALESCED:
      return k_all_reduce;
    case H::ALLGATHER_BASE:
      return k_all_gather_into_tensor;
    case H::ALLGATHER_COALESCED:
      return k_all_gather;
    case H::ALLGATHER_INTO_TENSOR_COALESCED:
      return k_all_gather_into_tensor;
    case H::REDUCE_SCATTER_BASE:
      return k_reduce_scatter_tensor;
    case H::REDUCE_SCATTER_TENSOR_COALESCED:
      return k_reduce_scatter_tensor;
    case H::ALLTOALL_BASE:
      return k_all_to_all_single;
    case H::SPLIT:
    case H::NEW_WINDOW:
      return 0;  // not a collective on the data path
    default:
      return k_other;
  }
}

std::uint8_t scout_dtype(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Double:
      return 1;
    case c10::ScalarType::Float:
      return 2;
    case c10::ScalarType::Half:
      return 3;
    case c10::ScalarType::BFloat16:
      return 4;
    case c10::ScalarType::Long:
      return 5;
    case c10::ScalarType::Int:
      return 6;
    case c10::ScalarType::Short:
      return 7;
    case c10::ScalarType::Char:
      return 8;
    case c10::ScalarType::Byte:
      return 9;
    case c10::ScalarType::Bool:
      return 10;
    default:
      return 0;
  }
}

// The token of an entered op, from its pre-hook to its post-hook (the kernel
// fires both on one thread, back to back around the backend call).
struct Open {
  const GroupState* group = nullptr;
  std::int64_t op_id = -1;
  std::uint64_t token = 0;
  bool collective = false;  // every member takes part (not send, recv or a batch of unknown kind)
};
thread_local std::array<Open, 8> t_open{};
thread_local std::size_t t_open_n = 0;

// `completed`: the backend said the op finished, so its exit is published; otherwise only issue is
// known, and nothing is published (see the top of this file).
void publish_exit(std::uint64_t token, bool completed, std::uint8_t kind = k_exit_completed) {
  ExitFn ex = g_sink.exit.load(std::memory_order_acquire);
  void* rec = g_sink.record.load(std::memory_order_acquire);
  if (ex == nullptr || rec == nullptr || token == 0) return;
  if (!completed) {
    g_stats.exits_at_issue.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (ExitKindFn with_kind = g_sink.exit_kind.load(std::memory_order_acquire); with_kind != nullptr)
    with_kind(rec, token, kind);
  else
    ex(rec, token);
  g_stats.exits_completed.fetch_add(1, std::memory_order_relaxed);
}

void publish_fail(std::uint64_t token) {
  g_stats.failed.fetch_add(1, std::memory_order_relaxed);
  ExitFn fail = g_sink.fail.load(std::memory_order_acquire);
  void* rec = g_sink.record.load(std::memory_order_acquire);
  if (fail != nullptr && rec != nullptr) fail(rec, token);
}

// Works with no completion source, watched until the trainer's wait() on them
// returns (see the top of this file). Allocated once and never destroyed: the
// watcher thread may still run while the process's statics are torn down.
struct Watched {
  c10::intrusive_ptr<c10d::Work> work;
  std::uint64_t token = 0;
  const GroupState* group = nullptr;
  bool collective = false;  // may be closed by a later call of its group (close_earlier)
};
struct Watcher {
  std::mutex mutex;
  std::condition_variable wake;
  std::vector<Watched> works;
  bool started = false;
};
constexpr std::size_t k_max_watched = 4096;
constexpr auto k_watch_period = std::chrono::milliseconds(2);
Watcher& watcher() {
  static Watcher* w = new Watcher();
  return *w;
}

// A later call of `group` (token `later`) completed: every watched collective Work
// of that group issued before it is closed too (never a send or recv: a later call
// completing does not mean a peer took the message). Some Works never report completion (gloo's
// reduce_scatter_tensor: no future, isCompleted() false even after wait()); a later
// call of the same process group completing means every member got past them.
void close_earlier(const GroupState* group, std::uint64_t later) {
  std::vector<Watched> closed;
  {
    Watcher& w = watcher();
    std::lock_guard lock(w.mutex);
    for (std::size_t i = 0; i < w.works.size();) {
      if (w.works[i].collective && w.works[i].group == group && w.works[i].token < later) {
        closed.push_back(std::move(w.works[i]));
        w.works[i] = std::move(w.works.back());
        w.works.pop_back();
      } else {
        ++i;
      }
    }
  }
  for (const auto& c : closed) {
    g_stats.exits_by_order.fetch_add(1, std::memory_order_relaxed);
    publish_exit(c.token, true, k_exit_ordered);
  }
}

void watch_loop() {
  Watcher& w = watcher();
  std::vector<Watched> finished;
  for (;;) {
    {
      std::unique_lock lock(w.mutex);
      if (w.works.empty()) w.wake.wait(lock, [&w] { return !w.works.empty(); });
      for (std::size_t i = 0; i < w.works.size();) {
        bool completed = true;
        try {
          completed = w.works[i].work->isCompleted();
        } catch (...) {
        }
        if (completed) {
          finished.push_back(std::move(w.works[i]));
          w.works[i] = std::move(w.works.back());
          w.works.pop_back();
        } else {
          ++i;
        }
      }
    }
    for (auto& f : finished) {
      bool ok = true;
      try {
        ok = f.work->isSuccess();
      } catch (...) {
        ok = false;
      }
      g_stats.exits_waited.fetch_add(1, std::memory_order_relaxed);
      if (ok)
        publish_exit(f.token, true, k_exit_waited);
      else
        publish_fail(f.token);
    }
    for (const auto& f : finished) close_earlier(f.group, f.token);
    finished.clear();  // drops the Work references outside the lock
    std::this_thread::sleep_for(k_watch_period);
  }
}

// Watches `work` until it completes; false when the watch list is full (or no thread can start).
bool watch(const c10::intrusive_ptr<c10d::Work>& work, std::uint64_t token, const GroupState* group, bool collective) {
  Watcher& w = watcher();
  std::lock_guard lock(w.mutex);
  if (w.works.size() >= k_max_watched) return false;
  if (!w.started) {
    try {
      std::thread(watch_loop).detach();
    } catch (...) {
      return false;
    }
    w.started = true;
  }
  w.works.push_back({work, token, group, collective});
  w.wake.notify_one();
  return true;
}

void pre_hook(GroupState& g, const c10d::PreHookArgs& a) noexcept {
  void* rec = g_sink.record.load(std::memory_order_acquire);
  EnterFn en = g_sink.enter.load(std::memory_order_acquire);
  if (rec == nullptr || en == nullptr) return;
  std::uint8_t type = scout_type(a.name);
  if (type == 0) return;
  const auto& ts = a.input_tensors.empty() ? a.output_tensors : a.input_tensors;
  std::uint64_t count = 0;
  std::uint8_t dtype = 0;
  for (const auto& t : ts) {
    if (!t.defined()) continue;
    count += static_cast<std::uint64_t>(t.numel());
    if (dtype == 0) dtype = scout_dtype(t.scalar_type());
  }
  std::uint64_t gid = g.gid, seq = 0;
  std::int64_t root = -1;
  const auto n = static_cast<std::int64_t>(g.ranks.size());
  if (type == k_send || type == k_recv) {
    // Point-to-point: its own pair "group" and a per-pair sequence, so that
    // ranks outside the pair keep the same sequence in the process group.
    if (a.root >= 0 && a.root < n) {
      gid = g.p2p_gid[a.root];
      seq = g.p2p_seq[a.root]->fetch_add(1, std::memory_order_relaxed) + 1;
      root = g.ranks[a.root];
    } else {
      seq = g.seq->fetch_add(1, std::memory_order_relaxed) + 1;
    }
  } else {
    seq = g.seq->fetch_add(1, std::memory_order_relaxed) + 1;
    if (a.root >= 0 && a.root < n) root = g.ranks[a.root];  // group rank -> global rank
  }
  std::uint64_t token = 0;
  if (en(rec, gid, type, dtype, count, root, seq, &token) != 0) token = 0;
  g_stats.enters[type].fetch_add(
      1, std::memory_order_relaxed);  // a coalesced batch is one op, as in torch's Flight Recorder
  if (t_open_n < t_open.size())
    t_open[t_open_n++] = Open{&g, a.op_id, token, type >= k_all_reduce && type <= k_barrier};
}

void post_hook(GroupState& g, const c10d::PostHookArgs& a) noexcept {
  std::uint64_t token = 0;
  bool collective = false;
  for (std::size_t i = t_open_n; i-- > 0;) {
    if (t_open[i].group == &g && t_open[i].op_id == a.op_id) {
      token = t_open[i].token;
      collective = t_open[i].collective;
      t_open[i] = t_open[--t_open_n];
      break;
    }
  }
  if (token == 0) return;
  if (!a.work) {
    publish_exit(token, false);
    return;
  }
  try {
    if (g.completion_hooks) {
      std::lock_guard lock(g.pending_mutex);
      g.pending[a.work->getCompletionKey()] = token;
      return;
    }
    c10::intrusive_ptr<c10::ivalue::Future> fut;
    try {
      fut = a.work->getFuture();
    } catch (...) {
      // This Work has no future (gloo's send and recv, some coalesced works): watched below.
    }
    if (!fut) {
      if (!watch(a.work, token, &g, collective)) publish_exit(token, false);
      return;
    }
    const GroupState* group = &g;  // kept for the process's life (g_groups)
    fut->addCallback([token, group](c10::ivalue::Future& f) {
      // Completed with an error: published as "failed", distinct from done
      // (without a fail sink it stays "inside", which never names a victim).
      if (f.hasError()) {
        publish_fail(token);
        return;
      }
      publish_exit(token, true);
      close_earlier(group, token);
    });
  } catch (...) {
    publish_exit(token, false);
  }
}

void write_err(char* err, std::size_t len, const std::string& what) {
  if (err == nullptr || len == 0) return;
  std::strncpy(err, what.c_str(), len - 1);
  err[len - 1] = '\0';
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) const char* scout_hooks_torch_version() {
  return TORCH_VERSION;
}

// Where events go: the trainer's record and libscout_publisher's enter/exit.
// record == nullptr stops publishing (the hooks stay registered, do nothing).
__attribute__((visibility("default"))) int scout_hooks_set_sink(void* record, EnterFn enter, ExitFn exit) {
  g_sink.enter.store(enter, std::memory_order_release);
  g_sink.exit.store(exit, std::memory_order_release);
  g_sink.record.store(record, std::memory_order_release);
  return 0;
}

// Where failed completions go (libscout_publisher's scout_collective_fail);
// nullptr: a failed operation publishes nothing and stays "inside".
// The publisher's scout_collective_exit_kind: exits then say which kind of time they are.
__attribute__((visibility("default"))) int scout_hooks_set_exit_kind(ExitKindFn exit_kind) {
  g_sink.exit_kind.store(exit_kind, std::memory_order_release);
  return 0;
}

__attribute__((visibility("default"))) int scout_hooks_set_fail(ExitFn fail) {
  g_sink.fail.store(fail, std::memory_order_release);
  return 0;
}

// Registers scout's pre/post hooks on the process group named `group_name`
// (c10d's group registry). `gid`: scout's id of the group (groups with the
// same id share one call counter, see g_counters); `ranks`: the global rank of
// each group rank. Returns 0, 1 when already attached, -1 on error (message in err).
__attribute__((visibility("default"))) int scout_hooks_attach(const char* group_name, std::uint64_t gid,
                                                              const std::int64_t* ranks, std::size_t n, char* err,
                                                              std::size_t err_len) {
  try {
    if (group_name == nullptr || ranks == nullptr || n == 0) {
      write_err(err, err_len, "no group name or ranks");
      return -1;
    }
    std::lock_guard lock(g_groups_mutex);
    if (g_groups.count(group_name)) return 1;
    auto pg = c10d::resolve_process_group(group_name);
    auto g = std::make_shared<GroupState>();
    g->name = group_name;
    g->gid = gid;
    g->ranks.assign(ranks, ranks + n);
    g->seq = counter_of(gid);
    g->p2p_gid.resize(n);
    g->p2p_seq.resize(n);
    const std::int64_t me = pg->getRank() < static_cast<int>(n) ? ranks[pg->getRank()] : -1;
    for (std::size_t i = 0; i < n; ++i) {
      std::int64_t lo = std::min(me, ranks[i]), hi = std::max(me, ranks[i]);
      const std::int64_t pair[3] = {lo, hi, -2};  // -2 marks a point-to-point pair, never a group member
      g->p2p_gid[i] = scout::records::layout::group_id(pair, 3);
      g->p2p_seq[i] = counter_of(g->p2p_gid[i]);
    }
    try {
      g->completion_hooks = pg->supportsCompletionHooks();
    } catch (...) {
      g->completion_hooks = false;
    }
    GroupState* raw = g.get();
    if (g->completion_hooks) {
      pg->registerCompletionHook(k_hook_id, [raw](const c10d::CompletionHookArgs& c) {
        std::uint64_t token = 0;
        {
          std::lock_guard l(raw->pending_mutex);
          auto it = raw->pending.find(c.completionKey);
          if (it == raw->pending.end()) return;
          token = it->second;
          raw->pending.erase(it);
        }
        publish_exit(token, true);
        close_earlier(raw, token);
      });
    }
    pg->registerPreHook(k_hook_id, [raw](const c10d::PreHookArgs& a) {
      try {
        pre_hook(*raw, a);
      } catch (...) {
        g_stats.hook_errors.fetch_add(1, std::memory_order_relaxed);
      }
    });
    pg->registerPostHook(k_hook_id, [raw](const c10d::PostHookArgs& a) {
      try {
        post_hook(*raw, a);
      } catch (...) {
        g_stats.hook_errors.fetch_add(1, std::memory_order_relaxed);
      }
    });
    g_groups.emplace(group_name, std::move(g));  // kept for the process's life: the hooks point at it
    return 0;
  } catch (const std::exception& e) {
    write_err(err, err_len, e.what());
  } catch (...) {
    write_err(err, err_len, "unknown error attaching the hooks");
  }
  return -1;
}

// Counters since load: out[0..15] enters by scout collective code, out[16]
// exits at completion, out[17] exits at issue (no completion source, not
// watched: no exit published), out[18] failed (no exit), out[19] hook errors,
// out[20] of those completed or failed, the ones found by the watcher (a Work with
// no completion source, after its wait() returned), out[21] of the completed, the
// ones closed by a later call of their group completing. Returns the count written.
__attribute__((visibility("default"))) std::size_t scout_hooks_stats(std::uint64_t* out, std::size_t n) {
  std::size_t i = 0;
  for (; i < k_kinds && i < n; ++i) out[i] = g_stats.enters[i].load();
  const std::uint64_t rest[6] = {g_stats.exits_completed.load(), g_stats.exits_at_issue.load(),
                                 g_stats.failed.load(),          g_stats.hook_errors.load(),
                                 g_stats.exits_waited.load(),    g_stats.exits_by_order.load()};
  for (std::size_t j = 0; j < 6 && i < n; ++j, ++i) out[i] = rest[j];
  return i;
}

// Benchmark of scout's own work per event: `iters` pre-hook + post-hook pairs
// (one float tensor, no Work: exit at once) into the current sink. Returns
// nanoseconds per event pair (enter + exit), or -1 without a sink.
__attribute__((visibility("default"))) double scout_hooks_bench(std::uint64_t iters) {
  try {
    if (g_sink.record.load() == nullptr) return -1;
    GroupState g;
    g.gid = 1;
    g.ranks = {0};
    std::atomic<std::uint64_t> seq{0}, p2p_seq{0};
    g.seq = &seq;
    g.p2p_gid = {2};
    g.p2p_seq = {&p2p_seq};
    c10d::PreHookArgs pre{c10d::HookOpName::ALLREDUCE, false, {at::empty({4})}, {}, -1, 0};
    c10d::PostHookArgs post{c10d::HookOpName::ALLREDUCE, false, {}, 0};
    auto t0 = std::chrono::steady_clock::now();
    for (std::uint64_t i = 0; i < iters; ++i) {
      pre.op_id = post.op_id = static_cast<std::int64_t>(i);
      pre_hook(g, pre);
      post_hook(g, post);
    }
    auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(iters ? iters : 1);
  } catch (...) {
    return -1;
  }
}

}  // extern "C"
