// Bash-like word splitting of a file of arguments (see shell_words.h).
#include "planner/frameworks/shell_words.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "planner/base/error.h"

namespace dockyard {
namespace {

[[noreturn]] void Fail(const std::string& file, int line, const std::string& message) {
  throw Error(fmt::format("{}:{}: {}", file, line, message));
}

}  // namespace

std::string ShownWord(const std::string& word) {
  std::string out;
  for (const char c : word.substr(0, word.size() <= 80 ? 80 : 60)) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    else out += c;
  }
  if (word.size() <= 80) return out;
  return fmt::format("{}... ({} characters)", out, word.size());
}

std::vector<ShellWord> SplitShellWords(const std::string& text, const std::string& file, const std::string& what) {
  if (const size_t nul = text.find('\0'); nul != std::string::npos) {
    Fail(file, 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(nul), '\n')),
         "a NUL byte: not a text file of " + what);
  }
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) Fail(file, 1, "a UTF-8 byte-order mark at the start: save the file without it");
  std::vector<ShellWord> words;
  int line = 1;
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      ++i;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
      continue;
    }
    if (c == '\\' && i + 1 < n && (text[i + 1] == '\n' || (text[i + 1] == '\r' && i + 2 < n && text[i + 2] == '\n'))) {
      i += text[i + 1] == '\n' ? 2 : 3;
      ++line;
      continue;
    }
    if (c == '#') {
      while (i < n && text[i] != '\n') ++i;
      continue;
    }
    ShellWord w;
    w.line = line;
    while (i < n && !(text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) {
      const char d = text[i];
      if (d == '\\') {
        if (i + 1 < n && text[i + 1] == '\n') break;  // a continuation ends the word
        if (i + 1 < n && text[i + 1] != '\r') {     // bash: a backslash quotes the next character
          w.text += text[i + 1];
          w.quoted = true;
          i += 2;
          continue;
        }
        ++i;
        continue;
      }
      if (d == '`') Fail(file, line, "'`': a command substitution; dockyard reads the arguments as written: put its output in the file");
      if (d == '\'') {
        const size_t close = text.find('\'', i + 1);
        if (close == std::string::npos) Fail(file, line, "a single quote is not closed");
        const std::string inner = text.substr(i + 1, close - i - 1);
        line += static_cast<int>(std::count(inner.begin(), inner.end(), '\n'));
        w.text += inner;
        w.quoted = true;
        i = close + 1;
        continue;
      }
      if (d == '"') {
        // bash: inside double quotes a backslash quotes " \ $ ` (and drops a newline); $ and ` expand.
        size_t j = i + 1;
        std::string inner;
        for (; j < n && text[j] != '"'; ++j) {
          if (text[j] == '\\' && j + 1 < n && std::string("\"\\$`\n").find(text[j + 1]) != std::string::npos) {
            if (text[j + 1] != '\n') inner += text[j + 1];
            ++j;
            continue;
          }
          if (text[j] == '$' || text[j] == '`') {
            size_t k = j + 1;
            while (k < n && text[k] != '"' && !std::isspace(static_cast<unsigned char>(text[k]))) ++k;
            Fail(file, line, fmt::format("'{}' in double quotes: a shell variable or command substitution; dockyard reads the arguments as "
                                         "written: put its value in the file (a literal $ is \\$)",
                                         ShownWord(text.substr(j, k - j))));
          }
          inner += text[j];
        }
        if (j >= n) Fail(file, line, "a double quote is not closed");
        line += static_cast<int>(std::count(text.begin() + static_cast<std::ptrdiff_t>(i), text.begin() + static_cast<std::ptrdiff_t>(j), '\n'));
        w.text += inner;
        w.quoted = true;
        i = j + 1;
        continue;
      }
      if (d == '$') {
        size_t end = i;
        while (end < n && !std::isspace(static_cast<unsigned char>(text[end]))) ++end;
        Fail(file, line,
             fmt::format("'{}': a shell variable or command substitution; dockyard reads the arguments as written: put its value in "
                         "the file",
                         ShownWord(text.substr(i, end - i))));
      }
      if (d == ';' || d == '|' || d == '&' || d == '<' || d == '>') {
        Fail(file, line, fmt::format("'{}': a shell operator; the file holds arguments only (quote it if it is part of a value)", std::string(1, d)));
      }
      if (d == '(' || d == ')') {
        Fail(file, line,
             fmt::format("'{}': a bash array or subshell; give the arguments themselves (the body of MODEL_ARGS=( ... ), "
                         "without the brackets)",
                         std::string(1, d)));
      }
      w.text += d;
      ++i;
    }
    if (!w.text.empty() || w.quoted) words.push_back(w);
  }
  return words;
}

}  // namespace dockyard
