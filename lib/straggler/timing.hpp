// Timing evidence of a straggler decision (lib/straggler/README.md "Stragglers"): what
// each rank's collective ring says about how long it computed between
// collectives and how long it waited inside each one, aligned across ranks by
// (process group kind, per-group sequence number) so that only the same call
// of the program is compared. Pure functions, no I/O.
//
// Measures, per rank and per completed collective c (the rank's own clock
// only, so clock skew between nodes never enters):
//   compute(c) = enter(c) - latest exit of the rank's earlier collectives
//                that had completed before c was entered (0 when negative)
//   wait(c)    = exit(c) - enter(c)  (an upper bound where the exit is a
//                wait() returning, ExitKind::waited: CallTiming::wait_exact)
// and per process group G and call c:
//   link(G, c) = min over G's members of wait(c): the time the last member to
//                arrive spent inside, i.e. what the collective costs once
//                everyone is there. A straggler arrives last and waits least,
//                so it leaves link() alone; a slow link raises it for all.
//                Calls with an upper-bound wait on any member are left out.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lib/records/snapshot.hpp"
#include "lib/topology/mesh.hpp"

namespace scout::straggler {

// One rank's evidence from one read of its record.
struct RankEvents {
  std::int64_t rank = -1;
  std::string node;           // host name from the record ("" unknown)
  Coords coords{};            // (d, s, t, p, c, e) from the record
  std::uint64_t step = 0;     // the record's step at the read
  std::int64_t read_ns = 0;   // CLOCK_REALTIME of the read
  std::uint64_t written = 0;  // collective events the rank ever wrote (its calls so far)
  // The rank's scheduler counters at the read (Linux schedstat, ns; -1 unknown: another host's rank
  // recorded without them, or /proc unreadable): CPU time of all its threads, and the time its main
  // thread spent runnable but waiting for a CPU.
  std::int64_t cpu_ns = -1;
  std::int64_t runq_ns = -1;
  std::int64_t main_cpu_ns = -1;  // CPU time of the main thread alone
  // Its main thread's involuntary context switches (/proc/PID/status nonvoluntary_ctxt_switches: preempted while
  // runnable; -1 unknown: evidence that predates it, another host's rank recorded without it, /proc unreadable).
  std::int64_t nivcsw = -1;
  // Its CPU cgroup's throttling counters at the read (cgroup.hpp; -1 unknown: another host's rank
  // recorded without them, no readable CPU cgroup) and the quota that throttles it (quota_us -1: none;
  // period_us 0: unknown).
  std::int64_t nr_periods = -1;
  std::int64_t nr_throttled = -1;
  std::int64_t throttled_ns = -1;
  std::int64_t quota_us = -1;
  std::int64_t period_us = 0;
  // The observer's samples of the rank's process state since its previous read (stopped.hpp): how many, and
  // how many found it stopped ('T' by a signal, 't' by a tracer). -1: not sampled (another host's rank
  // recorded without them, evidence that predates them, the process not readable).
  std::int64_t state_samples = -1;
  std::int64_t stopped_samples = -1;
  // Its memory counters at the read (cgroup.hpp MemoryCounters; -1 unknown): major faults, bytes read from
  // storage, its memory cgroup's limit hits and stall (us).
  std::int64_t majflt = -1;
  std::int64_t read_bytes = -1;
  std::int64_t mem_limit_hits = -1;
  std::int64_t mem_stall_us = -1;
  std::vector<records::CollectiveEvent> events;  // the ring, oldest first
};

// Everything one round saw: every readable rank of the job.
struct RoundEvidence {
  std::int64_t world = 0;
  // The read before the first round: it opens the window of the scheduler counters (and marks the
  // calls already done as used); no decision is taken on it.
  bool baseline = false;
  std::vector<RankEvents> ranks;
};

// A process group scout compares: its kind ("tp", "dp", "world", ...), its id
// (layout::group_id of its members) and its members (global ranks).
struct GroupInfo {
  std::uint64_t id = 0;
  std::string kind;
  std::vector<std::int64_t> members;
};

// The process groups of `mesh`: every dim of size > 1 and the world group
// (a dim whose groups are the world group itself is listed once, by its dim).
std::vector<GroupInfo> mesh_groups(const Mesh& mesh);

// One rank's measurement of one call.
struct CallTiming {
  std::int64_t compute_ns = 0;
  std::int64_t wait_ns = 0;
  // False when the exit is the trainer's wait() returning (ExitKind::waited: gloo's sends and receives on
  // torch 2.x report no completion of their own): the call may have completed any time before, while the
  // rank did other work, so wait_ns is only an upper bound on its time inside (never evidence that a link
  // is slow, nor of how long the rank waited for its peers). The compute after it is exact: the rank
  // resumed its own work when the wait returned.
  bool wait_exact = true;
  std::uint8_t type = 0;
  std::uint64_t count = 0;
  std::uint64_t op_seq = 0;  // the rank's own order of its calls (every group), for the step's call pattern
};

// A rank's scheduler counters between two reads, per collective call it completed in between: how
// much CPU it used, and how long its main thread waited for a CPU. On a host with more runnable
// threads than CPUs the wait is part of every measured compute time, unequally between ranks.
struct CpuPerCall {
  double cpu_ns = 0;
  double runq_ns = 0;
  double main_cpu_ns = -1;  // -1: not counted at both reads
  double nivcsw = -1;       // the main thread's involuntary context switches (-1: not counted at both reads)
  // The cgroup's throttled time per call (-1: not counted at both reads), and over the window between the
  // reads: throttled periods, periods, calls completed and wall time.
  double throttled_ns = -1;
  std::int64_t nr_throttled = -1;
  std::int64_t nr_periods = -1;
  std::int64_t calls = 0;
  std::int64_t window_ns = 0;
  std::int64_t quota_us = -1;  // the quota at the later read (-1: none; period_us 0: unknown)
  std::int64_t period_us = 0;
  // Memory per call between the reads (-1: not counted at both reads): major faults, bytes read from storage,
  // memory stall (ns); and its memory cgroup's limit hits over the window.
  double majflt = -1;
  double read_bytes = -1;
  double mem_stall_ns = -1;
  std::int64_t mem_limit_hits = -1;
};

// Per rank of evidence[i], its counters per call between evidence[i-1] and evidence[i] (none for the
// first read). Ranks without counters at both reads, or with no call in between, are left out.
std::vector<std::map<std::int64_t, CpuPerCall>> cpu_per_call(const std::vector<RoundEvidence>& evidence);

// A rank's state samples between two reads (RankEvents::state_samples), with the window and the calls it
// completed in it: share() of the window it was stopped, and that time per call.
struct StoppedWindow {
  std::int64_t samples = 0;
  std::int64_t stopped = 0;
  std::int64_t window_ns = 0;
  std::int64_t calls = 0;
  double share() const { return samples > 0 ? static_cast<double>(stopped) / static_cast<double>(samples) : 0.0; }
  double ns_per_call() const {
    return calls > 0 ? share() * static_cast<double>(window_ns) / static_cast<double>(calls) : 0.0;
  }
};

// Per rank of evidence[i], its state samples over the window since evidence[i-1] (none for the first read).
// Ranks not sampled, or not read at both, or with no call or no time in between, are left out.
std::vector<std::map<std::int64_t, StoppedWindow>> stopped_per_round(const std::vector<RoundEvidence>& evidence);

// The same call of the program on every rank: its process group kind (an index into TimingTable::kinds) and the
// group's sequence number. Two integers, so that keys compare and sort without reading the kind's name.
struct CallKey {
  std::uint32_t kind = 0;
  std::uint64_t seq = 0;
  friend auto operator<=>(const CallKey&, const CallKey&) = default;
};

// One rank's calls in a round, one per key, in key order: its keys and its timings, two runs of its table's arrays
// (CallsByRank: ranks that make the same calls share one run of keys), so that two ranks' calls are walked side by
// side in one pass and a key is found by bisection. Walked as (key, timing) pairs of references. A view: valid while
// the table holds it unchanged.
class RankCalls {
 public:
  using Entry = std::pair<CallKey, CallTiming>;  // a call as CallsByRank::assign takes it
  using reference = std::pair<const CallKey&, const CallTiming&>;

  class const_iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Entry;
    using difference_type = std::ptrdiff_t;
    using reference = RankCalls::reference;
    // operator->'s: the pair of references held.
    struct pointer {
      reference r;
      const reference* operator->() const { return &r; }
    };
    const_iterator() = default;
    const_iterator(const CallKey* key, const CallTiming* call) : m_key(key), m_call(call) {}
    reference operator*() const { return {*m_key, *m_call}; }
    pointer operator->() const { return pointer{**this}; }
    const_iterator& operator++() {
      ++m_key;
      ++m_call;
      return *this;
    }
    const_iterator operator++(int) {
      auto old = *this;
      ++*this;
      return old;
    }
    friend bool operator==(const const_iterator& a, const const_iterator& b) { return a.m_key == b.m_key; }

   private:
    const CallKey* m_key = nullptr;
    const CallTiming* m_call = nullptr;
  };

  RankCalls() = default;
  RankCalls(const CallKey* keys, const CallTiming* calls, std::size_t n) : m_keys(keys), m_calls(calls), m_n(n) {}

  // The call at `key`: nullptr (find) or std::out_of_range (at) where there is none.
  const CallTiming* find(CallKey key) const;
  const CallTiming& at(CallKey key) const;
  std::size_t count(CallKey key) const { return find(key) ? 1 : 0; }

  std::size_t size() const { return m_n; }
  bool empty() const { return m_n == 0; }
  const_iterator begin() const { return {m_keys, m_calls}; }
  const_iterator end() const { return {m_keys + m_n, m_calls + m_n}; }
  // Its keys and its timings, size() each, in key order (the keys shared with the ranks that make the same calls).
  const CallKey* keys() const { return m_keys; }
  const CallTiming* timings() const { return m_calls; }

 private:
  const CallKey* m_keys = nullptr;
  const CallTiming* m_calls = nullptr;
  std::size_t m_n = 0;
};

// Every rank's calls in a round, in a few blocks: per rank a run of one block of timings in key order, and its keys, a
// run of one block of keys shared with the rank before where they are the same (most ranks: a call's row is its 40
// bytes of timing, not 56 with its key, and the table's writes, pages and reads scale with it, issue 40), the ranks
// ascending as a std::map's. An allocation per block of about a thousand calls (a std::map of per-rank arrays was a
// node and an array per rank and round, their allocation and walks about a sixth of the decision at 100k ranks: issue
// 40; one array per table, mapped and unmapped by malloc per table, faulted its pages in afresh every decision: 7.6x
// the page faults at 1k ranks, slower at 1k and 10k). Walked as a map: (rank, RankCalls) pairs in ascending ranks; a
// rank without calls is still in it (as the map's empty entry).
class CallsByRank {
 public:
  using Entry = RankCalls::Entry;
  using value_type = std::pair<std::int64_t, RankCalls>;

  class const_iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = CallsByRank::value_type;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = value_type;
    const_iterator() = default;
    const_iterator(const CallsByRank* t, std::size_t i) : m_t(t), m_i(i) {}
    value_type operator*() const { return {m_t->m_runs[m_i].rank, m_t->calls_of(m_i)}; }
    const_iterator& operator++() {
      ++m_i;
      return *this;
    }
    const_iterator operator++(int) {
      auto old = *this;
      ++m_i;
      return old;
    }
    friend bool operator==(const const_iterator& a, const const_iterator& b) { return a.m_i == b.m_i; }
    std::size_t index() const { return m_i; }

   private:
    const CallsByRank* m_t = nullptr;
    std::size_t m_i = 0;
  };

  // Reserves room for `ranks` ranks (the caller's bound: no array of runs grown and copied).
  void reserve(std::size_t ranks);
  // Sets `rank`'s calls to `entries`, in any order; where a key repeats, the last one of it counts. A rank above
  // every rank in the table is appended in O(its calls); another's run is replaced (its old one left unused).
  // `scratch`: the caller's, reused rank after rank. Returns the rank's calls (valid until the table next changes).
  RankCalls assign(std::int64_t rank, const std::vector<Entry>& entries, std::vector<std::uint32_t>& scratch);
  // Sets `rank`'s call at `key` (added in key order, or replacing the one there); the rank added where new.
  void set(std::int64_t rank, CallKey key, const CallTiming& call);
  // Takes out the call at `key` of every rank.
  void erase(CallKey key);

  // `rank`'s calls (std::out_of_range where the rank is not in the table), end() where it is not (find).
  RankCalls at(std::int64_t rank) const;
  const_iterator find(std::int64_t rank) const;
  std::size_t count(std::int64_t rank) const { return find(rank) == end() ? 0 : 1; }

  std::size_t size() const { return m_runs.size(); }
  bool empty() const { return m_runs.empty(); }
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, m_runs.size()}; }
  // The least and the largest rank (the table not empty).
  std::int64_t front_rank() const { return m_runs.front().rank; }
  std::int64_t back_rank() const { return m_runs.back().rank; }
  // Ranks from 0 and nearly all present (up to twice as many places as ranks, and 64): an array by rank fits them.
  bool dense() const {
    return !empty() && front_rank() >= 0 && back_rank() < 2 * static_cast<std::int64_t>(size()) + 64;
  }
  // The calls of the i-th rank in ascending order.
  RankCalls calls_of(std::size_t i) const {
    const Run& run = m_runs[i];
    if (run.n == 0) return {};
    return {m_key_blocks[run.key_block].data() + run.key_first, m_blocks[run.block].data() + run.first, run.n};
  }
  // The i-th rank in ascending order.
  std::int64_t rank_of(std::size_t i) const { return m_runs[i].rank; }
  // Whether the i-th rank's call keys are the (i-1)-th's, noted by assign as it writes them (still in the cache):
  // true only where they are (false where not known, after set() or a rank added between), so that the key sets of
  // the table's ranks (UsedCalls::add, KeySets) are found without reading every rank's calls again, cold (each
  // compared every rank's keys with the rank before's, ~10% of the decision at 100k ranks: issue 40).
  bool same_keys_as_before(std::size_t i) const { return m_runs[i].same_keys; }

 private:
  struct Run {
    std::int64_t rank = 0;
    std::uint32_t block = 0;  // its timings: m_blocks[block][first, first + n)
    std::uint32_t first = 0;
    std::uint32_t n = 0;
    std::uint32_t key_block = 0;  // its keys: m_key_blocks[key_block][key_first, key_first + n)
    std::uint32_t key_first = 0;
    bool same_keys = false;  // its keys are the run before's (same_keys_as_before)
  };
  // The run of `rank`: found or added (at its place in ascending ranks), with no calls where added.
  Run& run_of(std::int64_t rank);
  // Sets run's keys to `keys` (run.n of them, in key order): the run before's where they are the same (same_keys
  // true, nothing written), else appended (`share` false: always appended, same_keys false).
  void put_keys(Run& run, const CallKey* keys, bool share);

  std::vector<std::vector<CallTiming>> m_blocks;
  std::vector<std::vector<CallKey>> m_key_blocks;
  std::vector<Run> m_runs;              // ascending ranks
  std::vector<CallKey> m_keys_scratch;  // assign's: a rank's keys before they are found shared or appended
};

// Per rank, per call key: its timing. Ranks whose events name a group the
// mesh does not know get a kind "group:<16 hex>" for it.
struct TimingTable {
  std::vector<GroupInfo> groups;   // mesh groups, then groups seen only in the events
  std::vector<std::string> kinds;  // CallKey::kind -> the kind's name (GroupInfo::kind)
  CallsByRank ranks;
  std::map<std::int64_t, std::string> nodes;  // rank -> node name from its record
  std::int64_t misaligned = 0;                // calls dropped because ranks disagreed on (type, count)
  // Per rank, its scheduler counters per collective call over the round (see cpu_per_call).
  std::map<std::int64_t, CpuPerCall> cpu;
  // Per rank, its process state samples over the round (see stopped_per_round).
  std::map<std::int64_t, StoppedWindow> stopped;

  // The index of kind `name` in `kinds`: added where new (add_kind), kinds.size() where absent (kind_index).
  std::uint32_t add_kind(const std::string& name);
  std::uint32_t kind_index(const std::string& name) const;
  // The key of call `seq` of kind `name` (a key no call has where the kind is absent).
  CallKey key(const std::string& name, std::uint64_t seq) const { return CallKey{kind_index(name), seq}; }
};

// The calls earlier rounds used, per rank, in key order; their kinds numbered as in `kinds`. A table built with
// them leaves them out and numbers its kinds alike (its `kinds` begin with these). Ranks that used the same calls
// share one key array (most do: a std::map of 100k ranks' arrays, merged rank by rank, cost 0.3 s at 100k ranks per
// decision, issue 40).
struct UsedCalls {
  std::vector<std::string> kinds;
  std::vector<std::vector<CallKey>> sets;                     // the distinct arrays of used keys
  std::vector<std::pair<std::int64_t, std::uint32_t>> ranks;  // (rank, its array in `sets`), ascending ranks

  // Adds every call of `t`, a table built with this as its exclusion.
  void add(const TimingTable& t);
  // The calls `rank` used (nullptr: none). `hint`: the caller's, 0 at first; ranks asked in ascending order are
  // found in O(1) with it.
  const std::vector<CallKey>* of(std::int64_t rank, std::size_t& hint) const;
};

// Builds the table from a round's evidence. Calls listed in `exclude` (used by
// an earlier round) are left out, so rounds are independent samples.
TimingTable build_table(const RoundEvidence& round, const std::vector<GroupInfo>& mesh_groups,
                        const UsedCalls* exclude = nullptr);

// For each of one rank's calls `ev` (in op_seq order), the index of the latest completion the rank had seen when it
// entered the call: of the calls before it (index j < i) that had completed (exit_ns > 0) at or before its enter_ns,
// the one with the largest exit_ns, of equal ones the later; -1 where there is none. Written into `out` (resized to
// ev.size()). O(E log E): where the exits ascend in call order, a bisection per call; else exits sorted once, a
// prefix maximum over them (Fenwick) filled in call order.
void latest_completed_before(const std::vector<records::CollectiveEvent>& ev, std::vector<std::ptrdiff_t>& out);
// The same with `done` as its scratch (a caller's, reused rank after rank).
void latest_completed_before(const std::vector<records::CollectiveEvent>& ev, std::vector<std::ptrdiff_t>& out,
                             std::vector<std::size_t>& done);

// Median of `v` (0 when empty); averages the two middle values.
double median(std::vector<double> v);
// The same of [first, last), reordered in place: no copy (a scratch row per call, issue 40).
double median_in_place(double* first, double* last);

// One figure of a group's members, read as each member sees the others: the median (exactly what median() of the
// others' values gives: the same middle values, averaged alike), the least and the largest of every member but one,
// each in O(1). Building it costs O(n): of the values sorted, only the few places these read are found (the two
// least, the three about the middle, the two largest: a member's others are the values without one copy of its
// own); a median of the others per member costs O(n^2 log n) over the group (at 100k ranks, minutes), and a sort of
// the values, eleven per peer group and round, was a seventh of the decision (issue 40). Members whose value does
// not count (`counted` false: a counter missing) are in no member's others.
class LeaveOneOut {
 public:
  LeaveOneOut() = default;
  // `values`: one per member; `counted`: which of them count (every one where empty).
  explicit LeaveOneOut(std::vector<double> values, const std::vector<bool>& counted = {});

  // Member i's value.
  double value(std::size_t i) const { return m_values[i]; }
  // The median of the counted values of the members other than i (0 when there are none).
  double median_without(std::size_t i) const;
  // The least / the largest counted value of the members other than i (`none` when there are none).
  double min_without(std::size_t i, double none) const;
  double max_without(std::size_t i, double none) const;
  // How many members other than i count.
  std::size_t count_without(std::size_t i) const;

 private:
  // The k-th smallest counted value once member i's is taken out (i uncounted: none is).
  double nth_without(std::size_t i, std::size_t k) const;
  // The value at place p of the counted values sorted (one of the places kept).
  double sorted_at(std::size_t p) const;

  std::vector<double> m_values;  // per member
  std::vector<char> m_counted;   // per member, whether its value counts
  std::size_t m_count = 0;       // how many count
  // (place, value) of the counted values sorted, at the places the queries read; ascending places.
  std::vector<std::pair<std::size_t, double>> m_places;
};

}  // namespace scout::straggler
