// `scout verify-ckpt`: certify checkpoints (replica consensus over tensor
// hashes, hash manifests against bit rot), keep the job's ledger of latest /
// candidate / verified checkpoints from replay verdicts (Algorithm 3), and
// choose the checkpoint to restart from for a failure.
//
//   scout verify-ckpt check (--replicas F F F... | DIR [--mesh M] [--pattern P])
//   scout verify-ckpt manifest write DIR --mesh M | manifest check DIR
//   scout verify-ckpt record --ledger L --replay VERDICT.json...
//   scout verify-ckpt select --ledger L --failure sdc|hang|straggler|machine-lost|unknown [--sweep V.json]
//   scout verify-ckpt status --ledger L
//   scout verify-ckpt ack --ledger L CHECKPOINT...
//   scout verify-ckpt --job J [--ledger L] [--mesh M] DIR...        (cron)
#pragma once

#include <string>
#include <vector>

#include "commands/common.hpp"

namespace scout {

struct VerifyCkptOptions {
  // Which form ran: check, manifest-write, manifest-check, record, select, status, ack, cron.
  std::string action = "cron";
  std::vector<std::string> replicas;  // explicit replica files
  std::vector<std::string> dirs;      // check/manifest: one checkpoint dir; cron: roots or checkpoints
  std::string mesh;                   // "dp=4,tp=2"
  std::string pattern;                // per-rank file name with {rank}
  bool no_manifest = false;           // do not compare with DIR/scout-ckpt.json
  unsigned jobs = 0;                  // files hashed at once (0 = automatic)
  std::string job;
  std::string ledger;  // ledger file; default from --job
  double lock_timeout_s = 30;
  std::vector<std::string> replay_files;
  std::string failure;           // select
  std::string sweep_file;        // select: a full-sweep replay verdict
  std::string prometheus;        // textfile collector output
  double settle_s = 60;          // cron: skip checkpoints modified more recently
  bool settle_given = false;     // --settle was on the command line
  bool recheck_invalid = false;  // cron: check checkpoints recorded as invalid again
  bool quiet = false;            // no progress on stderr
  OutputFormat format = OutputFormat::json;
};

// Adds verify-ckpt's sub-subcommands and options to `command`; returns its runner.
CommandRunner register_verify_ckpt(CLI::App& command, const GlobalOptions& globals);

// Runs the form named by `options.action`; prints the verdict and returns the exit code.
int run_verify_ckpt(const VerifyCkptOptions& options);

}  // namespace scout
