// Standard base64 (RFC 4648, alphabet A-Z a-z 0-9 + /, '=' padding): how etcd's JSON gateway
// carries keys and values (lib/transport/etcd_store.cpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace scout {

// `bytes` in base64, padded.
std::string base64_encode(std::string_view bytes);

// The bytes of padded base64 `text`; nullopt for a character outside the alphabet, a bad length
// or misplaced padding.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace scout
