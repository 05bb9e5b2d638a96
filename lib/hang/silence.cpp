#include "lib/hang/silence.hpp"

#include <algorithm>

namespace scout::hang {

std::int64_t last_progress_ns(const records::RankSnapshot& s) {
  if (s.progress_ns > 0) return s.progress_ns;
  if (s.heartbeat_ns > 0) return s.heartbeat_ns;
  return s.start_ns;
}

void Silence::add_rank(const records::RankSnapshot& snapshot, ProcessState process) {
  if (snapshot.op_seq > 0) m_newest = std::max(m_newest, last_progress_ns(snapshot));
  m_bad_process |= process == ProcessState::stopped || is_dead(process);
}

void Silence::add_issue(std::string_view problem, bool writer_alive) {
  if (!writer_alive && problem == "torn") m_bad_process = true;
}

Silence silence_of(const NodeEvidence& evidence) {
  Silence s;
  for (const auto& r : evidence.ranks) s.add_rank(r);
  for (const auto& i : evidence.issues) s.add_issue(i);
  return s;
}

}  // namespace scout::hang
