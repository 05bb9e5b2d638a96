// Helpers shared by the stages of the hang decision, and the names of its measures.
#include "lib/common/hex.hpp"
#include "lib/hang/decide/stages.hpp"

namespace scout::hang::stages {

std::string hex_id(std::uint64_t id) {
  return hex64(id);
}

std::string process_reason(const ProcessEvidence& p) {
  switch (p.state) {
    case ProcessState::stopped:
      return "process_stopped";
    case ProcessState::exited:
      return p.signal != 0 ? "process_killed_by_signal" : "process_exited";
    case ProcessState::gone:
      return "process_gone";
    case ProcessState::disk_sleep:
      return "process_in_uninterruptible_sleep";
    default:
      return "process_state";
  }
}

json process_json(const ProcessEvidence& p, std::int64_t pid) {
  json j = {{"state", process_state_name(p.state)}, {"pid", pid}};
  if (p.raw_state != '?') j["raw_state"] = std::string(1, p.raw_state);
  if (p.exit_code >= 0) j["exit_code"] = p.exit_code;
  if (p.signal != 0) j["signal"] = p.signal;
  if (p.pid_reused) j["pid_reused"] = true;
  if (!p.detail.empty()) j["detail"] = p.detail;
  return j;
}

std::string_view measure_name(Measure m) {
  switch (m) {
    case Measure::position:
      return "position";
    case Measure::step:
      return "step";
    case Measure::call_arguments:
      return "call_arguments";
    case Measure::history:
      return "history";
    case Measure::history_structure:
      return "history_structure";
    case Measure::stage_arguments:
      return "stage_arguments";
    case Measure::wait_chain_end:
      return "wait_chain_end";
    case Measure::died_inside:
      return "died_inside";
    case Measure::process_stopped:
      return "process_stopped";
    case Measure::torn_record:
      return "torn_record";
    case Measure::first_failure:
      return "first_failure";
    case Measure::first_failed_node:
      return "first_failed_node";
    case Measure::killed_node:
      return "killed_node";
    case Measure::lost_node:
      return "lost_node";
    case Measure::uninterruptible_sleep:
      return "uninterruptible_sleep";
    case Measure::unreachable_observer:
      return "unreachable_observer";
  }
  return "position";
}

std::string_view measure_stage(Measure m) {
  switch (m) {
    case Measure::position:
    case Measure::step:
    case Measure::call_arguments:
    case Measure::history:
    case Measure::history_structure:
    case Measure::stage_arguments:
      return "compare_groups";
    case Measure::wait_chain_end:
    case Measure::died_inside:
    case Measure::process_stopped:
    case Measure::torn_record:
    case Measure::first_failure:
    case Measure::first_failed_node:
    case Measure::killed_node:
    case Measure::lost_node:
    case Measure::uninterruptible_sleep:
      return "explain";
    case Measure::unreachable_observer:
      return "conclude";
  }
  return "compare_groups";
}

}  // namespace scout::hang::stages
