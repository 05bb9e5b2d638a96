#include "lib/records/snapshot.hpp"

#include "lib/records/layout.hpp"

namespace scout::records {

// The numeric values are shared with the C publisher (scout_publisher.h) and
// packed into the record by layout::pack_small.
static_assert(static_cast<int>(Phase::idle) == 7 && static_cast<int>(CollectiveType::other) == 15);
static_assert(static_cast<int>(CollectiveState::inside) == 2 && static_cast<int>(CollectiveState::done) == 3 &&
              static_cast<int>(CollectiveState::failed) == 4);

std::string_view phase_name(Phase phase) {
  switch (phase) {
    case Phase::unknown:
      return "unknown";
    case Phase::forward:
      return "forward";
    case Phase::backward:
      return "backward";
    case Phase::optimizer:
      return "optimizer";
    case Phase::dataloader:
      return "dataloader";
    case Phase::checkpoint:
      return "checkpoint";
    case Phase::collective:
      return "collective";
    case Phase::idle:
      return "idle";
    case Phase::comm_error:
      return "comm_error";
    case Phase::terminated:
      return "terminated";
  }
  return "invalid";
}

std::string_view collective_type_name(CollectiveType type) {
  switch (type) {
    case CollectiveType::none:
      return "none";
    case CollectiveType::all_reduce:
      return "all_reduce";
    case CollectiveType::all_gather:
      return "all_gather";
    case CollectiveType::all_gather_into_tensor:
      return "all_gather_into_tensor";
    case CollectiveType::reduce_scatter:
      return "reduce_scatter";
    case CollectiveType::reduce_scatter_tensor:
      return "reduce_scatter_tensor";
    case CollectiveType::all_to_all:
      return "all_to_all";
    case CollectiveType::all_to_all_single:
      return "all_to_all_single";
    case CollectiveType::broadcast:
      return "broadcast";
    case CollectiveType::reduce:
      return "reduce";
    case CollectiveType::gather:
      return "gather";
    case CollectiveType::scatter:
      return "scatter";
    case CollectiveType::barrier:
      return "barrier";
    case CollectiveType::send:
      return "send";
    case CollectiveType::recv:
      return "recv";
    case CollectiveType::other:
      return "other";
  }
  return "invalid";
}

std::string_view exit_kind_name(ExitKind kind) {
  switch (kind) {
    case ExitKind::unknown:
      return "unknown";
    case ExitKind::returned:
      return "returned";
    case ExitKind::completed:
      return "completed";
    case ExitKind::waited:
      return "waited";
    case ExitKind::ordered:
      return "ordered";
  }
  return "invalid";
}

std::string_view collective_state_name(CollectiveState state) {
  switch (state) {
    case CollectiveState::none:
      return "none";
    case CollectiveState::entering:
      return "entering";
    case CollectiveState::inside:
      return "inside";
    case CollectiveState::done:
      return "done";
    case CollectiveState::failed:
      return "failed";
  }
  return "invalid";
}

std::string_view record_problem_name(RecordProblem problem) {
  switch (problem) {
    case RecordProblem::none:
      return "none";
    case RecordProblem::torn:
      return "torn";
    case RecordProblem::bad_magic:
      return "bad_magic";
    case RecordProblem::unknown_version:
      return "unknown_version";
    case RecordProblem::wrong_size:
      return "wrong_size";
    case RecordProblem::other_owner:
      return "other_owner";
    case RecordProblem::other_job:
      return "other_job";
    case RecordProblem::unreadable:
      return "unreadable";
    case RecordProblem::corrupt:
      return "corrupt";
  }
  return "invalid";
}

}  // namespace scout::records
