#include "lib/transport/auth.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/opensslv.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

namespace scout::transport {

namespace {

// OpenSSL's libcrypto, loaded on first use rather than linked: binding its
// symbols cost every scout process ~1.5 ms and ~120 page faults at start-up
// (3,400 of the 7,900 dynamic bindings of `scout verify-ckpt`), and only the
// observers' job token uses it. The same library the build compiled against,
// by its soname; the functions keep their declared types (decltype).
struct Crypto {
  decltype(&EVP_Digest) digest = nullptr;
  decltype(&EVP_sha256) sha256 = nullptr;
  decltype(&HMAC) hmac = nullptr;
};

std::string libcrypto_soname() {
#if defined(OPENSSL_VERSION_MAJOR) && OPENSSL_VERSION_MAJOR >= 3
  return fmt::format("libcrypto.so.{}", OPENSSL_VERSION_MAJOR);  // libcrypto.so.3 whatever the minor version
#else
  return "libcrypto.so.1.1";
#endif
}

const Crypto& crypto() {
  static const Crypto c = [] {
    Crypto c;
    const std::string name = libcrypto_soname();
    void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* why = dlerror();
      throw FatalError(unavailable_error(fmt::format("cannot load OpenSSL's {} (the job token's HMAC-SHA256)", name),
                                         why ? why : "", "install OpenSSL 3 (libssl3 / openssl-libs)"));
    }
    c.digest = reinterpret_cast<decltype(&EVP_Digest)>(dlsym(h, "EVP_Digest"));
    c.sha256 = reinterpret_cast<decltype(&EVP_sha256)>(dlsym(h, "EVP_sha256"));
    c.hmac = reinterpret_cast<decltype(&HMAC)>(dlsym(h, "HMAC"));
    if (!c.digest || !c.sha256 || !c.hmac)
      throw FatalError(unavailable_error(fmt::format("{} lacks EVP_Digest, EVP_sha256 or HMAC", name)));
    return c;
  }();
  return c;
}

std::array<std::uint8_t, 32> sha256(const std::string& data) {
  std::array<std::uint8_t, 32> out{};
  unsigned int len = 0;
  const Crypto& c = crypto();
  c.digest(data.data(), data.size(), out.data(), &len, c.sha256(), nullptr);
  return out;
}

// Compares in time independent of where the bytes differ (as CRYPTO_memcmp).
bool equal_const_time(const std::uint8_t* a, const std::uint8_t* b, std::size_t n) {
  volatile std::uint8_t diff = 0;
  for (std::size_t i = 0; i < n; ++i) diff = diff | static_cast<std::uint8_t>(a[i] ^ b[i]);
  return diff == 0;
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
  const Crypto& c = crypto();
  c.hmac(c.sha256(), key.data(), static_cast<int>(key.size()), msg.data(), msg.size(), out.data(), &out_len);
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
  if (!equal_const_time(t.data(), signed_blob.data() + n, k_tag_size)) return std::nullopt;
  return std::vector<std::uint8_t>(signed_blob.begin(), signed_blob.begin() + static_cast<std::ptrdiff_t>(n));
}

}  // namespace scout::transport
