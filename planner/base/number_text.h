// Numbers from text, strictly: the whole text must be the number (routing specs "zipf:1.2",
// CSV traces). Return false instead of throwing; the caller names the field and the rule.
#pragma once

#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace dockyard {

// Strict decimal number: digits, one optional sign, '.', exponent; the whole text consumed.
inline bool ParseStrictDouble(const std::string& text, double* out) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-')) {
      return false;
    }
  }
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return false;
  *out = v;
  return true;
}

// Strict integer: an optional minus sign and digits, the whole text consumed (std::from_chars).
inline bool ParseStrictInt(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(first, last, *out);
  return ec == std::errc() && ptr == last;
}

}  // namespace dockyard
