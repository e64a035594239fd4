// Per-expert refit map (see refit.h).
#include "planner/accounting/refit.h"

#include <map>
#include <utility>

#include <fmt/format.h>

#include "planner/base/error.h"
#include "planner/model/model_spec.h"

namespace dockyard {

namespace {

// Per-expert names of one family (HF per-expert checkpoints / inference engine loaders).
struct RefitNaming {
  const char* family;
  const char* prefix;  // "{0}" = layer, "{1}" = expert
  const char* gate;
  const char* up;
  const char* down;
  const char* gate_bias;
  const char* up_bias;
  const char* down_bias;
  // gpt-oss: gate/up interleaved, refit as one fused tensor per expert under these names.
  const char* gate_up = nullptr;
  const char* gate_up_bias = nullptr;
  // Slices keep the stored orientation (never transposed): gpt-oss ([in, out] by design) and
  // DBRX (w2 stored in x out, kept as stored).
  bool keep_stored = false;
};

const RefitNaming* NamingFor(const std::string& family) {
  static const RefitNaming kHfMlp = {"",
                                     "model.layers.{0}.mlp.experts.{1}.",
                                     "gate_proj.weight",
                                     "up_proj.weight",
                                     "down_proj.weight",
                                     "gate_proj.bias",
                                     "up_proj.bias",
                                     "down_proj.bias"};
  static const RefitNaming kBlockSparse = {
      "", "model.layers.{0}.block_sparse_moe.experts.{1}.", "w1.weight", "w3.weight", "w2.weight", "w1.bias", "w3.bias", "w2.bias"};
  static const RefitNaming kLlama4 = {"",
                                      "model.layers.{0}.feed_forward.experts.{1}.",
                                      "gate_proj.weight",
                                      "up_proj.weight",
                                      "down_proj.weight",
                                      "gate_proj.bias",
                                      "up_proj.bias",
                                      "down_proj.bias"};
  static const RefitNaming kGptOss = {"",
                                      "model.layers.{0}.mlp.experts.{1}.",
                                      nullptr,
                                      nullptr,
                                      "down_proj",
                                      nullptr,
                                      nullptr,
                                      "down_proj_bias",
                                      "gate_up_proj",
                                      "gate_up_proj_bias",
                                      true};
  static const RefitNaming kDbrx = {
      "", "transformer.blocks.{0}.ffn.experts.mlp.{1}.", "w1", "v1", "w2", nullptr, nullptr, nullptr, nullptr, nullptr, true};
  if (family == "mixtral" || family == "phimoe" || family == "minimax_m2") return &kBlockSparse;
  if (family == "qwen2_moe" || family == "qwen3_moe" || family == "deepseek_v2" || family == "deepseek_v3" || family == "olmoe" ||
      family == "glm4_moe" || family == "deepseek_v32" || family == "qwen3_next" || family == "ernie4_5_moe" ||
      family == "bailing_moe_v2") {
    return &kHfMlp;
  }
  if (family == "llama4_text") return &kLlama4;
  if (family == "gpt_oss") return &kGptOss;
  if (family == "dbrx") return &kDbrx;
  return nullptr;
}

// The routed-expert tensors of one MoE layer.
struct LayerExperts {
  const ParamInfo* gate_up = nullptr;
  const ParamInfo* gate = nullptr;
  const ParamInfo* up = nullptr;
  const ParamInfo* down = nullptr;
  const ParamInfo* gate_up_bias = nullptr;
  const ParamInfo* down_bias = nullptr;
};

void SetOnce(const ParamInfo*& slot, const ParamInfo& p, const char* what) {
  if (slot != nullptr) {
    throw Error(fmt::format("refit: layer {} has two routed-expert {} tensors: {} and {}", p.layer, what, slot->fqn, p.fqn));
  }
  slot = &p;
}

class MapBuilder {
 public:
  MapBuilder(const Plan& plan, const RefitNaming& naming, RefitMap& map) : plan_(plan), n_(naming), map_(map) {}

  void Layer(int64_t layer, const LayerExperts& x) {
    layer_ = layer;
    for (const ParamInfo* p : {x.gate_up, x.gate, x.up, x.down, x.gate_up_bias, x.down_bias}) {
      if (p != nullptr) CheckShape(*p);
    }
    if (x.down == nullptr) throw Error(fmt::format("refit: layer {} has no routed-expert down tensor", layer));
    if (x.gate_up == nullptr && (x.gate == nullptr || x.up == nullptr)) {
      throw Error(fmt::format("refit: layer {} has neither a fused gate_up tensor nor separate gate and up tensors", layer));
    }
    for (int64_t e = 0; e < map_.num_experts; ++e) {
      expert_ = e;
      prefix_ = fmt::format(n_.prefix, layer, e);
      if (x.gate_up != nullptr) {
        GateUp(*x.gate_up);
      } else {
        Whole(*x.gate, Name(n_.gate, *x.gate), /*out_dim=*/x.gate->tp_dim - 1);
        Whole(*x.up, Name(n_.up, *x.up), x.up->tp_dim - 1);
      }
      // Fused families (gpt-oss) list each bias after its weight, as the inventory does; split
      // families list the three weights, then the three biases.
      const bool fused = n_.gate_up != nullptr;
      if (fused && x.gate_up_bias != nullptr) GateUp(*x.gate_up_bias);
      Down(*x.down);
      if (fused && x.down_bias != nullptr) DownBias(*x.down_bias);
      if (!fused && x.gate_up_bias != nullptr) GateUp(*x.gate_up_bias);
      if (!fused && x.down_bias != nullptr) DownBias(*x.down_bias);
    }
  }

 private:
  // Routed weights are [E, a, b], biases [E, n]; dim 0 must be the plan's expert count.
  void CheckShape(const ParamInfo& p) const {
    const bool bias = p.role == Role::kExpertGateUpBias || p.role == Role::kExpertDownBias;
    const size_t rank = bias ? 2 : 3;
    if (p.shape.size() != rank || p.shape[0] != map_.num_experts) {
      throw Error(fmt::format("refit: {}: expected a {}-D [num_experts = {}, ...] tensor, got shape [{}]", p.fqn, rank, map_.num_experts,
                              fmt::join(p.shape, ", ")));
    }
    if (!bias && (p.tp_dim < 1 || p.tp_dim > 2)) {
      throw Error(fmt::format("refit: {}: tp_dim {} does not name a dim of the [expert] slice", p.fqn, p.tp_dim));
    }
  }

  std::string Name(const char* suffix, const ParamInfo& p) const {
    if (suffix == nullptr) {
      throw Error(fmt::format("refit: family {} has no per-expert name for {} ({})", plan_.model.family, RoleName(p.role), p.fqn));
    }
    return prefix_ + suffix;
  }

  static std::vector<int64_t> Slice(const ParamInfo& p) { return {p.shape.begin() + 1, p.shape.end()}; }

  // The per-expert shape after the optional transpose of a 2-D slice.
  static std::vector<int64_t> Oriented(std::vector<int64_t> shape, bool transpose) {
    if (transpose) std::swap(shape[0], shape[1]);
    return shape;
  }

  void Emit(const ParamInfo& p, std::string name, std::vector<int64_t> shape, int dim, int64_t begin, int64_t end, bool transpose) {
    RefitEntry r;
    r.name = std::move(name);
    r.shape = std::move(shape);
    r.dtype = map_.dtype;
    r.layer = layer_;
    r.expert_idx = expert_;
    r.ep_rank = plan_.experts.OwnerOf(expert_);
    r.source_fqn = p.fqn;
    r.slice_dim = dim;
    r.slice_begin = begin;
    r.slice_end = end;
    r.transpose = transpose;
    map_.entries.push_back(std::move(r));
  }

  // A whole [expert] slice of a column-parallel weight whose output dim is `out_dim` of the slice
  // (DBRX w1 / v1: [F, D], out_dim 0).
  void Whole(const ParamInfo& p, std::string name, int out_dim) {
    const bool transpose = !n_.keep_stored && out_dim == 1;
    Emit(p, std::move(name), Oriented(Slice(p), transpose), -1, 0, 0, transpose);
  }

  // Down: the input dim (F) is the TP dim; [D, F] is nn.Linear's [out, in], [F, D] is transposed
  // unless the family keeps the stored orientation.
  void Down(const ParamInfo& p) {
    const bool transpose = !n_.keep_stored && p.tp_dim - 1 == 0;
    Emit(p, Name(n_.down, p), Oriented(Slice(p), transpose), -1, 0, 0, transpose);
  }

  void DownBias(const ParamInfo& p) { Emit(p, Name(n_.down_bias, p), Slice(p), -1, 0, 0, false); }

  // Fused gate_up weight or bias: the output dim (2F) is the TP dim, split into its gate | up
  // sections, or kept fused for families that refit it fused (gpt-oss's interleaved halves).
  void GateUp(const ParamInfo& p) {
    const bool bias = p.role == Role::kExpertGateUpBias;
    if (n_.gate_up != nullptr) {
      Emit(p, Name(bias ? n_.gate_up_bias : n_.gate_up, p), Slice(p), -1, 0, 0, false);
      return;
    }
    const int dim = bias ? 0 : p.tp_dim - 1;  // the 2F dim of the [expert] slice
    const auto& s = p.fused_sections;
    if (s.size() != 2 || s[0] < 1 || s[1] < 1 || s[0] + s[1] != p.shape[dim + 1]) {
      throw Error(fmt::format("refit: {}: needs gate | up fused_sections summing to {} (dim {}), got [{}]", p.fqn, p.shape[dim + 1],
                              dim + 1, fmt::join(s, ", ")));
    }
    const bool transpose = !bias && !n_.keep_stored && dim == 1;
    const int64_t bounds[3] = {0, s[0], s[0] + s[1]};
    const char* names[2] = {bias ? n_.gate_bias : n_.gate, bias ? n_.up_bias : n_.up};
    for (int half = 0; half < 2; ++half) {
      std::vector<int64_t> shape = Slice(p);
      shape[dim] = s[half];
      Emit(p, Name(names[half], p), Oriented(std::move(shape), transpose), dim, bounds[half], bounds[half + 1], transpose);
    }
  }

  const Plan& plan_;
  const RefitNaming& n_;
  RefitMap& map_;
  int64_t layer_ = -1;
  int64_t expert_ = -1;
  std::string prefix_;
};

}  // namespace

void CheckExpertCoverage(const std::vector<std::vector<int64_t>>& experts_per_ep_rank, int64_t num_experts) {
  if (num_experts < 0) throw Error(fmt::format("refit: num_experts must be >= 0, got {}", num_experts));
  std::vector<int64_t> holder(static_cast<size_t>(num_experts), -1);
  for (size_t r = 0; r < experts_per_ep_rank.size(); ++r) {
    for (int64_t e : experts_per_ep_rank[r]) {
      if (e < 0 || e >= num_experts) {
        throw Error(fmt::format("refit: expert {} on EP rank {} is out of range [0, {})", e, r, num_experts));
      }
      int64_t& h = holder[static_cast<size_t>(e)];
      if (h == static_cast<int64_t>(r)) throw Error(fmt::format("refit: expert {} is listed twice by EP rank {}", e, r));
      if (h >= 0) throw Error(fmt::format("refit: expert {} is held by EP ranks {} and {}", e, h, r));
      h = static_cast<int64_t>(r);
    }
  }
  int64_t missing = 0, first = -1;
  for (int64_t e = 0; e < num_experts; ++e) {
    if (holder[static_cast<size_t>(e)] >= 0) continue;
    if (missing++ == 0) first = e;
  }
  if (missing == 1) throw Error(fmt::format("refit: expert {} is held by no EP rank", first));
  if (missing > 1) throw Error(fmt::format("refit: expert {} is held by no EP rank ({} experts missing)", first, missing));
}

RefitMap BuildRefitMap(const Plan& plan, const std::string& refit_dtype) {
  RefitMap map;
  map.dtype = !refit_dtype.empty()                 ? refit_dtype
              : !plan.training.refit_dtype.empty() ? plan.training.refit_dtype
                                                   : plan.training.param_dtype;
  DtypeBytes(map.dtype, "refit: dtype");

  const ExpertOwnership& own = plan.experts;
  if (own.ep < 1 || own.num_local_experts < 1) {
    throw Error(
        fmt::format("refit: expert ownership has ep {} and num_local_experts {}; both must be >= 1", own.ep, own.num_local_experts));
  }
  std::vector<std::vector<int64_t>> per_rank(static_cast<size_t>(own.ep));
  for (int64_t r = 0; r < own.ep; ++r) {
    for (int64_t i = 0; i < own.num_local_experts; ++i) per_rank[static_cast<size_t>(r)].push_back(own.FirstExpert(r) + i);
  }
  CheckExpertCoverage(per_rank, own.num_experts);
  map.num_experts = own.num_experts;
  map.ep = own.ep;

  const RefitNaming* naming = NamingFor(plan.model.family);
  if (naming == nullptr) throw Error(fmt::format("refit: no per-expert naming for family \"{}\"", plan.model.family));

  std::map<int64_t, LayerExperts> layers;  // ordered by layer
  for (const ParamInfo& p : plan.inventory.params) {
    if (!p.routed_expert) continue;
    LayerExperts& x = layers[p.layer];
    switch (p.role) {
      case Role::kExpertGateUp:
        SetOnce(x.gate_up, p, "gate_up");
        break;
      case Role::kExpertGate:
        SetOnce(x.gate, p, "gate");
        break;
      case Role::kExpertUp:
        SetOnce(x.up, p, "up");
        break;
      case Role::kExpertDown:
        SetOnce(x.down, p, "down");
        break;
      case Role::kExpertGateUpBias:
        SetOnce(x.gate_up_bias, p, "gate_up bias");
        break;
      case Role::kExpertDownBias:
        SetOnce(x.down_bias, p, "down bias");
        break;
      default:
        throw Error(fmt::format("refit: {}: routed-expert tensor with role {} has no refit rule", p.fqn, RoleName(p.role)));
    }
  }
  MapBuilder builder(plan, *naming, map);
  for (const auto& [layer, x] : layers) builder.Layer(layer, x);
  return map;
}

Json RefitMapToJson(const RefitMap& map) {
  Json entries = Json::array();
  for (const RefitEntry& r : map.entries) {
    Json slice = nullptr;
    if (r.slice_dim >= 0) slice = {{"dim", r.slice_dim}, {"begin", r.slice_begin}, {"end", r.slice_end}};
    entries.push_back({{"name", r.name},
                       {"shape", r.shape},
                       {"dtype", r.dtype},
                       {"layer", r.layer},
                       {"expert_idx", r.expert_idx},
                       {"ep_rank", r.ep_rank},
                       {"source_fqn", r.source_fqn},
                       {"slice", slice},
                       {"transpose", r.transpose}});
  }
  return {{"dtype", map.dtype}, {"num_experts", map.num_experts}, {"ep", map.ep}, {"entries", std::move(entries)}};
}

}  // namespace dockyard
