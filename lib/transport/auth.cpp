#include "lib/transport/auth.hpp"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

namespace scout::transport {

namespace {

std::array<std::uint8_t, 32> sha256(const std::string& data) {
  std::array<std::uint8_t, 32> out{};
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_sha256(), nullptr);
  return out;
}

std::string hex(const std::uint8_t* p, std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += fmt::format("{:02x}", p[i]);
  return s;
}

std::string sanitize(const std::string& s) {
  std::string out;
  for (char c : s.substr(0, 100))
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  return out.empty() ? "_" : out;
}

std::array<std::uint8_t, 32> tag(const std::array<std::uint8_t, 32>& key, const std::string& context,
                                 const std::uint8_t* data, std::size_t len) {
  std::array<std::uint8_t, 32> out{};
  // Length-prefix the context so (context, blob) splits are unambiguous.
  std::string header = fmt::format("{}:{}|", context.size(), context);
  std::vector<std::uint8_t> msg(header.begin(), header.end());
  msg.insert(msg.end(), data, data + len);
  unsigned int out_len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), msg.data(), msg.size(), out.data(), &out_len);
  return out;
}

}  // namespace

JobToken JobToken::from_secret(const std::string& job, const std::string& attempt, const std::string& secret,
                               bool authenticated) {
  JobToken t;
  t.m_key = sha256("scout-hmac-key\n" + job + "\n" + attempt + "\n" + secret);
  auto ns = sha256("scout-namespace\n" + job + "\n" + attempt + "\n" + secret);
  t.m_namespace = fmt::format("scout/{}/{}/{}", sanitize(job), sanitize(attempt), hex(ns.data(), 8));
  auto id = sha256("scout-key-id\n" + job + "\n" + attempt + "\n" + secret);
  t.m_key_id = hex(id.data(), 8);
  t.m_presence_prefix = fmt::format("scout/{}/presence", sanitize(job));
  t.m_attempt = attempt;
  t.m_authenticated = authenticated;
  return t;
}

Result<JobToken> JobToken::load(const std::string& job, const std::string& attempt, const std::string& token_file) {
  if (!token_file.empty()) {
    struct stat st {};
    if (::stat(token_file.c_str(), &st) != 0)
      return usage_error(fmt::format("--token-file {} cannot be read", token_file), {},
                         "give the file the launcher wrote");
    if (st.st_mode & (S_IRWXG | S_IRWXO))
      return input_error(fmt::format("--token-file {} is readable by other users", token_file),
                         "a job token is a secret", fmt::format("chmod 600 {}", token_file));
    std::ifstream in(token_file);
    std::string line;
    std::getline(in, line);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty()) return input_error(fmt::format("--token-file {} is empty", token_file));
    return from_secret(job, attempt, line, true);
  }
  if (const char* env = std::getenv(k_token_env); env != nullptr && *env != '\0')
    return from_secret(job, attempt, env, true);
  return from_secret(job, attempt, "", false);
}

std::vector<std::uint8_t> JobToken::sign(const std::vector<std::uint8_t>& blob, const std::string& context) const {
  auto t = tag(m_key, context, blob.data(), blob.size());
  std::vector<std::uint8_t> out = blob;
  out.insert(out.end(), t.begin(), t.end());
  return out;
}

std::optional<std::vector<std::uint8_t>> JobToken::verify(const std::vector<std::uint8_t>& signed_blob,
                                                          const std::string& context) const {
  if (signed_blob.size() < k_tag_size) return std::nullopt;
  std::size_t n = signed_blob.size() - k_tag_size;
  auto t = tag(m_key, context, signed_blob.data(), n);
  if (CRYPTO_memcmp(t.data(), signed_blob.data() + n, k_tag_size) != 0) return std::nullopt;
  return std::vector<std::uint8_t>(signed_blob.begin(), signed_blob.begin() + static_cast<std::ptrdiff_t>(n));
}

}  // namespace scout::transport
