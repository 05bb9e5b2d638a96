// The adversary of the forged-blob integration test: a process that has learned
// a probe's store namespace (for instance from a leaked log line) but not the
// job token's key. It joins the observers' gather as observer 1 through the real
// store and Gloo TCP (a session member), offering evidence that would frame a rank: the lowest
// local rank is reported stopped, the others alive. Signed with the wrong key,
// the blob must be rejected and reported by every real observer, never believed.
//
//   scout_test_forge_observer JOB TOKEN STORE_DIR SHM_DIR FIRST_RANK LAST_RANK TIMEOUT_MS
// Prints "forged rank R" before gathering, then the number of positions it received.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "lib/common/clock.hpp"
#include "lib/common/parse.hpp"
#include "lib/hang/evidence.hpp"
#include "lib/hang/position.hpp"
#include "lib/hang/probe.hpp"
#include "lib/records/reader.hpp"
#include "lib/session/session.hpp"
#include "lib/transport/auth.hpp"
#include "lib/transport/store.hpp"

int main(int argc, char** argv) {
  using namespace scout;
  if (argc != 8) {
    std::fprintf(stderr, "usage: %s JOB TOKEN STORE_DIR SHM_DIR FIRST_RANK LAST_RANK TIMEOUT_MS\n", argv[0]);
    return 2;
  }
  const std::string job = argv[1], token = argv[2], store_dir = argv[3], shm_dir = argv[4];
  auto first = parse_int(argv[5], "FIRST_RANK"), last = parse_int(argv[6], "LAST_RANK"),
       timeout = parse_int(argv[7], "TIMEOUT_MS");
  if (!first || !last || !timeout) return 2;

  records::ReaderOptions ro;
  ro.job = job;
  ro.shm_dir = shm_dir;
  auto reads = records::read_records(ro);
  if (!reads) {
    std::fprintf(stderr, "%s\n", reads.error().message().c_str());
    return 5;
  }
  hang::ProbeOptions po;
  po.job = job;
  po.nodes = 2;
  po.local_ranks = std::set<std::int64_t>();
  for (auto r = *first; r <= *last; ++r) po.local_ranks->insert(r);
  hang::NodeEvidence e = hang::collect_evidence(*reads, po, 1, scout::realtime_ns());
  if (e.ranks.empty()) {
    std::fprintf(stderr, "no records of ranks %lld-%lld\n", static_cast<long long>(*first),
                 static_cast<long long>(*last));
    return 5;
  }
  auto* victim = &e.ranks.front();
  for (auto& r : e.ranks) {
    r.process.state = hang::ProcessState::alive;
    r.writer_alive = true;
    if (r.snapshot.rank < victim->snapshot.rank) victim = &r;
  }
  victim->process.state = hang::ProcessState::stopped;
  victim->process.raw_state = 'T';
  std::printf("forged rank %lld\n", static_cast<long long>(victim->snapshot.rank));
  std::fflush(stdout);

  // The namespace of the real token, the key of another.
  const auto real = transport::JobToken::from_secret(job, "", token, true);
  const auto wrong = transport::JobToken::from_secret(job, "", token + "-guessed", true);
  auto store = transport::open_store(*transport::parse_store_uri("file://" + store_dir), false,
                                     std::chrono::milliseconds(*timeout));
  if (!store) return 5;
  // It joins the session as a member like any other, but signs with the wrong key.
  session::SessionOptions so;
  so.key_namespace = real.key_namespace();
  so.member = 1;
  so.id_space = 2;
  so.timeout = std::chrono::milliseconds(*timeout);
  so.listen_address = "127.0.0.1";
  so.signer = &wrong;
  auto joined = session::Session::open(**store, so);
  if (!joined) {
    std::fprintf(stderr, "%s\n", joined.error().message().c_str());
    return 5;
  }
  // The probe's own two phases: a position that does not prove the job healthy, then the blob.
  session::TwoPhaseRequest rq;
  rq.name = "evidence";
  rq.position = hang::encode_node_position(e);
  rq.position_bytes = hang::k_node_position_bytes;
  const auto blob = hang::serialize(e);
  rq.details = [&blob] { return blob; };
  rq.select = [](const session::PositionTable& t) { return hang::select_evidence(t, 10'000'000'000LL); };
  rq.decide = [](const session::PositionTable&, const std::map<std::int64_t, session::Bytes>&) {
    return session::Bytes{};
  };
  rq.op.timeout = std::chrono::milliseconds(*timeout) / 2;
  auto g = (*joined)->two_phase(rq);
  (*joined)->close();
  if (!g) {
    std::fprintf(stderr, "%s\n", g.error().message().c_str());
    return 5;
  }
  std::size_t got = 0;
  for (const auto& c : g->positions_from)
    got += c.state != session::Contribution::State::absent && c.state != session::Contribution::State::lost;
  std::printf("received %zu blobs\n", got);
  return 0;
}
