// The job token: only observers of the same job and attempt may meet. The
// token namespaces the store keys and authenticates every gathered evidence
// blob with HMAC-SHA256 (OpenSSL), so a stray observer of another job never
// meets this job's observers and a forged blob is rejected, not believed. The
// stray is still reported: every observer also announces itself under a
// token-independent presence key with its key id (lib/transport/presence.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/common/error.hpp"

namespace scout::transport {

// Environment variable the launcher sets to the job token.
inline constexpr const char* k_token_env = "SCOUT_JOB_TOKEN";
// Length of the HMAC-SHA256 tag appended to a signed blob.
inline constexpr std::size_t k_tag_size = 32;

class JobToken {
 public:
  // From `token_file` when given (first line; must not be readable by others),
  // else from $SCOUT_JOB_TOKEN, else an unauthenticated default derived from
  // the job id (authenticated() is false then). Errors: unreadable or empty file.
  static Result<JobToken> load(const std::string& job, const std::string& attempt, const std::string& token_file);
  // A token from its secret (tests).
  static JobToken from_secret(const std::string& job, const std::string& attempt, const std::string& secret,
                              bool authenticated);

  bool authenticated() const { return m_authenticated; }
  // Store key namespace: "scout/<job>/<attempt>/<16 hex of a digest of the token>".
  const std::string& key_namespace() const { return m_namespace; }
  // A public name for the token (16 hex of a digest under another label than
  // the namespace's: it reveals neither the token nor the namespace). Observers
  // of one job and attempt share it; a different one means another token.
  const std::string& key_id() const { return m_key_id; }
  // Where every observer of the job announces itself, whatever its token or
  // attempt: "scout/<job>/presence". See lib/transport/presence.hpp.
  const std::string& presence_prefix() const { return m_presence_prefix; }
  const std::string& attempt() const { return m_attempt; }

  // `blob` followed by HMAC(key, context || blob); context binds it to a probe and a sender.
  std::vector<std::uint8_t> sign(const std::vector<std::uint8_t>& blob, const std::string& context) const;
  // The blob inside `signed_blob` when its tag verifies for `context`; nullopt otherwise.
  std::optional<std::vector<std::uint8_t>> verify(const std::vector<std::uint8_t>& signed_blob,
                                                  const std::string& context) const;

 private:
  std::array<std::uint8_t, 32> m_key{};
  std::string m_namespace;
  std::string m_key_id;
  std::string m_presence_prefix;
  std::string m_attempt;
  bool m_authenticated = false;
};

}  // namespace scout::transport
