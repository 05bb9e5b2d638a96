// Temporary names for snapshot.hpp's enums until the record reader branch
// (hang-records) lands its snapshot.cpp; removed at that merge.
#include "lib/records/snapshot.hpp"

namespace scout::records {
std::string_view phase_name(Phase p) {
  static constexpr std::string_view n[] = {"unknown", "forward", "backward", "optimizer", "dataloader", "checkpoint", "collective", "idle"};
  return static_cast<int>(p) < 8 ? n[static_cast<int>(p)] : "invalid";
}
std::string_view collective_type_name(CollectiveType t) {
  static constexpr std::string_view n[] = {"none", "all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
                                           "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "broadcast", "reduce",
                                           "gather", "scatter", "barrier", "send", "recv", "other"};
  return static_cast<int>(t) < 16 ? n[static_cast<int>(t)] : "invalid";
}
std::string_view collective_state_name(CollectiveState s) {
  static constexpr std::string_view n[] = {"none", "entering", "inside", "done"};
  return static_cast<int>(s) < 4 ? n[static_cast<int>(s)] : "invalid";
}
std::string_view record_problem_name(RecordProblem p) {
  static constexpr std::string_view n[] = {"none", "torn", "bad_magic", "unknown_version", "wrong_size", "other_owner", "other_job", "unreadable", "corrupt"};
  return static_cast<int>(p) < 9 ? n[static_cast<int>(p)] : "invalid";
}
}  // namespace scout::records
