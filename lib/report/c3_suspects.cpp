#include "lib/report/c3_suspects.hpp"

namespace scout {

C3Attribution attribute_c3(std::string kind, std::vector<std::int64_t> members, C3Mode mode, const C3Result& result,
                           nlohmann::json values) {
  C3Attribution a;
  if (result.status != C3Status::inconclusive) {
    for (std::size_t i = 0; i < result.outliers.size() && i < members.size(); ++i)
      if (result.outliers[i]) a.outliers.push_back(i);
    if (result.majority_peer >= 0 && static_cast<std::size_t>(result.majority_peer) < members.size())
      a.majority = static_cast<std::size_t>(result.majority_peer);
  }
  a.run = make_group_run(std::move(kind), std::move(members), mode, result, std::move(values));
  return a;
}

std::vector<Suspect> suspects_from_c3(const C3Attribution& a, const std::function<void(std::size_t, Suspect&)>& fill) {
  std::vector<Suspect> out;
  out.reserve(a.outliers.size());
  for (auto i : a.outliers) {
    Suspect s;
    s.rank = a.run.members[i];
    if (fill) fill(i, s);
    if (!s.evidence.is_object()) s.evidence = nlohmann::json::object();
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<Suspect> suspects_from_c3(const C3Attribution& a, const std::string& reason,
                                      const std::function<nlohmann::json(std::size_t)>& evidence,
                                      const std::function<std::string(std::int64_t)>& node) {
  return suspects_from_c3(a, [&](std::size_t i, Suspect& s) {
    s.reason = reason;
    if (node) s.node = node(s.rank);
    s.evidence = evidence ? evidence(i) : nlohmann::json::object();
  });
}

}  // namespace scout
