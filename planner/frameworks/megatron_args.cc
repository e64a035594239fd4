// Megatron-LM launch arguments (see megatron_args.h). Defaults and names: Megatron-LM at
// kMegatronLmCommit, megatron/training/arguments.py (the literal add_argument calls and
// validate_args) and megatron/core/transformer/transformer_config.py (the dataclass fields the
// ArgumentGroupFactory turns into arguments, and their __post_init__ defaults).
#include "planner/frameworks/megatron_args.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <cctype>
#include <cstdint>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/base/json_util.h"
#include "planner/base/number_text.h"
#include "planner/frameworks/megatron_arg_table.h"
#include "planner/frameworks/shell_words.h"
#include "planner/model/dispatcher.h"
#include "planner/model/pipeline_layout.h"
#include "planner/model/recompute.h"
#include "planner/model/training.h"

namespace dockyard {

namespace {

// The commit named on the list's first line ("# Megatron-LM command-line arguments at commit C, ...").
const std::string& ArgTableCommit() {
  static const std::string commit = [] {
    const std::string text = kMegatronArgTableText;
    const std::string marker = "at commit ";
    const size_t at = text.find(marker);
    const size_t end = at == std::string::npos ? at : text.find_first_not_of("0123456789abcdef", at + marker.size());
    return at == std::string::npos ? std::string("unknown") : text.substr(at + marker.size(), end - at - marker.size());
  }();
  return commit;
}

}  // namespace

// Read at run time only (messages, written headers), never during static initialization.
const char* const kMegatronLmCommit = ArgTableCommit().c_str();

const std::map<std::string, char>& MegatronArgTable() {
  static const std::map<std::string, char> table = [] {
    std::map<std::string, char> t;
    std::istringstream in(kMegatronArgTableText);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      const auto tab = line.find('\t');
      if (tab == std::string::npos || tab + 1 >= line.size()) continue;
      t[line.substr(0, tab)] = line[tab + 1];
    }
    return t;
  }();
  return table;
}

const std::set<std::string>& MegatronSplitKeys() {
  static const std::set<std::string> keys = {
      "--pipeline-model-parallel-layout",        "--decoder-first-pipeline-num-layers",   "--decoder-last-pipeline-num-layers",
      "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split", "--num-layers-per-virtual-pipeline-stage",
      "--num-virtual-stages-per-pipeline-rank"};
  return keys;
}

namespace {

[[noreturn]] void Fail(const std::string& file, int line, const std::string& message) {
  throw Error(fmt::format("{}:{}: {}", file, line, message));
}

// A word is a key when it starts with "--" after quote removal, as argparse sees it ('--key',
// "--key=value" and --key="value" alike).
bool IsKey(const ShellWord& w) { return w.text.size() > 2 && w.text[0] == '-' && w.text[1] == '-'; }

[[noreturn]] void StrayWord(const std::string& file, const ShellWord& w) {
  if (w.text.find("=(") != std::string::npos) {
    Fail(file, w.line, fmt::format("'{}': a bash array; give the arguments themselves, without NAME=( ... )", ShownWord(w.text)));
  }
  Fail(file, w.line,
       fmt::format("'{}' is not an argument: the file holds Megatron-LM's arguments only (what follows pretrain_gpt.py, e.g. the "
                   "body of MODEL_ARGS), each a --key with its values",
                   ShownWord(w.text)));
}

std::vector<std::string> TableKeys() {
  std::vector<std::string> keys;
  for (const auto& [k, a] : MegatronArgTable()) keys.push_back(k);
  return keys;
}

}  // namespace

std::vector<ConfigArg> ReadMegatronArgs(const std::string& text, const std::string& file) {
  const std::vector<ShellWord> words = SplitShellWords(text, file, "Megatron-LM arguments");
  const auto& table = MegatronArgTable();
  std::vector<ConfigArg> args;
  for (size_t i = 0; i < words.size();) {
    const ShellWord& w = words[i];
    if (!IsKey(w)) StrayWord(file, w);
    ConfigArg arg;
    arg.line = w.line;
    arg.key = w.text;
    const auto eq = arg.key.find('=');
    if (eq != std::string::npos) {
      arg.values.push_back(arg.key.substr(eq + 1));
      arg.key = arg.key.substr(0, eq);
    }
    const auto it = table.find(arg.key);
    if (it == table.end()) {
      Fail(file, w.line,
           fmt::format("{}: not a Megatron-LM argument (its argument list at {}){}", ShownWord(arg.key), std::string(kMegatronLmCommit).substr(0, 12),
                       arg.key.size() > 4 ? DidYouMeanText(arg.key, TableKeys()) : std::string()));
    }
    ++i;
    const char arity = it->second;
    // argparse: a switch takes no word, a one-value key one, a '+' key every word up to the next key;
    // a word left over is not an argument (named on its own line, unless it sits on the key's).
    const size_t takes = arity == '0' || !arg.values.empty() ? 0 : arity == '1' ? 1 : SIZE_MAX;
    for (size_t taken = 0; i < words.size() && !IsKey(words[i]) && taken < takes; ++taken) {
      // argparse reads a word that starts with '-' and is not a number as an option, not a value.
      double number = 0;
      const std::string& v = words[i].text;
      if (v.size() > 1 && v[0] == '-' && !ParseStrictDouble(v, &number)) {
        Fail(file, words[i].line, fmt::format("'{}' after {}: argparse reads a word starting with '-' as an option, not a value", ShownWord(v), arg.key));
      }
      arg.values.push_back(words[i++].text);
    }
    if (i < words.size() && !IsKey(words[i])) {
      const ShellWord& extra = words[i];
      if (extra.line != arg.line) StrayWord(file, extra);
      if (arity == '0') Fail(file, arg.line, fmt::format("{} is a switch and takes no value, got '{}'", arg.key, ShownWord(extra.text)));
      Fail(file, arg.line, fmt::format("{} takes one value, got '{}' and then '{}'", arg.key, ShownWord(arg.values.front()), ShownWord(extra.text)));
    }
    if (arity == '0' && !arg.values.empty()) {
      Fail(file, arg.line, fmt::format("{} is a switch and takes no value, got '{}'", arg.key, ShownWord(arg.values.front())));
    }
    if (arity == '1' && arg.values.empty()) Fail(file, arg.line, fmt::format("{} needs a value", arg.key));
    if (arity == '+' && arg.values.empty()) Fail(file, arg.line, fmt::format("{} needs one or more values", arg.key));
    // A key given again keeps its last value (argparse).
    args.erase(std::remove_if(args.begin(), args.end(), [&](const ConfigArg& a) { return a.key == arg.key; }), args.end());
    args.push_back(arg);
  }
  return args;
}

namespace {

// ---- values ------------------------------------------------------------------------------------

const std::string& Value(const ConfigArg& a) { return a.values.front(); }

int64_t IntValue(const FrameworkConfig& c, const ConfigArg& a, int64_t min) {
  int64_t v = 0;
  if (!ParseStrictInt(Value(a), &v)) Fail(c.file, a.line, fmt::format("{} '{}': not a whole number", a.key, ShownWord(Value(a))));
  if (v < min) Fail(c.file, a.line, fmt::format("{} {}: must be >= {}", a.key, Value(a), min));
  return v;
}

double NumberValue(const FrameworkConfig& c, const ConfigArg& a) {
  double v = 0;
  if (!ParseStrictDouble(Value(a), &v)) Fail(c.file, a.line, fmt::format("{} '{}': not a number", a.key, ShownWord(Value(a))));
  return v;
}

std::string ChoiceValue(const FrameworkConfig& c, const ConfigArg& a, const std::vector<std::string>& choices) {
  const std::string& v = Value(a);
  if (std::find(choices.begin(), choices.end(), v) == choices.end()) {
    Fail(c.file, a.line, fmt::format("{} '{}': Megatron-LM takes {}", a.key, ShownWord(v), fmt::join(choices, " | ")));
  }
  return v;
}

// ---- the keys ----------------------------------------------------------------------------------

// Architecture keys: read by MegatronModel.
const std::set<std::string>& ArchitectureKeys() {
  static const std::set<std::string> keys = {
      "--num-layers", "--hidden-size", "--ffn-hidden-size", "--num-attention-heads", "--group-query-attention", "--num-query-groups",
      "--kv-channels", "--num-experts", "--moe-router-topk", "--moe-ffn-hidden-size", "--moe-shared-expert-intermediate-size",
      "--moe-shared-expert-gate", "--moe-layer-freq", "--multi-latent-attention", "--q-lora-rank", "--kv-lora-rank", "--qk-head-dim",
      "--qk-pos-emb-head-dim", "--v-head-dim", "--qk-layernorm", "--untie-embeddings-and-output-weights", "--vocab-size",
      "--normalization", "--swiglu", "--disable-bias-linear", "--add-bias-linear", "--add-qkv-bias", "--moe-router-score-function",
      "--moe-router-enable-expert-bias", "--moe-router-num-groups", "--moe-router-group-topk", "--moe-router-topk-scaling-factor",
      "--max-position-embeddings", "--rotary-scaling-factor", "--position-embedding-type", "--activation-func-clamp-value",
      "--window-size", "--window-attn-skip-freq", "--softmax-type"};
  return keys;
}

// Keys without effect on a plan's layout, memory or traffic: optimization hyper-parameters, data,
// tokenizer, logging, checkpointing, initialization, fused-kernel switches the time model does not
// distinguish. Everything else that is neither mapped nor here is listed as ignored.
bool WithoutEffect(const std::string& key) {
  static const char* const prefixes[] = {
      "--lr", "--min-lr", "--weight-decay", "--start-weight-decay", "--end-weight-decay", "--adam-", "--sgd-", "--log", "--tensorboard",
      "--wandb", "--save", "--load", "--ckpt", "--dist-ckpt", "--data-", "--split", "--tokenizer", "--vocab-file", "--merge-file",
      "--eval-", "--train-", "--exit-", "--seed", "--init-method", "--attention-dropout", "--hidden-dropout", "--rotary-base",
      "--rotary-percent", "--norm-epsilon", "--use-mcore-models", "--no-masked-softmax-fusion", "--no-position-embedding",
      "--no-rope-fusion", "--no-bias-swiglu-fusion", "--no-bias-dropout-fusion", "--no-bias-gelu-fusion", "--moe-aux-loss-coeff",
      "--moe-router-load-balancing-type", "--moe-router-bias-update-rate", "--moe-router-pre-softmax", "--moe-z-loss-coeff",
      "--moe-router-dtype", "--moe-grouped-gemm", "--moe-permute-fusion", "--distributed-timeout-minutes", "--distributed-backend",
      "--manual-gc", "--num-workers", "--no-mmap-bin-files", "--no-create-attention-mask-in-dataloader", "--auto-detect-ckpt-format",
      "--mscale", "--profile", "--enable-experimental", "--use-flash-attn", "--mtp-loss-scaling-factor", "--no-load-optim",
      "--no-load-rng", "--timing-log-level", "--mock-data", "--use-checkpoint-args", "--init-model-with-meta-device",
      "--transformer-impl", "--attention-softmax-in-fp32", "--accumulate-allreduce-grads-in-fp32", "--use-dist-ckpt",
      "--override-opt-param-scheduler", "--use-checkpoint-opt_param-scheduler", "--micro-batch-size-warmup", "--rampup-batch-size",
      "--finetune", "--pretrained-checkpoint", "--async-save", "--object-storage-cache-path", "--kv-channels", "--beta-",
      "--original-max-position-embeddings", "--rope-type", "--no-persist-layer-norm", "--apply-layernorm-1p", "--bias-",
      "--calculate-per-token-loss", "--use-rotary-position-embeddings", "--rotary-interleaved", "--deterministic-mode", "--fp8-margin",
      "--fp8-interval", "--fp8-amax-", "--fp8-wgrad", "--no-fp8-wgrad", "--hysteresis", "--loss-scale", "--initial-loss-scale",
      "--min-loss-scale", "--check-weight-hash-across-dp-replicas-interval", "--no-check-for-nan-in-loss-and-grad-", "--iterations-to-skip",
      "--result-rejected-tracker-filename", "--rerun-mode", "--dataloader-type", "--num-dataset-builder-threads", "--reset-",
      "--eod-mask-loss", "--no-shared-storage", "--straggler", "--one-logger", "--app-tag-run-", "--nvtx", "--record-memory-history",
      "--memory-snapshot-path", "--per-split-data-args-path", "--mid-level-dataset-surplus", "--full-validation", "--skip-train",
      "--te-rng-tracker", "--inference-rng-tracker", "--heterogeneous-layers-config", "--wgrad-deferral-limit"};
  for (const char* p : prefixes) {
    if (key.rfind(p, 0) == 0) return true;
  }
  return false;
}

// Keys that change a plan and that dockyard does not model, with the reason.
std::string IgnoredReason(const std::string& key) {
  static const std::map<std::string, std::string> reasons = {
      {"--moe-expert-capacity-factor", "token dropping: simulate --capacity-factor reports the drops"},
      {"--moe-token-drop-policy", "token dropping"},
      {"--moe-router-force-load-balancing", "balanced routing: give --imbalance or --routing"},
      {"--cpu-offloading", "activation offloading"},
      {"--fine-grained-activation-offloading", "activation offloading"},
      {"--defer-embedding-wgrad-compute", "deferred embedding weight gradient"},
      {"--num-distributed-optimizer-instances", "several distributed-optimizer instances: priced as one over all of dp"},
      {"--megatron-fsdp-grad-comm-dtype", "Megatron-FSDP's gradient communication dtype"},
      {"--megatron-fsdp-main-grads-dtype", "Megatron-FSDP's main-gradient dtype"},
      {"--fsdp-double-buffer", "Megatron-FSDP's double buffer"},
      {"--use-nccl-ub", "NCCL user buffers"},
      {"--moe-enable-deepep", "read as --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep"},
      // --tp-comm-overlap is priced with TransformerEngine's initialize_ub defaults (docs/cost-model.md 3.2).
      {"--tp-comm-overlap-cfg", "a userbuffers configuration of its own: --tp-comm-overlap is priced with TransformerEngine's defaults"},
      {"--disable-tp-comm-bulk-dgrad", "a userbuffers overlap turned off: --tp-comm-overlap is priced with all of TransformerEngine's"},
      {"--disable-tp-comm-bulk-wgrad", "a userbuffers overlap turned off: --tp-comm-overlap is priced with all of TransformerEngine's"},
      {"--disable-tp-comm-overlap-ag", "a userbuffers overlap turned off: --tp-comm-overlap is priced with all of TransformerEngine's"},
      {"--disable-tp-comm-overlap-rs", "a userbuffers overlap turned off: --tp-comm-overlap is priced with all of TransformerEngine's"},
      {"--disable-tp-comm-split-ag", "a userbuffers variant: --tp-comm-overlap is priced with TransformerEngine's defaults"},
      {"--disable-tp-comm-split-rs", "a userbuffers variant: --tp-comm-overlap is priced with TransformerEngine's defaults"},
      {"--tp-comm-overlap-rs-dgrad", "a userbuffers variant: --tp-comm-overlap is priced with TransformerEngine's defaults"},
  };
  const auto it = reasons.find(key);
  return it == reasons.end() ? "" : it->second;
}

void AddFlag(FrameworkConfig& c, const std::string& flag, const std::string& value, const std::string& from) {
  c.flags.push_back({flag, value, from});
}

// "[0]*3+[1]*58", "([1]*3+[0])*4", "[1,0,1]": Megatron's --moe-layer-freq list expressions
// (arguments.py moe_freq_type evaluates them as Python); a plain N: every N-th layer.
class FreqExpression {
 public:
  FreqExpression(const std::string& text, const std::string& where) : s_(text), where_(where) {}
  std::vector<int64_t> Parse() {
    std::vector<int64_t> v = Sum();
    Skip();
    if (i_ != s_.size()) Bad(fmt::format("unexpected '{}' at character {}", s_.substr(i_, 1), i_ + 1));
    return v;
  }

 private:
  void Skip() {
    while (i_ < s_.size() && s_[i_] == ' ') ++i_;
  }
  [[noreturn]] void Bad(const std::string& why) {
    throw Error(fmt::format("{} '{}': {} (a list expression such as [0]*3+[1]*58, or N for every N-th layer)", where_, ShownWord(s_), why));
  }
  // A whole number as Python writes one (no leading zeros), at most 2^20.
  int64_t Int() {
    Skip();
    size_t start = i_;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    int64_t v = 0;
    if (start == i_) Bad(fmt::format("expected a whole number at character {}", start + 1));
    if (i_ - start > 1 && s_[start] == '0') Bad("a number with a leading zero, which Python refuses");
    if (i_ - start > 7 || !ParseStrictInt(s_.substr(start, i_ - start), &v) || v > (1 << 20)) Bad("a number above 2^20");
    return v;
  }
  // Nesting is bounded (a layer list is short): no stack exhaustion on a hostile file.
  struct Depth {
    explicit Depth(FreqExpression* e) : e_(e) {
      if (++e_->depth_ > 64) e_->Bad("brackets nested more than 64 deep");
    }
    ~Depth() { --e_->depth_; }
    FreqExpression* e_;
  };
  std::vector<int64_t> Atom() {
    const Depth depth(this);
    Skip();
    std::vector<int64_t> v;
    if (i_ < s_.size() && s_[i_] == '[') {
      ++i_;
      Skip();
      if (i_ < s_.size() && s_[i_] == ']') {
        ++i_;
        return v;
      }
      for (;;) {
        v.push_back(Int());
        Skip();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        if (i_ < s_.size() && s_[i_] == ']') {
          ++i_;
          return v;
        }
        Bad(fmt::format("expected ',' or ']' at character {}", i_ + 1));
      }
    }
    if (i_ < s_.size() && s_[i_] == '(') {
      ++i_;
      v = Sum();
      Skip();
      if (i_ >= s_.size() || s_[i_] != ')') Bad(fmt::format("expected ')' at character {}", i_ + 1));
      ++i_;
      return v;
    }
    Bad(fmt::format("expected '[' or '(' at character {}", i_ + 1));
  }
  std::vector<int64_t> Term() {
    std::vector<int64_t> v = Atom();
    Skip();
    while (i_ < s_.size() && s_[i_] == '*') {
      ++i_;
      const int64_t k = Int();
      std::vector<int64_t> r;
      if (static_cast<double>(v.size()) * static_cast<double>(k) > (1 << 20)) Bad("a list longer than 2^20 layers");
      for (int64_t j = 0; j < k; ++j) r.insert(r.end(), v.begin(), v.end());
      v = std::move(r);
      Skip();
    }
    return v;
  }
  std::vector<int64_t> Sum() {
    std::vector<int64_t> v = Term();
    Skip();
    while (i_ < s_.size() && s_[i_] == '+') {
      ++i_;
      const std::vector<int64_t> t = Term();
      v.insert(v.end(), t.begin(), t.end());
      Skip();
    }
    return v;
  }

  std::string s_, where_;
  size_t i_ = 0;
  int depth_ = 0;
};

std::string JoinValues(const ConfigArg& a, const char* sep) { return fmt::format("{}", fmt::join(a.values, sep)); }

}  // namespace

FrameworkConfig ImportMegatronArgs(const std::string& text, const std::string& file) {
  FrameworkConfig c;
  c.framework = "Megatron-LM";
  c.file = file;
  c.args = ReadMegatronArgs(text, file);
  std::set<std::string> used;
  auto find = [&](const std::string& key) -> const ConfigArg* {
    const ConfigArg* a = c.Find(key);
    if (a) used.insert(key);
    return a;
  };

  // Megatron needs these three (arguments.py validate_args asserts them); so does dockyard.
  for (const char* key : {"--num-layers", "--hidden-size", "--num-attention-heads"}) {
    if (!c.Find(key)) throw Error(fmt::format("{}: no {}: Megatron-LM requires it (arguments.py), and so does dockyard", file, key));
  }
  AddFlag(c, "--convention", "megatron", "Megatron-LM");

  // Degrees. The data-parallel degree is what the world leaves (world / (tp x pp x cp)).
  int64_t tp = 1, pp = 1;
  if (const ConfigArg* a = find("--tensor-model-parallel-size")) {
    tp = IntValue(c, *a, 1);
    AddFlag(c, "--tp", Value(*a), a->key);
  }
  if (const ConfigArg* a = find("--pipeline-model-parallel-size")) {
    pp = IntValue(c, *a, 1);
    AddFlag(c, "--pp", Value(*a), a->key);
  }
  if (const ConfigArg* a = find("--context-parallel-size")) AddFlag(c, "--cp", std::to_string(IntValue(c, *a, 1)), a->key);
  if (const ConfigArg* a = find("--expert-model-parallel-size")) AddFlag(c, "--ep", std::to_string(IntValue(c, *a, 1)), a->key);
  // Absent, ETP = TP: Megatron's default (arguments.py validate_args) is the megatron convention's
  // (planner/layout/parallel_dims.h DefaultEtp), so nothing is set here.
  if (const ConfigArg* a = find("--expert-tensor-parallel-size")) AddFlag(c, "--etp", std::to_string(IntValue(c, *a, 1)), a->key);
  if (const ConfigArg* a = find("--sequence-parallel")) (void)a;  // dockyard always runs SP under TP
  else if (tp > 1) {
    c.ignored.push_back(
        "(no --sequence-parallel) with tp > 1: dockyard prices sequence parallelism, which Megatron-Core asks for with expert and "
        "tensor parallelism (model_parallel_config.py warns \"sequence parallelism must be used\")");
  }
  // Off by default in Megatron-LM (store_true flags), on in Megatron-Bridge's MoE recipes; dockyard
  // prices the fused kernels either way, and says so.
  if (!find("--moe-grouped-gemm")) {
    c.ignored.push_back(
        "(no --moe-grouped-gemm): Megatron-LM then runs SequentialMLP, one GEMM per local expert; dockyard prices the grouped GEMM");
  }
  if (!find("--moe-permute-fusion")) {
    c.ignored.push_back(
        "(no --moe-permute-fusion): Megatron-LM then permutes with unfused PyTorch ops (argsort, index_select, scatter_add); dockyard "
        "prices TransformerEngine's fused permute and unpermute");
  }

  // Data parallel sharding: Megatron-FSDP / torch FSDP2, the distributed optimizer, else DDP.
  const ConfigArg* fsdp = find("--use-megatron-fsdp");
  if (!fsdp) fsdp = find("--use-torch-fsdp2");
  const ConfigArg* dist_opt = find("--use-distributed-optimizer");
  if (fsdp) {
    std::string strategy = "optim_grads_params";  // arguments.py default
    if (const ConfigArg* s = find("--data-parallel-sharding-strategy")) {
      strategy = ChoiceValue(c, *s, {"no_shard", "optim", "optim_grads", "optim_grads_params"});
    }
    if (strategy == "optim_grads") {
      Fail(file, fsdp->line, "--data-parallel-sharding-strategy optim_grads (ZeRO-2): dockyard plans ZeRO-1 (optim), FSDP (optim_grads_params) "
                             "and DDP (no_shard)");
    }
    AddFlag(c, "--dp-sharding", strategy == "optim_grads_params" ? "fsdp" : strategy == "optim" ? "zero1" : "ddp",
            fsdp->key + " --data-parallel-sharding-strategy " + strategy);
  } else {
    find("--data-parallel-sharding-strategy");
    // --optimizer dist_muon: Megatron's deprecated spelling of --optimizer muon --use-distributed-optimizer (arguments.py).
    const ConfigArg* opt = c.Find("--optimizer");
    const bool dist_muon = opt && Value(*opt) == "dist_muon";
    AddFlag(c, "--dp-sharding", dist_opt || dist_muon ? "zero1" : "ddp",
            dist_opt ? "--use-distributed-optimizer" : dist_muon ? "--optimizer dist_muon" : "(no --use-distributed-optimizer: Megatron's DDP)");
  }

  // Batch and sequence.
  if (const ConfigArg* a = find("--micro-batch-size")) AddFlag(c, "--micro-batch-size", std::to_string(IntValue(c, *a, 1)), a->key);
  if (const ConfigArg* a = find("--global-batch-size")) AddFlag(c, "--global-batch-size", std::to_string(IntValue(c, *a, 1)), a->key);
  if (const ConfigArg* a = find("--seq-length")) {
    const int64_t seq = IntValue(c, *a, 1);
    // arguments.py validate_args: "max_position_embeddings ... must be greater than or equal to seq_length".
    if (const ConfigArg* mpe = c.Find("--max-position-embeddings"); mpe && IntValue(c, *mpe, 1) < seq) {
      Fail(file, mpe->line,
           fmt::format("--max-position-embeddings {} is below --seq-length {}: Megatron-LM asserts max_position_embeddings >= "
                       "seq_length (arguments.py)",
                       Value(*mpe), seq));
    }
    AddFlag(c, "--seq-len", std::to_string(seq), a->key);
  }

  // Model chunks and the split over stages.
  const int64_t num_layers = IntValue(c, *c.Find("--num-layers"), 1);
  const ConfigArg* per_stage = find("--num-layers-per-virtual-pipeline-stage");
  const ConfigArg* stages = find("--num-virtual-stages-per-pipeline-rank");
  if (per_stage && stages) {
    Fail(file, stages->line, "--num-layers-per-virtual-pipeline-stage and --num-virtual-stages-per-pipeline-rank: Megatron takes one");
  }
  // The file's virtual stages per pipeline rank (1 without either key).
  int64_t file_vpp = 1;
  if (per_stage) {
    const int64_t n = IntValue(c, *per_stage, 1);
    // arguments.py: virtual_pipeline_model_parallel_size = num_layers // pp // n, layers % (pp x n) == 0.
    if (num_layers % (pp * n) != 0) {
      Fail(file, per_stage->line,
           fmt::format("--num-layers-per-virtual-pipeline-stage {}: --num-layers {} is not a multiple of pp ({}) x {}", n, num_layers, pp, n));
    }
    file_vpp = num_layers / pp / n;
    AddFlag(c, "--vpp", std::to_string(file_vpp), per_stage->key);
  }
  if (stages) {
    file_vpp = IntValue(c, *stages, 1);
    AddFlag(c, "--vpp", std::to_string(file_vpp), stages->key);
  }
  if (const ConfigArg* a = find("--pipeline-model-parallel-layout")) {
    // transformer_config.py: "pipeline_model_parallel_layout cannot be set with other pipeline layout arguments".
    for (const std::string& other : MegatronSplitKeys()) {
      if (other != a->key && c.Find(other)) {
        Fail(file, c.Find(other)->line,
             fmt::format("{} with --pipeline-model-parallel-layout: Megatron-LM refuses a layout with other pipeline layout arguments "
                         "(transformer_config.py)",
                         other));
      }
    }
    if (JoinValues(*a, "").empty()) {
      Fail(file, a->line,
           "--pipeline-model-parallel-layout '': an empty layout places no stage (give one, e.g. \"Et*3|(tt|)*29m|L\" as Megatron's "
           "pipeline_parallel_layout.py parses it, or drop the key)");
    }
    AddFlag(c, "--pipeline-model-parallel-layout", JoinValues(*a, ""), a->key);
  }
  if ((c.Find("--decoder-first-pipeline-num-layers") || c.Find("--decoder-last-pipeline-num-layers")) &&
      (c.Find("--account-for-embedding-in-pipeline-split") || c.Find("--account-for-loss-in-pipeline-split"))) {
    Fail(file, (c.Find("--account-for-embedding-in-pipeline-split") ? c.Find("--account-for-embedding-in-pipeline-split") : c.Find("--account-for-loss-in-pipeline-split"))->line,
         "--account-for-*-in-pipeline-split with --decoder-first/last-pipeline-num-layers: Megatron-LM takes one way of splitting (transformer_config.py)");
  }
  const ConfigArg* first = find("--decoder-first-pipeline-num-layers");
  const ConfigArg* last = find("--decoder-last-pipeline-num-layers");
  if (first || last) {
    // Megatron: the first / last stage takes the given layers, the others split the rest evenly.
    const int64_t f = first ? IntValue(c, *first, 0) : -1;
    const int64_t l = last ? IntValue(c, *last, 0) : -1;
    const int64_t middle_stages = pp - (first ? 1 : 0) - (last ? 1 : 0);
    const int64_t rest = num_layers - std::max<int64_t>(f, 0) - std::max<int64_t>(l, 0);
    const ConfigArg* at = first ? first : last;
    if (pp < 2 || middle_stages < 0 || rest < 0 || (middle_stages == 0 ? rest != 0 : rest % middle_stages != 0)) {
      Fail(file, at->line,
           fmt::format("--decoder-first/last-pipeline-num-layers: {} layers over pp {} do not split evenly after the first / last "
                       "stage's (Megatron's rule)",
                       num_layers, pp));
    }
    std::vector<int64_t> split;
    for (int64_t s = 0; s < pp; ++s) {
      if (s == 0 && first) split.push_back(f);
      else if (s == pp - 1 && last) split.push_back(l);
      else split.push_back(rest / middle_stages);
    }
    // transformer_config.py: with virtual stages every stage's layers must divide into them.
    for (int64_t n : split) {
      if (file_vpp > 1 && n % file_vpp != 0) {
        Fail(file, at->line,
             fmt::format("a pipeline stage of {} layers does not divide into {} virtual stages: Megatron-LM raises \"number of layers at "
                         "first/last stage must be divisible by virtual pipeline parallel degree\" (transformer_config.py); give a "
                         "--pipeline-model-parallel-layout",
                         n, file_vpp));
      }
    }
    AddFlag(c, "--pp-layer-split", fmt::format("{}", fmt::join(split, ",")), "--decoder-first/last-pipeline-num-layers");
  }
  if (const ConfigArg* a = find("--account-for-embedding-in-pipeline-split")) AddFlag(c, "--account-for-embedding-in-pipeline-split", "", a->key);
  if (const ConfigArg* a = find("--account-for-loss-in-pipeline-split")) AddFlag(c, "--account-for-loss-in-pipeline-split", "", a->key);

  // Recompute. A bare selective recompute takes Megatron's core_attn from the megatron convention
  // (planner/layout/convention.h DefaultSelectiveModules), so only given modules are set.
  const ConfigArg* granularity = find("--recompute-granularity");
  const ConfigArg* activations = find("--recompute-activations");  // arguments.py: selective
  const ConfigArg* modules = find("--recompute-modules");
  const ConfigArg* method = find("--recompute-method");
  const ConfigArg* recompute_layers = find("--recompute-num-layers");
  std::string recompute = "none";
  if (granularity) recompute = ChoiceValue(c, *granularity, {"full", "selective"});
  if (activations) recompute = "selective";  // arguments.py validate_args: --recompute-activations sets granularity selective
  if (recompute != "none") {
    AddFlag(c, "--recompute", recompute, activations ? activations->key : granularity->key);
    if (recompute == "selective" && modules) {
      for (const std::string& m : modules->values) {
        const auto& names = RecomputeModuleNames();
        if (std::find(names.begin(), names.end(), m) == names.end()) {
          Fail(file, modules->line,
               fmt::format("--recompute-modules '{}': Megatron-LM takes {}{}", ShownWord(m), fmt::join(names, ", "), DidYouMeanText(m, names)));
        }
      }
      AddFlag(c, "--recompute-modules", JoinValues(*modules, ","), modules->key);
    }
    if (recompute == "full") {
      // transformer_config.py: full recomputation needs a method and a layer count.
      if (!method || !recompute_layers) {
        Fail(file, granularity ? granularity->line : activations->line,
             "--recompute-granularity full needs --recompute-method uniform|block and --recompute-num-layers N "
             "(transformer_config.py raises without them)");
      }
      const std::string m = ChoiceValue(c, *method, {"uniform", "block"});
      const int64_t k = IntValue(c, *recompute_layers, 1);
      // uniform with 1 layer per group recomputes every layer: dockyard's full recompute.
      if (!(m == "uniform" && k == 1)) {
        c.ignored.push_back(fmt::format("--recompute-method {} --recompute-num-layers {} (partial full recompute: priced as every layer)", m, k));
      }
    }
  } else if (modules) {
    c.ignored.push_back("--recompute-modules (without --recompute-granularity selective Megatron recomputes nothing)");
  }
  if (recompute == "selective" && (method || recompute_layers)) {
    Fail(file, (method ? method : recompute_layers)->line,
         fmt::format("{} with --recompute-granularity selective: Megatron-LM refuses it (arguments.py, transformer_config.py)",
                     (method ? method : recompute_layers)->key));
  }
  if (recompute == "none" && (method || recompute_layers)) {
    c.ignored.push_back(fmt::format("{} (without --recompute-granularity Megatron recomputes nothing)", (method ? method : recompute_layers)->key));
  }

  // Token dispatcher. transformer_config.py: moe_token_dispatcher_type defaults to allgather.
  std::string dispatcher = "allgather";
  std::string dispatcher_from = "(no --moe-token-dispatcher-type: Megatron's allgather)";
  if (const ConfigArg* a = find("--moe-token-dispatcher-type")) {
    dispatcher = ChoiceValue(c, *a, {"allgather", "alltoall", "flex"});
    dispatcher_from = a->key;
  }
  if (const ConfigArg* a = find("--moe-enable-deepep")) {
    dispatcher = "flex";
    dispatcher_from = a->key;
  }
  // Set also when the experts come from --model (dockyard plans MoE models only).
  AddFlag(c, "--dispatcher", dispatcher == "alltoall" ? "all_to_all" : dispatcher == "flex" ? "deepep" : "allgather", dispatcher_from);
  if (const ConfigArg* a = find("--moe-flex-dispatcher-backend")) {
    const std::string backend = ChoiceValue(c, *a, {"deepep", "hybridep", "ncclep"});
    if (dispatcher == "flex") AddFlag(c, "--moe-flex-dispatcher-backend", backend, a->key);
  }
  // The flex dispatcher's SMs (run_settings.h moe_flex_dispatcher_num_sms). transformer_config.py
  // __post_init__: an explicit --moe-flex-dispatcher-num-sms wins; else the deprecated
  // --moe-deepep-num-sms / --moe-hybridep-num-sms are routed to it, and two different values are a
  // ValueError ("Conflicting deprecated SM-count knobs").
  {
    const ConfigArg* num_sms = find("--moe-flex-dispatcher-num-sms");
    const ConfigArg* deepep = find("--moe-deepep-num-sms");
    const ConfigArg* hybridep = find("--moe-hybridep-num-sms");
    if (!num_sms) {
      if (deepep && hybridep && IntValue(c, *deepep, 1) != IntValue(c, *hybridep, 1)) {
        Fail(file, hybridep->line,
             fmt::format("--moe-deepep-num-sms {} and --moe-hybridep-num-sms {}: Megatron-Core raises \"Conflicting deprecated SM-count "
                         "knobs\" (transformer_config.py): give one --moe-flex-dispatcher-num-sms",
                         Value(*deepep), Value(*hybridep)));
      }
      num_sms = deepep ? deepep : hybridep;
    }
    if (num_sms) {
      const int64_t n = IntValue(c, *num_sms, 1);
      if (dispatcher == "flex") {
        AddFlag(c, "--moe-flex-dispatcher-num-sms", std::to_string(n), num_sms->key);
      } else {
        c.ignored.push_back(fmt::format("{} {} (the flex dispatcher's SMs; this run's dispatcher is {})", num_sms->key, n, dispatcher));
      }
    }
  }

  // Overlaps and the step's end.
  // Under Megatron-FSDP --overlap-grad-reduce / --overlap-param-gather overlap FSDP's own
  // reduce-scatters and all-gathers, as dockyard prices FSDP: nothing to set.
  for (const char* key : {"--overlap-grad-reduce", "--overlap-param-gather"}) {
    if (const ConfigArg* a = find(key); a && !fsdp) AddFlag(c, key, "", a->key);
  }
  // The DDP's parameter-gather dispatch and buckets (run_settings.h; Megatron-FSDP has neither).
  for (const char* key : {"--overlap-param-gather-with-optimizer-step", "--no-align-param-gather"}) {
    if (const ConfigArg* a = find(key); a && !fsdp) AddFlag(c, key, "", a->key);
  }
  if (const ConfigArg* a = find("--no-gradient-accumulation-fusion")) AddFlag(c, "--no-gradient-accumulation-fusion", "", a->key);
  if (const ConfigArg* a = find("--ddp-bucket-size"); a && !fsdp) {
    AddFlag(c, "--ddp-bucket-size", std::to_string(IntValue(c, *a, 1)), a->key);
  }
  for (const char* key : {"--overlap-moe-expert-parallel-comm", "--moe-shared-expert-overlap", "--no-check-for-nan-in-loss-and-grad",
                          "--no-overlap-p2p-communication", "--tp-comm-overlap", "--delay-wgrad-compute",
                          "--moe-pad-expert-input-to-capacity", "--use-transformer-engine-op-fuser"}) {
    if (const ConfigArg* a = find(key)) AddFlag(c, key, "", a->key);
  }
  // Megatron-Core: "moe_expert_capacity_factor must be set to use moe_pad_expert_input_to_capacity"
  // (transformer_config.py), a positive factor.
  if (const ConfigArg* a = c.Find("--moe-pad-expert-input-to-capacity")) {
    const ConfigArg* factor = c.Find("--moe-expert-capacity-factor");
    if (!factor) {
      Fail(file, a->line,
           "--moe-pad-expert-input-to-capacity without --moe-expert-capacity-factor: Megatron-Core asserts \"moe_expert_capacity_factor "
           "must be set to use moe_pad_expert_input_to_capacity\" (transformer_config.py)");
    }
    if (!(NumberValue(c, *factor) > 0)) {
      Fail(file, factor->line, fmt::format("--moe-expert-capacity-factor {}: must be a positive number with --moe-pad-expert-input-to-capacity", Value(*factor)));
    }
  }
  if (const ConfigArg* a = find("--clip-grad")) {
    if (NumberValue(c, *a) < 0) Fail(file, a->line, fmt::format("--clip-grad {}: must be >= 0", Value(*a)));
    AddFlag(c, "--clip-grad", Value(*a), a->key);
  }
  if (const ConfigArg* a = find("--cross-entropy-loss-fusion")) AddFlag(c, "--cross-entropy", "fused", a->key);
  if (const ConfigArg* a = find("--cross-entropy-fusion-impl")) {
    AddFlag(c, "--cross-entropy-fusion-impl", ChoiceValue(c, *a, {"native", "te"}), a->key);
  }
  if (const ConfigArg* a = find("--make-vocab-size-divisible-by")) {
    AddFlag(c, "--make-vocab-size-divisible-by", std::to_string(IntValue(c, *a, 1)), a->key);
  }
  if (const ConfigArg* a = find("--mtp-num-layers")) AddFlag(c, "--mtp-layers", std::to_string(IntValue(c, *a, 0)), a->key);
  if (const ConfigArg* a = find("--cp-comm-type")) {
    if (a->values.size() != 1) {
      c.ignored.push_back("--cp-comm-type (one type per layer: priced as the first)");
    }
    const std::string t = a->values.front();
    if (t != "p2p" && t != "a2a") {
      Fail(file, a->line, fmt::format("--cp-comm-type '{}': dockyard prices p2p and a2a", t));
    }
    AddFlag(c, "--cp-comm-type", t, a->key);
  }
  // A whole-iteration graph: --cuda-graph-impl full_iteration, or the older spellings Megatron-LM
  // converts to it (a full_iteration --cuda-graph-scope / --cuda-graph-modules, cuda_graph_config.py).
  const ConfigArg* older_full = nullptr;
  for (const char* key : {"--cuda-graph-scope", "--cuda-graph-modules"}) {
    if (const ConfigArg* a = c.Find(key)) {
      for (const std::string& v : a->values) {
        if (v == "full_iteration") older_full = a;
      }
    }
  }
  if (const ConfigArg* a = find("--cuda-graph-impl"); a && (Value(*a) == "full_iteration" || (older_full && Value(*a) != "none"))) {
    AddFlag(c, "--full-iteration-cuda-graph", "", a->key);
  } else if (a && Value(*a) != "none") {
    AddFlag(c, "--cuda-graphs", "", a->key);
  }
  if (const ConfigArg* a = find("--enable-cuda-graph")) AddFlag(c, "--cuda-graphs", "", a->key);

  // Precision: --bf16 / --fp16 set the compute dtype, --fp8-format the FP8 GEMMs.
  if (c.Find("--fp16") && c.Find("--bf16")) {
    Fail(file, c.Find("--fp16")->line, "--bf16 and --fp16: Megatron-LM trains in one of them (arguments.py asserts not both)");
  }
  if (const ConfigArg* a = find("--fp16")) AddFlag(c, "--param-dtype", "float16", a->key);
  if (const ConfigArg* a = find("--bf16")) AddFlag(c, "--param-dtype", "bfloat16", a->key);
  if (!c.Find("--fp16") && !c.Find("--bf16")) {
    throw Error(fmt::format("{}: neither --bf16 nor --fp16: Megatron would train in float32, which dockyard does not plan", file));
  }
  if (const ConfigArg* a = find("--fp8-format")) {
    ChoiceValue(c, *a, {"e4m3", "hybrid"});
    AddFlag(c, "--precision", "fp8", a->key);
    std::string recipe = "delayed";  // transformer_config.py fp8_recipe default
    const ConfigArg* r = find("--fp8-recipe");
    if (r) recipe = ChoiceValue(c, *r, {"tensorwise", "delayed", "mxfp8", "blockwise", "custom"});
    if (recipe == "custom") {
      Fail(file, r->line, "--fp8-recipe custom: not modelled (dockyard prices tensorwise, delayed, blockwise and mxfp8 scaling)");
    }
    // Delayed scaling keeps one scale per tensor, as tensorwise does: the same bytes and GEMMs.
    AddFlag(c, "--fp8-recipe", recipe == "delayed" ? "tensorwise" : recipe, r ? r->key : "(no --fp8-recipe: Megatron's delayed)");
  } else if (const ConfigArg* r = find("--fp8-recipe")) {
    c.ignored.push_back("--fp8-recipe (without --fp8-format Megatron runs no FP8)");
    (void)r;
  }
  if (const ConfigArg* a = find("--fp8-param-gather")) AddFlag(c, "--fp8-param-gather", "", a->key);
  if (const ConfigArg* a = find("--main-grads-dtype")) {
    AddFlag(c, "--grad-dtype", ChoiceValue(c, *a, {"fp32", "bf16"}) == "bf16" ? "bfloat16" : "float32", a->key);
  }
  if (const ConfigArg* a = find("--grad-reduce-in-bf16")) AddFlag(c, "--grad-dtype", "bfloat16", a->key);
  const ConfigArg* avg = find("--exp-avg-dtype");
  const ConfigArg* avg_sq = find("--exp-avg-sq-dtype");
  if (avg || avg_sq) {
    const std::string a1 = avg ? ChoiceValue(c, *avg, {"fp32", "fp16", "bf16", "fp8"}) : "fp32";
    const std::string a2 = avg_sq ? ChoiceValue(c, *avg_sq, {"fp32", "fp16", "bf16", "fp8"}) : "fp32";
    if (a1 != a2 || (a1 != "fp32" && a1 != "bf16")) {
      Fail(file, (avg ? avg : avg_sq)->line,
           fmt::format("--exp-avg-dtype {} --exp-avg-sq-dtype {}: dockyard plans both moments in fp32 or both in bf16", a1, a2));
    }
    AddFlag(c, "--optimizer-states-dtype", a1 == "bf16" ? "bfloat16" : "float32", "--exp-avg-dtype / --exp-avg-sq-dtype");
  }
  find("--use-precision-aware-optimizer");  // needed by the moments' dtypes above; nothing of its own
  // Muon's TP mode: duplicated (Megatron's default) is what dockyard prices (muon.h).
  if (const ConfigArg* a = c.Find("--muon-tp-mode"); a && Value(*a) == "duplicated") find("--muon-tp-mode");
  if (const ConfigArg* a = find("--optimizer")) {
    const std::string opt = Value(*a);
    if (opt != "adam" && opt != "sgd" && opt != "muon" && opt != "dist_muon") {
      Fail(file, a->line, fmt::format("--optimizer {}: dockyard plans adam, sgd and muon", opt));
    }
    AddFlag(c, "--optimizer", opt == "adam" ? "adamw" : opt == "sgd" ? "sgd" : "muon", a->key);
  }

  // More of Megatron-LM's refusals (arguments.py validate_args, transformer_config.py), so that a
  // file dockyard passes is one Megatron starts.
  auto refuse_if = [&](bool broken, const char* key, const std::string& rule) {
    if (broken) Fail(file, c.Find(key) ? c.Find(key)->line : 1, rule);
  };
  refuse_if(c.Find("--multi-latent-attention") && c.Find("--group-query-attention"), "--group-query-attention",
            "--group-query-attention with --multi-latent-attention: Megatron-LM asserts they are mutually exclusive (arguments.py)");
  refuse_if(c.Find("--tp-comm-overlap") && tp == 1, "--tp-comm-overlap",
            "--tp-comm-overlap needs --sequence-parallel, which Megatron-LM turns off at tp 1 (arguments.py asserts it)");
  refuse_if(c.Find("--tp-comm-overlap") && tp > 1 && !c.Find("--sequence-parallel"), "--tp-comm-overlap",
            fmt::format("--tp-comm-overlap needs --sequence-parallel, which the file does not set at tp {} (arguments.py asserts it)", tp));
  refuse_if(c.Find("--enable-cuda-graph") && c.Find("--cuda-graph-impl"), "--enable-cuda-graph",
            "--enable-cuda-graph with --cuda-graph-impl: Megatron-LM asserts one (arguments.py)");
  if (const ConfigArg* a = c.Find("--cuda-graph-impl")) ChoiceValue(c, *a, {"none", "local", "transformer_engine", "full_iteration"});
  {
    const ConfigArg* pe = c.Find("--position-embedding-type");
    const std::string type = pe ? ChoiceValue(c, *pe, {"learned_absolute", "rope", "yarn", "mrope", "relative", "none"}) : "learned_absolute";
    if (type == "learned_absolute" || type == "relative") {
      Fail(file, pe ? pe->line : c.Find("--num-layers")->line,
           fmt::format("{}: dockyard plans rotary position embeddings (--position-embedding-type rope, yarn or mrope) or none; a {} table "
                       "is not modelled",
                       pe ? "--position-embedding-type " + type : "no --position-embedding-type (Megatron's default learned_absolute)", type));
    }
  }
  const bool fp8_delayed = c.Find("--fp8-format") && (!c.Find("--fp8-recipe") || Value(*c.Find("--fp8-recipe")) == "delayed");
  if (fp8_delayed && recompute == "selective" && modules) {
    for (const std::string& m : modules->values) {
      refuse_if(m == "moe_act" || m == "layernorm", "--recompute-modules",
                fmt::format("--recompute-modules {} with FP8 delayed scaling: Megatron-LM raises \"Delayed scaling does not support moe_act "
                            "and layernorm recompute\" (transformer_config.py)",
                            m));
    }
  }
  if (!c.Find("--pipeline-model-parallel-layout") && !first && !last && !c.Find("--account-for-embedding-in-pipeline-split") &&
      !c.Find("--account-for-loss-in-pipeline-split")) {
    // Without a split argument Megatron splits evenly and refuses what does not divide (megatron_split.h).
    refuse_if(num_layers % pp != 0, "--pipeline-model-parallel-size",
              fmt::format("--num-layers {} is not divisible by --pipeline-model-parallel-size {}: Megatron-LM asserts \"Number of layers "
                          "should be divisible by the pipeline-model-parallel size\" without a split argument (e.g. "
                          "--decoder-first-pipeline-num-layers)",
                          num_layers, pp));
    if (stages) {
      const int64_t v = file_vpp;
      refuse_if((num_layers / pp) % v != 0, "--num-virtual-stages-per-pipeline-rank",
                fmt::format("the {} layers of each pipeline rank do not divide into {} model chunks: Megatron-LM asserts "
                            "num_layers_per_pipeline_rank % vp_size == 0 (transformer_block.py) without a "
                            "--pipeline-model-parallel-layout",
                            num_layers / pp, v));
    }
  }
  // What a search would vary that the file leaves at Megatron's default.
  auto search_default = [&](const char* flag, const std::string& value, const char* key, bool absent) {
    if (absent) c.search_defaults.push_back({flag, value, fmt::format("(no {}: Megatron's default)", key)});
  };
  search_default("--tp", "1", "--tensor-model-parallel-size", !c.Find("--tensor-model-parallel-size"));
  search_default("--pp", "1", "--pipeline-model-parallel-size", !c.Find("--pipeline-model-parallel-size"));
  search_default("--cp", "1", "--context-parallel-size", !c.Find("--context-parallel-size"));
  search_default("--ep", "1", "--expert-model-parallel-size", !c.Find("--expert-model-parallel-size"));
  search_default("--etp", std::to_string(tp), "--expert-tensor-parallel-size", !c.Find("--expert-tensor-parallel-size"));
  search_default("--micro-batch-size", "1", "--micro-batch-size", !c.Find("--micro-batch-size"));
  search_default("--recompute", "none", "--recompute-granularity", recompute == "none");
  if (const ConfigArg* layout = c.Find("--pipeline-model-parallel-layout")) {
    // A search does not take a layout; it pins the layout's vpp (stages / pp) instead.
    const int64_t virtual_stages = static_cast<int64_t>(
        WithFlag(fmt::format("{}:{}", file, layout->line), [&] { return ParsePipelineLayout(JoinValues(*layout, ""), layout->key); }).size());
    if (virtual_stages % pp == 0) {
      c.search_defaults.push_back({"--vpp", std::to_string(virtual_stages / pp), "--pipeline-model-parallel-layout (its stages / pp)"});
    }
  } else {
    search_default("--vpp", "1", "--num-virtual-stages-per-pipeline-rank", !per_stage && !stages);
  }
  search_default("--no-overlap-moe-expert-parallel-comm", "", "--overlap-moe-expert-parallel-comm", !c.Find("--overlap-moe-expert-parallel-comm"));
  // MLA without --qk-layernorm: Megatron builds no latent norms; dockyard's MLA has them (2 vectors a layer).
  if (c.Find("--multi-latent-attention") && !c.Find("--qk-layernorm")) {
    c.ignored.push_back("(no --qk-layernorm) with --multi-latent-attention: dockyard counts MLA's q_a / kv_a latent norms, which Megatron "
                        "builds only with --qk-layernorm");
  }
  // What is left: architecture keys (MegatronModel), keys without effect, the ignored ones.
  for (const ConfigArg& a : c.args) {
    if (used.count(a.key) || a.key == "--fp16" || a.key == "--bf16") {
      c.read.push_back(a.key);
      continue;
    }
    if (ArchitectureKeys().count(a.key)) continue;  // the model's (MegatronModel); a written config keeps those it does not write
    if (a.key == "--attention-backend") {
      // Megatron's AttnBackend (transformer/enums.py): flash, fused (cuDNN) and auto run a fused
      // flash-attention kernel, which dockyard prices; unfused and local build the score matrix.
      const std::string backend = a.values.empty() ? std::string() : Value(a);
      if (backend == "flash" || backend == "fused" || backend == "auto") {
        c.not_read.push_back(a.key);
      } else {
        c.ignored.push_back(fmt::format("{} {} (attention is priced as a fused flash-attention kernel: flash, fused or auto)", a.key, backend));
      }
      continue;
    }
    const std::string why = IgnoredReason(a.key);
    if (!why.empty()) c.ignored.push_back(fmt::format("{} ({})", a.key, why));
    else if (WithoutEffect(a.key)) c.not_read.push_back(a.key);
    else c.ignored.push_back(a.key);
  }
  return c;
}


namespace {

// The model the arguments build, with Megatron's defaults where a key is absent; the vocabulary
// from --vocab-size, else `vocab_fallback` (--model's), else an error.
// A per-layer 0/1 key of Megatron's moe_freq_type (arguments.py: --moe-layer-freq and
// --window-attn-skip-freq): a plain integer N gives `every(i, N)` for 0-based layer i; a list
// expression ("[1,0]*18") one 0 or 1 per layer, 1 = true. Fails naming the key, its line and value.
std::vector<bool> LayerFreq(const FrameworkConfig& c, const ConfigArg& a, int64_t layers, const std::function<bool(int64_t, int64_t)>& every) {
  const std::string& text = Value(a);
  std::vector<bool> out(static_cast<size_t>(layers));
  int64_t n = 0;
  if (ParseStrictInt(text, &n)) {
    if (n < 1) Fail(c.file, a.line, fmt::format("{} {}: must be >= 1", a.key, text));
    for (int64_t i = 0; i < layers; ++i) out[static_cast<size_t>(i)] = every(i, n);
    return out;
  }
  const std::vector<int64_t> pattern = FreqExpression(text, fmt::format("{}:{}: {}", c.file, a.line, a.key)).Parse();
  if (static_cast<int64_t>(pattern.size()) != layers) {
    Fail(c.file, a.line, fmt::format("{} '{}' gives {} layers, --num-layers {}", a.key, text, pattern.size(), layers));
  }
  for (int64_t i = 0; i < layers; ++i) {
    const int64_t v = pattern[static_cast<size_t>(i)];
    if (v != 0 && v != 1) Fail(c.file, a.line, fmt::format("{} '{}': layer {} is {}, not 0 or 1", a.key, text, i, v));
    out[static_cast<size_t>(i)] = v == 1;
  }
  return out;
}

// Megatron's sliding-window attention (--window-size, --window-attn-skip-freq; transformer/utils.py
// is_layer_window_attention) into the model's window and per-layer kinds (ModelSpec
// attention.sliding_window, sliding_attention_layers). --window-size "(L, R)" is a causal window of L
// keys before the query (gpt-oss: (sliding_window - 1, 0), Megatron-Bridge gpt_oss_bridge.py), so
// sliding_window = L + 1; R must be 0 and L -1 means none. --window-attn-skip-freq N: 1-based layer l
// attends over the window unless l % N == 0; a list expression: 1 = window, 0 = full. Absent: every
// layer over the window.
void ReadWindow(const FrameworkConfig& c, int64_t layers, ModelSpec* m) {
  const ConfigArg* size = c.Find("--window-size");
  const ConfigArg* freq = c.Find("--window-attn-skip-freq");
  if (!size) {
    if (freq) Fail(c.file, freq->line, "--window-attn-skip-freq without --window-size: Megatron-LM runs no window (transformer/utils.py)");
    return;
  }
  // "(127, 0)", "127,0" or (a Bridge list) "127 0": two integers.
  std::string text = JoinValues(*size, " ");
  std::replace_if(text.begin(), text.end(), [](char ch) { return ch == '(' || ch == ')' || ch == ',' || ch == '[' || ch == ']'; }, ' ');
  std::istringstream words(text);
  std::vector<std::string> parts;
  for (std::string w; words >> w;) parts.push_back(w);
  int64_t left = 0, right = 0;
  if (parts.size() != 2 || !ParseStrictInt(parts[0], &left) || !ParseStrictInt(parts[1], &right)) {
    Fail(c.file, size->line, fmt::format("--window-size '{}': must be a pair '(left, right)' of integers", ShownWord(JoinValues(*size, " "))));
  }
  if (left == -1) return;  // TransformerEngine's "no limit"
  if (left < 0 || right != 0) {
    Fail(c.file, size->line,
         fmt::format("--window-size ({}, {}): dockyard models causal windows (left >= 0 keys before the query, right 0)", left, right));
  }
  m->attention.sliding_window = left + 1;
  m->sliding_attention_layers.assign(static_cast<size_t>(layers), true);
  // 1-based layer l attends over the window unless l % N == 0.
  if (freq) m->sliding_attention_layers = LayerFreq(c, *freq, layers, [](int64_t i, int64_t n) { return (i + 1) % n != 0; });
}

ModelSpec ModelFromArgs(const FrameworkConfig& c, std::optional<int64_t> vocab_fallback) {
  auto arg = [&](const char* key) { return c.Find(key); };
  auto int_or = [&](const char* key, int64_t fallback, int64_t min = 1) {
    const ConfigArg* a = arg(key);
    return a ? IntValue(c, *a, min) : fallback;
  };
  const int64_t layers = int_or("--num-layers", 0);
  if (layers > kMaxHiddenLayers) {  // before the per-layer vectors are sized (QA: 2^33 took 2 GB first)
    Fail(c.file, arg("--num-layers")->line, fmt::format("--num-layers {}: exceeds {}", layers, kMaxHiddenLayers));
  }
  const int64_t hidden = int_or("--hidden-size", 0);
  const int64_t heads = int_or("--num-attention-heads", 0);
  const bool mla = arg("--multi-latent-attention") != nullptr;
  const bool swiglu = arg("--swiglu") != nullptr;
  // transformer_config.py __post_init__: ffn_hidden_size None -> 4 x hidden.
  const int64_t ffn = int_or("--ffn-hidden-size", 4 * hidden);
  const int64_t experts = int_or("--num-experts", 0);
  std::vector<bool> moe_layers(static_cast<size_t>(layers), experts > 0);
  // An integer N: every N-th layer, from layer 0, is MoE.
  if (const ConfigArg* f = arg("--moe-layer-freq")) moe_layers = LayerFreq(c, *f, layers, [](int64_t i, int64_t n) { return i % n == 0; });

  // Built from the arguments (with --model: the job they describe, checked against it).
  if (experts < 1) throw Error(fmt::format("{}: no --num-experts: dockyard plans MoE models", c.file));
  if (!swiglu) {
    throw Error(fmt::format("{}: no --swiglu: dockyard plans gated (SwiGLU) MLPs, as every Megatron MoE recipe runs them", c.file));
  }
  const ConfigArg* vocab = arg("--vocab-size");
  if (!vocab && !vocab_fallback) {
    throw Error(fmt::format("{}: no --vocab-size: Megatron takes the vocabulary from the tokenizer, which dockyard does not read; add "
                            "--vocab-size N to the file, or give --model (the HF config.json) for the architecture",
                            c.file));
  }
  ModelSpec m;
  m.name = c.file + (c.framework == "Megatron-LM" || c.framework.empty() ? std::string(" (Megatron-LM arguments)") : " (" + c.framework + " " + c.form + ")");
  m.source = c.file;
  m.vocab_size = vocab ? IntValue(c, *vocab, 1) : *vocab_fallback;
  m.hidden_size = hidden;
  m.num_hidden_layers = layers;
  m.moe_layers = moe_layers;
  m.intermediate_size = ffn;  // as HF configs keep it, also when every layer is MoE
  m.tie_word_embeddings = arg("--untie-embeddings-and-output-weights") == nullptr;
  if (const ConfigArg* a = arg("--normalization")) {
    m.norm = ChoiceValue(c, *a, {"LayerNorm", "RMSNorm"}) == "RMSNorm" ? NormKind::kRmsNorm : NormKind::kLayerNorm;
  } else {
    m.norm = NormKind::kLayerNorm;  // transformer_config.py normalization default
  }
  m.norm_bias = m.norm == NormKind::kLayerNorm;
  // add_bias_linear defaults to True (transformer_config.py); --disable-bias-linear turns it off.
  const bool bias = arg("--disable-bias-linear") == nullptr;
  m.attention.num_attention_heads = heads;
  m.attention.o_bias = bias;
  m.attention.qkv_bias = bias || arg("--add-qkv-bias") != nullptr;
  if (mla) {
    m.family = "deepseek_v3";
    m.attention.kind = AttentionKind::kMla;
    // arguments.py MLA defaults: q_lora_rank None, kv_lora_rank 32, qk_head_dim 128, qk_pos_emb_head_dim 64, v_head_dim 128.
    m.attention.q_lora_rank = int_or("--q-lora-rank", 0, 0);
    m.attention.kv_lora_rank = int_or("--kv-lora-rank", 32);
    m.attention.qk_nope_head_dim = int_or("--qk-head-dim", 128);
    m.attention.qk_rope_head_dim = int_or("--qk-pos-emb-head-dim", 64);
    m.attention.v_head_dim = int_or("--v-head-dim", 128);
    m.attention.qkv_bias = false;
    if (const ConfigArg* w = arg("--window-size")) {
      Fail(c.file, w->line, "--window-size with --multi-latent-attention: dockyard reads a sliding window for GQA attention only");
    }
  } else {
    m.attention.kind = AttentionKind::kGqa;
    m.attention.num_key_value_heads = arg("--group-query-attention") ? int_or("--num-query-groups", 1) : heads;
    if (hidden % heads != 0 && !arg("--kv-channels")) {
      throw Error(fmt::format("{}: --hidden-size {} is not a multiple of --num-attention-heads {}: give --kv-channels", c.file, hidden, heads));
    }
    m.attention.head_dim = int_or("--kv-channels", hidden / heads);
    if (arg("--qk-layernorm")) m.attention.qk_norm = QkNorm::kPerHead;
    ReadWindow(c, layers, &m);
  }
  // --softmax-type (transformer_config.py softmax_type): vanilla (the default) or learnable, gpt-oss's
  // per-head sinks (ModelSpec attention.sinks); off-by-one is not modelled.
  if (const ConfigArg* a = arg("--softmax-type")) {
    const std::string type = ChoiceValue(c, *a, {"vanilla", "off-by-one", "learnable"});
    if (type == "off-by-one") Fail(c.file, a->line, "--softmax-type off-by-one: not modelled (vanilla, or learnable: gpt-oss's sinks)");
    m.attention.sinks = type == "learnable";
  }
  m.moe.num_experts = experts;
  m.moe.top_k = int_or("--moe-router-topk", 2);  // transformer_config.py moe_router_topk default
  m.moe.moe_intermediate_size = int_or("--moe-ffn-hidden-size", ffn);
  m.moe.expert_bias = bias;
  // The experts' activation clamp (gpt-oss: 7.0; transformer_config.py activation_func_clamp_value,
  // a finite number > 0 there; ModelSpec moe.swiglu_limit).
  if (const ConfigArg* a = arg("--activation-func-clamp-value")) {
    m.moe.swiglu_limit = NumberValue(c, *a);
    if (!(m.moe.swiglu_limit > 0) || !std::isfinite(m.moe.swiglu_limit)) {
      Fail(c.file, a->line,
           fmt::format("--activation-func-clamp-value {}: must be a finite number > 0 (Megatron-Core's activation_func_clamp_value)",
                       ShownWord(a->values.front())));
    }
  }
  if (const ConfigArg* a = arg("--moe-shared-expert-intermediate-size")) {
    m.moe.num_shared_experts = 1;
    m.moe.shared_expert_intermediate_size = IntValue(c, *a, 1);
    m.moe.shared_expert_gate = arg("--moe-shared-expert-gate") != nullptr;
  }
  if (m.family.empty()) m.family = m.moe.num_shared_experts > 0 ? "qwen2_moe" : "qwen3_moe";
  if (const ConfigArg* a = arg("--moe-router-score-function")) m.moe.score_func = ChoiceValue(c, *a, {"softmax", "sigmoid"});
  m.moe.score_correction_bias = arg("--moe-router-enable-expert-bias") != nullptr;
  if (const ConfigArg* a = arg("--moe-router-topk-scaling-factor")) m.moe.routed_scaling_factor = NumberValue(c, *a);
  m.moe.n_group = int_or("--moe-router-num-groups", 1);
  m.moe.topk_group = int_or("--moe-router-group-topk", 1);
  m.num_nextn_predict_layers = int_or("--mtp-num-layers", 0, 0);
  m.max_position_embeddings = int_or("--max-position-embeddings", 0, 0);
  m.rope_scaling = arg("--rotary-scaling-factor") != nullptr;
  ValidateModelSpec(m, c.file, true);
  return m;
}

// `base` (--model), after checking that the model the file builds (`job`, Megatron's defaults
// where a key is absent) has its shapes: a launch file whose job differs from --model is refused,
// naming the key, what the file gives (or Megatron's default for an absent key) and the model's.
ModelSpec CheckedAgainstBase(const FrameworkConfig& c, const ModelSpec& job, const ModelSpec& base) {
  const std::string source = base.source.empty() ? base.name : base.source;
  auto check = [&](const char* key, int64_t file_value, int64_t base_value, const std::string& field) {
    if (file_value == base_value) return;
    if (const ConfigArg* a = c.Find(key)) {
      Fail(c.file, a->line,
           fmt::format("{} {} but --model {} has {} {}: the file and the model disagree", key,
                       a->values.empty() ? "given" : ShownWord(a->values.front()), source, field, base_value));
    }
    throw Error(fmt::format("{}: no {}: Megatron-LM's default gives {} {}, but --model {} has {}: add {} to the file (the job is what it "
                            "says, not the model)",
                            c.file, key, field, file_value, source, base_value, key));
  };
  check("--num-layers", job.num_hidden_layers, base.num_hidden_layers, "num_hidden_layers");
  check("--hidden-size", job.hidden_size, base.hidden_size, "hidden_size");
  check("--num-attention-heads", job.attention.num_attention_heads, base.attention.num_attention_heads, "num_attention_heads");
  check("--multi-latent-attention", job.attention.kind == AttentionKind::kMla, base.attention.kind == AttentionKind::kMla,
        "multi-latent attention (1 = yes)");
  if (base.attention.kind == AttentionKind::kGqa) {
    check("--num-query-groups", job.attention.num_key_value_heads, base.attention.num_key_value_heads,
          "num_key_value_heads (--group-query-attention --num-query-groups)");
    check("--kv-channels", job.attention.head_dim, base.attention.head_dim, "head_dim");
    check("--qk-layernorm", job.attention.qk_norm == QkNorm::kPerHead, base.attention.qk_norm != QkNorm::kNone, "q/k layernorm (1 = yes)");
    check("--add-qkv-bias", job.attention.qkv_bias, base.attention.qkv_bias, "qkv bias (1 = yes)");
  } else {
    check("--q-lora-rank", job.attention.q_lora_rank, base.attention.q_lora_rank, "q_lora_rank");
    check("--kv-lora-rank", job.attention.kv_lora_rank, base.attention.kv_lora_rank, "kv_lora_rank");
    check("--qk-head-dim", job.attention.qk_nope_head_dim, base.attention.qk_nope_head_dim, "qk_nope_head_dim");
    check("--qk-pos-emb-head-dim", job.attention.qk_rope_head_dim, base.attention.qk_rope_head_dim, "qk_rope_head_dim");
    check("--v-head-dim", job.attention.v_head_dim, base.attention.v_head_dim, "v_head_dim");
  }
  check("--disable-bias-linear", job.attention.o_bias, base.attention.o_bias, "linear-layer biases (1 = yes)");
  check("--normalization", job.norm == NormKind::kRmsNorm, base.norm == NormKind::kRmsNorm, "RMSNorm (1 = yes; Megatron's default LayerNorm)");
  check("--num-experts", job.moe.num_experts, base.moe.num_experts, "num_experts");
  check("--moe-router-topk", job.moe.top_k, base.moe.top_k, "top_k");
  check("--moe-ffn-hidden-size", job.moe.moe_intermediate_size, base.moe.moe_intermediate_size, "moe_intermediate_size");
  check("--moe-shared-expert-intermediate-size", job.moe.shared_expert_intermediate_size, base.moe.shared_expert_intermediate_size,
        "shared_expert_intermediate_size");
  if (base.NumMoeLayers() < base.num_hidden_layers) {
    check("--ffn-hidden-size", job.intermediate_size, base.intermediate_size, "intermediate_size (its dense layers)");
  }
  // The router (QA: a softmax file against a sigmoid model, or a missing expert bias, a parameter,
  // passed): the score function, the expert bias, the group limit, the scaling factor.
  check("--moe-router-score-function", job.moe.score_func == "sigmoid", base.moe.score_func == "sigmoid",
        "a sigmoid router score (1 = yes; Megatron's default softmax)");
  check("--moe-router-enable-expert-bias", job.moe.score_correction_bias, base.moe.score_correction_bias,
        "the router's expert bias, e_score_correction_bias (1 = yes)");
  check("--moe-router-num-groups", job.moe.n_group, base.moe.n_group, "n_group (1 = no group limit)");
  check("--moe-router-group-topk", job.moe.topk_group, base.moe.topk_group, "topk_group");
  if (std::abs(job.moe.routed_scaling_factor - base.moe.routed_scaling_factor) > 1e-9 * std::abs(base.moe.routed_scaling_factor)) {
    if (const ConfigArg* a = c.Find("--moe-router-topk-scaling-factor")) {
      Fail(c.file, a->line,
           fmt::format("--moe-router-topk-scaling-factor {} but --model {} has routed_scaling_factor {}: the file and the model disagree",
                       ShownWord(a->values.front()), source, base.moe.routed_scaling_factor));
    }
    throw Error(fmt::format("{}: no --moe-router-topk-scaling-factor: Megatron-LM's default scales by 1, but --model {} has "
                            "routed_scaling_factor {}: add --moe-router-topk-scaling-factor {} to the file (the job is what it says, not "
                            "the model)",
                            c.file, source, base.moe.routed_scaling_factor, base.moe.routed_scaling_factor));
  }
  if (job.moe.swiglu_limit != base.moe.swiglu_limit) {
    // A number, not an integer: the clamp limit (ModelSpec moe.swiglu_limit; 0 = none).
    if (const ConfigArg* a = c.Find("--activation-func-clamp-value")) {
      Fail(c.file, a->line,
           fmt::format("--activation-func-clamp-value {} but --model {} has swiglu_limit {}: the file and the model disagree",
                       ShownWord(a->values.front()), source, base.moe.swiglu_limit));
    }
    throw Error(fmt::format("{}: no --activation-func-clamp-value: Megatron-LM's default is no clamp, but --model {} has swiglu_limit {}: "
                            "add --activation-func-clamp-value {} to the file (the job is what it says, not the model)",
                            c.file, source, base.moe.swiglu_limit, base.moe.swiglu_limit));
  }
  // Sliding-window attention and sinks (QA: a file without --window-size, which Megatron runs with full
  // attention, was priced with the model's window).
  if (base.attention.kind == AttentionKind::kGqa) {
    check("--window-size", job.attention.sliding_window, base.attention.sliding_window,
          "sliding_window (Megatron's --window-size \"(sliding_window - 1, 0)\"; 0 = none)");
    for (int64_t i = 0; base.attention.sliding_window > 0 && i < base.num_hidden_layers; ++i) {
      const bool job_sliding = job.sliding_attention_layers[static_cast<size_t>(i)];
      const bool base_sliding = base.sliding_attention_layers[static_cast<size_t>(i)];
      if (job_sliding != base_sliding) {
        check("--window-attn-skip-freq", job_sliding, base_sliding,
              fmt::format("layer {} (Megatron's layer_number {}) over the sliding window (1 = yes)", i, i + 1));
      }
    }
    check("--softmax-type", job.attention.sinks, base.attention.sinks, "attention sinks (1 = yes: --softmax-type learnable)");
  }
  check("--untie-embeddings-and-output-weights", job.tie_word_embeddings ? 0 : 1, base.tie_word_embeddings ? 0 : 1, "untied embeddings (1 = yes)");
  check("--vocab-size", job.vocab_size, base.vocab_size, "vocab_size");
  for (int64_t i = 0; i < base.num_hidden_layers; ++i) {
    if (job.moe_layers[static_cast<size_t>(i)] != base.moe_layers[static_cast<size_t>(i)]) {
      check("--moe-layer-freq", job.moe_layers[static_cast<size_t>(i)], base.moe_layers[static_cast<size_t>(i)],
            fmt::format("layer {} MoE (1 = yes)", i));
    }
  }
  return base;
}

}  // namespace

ModelSpec MegatronModel(const FrameworkConfig& c, const std::optional<ModelSpec>& base) {
  if (base) return CheckedAgainstBase(c, ModelFromArgs(c, base->vocab_size), *base);
  return ModelFromArgs(c, std::nullopt);
}

}  // namespace dockyard
