// The checkpoint ledger of one job (the SCOUT paper's Algorithm 3, kept in a
// small versioned JSON file, schemas/ledger.schema.json).
//
// Every checkpoint verify-ckpt checks is appended with its integrity result.
// Intact ones start `pending`. Replay verdicts (command "replay") arrive in
// cycle order: a clean cycle (details.numerics "clean": every compared
// number agreed, even when a slow peer was named; without details.numerics,
// status healthy) that follows a pending checkpoint extends that checkpoint's
// run of consecutive clean cycles; a pending checkpoint with two consecutive
// clean cycles after it becomes `verified` (older verified/pending ones become
// `superseded`); a cycle with SDC evidence (numerics "sdc", or status
// attributed without numerics) rejects every pending checkpoint; any other
// outcome (unclear numerics, inconclusive, group_stall) or a gap in cycle
// numbers restarts the runs. Derived pointers: verified = the verified checkpoint, latest = the
// newest pending or verified one, candidate = the oldest pending one newer
// than verified (the next to be promoted).
//
// The pure state machine is separate from storage (LedgerStore) so it is
// unit-tested without files.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lib/checkpoint/durable_file.hpp"
#include "lib/common/error.hpp"

namespace scout::checkpoint {

inline constexpr const char* k_ledger_schema = "scout.ckpt-ledger";
inline constexpr const char* k_ledger_schema_version = "1.0";

enum class CheckpointState { pending, verified, superseded, rejected, corrupt, inconclusive, invalid };
std::string_view checkpoint_state_name(CheckpointState state);
std::optional<CheckpointState> parse_checkpoint_state(std::string_view name);

struct LedgerCheckpoint {
  std::string id;        // absolute path of the checkpoint (directory or first file)
  std::int64_t seq = 0;  // order of recording, from 1
  std::string recorded_at;
  CheckpointState state = CheckpointState::pending;
  std::string summary;                           // integrity result in one sentence
  std::int64_t clean_cycles = 0;                 // consecutive clean replay cycles after it
  std::optional<std::int64_t> last_clean_cycle;  // cycle number of the last of them
  std::optional<std::int64_t> decided_by_cycle;  // cycle that verified or rejected it
  std::string acknowledged_at;  // when an operator acknowledged a corrupt finding (`verify-ckpt ack`); empty: not
};

// A replay outcome as the ledger uses it (parsed from a replay verdict).
enum class ReplayOutcome { clean, sdc, unclear };
struct ReplayCycle {
  std::int64_t cycle = 0;  // monotonically increasing per job
  ReplayOutcome outcome = ReplayOutcome::unclear;
  bool full_sweep = false;           // a full-catalog sweep (details.sweep == "full")
  std::optional<std::string> after;  // newest checkpoint saved before the cycle began (id, path or basename)
  std::string source;                // file it came from, for the record
};

struct FullSweep {
  std::int64_t cycle = 0;
  bool clean = false;
  std::int64_t after_seq = 0;  // the sweep follows checkpoints with seq <= after_seq
  std::string recorded_at;
  std::string source;
};

struct Ledger {
  std::string job;
  std::int64_t revision = 0;  // +1 per durable update
  std::string updated_at;
  std::optional<std::int64_t> last_cycle;
  std::int64_t clean_streak = 0;  // consecutive clean cycles, job-wide
  std::int64_t cycles_seen = 0;
  std::optional<FullSweep> last_full_sweep;
  std::vector<LedgerCheckpoint> checkpoints;  // ascending seq

  const LedgerCheckpoint* find(std::string_view id_path_or_basename) const;
  const LedgerCheckpoint* verified() const;
  const LedgerCheckpoint* latest() const;
  const LedgerCheckpoint* candidate() const;
};

// What an update did, for the verdict.
struct LedgerChange {
  bool changed = false;
  std::string note;                   // one sentence
  std::vector<std::string> verified;  // ids promoted
  std::vector<std::string> rejected;  // ids rejected
};

// Appends checkpoint `id` with integrity `state` (pending for intact ones)
// and `summary`. An id already present is left alone (changed = false).
LedgerChange ledger_add_checkpoint(Ledger& ledger, const std::string& id, CheckpointState state,
                                   const std::string& summary, const std::string& now);

// Replaces the integrity result of `id` when it is recorded as invalid (a
// checkpoint re-checked with --recheck-invalid after its writer finished);
// any other state is left alone (changed = false).
LedgerChange ledger_recheck_invalid(Ledger& ledger, const std::string& id, CheckpointState state,
                                    const std::string& summary, const std::string& now);

// Corrupt checkpoints still to be reported: not acknowledged and not
// superseded (no later checkpoint recorded intact: pending, verified or
// superseded). Cron runs and `status` keep naming them, so a finding is never
// lost to a failed side output or a later run that checks nothing new.
std::vector<const LedgerCheckpoint*> outstanding_corrupt(const Ledger& ledger);

// Marks corrupt checkpoint `id` acknowledged at `now`. Bad input when `id`
// is not in the ledger or not corrupt; acknowledging twice is a no-op.
Result<LedgerChange> ledger_acknowledge(Ledger& ledger, const std::string& id, const std::string& now);

// Applies one replay cycle. Bad input when the cycle number goes backwards
// (a stale verdict); re-recording the last cycle with the same outcome is a
// no-op (changed = false), with another outcome bad input.
Result<LedgerChange> ledger_apply_replay(Ledger& ledger, const ReplayCycle& cycle, const std::string& now);

// JSON form per schemas/ledger.schema.json, and its strict reader (bad
// input naming the field and the file).
nlohmann::ordered_json ledger_to_json(const Ledger& ledger);
Result<Ledger> ledger_from_json(const nlohmann::json& json, const std::string& path);

// Parses a replay verdict (scout.verdict, command "replay"; see
// man scout-verify-ckpt, REPLAY VERDICTS). Bad input naming the field.
Result<ReplayCycle> parse_replay_verdict(const nlohmann::json& verdict, const std::string& path,
                                         const std::string& job);

// Which checkpoint to restart from for a failure kind (Algorithm 3, CheckpointRetrieval).
enum class FailureKind { sdc, hang, straggler, machine_lost, unknown };
std::optional<FailureKind> parse_failure_kind(std::string_view name);
std::string_view failure_kind_name(FailureKind kind);

struct Selection {
  const LedgerCheckpoint* checkpoint = nullptr;  // null when nothing can be chosen
  std::string role;                              // "verified" or "latest"
  std::string rule;                              // the retrieval rule applied, e.g. "sdc_or_machine_lost_use_verified"
  std::string reason;                            // one sentence for people
};

// `sweep`: a full-catalog replay sweep run for this failure (optional); when
// absent the ledger's last full sweep counts if it follows the latest checkpoint.
Selection select_checkpoint(const Ledger& ledger, FailureKind failure, const std::optional<ReplayCycle>& sweep);

// The ledger file of a job and its lock (`path` + ".lock"). Every update is
// read-modify-write under the lock, written with atomic_write_file.
class LedgerStore {
 public:
  // `path`: the ledger file; `lock_timeout`: how long to wait for the lock.
  LedgerStore(std::string path, std::chrono::milliseconds lock_timeout)
      : m_path(std::move(path)), m_timeout(lock_timeout) {}

  // Reads the ledger; a missing file gives an empty ledger for `job` when
  // `create` is set, bad input otherwise. A ledger of another job is bad input.
  Result<Ledger> load(const std::string& job, bool create) const;

  // Locks, loads, applies `update` (which returns whether to write), bumps
  // the revision and writes durably. Returns the ledger as written.
  template <typename Update>
  Result<Ledger> update(const std::string& job, Update&& fn) const {
    auto dir = ensure_parent();
    if (!dir) return dir.error();
    auto lock = FileLock::acquire(m_path + ".lock", m_timeout);
    if (!lock) return lock.error();
    remove_stale_temps();  // left by writers killed mid-update; only the lock holder writes temps
    auto ledger = load(job, true);
    if (!ledger) return ledger.error();
    Result<bool> write = fn(*ledger);
    if (!write) return write.error();
    if (*write) {
      auto saved = save(*ledger);
      if (!saved) return saved.error();
    }
    return ledger;
  }

  const std::string& path() const { return m_path; }

 private:
  Status save(Ledger& ledger) const;
  Status ensure_parent() const;
  void remove_stale_temps() const;
  std::string m_path;
  std::chrono::milliseconds m_timeout;
};

}  // namespace scout::checkpoint
