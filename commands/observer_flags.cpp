#include "commands/observer_flags.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>

#include "lib/common/error.hpp"

namespace scout {

void add_observer_flags(CLI::App& cmd, ObserverFlags& f, const std::string& timeout_help) {
  cmd.add_option("--job", f.job, "Job id whose records are probed (as the trainers' publisher names it)")->required();
  cmd.add_option("--attempt", f.attempt, "Launcher attempt / restart id; records of other attempts are stale");
  cmd.add_option("--store", f.store,
                 "Rendezvous store of the observers: file://DIR, tcp://HOST:PORT or etcd://HOST:PORT[,HOST:PORT...] "
                 "(an etcd cluster's members; default with --nodes > 1: a per-job directory under /dev/shm)");
  cmd.add_flag("--store-host", f.store_host,
               "tcp://: host the store in this process (default: observer 0 hosts it unless one answers)");
  cmd.add_flag("--no-store-host", f.no_store_host, "tcp://: never host the store, only join a running one");
  cmd.add_option("--nodes", f.nodes, "Number of nodes (one observer each) taking part")->default_str("1");
  cmd.add_option("--node-index", f.node_index, "This node's 0-based index (default: from its lowest local rank)");
  cmd.add_option("--timeout", f.timeout_s, timeout_help)->default_str("10");
  cmd.add_option(
      "--token-file", f.token_file,
      "File holding the job token (default: $SCOUT_JOB_TOKEN; without either, evidence is not authenticated)");
  cmd.add_option("--listen", f.listen,
                 "Address the observer's Gloo device binds (default: this host's name, or the route to a tcp:// or "
                 "etcd:// store)");
}

ObserverSettings to_observer_settings(const ObserverFlags& f) {
  ObserverSettings s;
  if (f.job.empty()) throw FatalError(usage_error("--job is empty"));
  s.job = f.job;
  s.attempt = f.attempt;
  if (!std::isfinite(f.timeout_s) || f.timeout_s <= 0 || f.timeout_s > 3600)
    throw FatalError(usage_error("--timeout must be a number of seconds in (0, 3600]"));
  s.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(f.timeout_s * 1000));
  if (f.nodes < 1 || f.nodes > k_max_observers)
    throw FatalError(usage_error(fmt::format("--nodes must be between 1 and {}", k_max_observers)));
  s.nodes = f.nodes;
  if (f.node_index < -1 || f.node_index >= f.nodes)
    throw FatalError(usage_error(fmt::format("--node-index {} is out of range for --nodes {}", f.node_index, f.nodes)));
  if (f.node_index >= 0) s.node_index = f.node_index;
  if (!f.store.empty()) s.store = value_or_throw(transport::parse_store_uri(f.store));
  if (f.store_host && f.no_store_host)
    throw FatalError(usage_error("--store-host and --no-store-host exclude each other"));
  s.host_store = f.store_host      ? ObserverSettings::HostStore::always
                 : f.no_store_host ? ObserverSettings::HostStore::never
                                   : ObserverSettings::HostStore::auto_observer0;
  if (f.store_host && (!s.store || s.store->kind != transport::StoreUri::Kind::tcp))
    throw FatalError(usage_error("--store-host needs --store tcp://HOST:PORT"));
  s.token_file = f.token_file;
  s.listen_address = f.listen;
  return s;
}

}  // namespace scout
