// Content digests of inputs (calibration files, report inputs).
#pragma once

#include <string>

namespace dockyard {

// Lower-case hex SHA-256 of `data` (OpenSSL EVP). Throws dockyard::Error if OpenSSL fails.
std::string Sha256Hex(const std::string& data);

}  // namespace dockyard
