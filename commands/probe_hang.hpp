// `scout probe-hang`: one hang probe on this node (post mortem too), gathered
// with the other nodes' observers; prints the verdict and exits with its code.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "commands/common.hpp"
#include "commands/observer_flags.hpp"
#include "lib/hang/probe.hpp"

namespace scout {

// Options shared by probe-hang and observe (the probe part): the observer
// flags every session command has, and the hang probe's own.
struct HangProbeFlags {
  ObserverFlags observer;
  std::string mesh;
  std::string order;
  double threshold_s = hang::k_default_silence_threshold.count() / 1000.0;
  std::string local_ranks;  // "0-3": this node's ranks when several nodes share one /dev/shm
  std::string shm_dir = "/dev/shm";
  bool allow_other_owner = false;
  std::int64_t observer_group_size = 0;  // 0: automatic (hang::observer_group_size)
};

struct ProbeHangOptions {
  HangProbeFlags probe;
  std::string flight_recorder;        // --flight-recorder DIR: torch Flight Recorder dumps instead of records
  std::optional<std::int64_t> world;  // --world N: the job's world size, for dumps that do not carry it (gloo)
  std::string trace_out;              // --trace-out FILE: the timeline trace of the evidence decided on
  OutputFormat format = OutputFormat::json;
};

// Adds the probe flags to `cmd` (probe-hang and observe share them).
void add_hang_probe_flags(CLI::App& cmd, HangProbeFlags& flags);

// Validates `flags` and turns them into probe options; throws FatalError (usage) when invalid.
hang::ProbeOptions to_probe_options(const HangProbeFlags& flags, const std::string& command);

// The local record reader for `flags` (job, shm dir, owner policy).
hang::RecordSource make_record_source(const HangProbeFlags& flags);

// Adds the options of `probe-hang` to its subcommand and returns its runner.
CommandRunner register_probe_hang(CLI::App& command, const GlobalOptions& globals);

// Runs one probe and prints the verdict; returns its exit code.
int run_probe_hang(const ProbeHangOptions& options);

}  // namespace scout
