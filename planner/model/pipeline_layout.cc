// Megatron pipeline layer layouts (see pipeline_layout.h).
#include "planner/model/pipeline_layout.h"

#include <cctype>
#include <utility>

#include <fmt/format.h>

#include "planner/base/error.h"

namespace dockyard {
namespace {

constexpr int64_t kMaxUnrolled = 1000000;
constexpr const char* kGrammar =
    "layers are E (embedding), t (transformer layer), m (MTP layer), L (loss); '|' ends a stage, \"(..)*N\" and \"c*N\" "
    "repeat, commas are ignored";

using Chars = std::vector<std::pair<char, int64_t>>;  // character, 0-based position in the flag's string

std::string Where(const std::string& flag, const std::string& text) {
  return text.empty() ? flag : fmt::format("{} \"{}\"", flag, text);
}

[[noreturn]] void Fail(const std::string& flag, const std::string& text, int64_t position, const std::string& rule) {
  if (position < 0) throw Error(fmt::format("{}: {}", Where(flag, text), rule));
  throw Error(fmt::format("{}: position {}: {}", Where(flag, text), position, rule));
}

// Reads the digits of a repeat count at s[k...]; returns the count and moves k past them.
int64_t RepeatCount(const Chars& s, size_t& k, const std::string& flag, const std::string& text) {
  const int64_t at = s[k].second;
  int64_t n = 0;
  for (; k < s.size() && std::isdigit(static_cast<unsigned char>(s[k].first)); ++k) {
    n = n * 10 + (s[k].first - '0');
    if (n > kMaxUnrolled) Fail(flag, text, at, fmt::format("a repeat count above {} (the unrolled layout's limit)", kMaxUnrolled));
  }
  return n;
}

void Append(Chars& out, const Chars& part, int64_t times, int64_t at, const std::string& flag, const std::string& text) {
  if (static_cast<int64_t>(out.size()) + static_cast<int64_t>(part.size()) * times > kMaxUnrolled) {
    Fail(flag, text, at, fmt::format("the unrolled layout exceeds {} characters", kMaxUnrolled));
  }
  for (int64_t r = 0; r < times; ++r) out.insert(out.end(), part.begin(), part.end());
}

bool IsDigitAt(const Chars& s, size_t k) {
  return k < s.size() && std::isdigit(static_cast<unsigned char>(s[k].first));
}

}  // namespace

VirtualStages ParsePipelineLayout(const std::string& text, const std::string& flag) {
  Chars s;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != ',') s.push_back({text[i], static_cast<int64_t>(i)});
  }
  // re.sub(r'\(([^)]+)\)\*(\d+)', ...): a '(' , one or more characters up to the next ')', then "*N".
  Chars groups;
  for (size_t i = 0; i < s.size();) {
    if (s[i].first == '(') {
      size_t j = i + 1;
      while (j < s.size() && s[j].first != ')') ++j;
      if (j > i + 1 && j + 1 < s.size() && s[j + 1].first == '*' && IsDigitAt(s, j + 2)) {
        size_t k = j + 2;
        const int64_t n = RepeatCount(s, k, flag, text);
        Append(groups, Chars(s.begin() + i + 1, s.begin() + j), n, s[i].second, flag, text);
        i = k;
        continue;
      }
    }
    Append(groups, Chars{s[i]}, 1, s[i].second, flag, text);
    ++i;
  }
  // re.sub(r'(.)\*(\d+)', ...): any one character but a newline, then "*N".
  Chars flat;
  for (size_t i = 0; i < groups.size();) {
    if (groups[i].first != '\n' && i + 1 < groups.size() && groups[i + 1].first == '*' && IsDigitAt(groups, i + 2)) {
      size_t k = i + 2;
      const int64_t n = RepeatCount(groups, k, flag, text);
      Append(flat, Chars{groups[i]}, n, groups[i].second, flag, text);
      i = k;
      continue;
    }
    Append(flat, Chars{groups[i]}, 1, groups[i].second, flag, text);
    ++i;
  }
  VirtualStages stages(1);
  for (const auto& [c, at] : flat) {
    if (c == '|') {
      stages.emplace_back();
    } else if (c == 'E' || c == 't' || c == 'm' || c == 'L') {
      stages.back().push_back({static_cast<PipeLayer>(c), at});
    } else {
      std::string hint;
      if (c == '(' || c == ')' || c == '*') hint = " (a group is \"(...)*N\" with a count and no nested parentheses)";
      Fail(flag, text, at, fmt::format("'{}' is not a layer character{}; {}", c, hint, kGrammar));
    }
  }
  return stages;
}

PipelineStages ResolvePipelineLayout(const VirtualStages& stages, int64_t pp, int64_t num_layers, int64_t mtp_layers,
                                     const std::string& text, const std::string& flag) {
  const int64_t S = static_cast<int64_t>(stages.size());
  if (pp < 1 || S % pp != 0) {
    Fail(flag, text, -1,
         fmt::format("{} stages is not a multiple of pp ({}): the layout lists pp x vpp stages "
                     "(Megatron PipelineParallelLayerLayout: the length of pipeline_model_parallel_layout must be "
                     "divisible by pipeline_model_parallel_size)",
                     S, pp));
  }
  PipelineStages out;
  out.vpp = S / pp;
  const LayoutToken* first = nullptr;
  const LayoutToken* last = nullptr;
  int64_t count[4] = {0, 0, 0, 0};  // E, t, m, L
  auto index = [](PipeLayer l) { return l == PipeLayer::kEmbedding ? 0 : l == PipeLayer::kDecoder ? 1 : l == PipeLayer::kMtp ? 2 : 3; };
  int64_t mtp_seen_stage = -1;
  for (int64_t k = 0; k < S; ++k) {
    for (const LayoutToken& tok : stages[k]) {
      if (!first) first = &tok;
      last = &tok;
      const int64_t n = ++count[index(tok.layer)];
      if (tok.layer == PipeLayer::kEmbedding && n == 2)
        Fail(flag, text, tok.position, "embedding must be specified exactly once (a second E)");
      if (tok.layer == PipeLayer::kLoss && n == 2) Fail(flag, text, tok.position, "loss must be specified exactly once (a second L)");
      if (tok.layer == PipeLayer::kDecoder && count[2] > 0) {
        Fail(flag, text, tok.position, "decoder layers must be placed before MTP layers (a t after an m)");
      }
      if (tok.layer == PipeLayer::kMtp) {
        if (k / pp != out.vpp - 1) {
          Fail(flag, text, tok.position,
               fmt::format("an MTP layer in model chunk {} of rank {}: MTP must be in the last virtual pipeline stage of "
                           "its rank (chunk {})",
                           k / pp, k % pp, out.vpp - 1));
        }
        if (mtp_seen_stage >= 0 && mtp_seen_stage != k) {
          Fail(flag, text, tok.position, "all of the MTP layers must be in the same one virtual pipeline stage");
        }
        mtp_seen_stage = k;
        out.mtp_stage = k % pp;
      }
      if (tok.layer == PipeLayer::kDecoder) {
        out.layer_stage.push_back(k % pp);
        out.layer_chunk.push_back(k / pp);
      }
      if (tok.layer == PipeLayer::kEmbedding) out.embedding_stage = k % pp;
      if (tok.layer == PipeLayer::kLoss) out.loss_stage = k % pp;
    }
  }
  if (!first) Fail(flag, text, -1, "the layout has no layers; it needs E first, the decoder layers (t) and L last");
  if (first->layer != PipeLayer::kEmbedding) {
    Fail(flag, text, first->position, fmt::format("the first layer must be embedding (E), got {}", static_cast<char>(first->layer)));
  }
  if (last->layer != PipeLayer::kLoss) {
    Fail(flag, text, last->position, fmt::format("the last layer must be loss (L), got {}", static_cast<char>(last->layer)));
  }
  if (count[1] != num_layers) {
    Fail(flag, text, -1, fmt::format("{} decoder layers (t) must match num_hidden_layers ({})", count[1], num_layers));
  }
  if (count[2] != mtp_layers) {
    Fail(flag, text, -1, fmt::format("{} MTP layers (m) must match --mtp-layers ({})", count[2], mtp_layers));
  }
  if (count[2] == 0) out.mtp_stage = out.loss_stage;
  return out;
}

VirtualStages AccountForLayout(int64_t num_layers, int64_t pp, int64_t vpp, bool embedding, bool loss, int64_t mtp_layers) {
  const int64_t units = num_layers + (embedding ? 1 : 0) + (loss ? 1 : 0);
  const std::string flags = embedding && loss ? "--account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split"
                            : embedding       ? "--account-for-embedding-in-pipeline-split"
                                              : "--account-for-loss-in-pipeline-split";
  if (pp < 1 || units % pp != 0) {
    throw Error(fmt::format("{}: num_hidden_layers ({}){}{} = {} must be divisible by pp ({}) (Megatron transformer_config.py)", flags,
                            num_layers, embedding ? " + 1 (embedding)" : "", loss ? " + 1 (loss)" : "", units, pp));
  }
  const int64_t per_rank = units / pp;
  if (vpp < 1 || per_rank % vpp != 0) {
    throw Error(
        fmt::format("{}: {} layers per pipeline rank (embedding / loss counted) must be divisible by --vpp ({}) "
                    "(Megatron transformer_config.py)",
                    flags, per_rank, vpp));
  }
  const int64_t per_chunk = per_rank / vpp, S = pp * vpp;
  VirtualStages stages(S);
  for (int64_t k = 0; k < S; ++k) {
    int64_t decoders = per_chunk;
    if (k == 0 && embedding) --decoders;
    if (k == S - 1 && loss) --decoders;
    if (k == 0) stages[k].push_back({PipeLayer::kEmbedding, -1});
    for (int64_t i = 0; i < decoders; ++i) stages[k].push_back({PipeLayer::kDecoder, -1});
    if (k == S - 1) {
      for (int64_t i = 0; i < mtp_layers; ++i) stages[k].push_back({PipeLayer::kMtp, -1});
      stages[k].push_back({PipeLayer::kLoss, -1});
    }
  }
  return stages;
}

}  // namespace dockyard
