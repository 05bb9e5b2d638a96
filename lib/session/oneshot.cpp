#include "lib/session/oneshot.hpp"

#include "lib/session/session.hpp"

namespace scout::session {

Result<OneShotResult> gather_once(transport::KeyValueStore& store, const OneShotOptions& options,
                                  const std::vector<std::uint8_t>& mine) {
  SessionOptions so;
  so.key_namespace = options.key_namespace;
  so.member = options.member;
  so.id_space = options.members;
  so.timeout = options.timeout;
  so.listen_address = options.listen_address;
  auto session = Session::open(store, so);
  if (!session) return session.error();
  OpOptions op;
  op.name = "gather";
  op.timeout = options.timeout;
  auto gathered = (*session)->all_gather(mine, op);
  if (!gathered) return gathered.error();
  OneShotResult out;
  out.blobs.resize(static_cast<std::size_t>(options.members));
  for (std::size_t i = 0; i < gathered->from.size() && i < out.blobs.size(); ++i) {
    const auto& c = gathered->from[i];
    if (c.state == Contribution::State::ok) {
      out.blobs[i] = c.data;
    } else if (c.state != Contribution::State::absent || static_cast<std::int64_t>(i) != options.member) {
      out.notes.push_back("member " + std::to_string(i) + ": " + std::string(contribution_state_name(c.state)) +
                          (c.reason.empty() ? "" : " (" + c.reason + ")"));
    }
  }
  out.notes.insert(out.notes.end(), (*session)->notes().begin(), (*session)->notes().end());
  (*session)->close();
  return out;
}

}  // namespace scout::session
