// The report header (see header.h).
#include "planner/report/header.h"

#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "planner/base/file_util.h"

namespace dockyard {

Json DegreesToJson(const ParallelDims& d) {
  return {{"convention", ConventionName(d.convention)},
          {"world_size", d.world_size},
          {"pp", d.pp},
          {"dp_replicate", d.dp_replicate},
          {"dp_shard", d.dp_shard},
          {"cp", d.cp},
          {"tp", d.tp},
          {"ep", d.ep},
          {"etp", d.etp},
          {"efsdp", d.efsdp}};
}

Json ReportHeader(const ReportHeaderInputs& in) {
  Json degrees = in.dims ? DegreesToJson(*in.dims) : Json{{"world_size", in.world_size}, {"convention", ConventionName(in.convention)}};
  if (!in.pinned.is_null()) degrees["pinned"] = in.pinned;
  Json routing = nullptr;
  if (in.routing) routing = {{"spec", *in.routing}, {"seed", in.seed}, {"layers_sampled", in.routing_layers}};
  Json h{{"command", in.command},
         {"model", {{"name", in.model_name}, {"source", in.model_source}}},
         {"degrees", degrees},
         {"rules", ConventionRulesText(in.convention)},
         {"defaults_applied", in.defaults_applied},
         {"cluster", in.cluster.empty() ? Json(nullptr) : Json(in.cluster)},
         {"calibration", in.calibration.is_null() ? Json(nullptr) : in.calibration},
         {"routing", routing},
         {"imbalance", in.imbalance},
         {"provenance", in.provenance}};
  if (!in.compute.is_null()) h["compute"] = in.compute;
  if (!in.cluster.empty() && !in.cluster_compute.empty()) h["cluster_compute"] = in.cluster_compute;
  if (in.imbalance_per_layout) h["imbalance_per_layout"] = true;
  if (in.machine) h["machine"] = {{"gpus_per_node", in.machine->gpus_per_node}, {"gpu_memory_gib", in.machine->gpu_memory_gib}};
  return h;
}

std::string ReportHeaderToText(const Json& h) {
  std::ostringstream out;
  out << fmt::format("Report     dockyard-plan {}\n", h.at("command").get<std::string>());
  const std::string model_name = h.at("model").at("name").get<std::string>(), model_source = h.at("model").at("source").get<std::string>();
  // An HF config's name is its path (hf_config.h): said once.
  out << (model_name == model_source ? fmt::format("Model      {}\n", model_name)
                                     : fmt::format("Model      {} ({})\n", model_name, model_source));
  const Json& d = h.at("degrees");
  std::string degrees = fmt::format("world_size {}", d.at("world_size").get<int64_t>());
  if (d.contains("pp")) {
    degrees += fmt::format(" = pp {} x dp_replicate {} x dp_shard {} x cp {} x tp {}; ep {} etp {} efsdp {}", d.at("pp").get<int64_t>(),
                           d.at("dp_replicate").get<int64_t>(), d.at("dp_shard").get<int64_t>(), d.at("cp").get<int64_t>(),
                           d.at("tp").get<int64_t>(), d.at("ep").get<int64_t>(), d.at("etp").get<int64_t>(), d.at("efsdp").get<int64_t>());
  } else if (d.contains("pinned") && !d.at("pinned").empty()) {
    // The pins, as "name value" (a list's values joined by commas), the rest searched.
    std::string pins;
    for (const auto& [name, value] : d.at("pinned").items()) {
      std::string text;
      if (value.is_array()) {
        for (const Json& v : value) text += (text.empty() ? "" : ",") + (v.is_string() ? v.get<std::string>() : v.dump());
      } else {
        text = value.is_string() ? value.get<std::string>() : value.dump();
      }
      pins += fmt::format("{}{} {}", pins.empty() ? "" : ", ", name, text);
    }
    degrees += fmt::format(" (layouts searched; pinned: {})", pins);
  } else {
    degrees += " (every layout searched)";
  }
  // Megatron's own names for the same degrees (its users read DP and EDP, not dp_shard and efsdp):
  // DP = dp_replicate x dp_shard, EDP = dp_replicate x efsdp (ParallelDims::edp).
  if (d.contains("pp") && d.at("convention").get<std::string>() == "megatron") {
    const int64_t dpr = d.at("dp_replicate").get<int64_t>();
    degrees += fmt::format(" (Megatron: TP {}, PP {}, CP {}, DP {}, EP {}, ETP {}, EDP {})", d.at("tp").get<int64_t>(),
                           d.at("pp").get<int64_t>(), d.at("cp").get<int64_t>(), dpr * d.at("dp_shard").get<int64_t>(),
                           d.at("ep").get<int64_t>(), d.at("etp").get<int64_t>(), dpr * d.at("efsdp").get<int64_t>());
  }
  out << fmt::format("Degrees    {}, {} convention\n", degrees, d.at("convention").get<std::string>());
  if (h.contains("rules")) out << fmt::format("Rules      {}\n", h.at("rules").get<std::string>());
  if (h.contains("defaults_applied")) {
    for (const Json& line : h.at("defaults_applied")) out << fmt::format("Defaults   {}\n", line.get<std::string>());
  }
  out << fmt::format("Cluster    {}{}\n", h.at("cluster").is_null() ? std::string("none") : h.at("cluster").get<std::string>(),
                     h.contains("cluster_compute") ? " (compute knobs: " + h.at("cluster_compute").get<std::string>() + ")" : "");
  const Json& c = h.at("calibration");
  out << fmt::format("Calibration {}\n", c.is_null() ? std::string("none (built-in knobs)")
                                                     : fmt::format("{} (preset {}, {}, sha256 {})", c.at("name").get<std::string>(),
                                                                   c.at("preset").get<std::string>(), c.at("file").get<std::string>(),
                                                                   c.at("sha256").get<std::string>()));
  if (!c.is_null() && c.contains("fitted")) {
    std::string knobs;
    for (const auto& [path, f] : c.at("fitted").items()) {
      knobs += fmt::format("{}{} {:.4g} [{:.4g}, {:.4g}]", knobs.empty() ? "" : ", ", path, f.at("value").get<double>(),
                           f.at("interval80")[0].get<double>(), f.at("interval80")[1].get<double>());
    }
    out << fmt::format("            knobs with an 80 % interval (calibrate's fit): {}\n", knobs);
  }
  const Json& r = h.at("routing");
  if (r.is_null()) {
    out << fmt::format("Routing    none sampled: received rows sized by imbalance {}\n", h.at("imbalance").get<double>());
  } else if (h.value("imbalance_per_layout", false)) {
    out << fmt::format("Routing    {} (seed {}), {} MoE layer(s) sampled; each layout's memory sized by its own sample\n",
                       r.at("spec").get<std::string>(), r.at("seed").get<uint64_t>(), r.at("layers_sampled").get<int64_t>());
  } else {
    out << fmt::format("Routing    {} (seed {}), {} MoE layer(s) sampled; memory sized by imbalance {:.4f}\n",
                       r.at("spec").get<std::string>(), r.at("seed").get<uint64_t>(), r.at("layers_sampled").get<int64_t>(),
                       h.at("imbalance").get<double>());
  }
  if (h.contains("compute")) {
    const Json& k = h.at("compute");
    std::string attention = k.value("attention_precision", std::string("bf16"));
    if (k.contains("attention_fp8_speedup")) {
      const double x = k.at("attention_fp8_speedup").get<double>();
      attention += x == 1.0    ? " (priced as bf16: no measured FP8 gain for this head dim on this cluster)"
                   : x < 0.995 ? fmt::format(" (core x{:.2f}: FP8 attention slower than bf16 at this head dim on this cluster)", x)
                               : fmt::format(" (core x{:.2f})", x);
    }
    const bool ep_overlap = k.value("ep_overlap", false), delay = k.value("delay_wgrad_compute", false);
    const int64_t queues = k.value("cuda_device_max_connections", int64_t{0});
    const std::string queue_text = queues == 1 ? ", one hardware queue: CUDA_DEVICE_MAX_CONNECTIONS=1" : "";
    std::string ep = ep_overlap ? std::string(", EP all-to-alls overlapped (combined 1F1B") + (delay ? ", expert weight gradients delayed" : "") +
                                      queue_text + ")"
                     : delay    ? ", expert weight gradients delayed where the EP overlap runs"
                                : "";
    if (k.contains("moe_flex_dispatcher_num_sms")) ep += fmt::format(", flex dispatcher on {} SMs", k.at("moe_flex_dispatcher_num_sms").get<int64_t>());
    if (queues > 0 && !(queues == 1 && ep_overlap)) ep += fmt::format(", CUDA_DEVICE_MAX_CONNECTIONS={}", queues);
    // Megatron's overlapped data-parallel traffic (param_gather.h).
    std::string dp;
    if (k.contains("dp_overlap")) {
      const Json& o = k.at("dp_overlap");
      std::vector<std::string> parts;
      if (o.value("grad_reduce", false)) parts.push_back("gradient reduce");
      if (o.value("param_gather", false)) {
        parts.push_back(std::string("parameter gather (") +
                        (o.value("param_gather_with_optimizer_step", false) ? "first chunk under the optimizer step, "
                         : o.value("aligned_param_gather", false)           ? "aligned, "
                                                                            : "each later chunk on the first micro-batch's path, ") +
                        (o.contains("ddp_bucket_size") && !o.at("ddp_bucket_size").is_null()
                             ? fmt::format("bucket {}", o.at("ddp_bucket_size").get<int64_t>())
                             : std::string("Megatron-LM's bucket")) +
                        ")");
      }
      dp = ", DP overlap: " + fmt::format("{}", fmt::join(parts, ", "));
    }
    if (!k.value("gradient_accumulation_fusion", true)) dp += ", weight gradients accumulated outside the GEMMs";
    if (k.value("use_transformer_engine_op_fuser", false)) dp += ", routed experts as TransformerEngine's fused op";
    if (k.value("rotary", std::string()) == "unfused") {
      dp += fmt::format(", rotary unfused (YaRN attention factor {:.4f}: Megatron-Core's eager RoPE)", k.at("rope_attention_factor").get<double>());
    }
    const bool kernels = k.at("model").get<std::string>() == "kernels";  // the host synchronization is priced there only
    if (k.value("moe_pad_expert_input_to_capacity", false)) {
      dp += kernels ? ", expert inputs padded to capacity (no host synchronization; the rows priced as dropless routing)"
                    : ", expert inputs padded to capacity (the rows priced as dropless routing)";
    }
    out << fmt::format("Compute    {} model, GEMMs {}, attention {}, CUDA graphs {}, cross-entropy {}{}{}{}{}\n", k.at("model").get<std::string>(),
                       k.value("gemm_precision", std::string("bf16")), attention,
                       k.value("full_iteration_cuda_graph", false) ? "on (the whole iteration: no host synchronization)"
                       : k.at("cuda_graphs").get<bool>()              ? "on"
                                                                      : "off",
                       k.at("cross_entropy").get<std::string>(),
                       k.contains("cross_entropy_fusion_impl") ? " (" + k.at("cross_entropy_fusion_impl").get<std::string>() + ")" : "",
                       k.value("tp_comm_overlap", false) ? ", TP communication overlapped where tp > 1 (TransformerEngine userbuffers)" : "", ep,
                       dp);
  }
  if (h.contains("machine")) {
    const Json& m = h.at("machine");
    const double budget = m.at("gpu_memory_gib").get<double>();
    out << fmt::format("Machine    {} GPUs per node, {}\n", m.at("gpus_per_node").get<int64_t>(),
                       budget > 0 ? fmt::format("budget {:.2f} GiB per GPU", budget) : std::string("no memory budget"));
  }
  // The command as typed, the program by its name (argv[0] is a Bazel cache path under `bazel run`;
  // provenance.argv keeps it whole).
  std::string argv;
  for (const Json& a : h.at("provenance").value("argv", Json::array())) {
    std::string word = a.get<std::string>();
    if (argv.empty()) word = SplitPath(word).second;
    argv += (argv.empty() ? "" : " ") + word;
  }
  out << fmt::format("Command    {}\n", argv);
  return out.str();
}

}  // namespace dockyard
