// Bash-like word splitting of a file of arguments: what follows a launcher's script name
// (Megatron-LM's pretrain_gpt.py, torchtitan's `-m torchtitan.train --module M --config F`), kept in
// a file, split as bash splits the body of an argument array.
#pragma once

#include <string>
#include <vector>

namespace dockyard {

struct ShellWord {
  std::string text;    // after quote removal
  int line = 0;        // 1-based, where the word starts
  bool quoted = false;  // some part of it was quoted ('', "", or a backslash)
};

// Whitespace separates words, '...' and "..." quote, a backslash quotes the next character or (at
// a line's end) continues the line, '#' starts a comment. Throws dockyard::Error naming
// `file`:line, the word and the rule for: a NUL byte (not a text file of `what`), a byte-order
// mark, $VAR / ${VAR} / $(...) and backticks (also inside double quotes), shell operators
// (; | & < >), brackets (a bash array or subshell), an unclosed quote.
std::vector<ShellWord> SplitShellWords(const std::string& text, const std::string& file, const std::string& what);

// A word as a message quotes it: whole up to 80 characters, else its start and its length;
// control characters escaped as \xNN.
std::string ShownWord(const std::string& word);

}  // namespace dockyard
