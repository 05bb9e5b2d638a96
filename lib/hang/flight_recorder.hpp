// torch Flight Recorder dumps as hang evidence (`scout probe-hang
// --flight-recorder DIR`), for jobs that ran with torch's Flight Recorder on
// and with or without scout's publisher.
//
// A dump is one rank's recorder, in either form torch 2.8 to 2.15 write (format
// "version" 2.9 or 2.10; another major, or an entry without a field the
// snapshot is made of, is refused by name; a file cut short says so): the
// pickled dump-on-timeout file (_dump_fr_trace, what torch's fr_trace reads;
// read with lib/pickle and an empty allow-list: torch pickles only plain
// containers and scalars) or its JSON twin (_dump_fr_trace_json), told apart
// by the first byte. One file per rank; the rank is the number that ends the
// file name (torch's TORCH_FR_DUMP_TEMP_FILE<rank> convention, an optional
// ".json" after it).
//
// Each dump becomes the same snapshot a progress record gives: the pending
// collective is the rank's last entry (inside, unless the backend timed its
// completion: gloo marks a timed-out op retired like a completed one and
// records no completion time, and a dump is taken on a timeout), its group the scout id of the pg's ranks (pg_config),
// its type from profiling_name, count and dtype from input_sizes / input_dtypes, its per-group sequence number
// collective_seq_id (p2p_seq_id for point-to-point, with the pair's id as in the publisher; for pgs over the same
// members that pg_config names, "twins", the twins' calls counted together, as the publisher counts them), and the
// most recent entries as the event ring. Process evidence is unknown (a dump has no pid).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/common/error.hpp"
#include "lib/records/snapshot.hpp"
#include "lib/report/verdict.hpp"

namespace scout::hang {

// The largest world the dumps of a directory may have (every rank's view,
// group and coordinates are sized by it).
inline constexpr std::int64_t k_max_flight_recorder_world = std::int64_t{1} << 20;

// Parses one dump (pickle or JSON bytes) as rank `rank` of job `job`. Input error (what
// and where) on anything malformed.
Result<records::RankSnapshot> snapshot_from_flight_recorder(const std::string& json_text, std::int64_t rank,
                                                            const std::string& job);

// The world the dumps were read with, and what told it: "given" (--world,
// --mesh), "pg_config" (a pg_config entry listing every rank: NCCL's),
// "collective_sizes" (the default pg's all-gathers or reduce-scatters gather
// every rank), or "" (only the highest rank the dumps name: a last rank that
// left no dump cannot be seen).
// `short_pgs`: where nothing told it, the pgs that show a member beyond the ranks that dumped (in a
// family of pgs that partitions those ranks, one smaller than the family's largest: "pg 2 (called only
// by rank 2)"); such dumps are never read as a job whose ranks all finished.
struct DumpsWorld {
  std::int64_t world = 0;
  std::string told_by;
  std::vector<std::string> short_pgs;
};

// The note a verdict on dumps read with `w` carries where nothing told the
// world ("" where it was told).
std::string untold_world_note(const DumpsWorld& w);

// The verdict on dumps read with `w`, told what the dumps leave open: the
// note above (details.notes), and where `w.short_pgs` shows a member beyond
// the ranks that dumped, a verdict of healthy or group_stall naming nobody
// becomes inconclusive (the survivors of a last rank that exited may have had
// their failed calls retired by gloo; --world N names it).
void qualify_verdict(const DumpsWorld& w, Verdict& v);

// Every dump in `dir` as a record read (one per file whose name ends in a rank
// number), read together: a pg's members are its pg_config's, else (gloo) the
// ranks whose dumps call it when every rank left one; a newest call every
// member made with the same arguments and retired is done (a clean job reads
// finished); each rank's coordinates come from the pgs' families (DeviceMesh
// descriptions name dp/tp/...; unnamed families are never replicas; where the
// dumps cannot tell, every rank stands alone: pp = world). `world`: the job's
// world size where the caller knows it (--world, --mesh), else nullopt: the
// largest rank any dump or pg_config names (NCCL's pg_config lists the
// world; gloo's one config does not), or the world the default pg's
// all-gathers or reduce-scatters gather, where larger; else a last rank that
// left no dump does not show (`world_source` says which told it). With it,
// each rank in [0, world) without a dump is missing and the world's pgs count
// it as a member. Input error when the directory cannot be read, has no dump,
// two files claim one rank, or a dump or pg_config names a rank at or beyond
// `world`; a malformed or truncated dump is an error too, naming its file
// (never skipped).
Result<std::vector<records::RecordRead>> read_flight_recorder_dir(const std::string& dir, const std::string& job,
                                                                  std::optional<std::int64_t> world = std::nullopt,
                                                                  DumpsWorld* world_source = nullptr);

}  // namespace scout::hang
