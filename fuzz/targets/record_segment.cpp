// Fuzz target: the shared-memory record reader's validation of a segment's
// bytes (lib/records/reader.cpp: magic, version, size, job, contents, the
// latch and the ring slots), and gc's judgement of the same segment.
//
// Input: byte 0 chooses the form. Even: the rest is the segment file as is
// (any size). Odd: a valid record of job "fuzzjob" rank 0 of 1 is built and
// the rest of the input is copied over it from word offset byte 1, so that
// mutations reach the progress block and the ring behind a valid header.
// Bit 1 of byte 0: read as job "fuzzjob" (else as any job).
#include <cstring>

#include "fuzz/targets/fuzz_support.hpp"
#include "lib/records/layout.hpp"
#include "lib/records/reader.hpp"

using namespace scout;
namespace L = scout::records::layout;

namespace {

std::vector<std::uint8_t> valid_record() {
  static_assert(sizeof(L::Record) % 8 == 0);
  std::vector<std::uint64_t> w(sizeof(L::Record) / 8, 0);
  auto* rec = reinterpret_cast<L::Record*>(w.data());
  rec->header.magic.store(L::k_magic);
  rec->header.version.store(L::k_layout_version);
  rec->header.size.store(sizeof(L::Record));
  rec->header.world_size.store(1);
  L::store_string(rec->header.job, L::k_job_words, "fuzzjob");
  L::store_string(rec->header.attempt, L::k_attempt_words, "0");
  L::store_string(rec->header.host, L::k_host_words, "host");
  // One collective entered and left, in both copies and in ring slot 0.
  for (auto& p : rec->progress) {
    p.step.store(1);
    p.op_seq.store(2);
    p.small.store(L::pack_small(3, 3, 1, 2));
    p.group.store(5);
    p.count.store(10);
    p.group_seq.store(1);
    p.pending_op_seq.store(1);
    p.events.store(1);
  }
  rec->latch.store(2);
  rec->ring[0].seq.store(2);
  rec->ring[0].op_seq.store(1);
  rec->ring[0].small.store(L::pack_small(0, 0, 1, 2));
  rec->ring[0].group.store(5);
  rec->ring[0].count.store(10);
  rec->ring[0].group_seq.store(1);
  rec->ring[0].enter_ns.store(100);
  rec->ring[0].exit_ns.store(200);
  std::vector<std::uint8_t> out(sizeof(L::Record));
  std::memcpy(out.data(), w.data(), out.size());
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t form = data[0];
  std::vector<std::uint8_t> image;
  if ((form & 1) == 0) {
    image.assign(data + 1, data + size);
  } else {
    static const std::vector<std::uint8_t> base = valid_record();
    image = base;
    if (size >= 2) {
      std::size_t at = (std::size_t{data[1]} * 8 * 3) % image.size();
      std::size_t n = std::min(size - 2, image.size() - at);
      std::memcpy(image.data() + at, data + 2, n);
    }
  }
  const std::string name = "scout.fuzzjob.0";
  fuzz::write_scratch(name, image.data(), image.size(), 0600);
  records::ReaderOptions o;
  o.shm_dir = fuzz::scratch_dir();
  o.job = (form & 2) != 0 ? "fuzzjob" : "";
  o.read_timeout = std::chrono::milliseconds(1);
  auto read = records::read_segment(name, o);
  SCOUT_FUZZ_CHECK(read.snapshot.has_value() == (read.problem == records::RecordProblem::none));
  if (read.snapshot) {
    const auto& s = *read.snapshot;
    SCOUT_FUZZ_CHECK(s.rank >= 0 && s.rank < s.world_size);
    SCOUT_FUZZ_CHECK(s.recent.size() <= L::k_ring_size);
    for (std::size_t i = 0; i < s.recent.size(); ++i) {
      SCOUT_FUZZ_CHECK(s.recent[i].op_seq >= 1 && s.recent[i].op_seq <= s.op_seq);
      if (i > 0) SCOUT_FUZZ_CHECK(s.recent[i - 1].op_seq <= s.recent[i].op_seq);
    }
  } else {
    SCOUT_FUZZ_CHECK(!read.message.empty());
  }
  auto all = records::read_records(o);
  SCOUT_FUZZ_CHECK(all.ok());
  auto gc = records::gc_records(o, records::GcMode::dry_run);
  SCOUT_FUZZ_CHECK(gc.ok());
  // Segment names come from a directory listing: any text must parse or be refused.
  std::string_view tail(reinterpret_cast<const char*>(data), std::min<std::size_t>(size, 300));
  (void)records::parse_segment_name(tail);
  return 0;
}
