// One C3 result turned into what a verdict is made of: the group run it
// shows, the peers it attributes (outliers) and the peer holding the majority
// value. Shared by every command that decides by consensus (hang decisions,
// consensus, verify-ckpt; replay and straggler next), so that "a strict
// minority differs" means the same outliers, the same majority and the same
// suspects everywhere.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lib/consensus/c3.hpp"
#include "lib/report/verdict.hpp"

namespace scout {

struct C3Attribution {
  GroupRun run;                         // for Verdict::groups
  std::vector<std::size_t> outliers;    // peer indices (into run.members) C3 attributes
  std::optional<std::size_t> majority;  // a peer holding the strict-majority value, when one exists
  // True when C3 reached a decision (agree or attributed): an inconclusive run names nobody.
  bool decided() const { return run.status != C3Status::inconclusive; }
};

// The attribution of `result` (C3 over `members`, in peer order, with the
// gathered `values`). An inconclusive result attributes no peer and has no majority.
C3Attribution attribute_c3(std::string kind, std::vector<std::int64_t> members, C3Mode mode, const C3Result& result,
                           nlohmann::json values);

// One Suspect per attributed peer (rank = its member id), with `reason` and
// the evidence `evidence(peer index)` returns (an empty object when not given),
// `node(member)` as its node when given.
std::vector<Suspect> suspects_from_c3(const C3Attribution& attribution, const std::string& reason,
                                      const std::function<nlohmann::json(std::size_t)>& evidence = {},
                                      const std::function<std::string(std::int64_t)>& node = {});

// One Suspect per attributed peer, in peer order: rank = its member id, then
// `fill(peer index, suspect)` sets the rest (reason, evidence; rank or node
// where the member id is not the rank to report). An evidence that is not an
// object becomes an empty object.
std::vector<Suspect> suspects_from_c3(const C3Attribution& attribution,
                                      const std::function<void(std::size_t, Suspect&)>& fill);

}  // namespace scout
