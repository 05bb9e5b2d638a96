#include "commands/replay.hpp"

#include <fmt/format.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>

#include "lib/catalog/catalog_io.hpp"
#include "lib/common/file.hpp"
#include "lib/common/hex.hpp"
#include "lib/replay/exported.hpp"
#include "lib/replay/local_peers.hpp"
#include "lib/replay/recipe_share.hpp"
#include "lib/replay/runner.hpp"
#include "lib/session/join.hpp"

namespace scout {

CommandRunner register_replay(CLI::App& cmd, const GlobalOptions& globals) {
  auto o = std::make_shared<ReplayOptions>();
  cmd.add_option("--battery", o->battery, "Run the built-in battery: standard")->check(CLI::IsMember({"standard"}));
  cmd.add_option("--recipe", o->recipe_dir,
                 "Replay a trainer's exported recipes from DIR (its RecipeExporter's directory, or one recipe) across "
                 "the job's peers (with --job); with --nodes > 1, a node where DIR is absent or empty receives the "
                 "recipes of the lowest node that has them, and every other copy must equal that one");
  cmd.add_option("--evidence", o->evidence_dir,
                 "Decide over in-job replay evidence the Python package published under DIR (with --job, --cycle)");
  cmd.add_option("--recipes", o->recipes, "Battery recipes to run (default: all)")
      ->delimiter(',')
      ->check(CLI::IsMember({"transformer_block", "adamw_step", "expert_gemm", "param_allgather"}));
  cmd.add_option("--size", o->size, "Battery size: tiny, small, medium or large")
      ->check(CLI::IsMember({"tiny", "small", "medium", "large"}))
      ->default_str("small");
  cmd.add_option("--peers", o->peers,
                 "Peer processes on this machine (2..64; with --recipe --nodes > 1: 1..64 per node); with --evidence: "
                 "peers expected")
      ->default_str("4");
  cmd.add_option("--seed", o->seed, "Seed of the inputs and parameters")->default_str("1");
  cmd.add_option("--threads", o->threads, "Intra-op threads per peer (part of the replay contract)")->default_str("1");
  cmd.add_option("--repeat", o->repeat, "Module calls per recipe; times are the minimum (1..20)")->default_str("3");
  cmd.add_option("--device", o->device,
                 "cpu, or cuda (peer P on GPU P modulo the GPUs; needs a CUDA LibTorch: the torch 2.x module)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->default_str("cpu");
  cmd.add_option("--catalog", o->catalog, "scout catalog file: expert_gemm runs at its representatives' rows")
      ->check(CLI::ExistingFile);
  cmd.add_option("--golden", o->golden,
                 "Golden hashes: written when FILE is absent, compared when present (drift between images)");
  cmd.add_option("--inject", o->inject,
                 "Drill injection (repeatable): sdc:peer=P,tensor=Q,word=W,bit=B | sdc:random | slow:peer=P,factor=F | "
                 "contract:peer=P");
  cmd.add_option("--timeout", o->timeout_s, "Seconds each transport step may take")->default_str("30");
  cmd.add_option("--cycle", o->cycle, "Replay cycle number for the checkpoint ledger (details.cycle)");
  cmd.add_option("--checkpoint", o->checkpoint, "Newest checkpoint saved before this cycle (details.checkpoint)");
  cmd.add_option("--sweep", o->sweep, "periodic or full (details.sweep)")
      ->check(CLI::IsMember({"periodic", "full"}))
      ->default_str("periodic");
  cmd.add_option("--job", o->job, "Job id to record in the verdict (required with --recipe and --evidence)");
  cmd.add_option("--store", o->store,
                 "--recipe across nodes: the rendezvous store every node's scout meets at, file://DIR (shared) or "
                 "tcp://HOST:PORT (node 0 hosts)");
  cmd.add_option("--nodes", o->nodes,
                 "--recipe across nodes: how many nodes run 'scout replay --recipe' (each with --peers local peers)")
      ->default_str("1");
  cmd.add_option("--node-index", o->node_index,
                 "--recipe across nodes: this node's 0-based index (required with --nodes > 1)");
  cmd.add_option("--straggler-factor", o->straggler_factor,
                 "A peer is a straggler when slower than this many times the median (> 1)")
      ->default_str("2");
  cmd.footer(
      "Examples:\n"
      "  scout replay --battery standard --peers 4\n"
      "  scout replay --battery standard --peers 4 --golden battery-golden.json\n"
      "  scout replay --battery standard --peers 4 --inject sdc:peer=2,tensor=param_grad,word=5,bit=62\n"
      "  scout replay --recipe /shared/recipes --job llm7 --peers 4\n"
      "  scout replay --recipe /shared/recipes --job llm7 --peers 8 --store file:///shared/scout-store --nodes 2 "
      "--node-index 0");
  return [o, &globals, &cmd]() {
    o->format = resolve_format(globals.format);
    o->peers_given = cmd.count("--peers") > 0;
    return run_replay(*o);
  };
}

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

std::vector<replay::RecipeInstance> make_recipes(const ReplayOptions& o) {
  std::vector<std::string> ids = o.recipes;
  if (ids.empty()) ids.assign(std::begin(replay::k_battery_recipes), std::end(replay::k_battery_recipes));
  std::vector<std::vector<std::int64_t>> reps;
  if (o.catalog) reps = value_or_throw(replay::catalog_expert_rows(*o.catalog));
  std::vector<replay::RecipeInstance> out;
  const auto add = [&out](std::string name, replay::RecipeSpec spec) {
    replay::RecipeInstance r;
    r.name = std::move(name);
    r.spec = std::move(spec);
    out.push_back(std::move(r));
  };
  for (const auto& id : ids) {
    if (id == "expert_gemm" && !reps.empty()) {
      for (std::size_t i = 0; i < reps.size(); ++i)
        add(i == 0 ? id : fmt::format("{}#{}", id, i), value_or_throw(replay::battery_recipe(id, o.size, reps[i])));
    } else {
      add(id, value_or_throw(replay::battery_recipe(id, o.size)));
    }
  }
  return out;
}

// This node's peers as the options ask for them (replay::run_local_peers).
replay::LocalPeersOptions local_peers_options(const ReplayOptions& o) {
  replay::LocalPeersOptions lp;
  lp.peers = o.peers;
  lp.seed = o.seed;
  lp.threads = o.threads;
  lp.repeat = o.repeat;
  lp.device = o.device;
  lp.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(o.timeout_s * 1000));
  return lp;
}

}  // namespace

namespace {

replay::DecideOptions decide_options(const ReplayOptions& o, const char* mode) {
  replay::DecideOptions d;
  d.job = o.job;
  d.straggler_min_rel = o.straggler_factor - 1;
  d.cycle = o.cycle;
  d.checkpoint = o.checkpoint;
  d.sweep = o.sweep;
  d.mode = mode;
  // Peers run on this machine in battery and recipe modes. More peers than CPUs: each one
  // waits scheduler slices of a few ms for a CPU, and a 3 ms module call read 2.8-3.6x its
  // median on a clean run (fresh clone, test_replay_recipe seed 413067312, 3 peers on 2
  // CPUs). Module calls then count as slow only 25 ms above the median, several slices.
  if (std::string_view(mode) != "job") {
    cpu_set_t set;
    CPU_ZERO(&set);
    const std::int64_t cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
    if (o.peers > cpus) {
      d.oversubscribed = std::pair{o.peers, cpus};
      d.straggler_min_abs = std::max(d.straggler_min_abs, 0.025);
    }
  }
  return d;
}

// `--evidence DIR`: the in-job replay's published evidence, decided here.
int run_evidence(const ReplayOptions& o) {
  if (o.job.empty())
    throw FatalError(usage_error("--evidence needs --job", {}, "pass the job id the trainer published under"));
  fs::path dir = fs::path(*o.evidence_dir) / o.job;
  if (o.cycle) dir /= fmt::format("cycle-{}", *o.cycle);
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw FatalError(input_error(fmt::format("--evidence: {} is not a directory", dir.string()),
                                 "no evidence was published for this job and cycle",
                                 "check --evidence, --job and --cycle against the trainer's SCOUT_REPLAY_DIR"));
  std::map<std::int64_t, replay::PeerEvidence> found;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("peer-", 0) != 0 || entry.path().extension() != ".json") continue;
    auto text = value_or_throw(read_small_file(entry.path().string()));
    auto j = nlohmann::json::parse(text, nullptr, false);
    auto e = replay::peer_evidence_from_json(j);
    if (!e)
      throw FatalError(
          input_error(fmt::format("{}: {}", entry.path().string(), e.error().what), e.error().why, e.error().hint));
    if (e->peer < 0 || e->peer > 100000 || found.count(e->peer))
      throw FatalError(
          input_error(fmt::format("{}: peer {} is out of range or repeated", entry.path().string(), e->peer)));
    found.emplace(e->peer, std::move(*e));
  }
  std::int64_t n = o.peers_given ? o.peers : (found.empty() ? 0 : found.rbegin()->first + 1);
  if (n < 1)
    throw FatalError(input_error(fmt::format("--evidence: no peer-*.json under {}", dir.string()), {},
                                 "wait for the trainer's replay cycle to finish"));
  std::vector<std::optional<replay::PeerEvidence>> evidence(static_cast<std::size_t>(n));
  for (auto& [p, e] : found)
    if (p < n) evidence[static_cast<std::size_t>(p)] = std::move(e);
  Verdict v = replay::decide_replay(evidence, decide_options(o, "job"));
  v.details["evidence"] = dir.string();
  return emit_verdict(v, o.format);
}

}  // namespace

namespace {

// Whether the LibTorch module computes on a GPU here, asked in a forked child: this process never initializes
// CUDA (the peers are forked from it).
void check_cuda_module(const ReplayOptions& o) {
  auto probe = replay::probe_module_device_isolated("cuda:0", o.threads, std::chrono::seconds(120));
  if (probe) return;
  std::string why = probe.error().message();
  for (std::size_t at = why.find("; "); at != std::string::npos; at = why.find("; ", at)) why.replace(at, 2, ", ");
  if (!fs::exists("/dev/nvidiactl") && !fs::exists("/dev/dxg"))
    why += ", and /dev/nvidiactl is absent (no NVIDIA driver)";
  throw FatalError(unavailable_error("--device cuda: replay cannot compute on a GPU here", why,
                                     "use --device cpu, or a machine with a GPU and its driver (nvidia-smi) and the "
                                     "LibTorch module built against a CUDA wheel"));
}

// `min_peers`: 2 on one machine; 1 with --nodes > 1 (one peer per node).
void check_common(const ReplayOptions& o, std::int64_t min_peers = 2) {
  if (o.peers < min_peers || o.peers > 64)
    throw FatalError(usage_error(fmt::format("--peers {} is out of range", o.peers),
                                 fmt::format("replay runs {}..64 peers on a machine", min_peers), "use --peers 4"));
  if (o.threads < 1 || o.threads > 256)
    throw FatalError(usage_error(fmt::format("--threads {} is out of range", o.threads), {}, "use 1..256"));
  if (o.repeat < 1 || o.repeat > 20)
    throw FatalError(usage_error(fmt::format("--repeat {} is out of range", o.repeat), {}, "use 1..20"));
  if (!(o.timeout_s > 0 && o.timeout_s <= 3600))
    throw FatalError(usage_error("--timeout must be in (0, 3600] seconds"));
  if (!(o.straggler_factor > 1 && o.straggler_factor < 1000))
    throw FatalError(usage_error("--straggler-factor must be above 1", {}, "e.g. --straggler-factor 2"));
  if (o.cycle && *o.cycle < 0) throw FatalError(usage_error("--cycle must be a non-negative integer"));
  if (o.checkpoint && o.checkpoint->empty())
    throw FatalError(usage_error("--checkpoint is empty", {}, "give the checkpoint's id, path or directory name"));
}

// The --inject list, resolved against the run's recipes and `peers` (all nodes' peers).
std::vector<replay::Injection> parse_injections(const ReplayOptions& o,
                                                const std::vector<replay::RecipeInstance>& recipes, std::int64_t peers,
                                                nlohmann::json& inj_json) {
  std::vector<replay::RecipeQuantities> rq;
  for (const auto& r : recipes) rq.push_back({r.name, r.spec.quantities});
  std::vector<replay::Injection> injections;
  for (const auto& text : o.inject) {
    auto in = value_or_throw(replay::parse_injection(text));
    if (in.kind == replay::Injection::Kind::sdc_random) {
      if (in.seed == 0 && o.nodes > 1)
        throw FatalError(usage_error(fmt::format("--inject '{}': with --nodes > 1 give seed=S", text),
                                     "every node must resolve it alike", "use sdc:random,seed=S"));
      if (in.seed == 0) in.seed = static_cast<std::uint64_t>(Clock::now().time_since_epoch().count()) | 1;
      std::fprintf(stderr, "scout replay: %s resolved with seed %llu\n", text.c_str(),
                   static_cast<unsigned long long>(in.seed));
      in = replay::resolve_random(in, peers, rq);
    }
    if (in.kind == replay::Injection::Kind::sdc || in.kind == replay::Injection::Kind::slow) {
      bool known = in.recipe.empty();
      for (const auto& r : recipes) known = known || r.name == in.recipe || r.spec.id == in.recipe;
      if (!known)
        throw FatalError(usage_error(fmt::format("--inject '{}': recipe '{}' is not in this run", text, in.recipe), {},
                                     "name one of the recipes run"));
    }
    nlohmann::json j = {{"spec", text},
                        {"kind", in.kind == replay::Injection::Kind::sdc    ? "sdc"
                                 : in.kind == replay::Injection::Kind::slow ? "slow"
                                                                            : "contract"},
                        {"peer", in.peer}};
    if (in.kind == replay::Injection::Kind::sdc) {
      j["tensor"] = replay::quantity_name(in.tensor);
      j["word"] = std::to_string(in.word);
      j["bit"] = in.bit;
      j["recipe"] = in.recipe.empty() ? nlohmann::json() : nlohmann::json(in.recipe);
      if (in.seed) j["seed"] = std::to_string(in.seed);
    }
    inj_json.push_back(j);
    injections.push_back(in);
  }
  if (auto v = replay::validate_injections(injections, peers); !v) throw FatalError(v.error());
  return injections;
}

// `--recipe DIR`: a trainer's exported recipes replayed across the job's
// peers, this node's --peers processes and, with --store/--nodes, every
// node's: the battery's decision order over the recipes' own data.
int run_recipes(const ReplayOptions& o) {
  if (o.job.empty())
    throw FatalError(usage_error("--recipe needs --job", {}, "pass the job id the recipes were exported from"));
  if (!o.battery.empty())
    throw FatalError(usage_error("--recipe and --battery exclude each other", {}, "run one of them"));
  if (!o.recipes.empty() || o.catalog || o.golden)
    throw FatalError(
        usage_error("--recipes, --catalog and --golden belong to --battery", {}, "drop them with --recipe"));
  check_common(o, o.nodes > 1 ? 1 : 2);
  if (o.nodes < 1 || o.nodes > 4096)
    throw FatalError(usage_error(fmt::format("--nodes {} is out of range", o.nodes), {}, "use 1..4096"));
  if (o.nodes > 1 && (!o.store || !o.node_index))
    throw FatalError(usage_error("--nodes > 1 needs --store and --node-index", "every node's scout meets at one store",
                                 "e.g. --store file:///shared/scout-store --node-index 0"));
  if (o.node_index && (*o.node_index < 0 || *o.node_index >= o.nodes))
    throw FatalError(
        usage_error(fmt::format("--node-index {} is out of range for --nodes {}", *o.node_index, o.nodes)));
  std::optional<transport::StoreUri> shared;
  if (o.store) shared = value_or_throw(transport::parse_store_uri(*o.store));
  const std::int64_t total = o.nodes * o.peers;
  if (total > 100000) throw FatalError(usage_error("--nodes x --peers is above 100000"));
  if (o.device == "cuda") check_cuda_module(o);
  const std::int64_t node = o.node_index.value_or(0);
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(o.timeout_s * 1000));
  const std::string cycle = o.cycle ? std::to_string(*o.cycle) : "adhoc";
  // Across nodes the recipes come from the lowest node that holds them (the
  // others' copies must equal it; a node without one receives it). Node 0's
  // scout hosts a tcp:// store here, for the exchange and every peer after it.
  std::unique_ptr<transport::KeyValueStore> hosted;
  replay::SharedRecipes share;
  if (o.nodes > 1) {
    const bool host = shared->kind == transport::StoreUri::Kind::tcp && node == 0;
    auto store = value_or_throw(transport::open_store(*shared, host, timeout));
    replay::ShareOptions so;
    so.recipe_dir = *o.recipe_dir;
    so.node = node;
    so.nodes = o.nodes;
    so.key_namespace = fmt::format("replay-recipe/{}/{}/share", o.job, cycle);
    so.timeout = timeout;
    so.listen_address = replay::peer_listen_address(shared, o.nodes);
    share = value_or_throw(replay::share_recipes(*store, so));
    if (host) hosted = std::move(store);
  } else {
    share.recipes = value_or_throw(replay::load_exported_recipes(*o.recipe_dir));
  }
  const auto& recipes = share.recipes;
  nlohmann::json inj_json = nlohmann::json::array();
  const auto injections = parse_injections(o, recipes, total, inj_json);
  // Keys of one run: every node derives the same namespace (a reused store
  // needs a new --cycle or a fresh directory; file stores never delete keys).
  std::vector<std::string> parts{o.job, cycle};
  for (const auto& r : recipes) parts.push_back(r.name + "=" + r.spec.config.value("module_hash", ""));
  const std::string joined = fmt::format("{}", fmt::join(parts, "|"));
  const std::string ns = shared ? fmt::format("replay-recipe/{}/{}", o.job, hex64(std::hash<std::string>{}(joined)))
                                : fmt::format("replay-{}", getpid());
  auto ran = value_or_throw(replay::run_local_peers(local_peers_options(o), recipes, injections, shared, node, o.nodes,
                                                    ns, hosted != nullptr));
  if (hosted) replay::wait_all_done(*hosted, ns, total, timeout, false, true);
  Verdict v = replay::decide_replay(ran.evidence, decide_options(o, "recipe"));
  nlohmann::json rs = nlohmann::json::array();
  for (const auto& r : recipes)
    rs.push_back({{"recipe", r.name},
                  {"module", share.received ? nlohmann::json() : nlohmann::json(r.module_path)},
                  {"layer", r.spec.config["layer"]},
                  {"step", r.spec.config["step"]}});
  v.details["recipe_dir"] = *o.recipe_dir;
  v.details["recipe_source"] = {{"node", share.source_node},
                                {"origin", share.received ? "received" : "local"},
                                {"digest", o.nodes > 1 ? nlohmann::json(hex64(share.digest)) : nlohmann::json()},
                                {"bytes", o.nodes > 1 ? nlohmann::json(share.bytes) : nlohmann::json()},
                                {"nodes", o.nodes > 1 ? share.nodes : nlohmann::json()}};
  v.details["exported"] = rs;
  v.details["injections"] = inj_json;
  v.details["transport"] = {{"kind", shared ? "gloo+" + shared->text : std::string("gloo+file_store")},
                            {"nodes", o.nodes},
                            {"node_index", node},
                            {"local_peers", o.peers},
                            {"notes", ran.notes},
                            {"peer_errors", ran.errors},
                            {"peer_exit_codes", ran.codes}};
  return emit_verdict(v, o.format);
}

}  // namespace

int run_replay(const ReplayOptions& o) {
  if (o.evidence_dir) return run_evidence(o);
  if (o.recipe_dir) return run_recipes(o);
  if (o.battery.empty())
    throw FatalError(usage_error("nothing to replay", "--battery is missing", "pass --battery standard"));
  if (o.store || o.nodes != 1 || o.node_index)
    throw FatalError(usage_error("--store, --nodes and --node-index belong to --recipe",
                                 "the battery runs its peers on this machine", "drop them, or use --recipe DIR"));
  check_common(o);

  const auto recipes = make_recipes(o);
  nlohmann::json inj_json = nlohmann::json::array();
  const auto injections = parse_injections(o, recipes, o.peers, inj_json);
  if (o.device == "cuda") check_cuda_module(o);

  // Golden file: read before running so bad input fails fast.
  std::optional<nlohmann::json> golden;
  if (o.golden && fs::exists(*o.golden)) {
    auto text = value_or_throw(read_small_file(*o.golden));
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || j.value("schema", "") != "scout.replay.golden" ||
        !j.contains("recipes") || !j["recipes"].is_object())
      throw FatalError(input_error(fmt::format("--golden {}: not a scout.replay.golden document", *o.golden), {},
                                   "pass a file an earlier 'scout replay --golden' wrote, or a new path to write one"));
    if (j.value("size", "") != o.size || j.value("seed", "") != std::to_string(o.seed))
      throw FatalError(
          input_error(fmt::format("--golden {}: written for size {} and seed {}", *o.golden, j.value("size", "?"),
                                  j.value("seed", "?")),
                      "golden hashes compare only the same battery",
                      fmt::format("run with --size {} --seed {}", j.value("size", "?"), j.value("seed", "?"))));
    golden = std::move(j);
  }

  auto ran = value_or_throw(replay::run_local_peers(local_peers_options(o), recipes, injections, std::nullopt, 0, 1,
                                                    fmt::format("replay-{}", getpid())));
  std::vector<std::optional<replay::PeerEvidence>>& evidence = ran.evidence;
  std::vector<int>& codes = ran.codes;
  std::vector<std::string>& errors = ran.errors;
  nlohmann::json& notes = ran.notes;
  Verdict v = replay::decide_replay(evidence, decide_options(o, "battery"));
  v.details["battery"] = {{"name", o.battery},
                          {"size", o.size},
                          {"seed", std::to_string(o.seed)},
                          {"threads", o.threads},
                          {"repeat", o.repeat},
                          {"device", o.device},
                          {"catalog", o.catalog ? nlohmann::json(*o.catalog) : nlohmann::json()}};
  v.details["injections"] = inj_json;
  v.details["transport"] = {
      {"kind", "gloo+file_store"}, {"notes", notes}, {"peer_errors", errors}, {"peer_exit_codes", codes}};

  if (o.golden) {
    const auto now = replay::golden_from_verdict(v);
    nlohmann::json gj = {{"file", *o.golden}};
    if (golden) {
      auto drift = replay::golden_drift((*golden)["recipes"], now);
      gj["action"] = "compared";
      gj["drift"] = drift;
      if (!drift.empty()) {
        v.summary += fmt::format(
            "; {} difference(s) from the golden image's hashes (numeric drift between images, not a disagreement "
            "between peers)",
            drift.size());
        if (v.status == VerdictStatus::healthy) v.action = "review_drift";
      }
    } else if (v.status == VerdictStatus::healthy) {
      nlohmann::json doc = {{"schema", "scout.replay.golden"},
                            {"schema_version", "1.0"},
                            {"created_at", now_rfc3339()},
                            {"battery", o.battery},
                            {"size", o.size},
                            {"seed", std::to_string(o.seed)},
                            {"recipes", now}};
      if (auto w = atomic_write_file(*o.golden, doc.dump(2) + "\n"); !w) throw FatalError(w.error());
      gj["action"] = "written";
      gj["drift"] = nlohmann::json::array();
    } else {
      gj["action"] = "not_written";
      gj["drift"] = nlohmann::json::array();
      gj["why"] = "the peers did not agree: a golden file is written only from a healthy run";
    }
    v.details["golden"] = gj;
  }
  return emit_verdict(v, o.format);
}

}  // namespace scout
