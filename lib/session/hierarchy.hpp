// A two-level session that scales with the job: members meet in groups (a
// rack, a peer group: at most a few dozen members, one Gloo full mesh each),
// and the lowest member of each group, its leader, meets the other leaders in
// a second group. No member connects to more than (group size - 1) peers, a
// leader to (group size - 1) + (groups - 1); a flat session of N members
// connects N - 1 each and N (N - 1) / 2 pairs in all. The cost model is in
// lib/session/README.md ("Observer session: cost model"); bench/session_scale.py
// measures it.
//
// Keys: level 1 under "<namespace>/hier/grp<K>/g<G>/...", level 2 (member id
// = group index) under "<namespace>/hier/top/g<G>/..."; each level finds its
// own fresh generation and forms, re-forms and closes like any Session.
// A two-phase gather (TwoPhaseRequest) runs as: positions all-gathered in the
// group; leaders all-gather their groups' blocks (the whole table); every
// leader runs `select` on the same table; the selection is broadcast in each
// group; only the selected members send details, which go up the same way;
// every leader runs `decide` and broadcasts the decision in its group. A
// group whose leader is lost mid-way gets an error, not a decision; a group
// that never reaches the leaders is missing from the table (absent).
#pragma once

#include <memory>

#include "lib/session/session.hpp"

namespace scout::session {

struct HierarchyOptions {
  SessionOptions member;  // this member, the id space, namespace, signer; forming takes up to
                          // timeout (the group) + 2 x timeout (the leaders, who wait for late groups)
  std::vector<std::int64_t>
      group_of;  // group label per id (id_space entries, labels 0..groups-1); empty: id / group_size
  std::int64_t group_size = 32;
};

class Hierarchy {
 public:
  static Result<std::unique_ptr<Hierarchy>> open(transport::KeyValueStore& store, const HierarchyOptions& options);
  ~Hierarchy();

  Session& group() { return *m_group; }
  // The leaders' session; null unless this member leads its group.
  Session* leaders() { return m_top.get(); }
  std::int64_t group_index() const { return m_group_index; }
  std::int64_t groups() const { return m_groups; }
  bool leads() const { return m_top != nullptr; }
  const transport::TrafficCounters& traffic() const { return *m_traffic; }
  // Notes of both levels, for transport details.
  std::vector<std::string> notes() const;

  Result<TwoPhaseResult> two_phase(const TwoPhaseRequest& request);
  void close();

 private:
  Hierarchy() = default;
  std::unique_ptr<Session> m_group;
  std::unique_ptr<Session> m_top;
  std::vector<std::int64_t> m_group_of;
  std::int64_t m_group_index = 0;
  std::int64_t m_groups = 1;
  std::int64_t m_id_space = 1;
  std::shared_ptr<transport::TrafficCounters> m_traffic;
};

}  // namespace scout::session
