// The HTML report's page header (html_internal.h Header): the title, the headline numbers and
// the table of inputs, from the fields of the report each kind of page has.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "planner/report/html_internal.h"
#include "planner/report/report.h"

namespace dockyard::html {
namespace {

// One row of the table of inputs.
void Row(std::string& out, const std::string& key, const std::string& value) {
  out += fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", Esc(key), Esc(value));
}

// The parallel degrees of `parallel` (PlanToJson's) as "world_size 64, pp 1, ..." and its convention.
std::string Degrees(const Json& par) {
  std::string out;
  for (const char* k : {"world_size", "pp", "dp_replicate", "dp_shard", "cp", "tp", "ep", "etp", "efsdp"}) {
    if (par.contains(k)) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", k, JsonText(par[k]));
  }
  if (par.contains("convention")) out += " (" + JsonText(par.at("convention")) + ")";
  return out;
}

// The table of inputs: model, degrees, layout, training, cluster, routing, run, generator, command
// and input files, each when the report has it.
std::string InputRows(const Json& r, const std::string& kind) {
  std::string inputs;
  const Json& gen = r.contains("generator") ? r.at("generator") : Json::object();
  const Json& prov = r.contains("provenance") ? r.at("provenance") : gen.value("provenance", Json());
  if (r.contains("model")) {
    const Json& m = r.at("model");
    if (m.is_string()) {
      Row(inputs, "model", m.get<std::string>());
    } else {
      Row(inputs, "model",
          fmt::format("{} ({})", JsonText(m.value("source", m.value("name", Json("?")))), JsonText(m.value("family", Json("?")))));
      if (m.contains("num_experts")) {
        Row(inputs, "experts", fmt::format("{} routed, top_k {}", JsonText(m.at("num_experts")), JsonText(m.value("top_k", Json("?")))));
      }
    }
  }
  if (r.contains("parallel")) Row(inputs, "degrees", Degrees(r.at("parallel")));
  if (r.contains("layout")) {
    const Json& l = r.at("layout");
    Row(inputs, "layout",
        fmt::format("world {}, stage {}, {} ranks run, ep {}, expert tp {}, dispatcher {}", JsonText(l.at("world_size")),
                    JsonText(l.at("stage")), JsonText(l.at("ranks")), JsonText(l.at("ep")), JsonText(l.at("expert_tp")),
                    JsonText(l.at("dispatcher"))));
  }
  if (r.contains("world_size") && !r.contains("parallel")) Row(inputs, "world size", JsonText(r.at("world_size")));
  if (r.contains("training")) {
    const Json& t = r.at("training");
    // A search's searched settings (its JSON's training.searched) are not fixed values: listed as searched.
    std::vector<std::string> searched;
    if (t.contains("searched") && t.at("searched").is_array()) {
      for (const auto& s : t.at("searched")) searched.push_back(JsonText(s));
    }
    std::string text;
    for (const char* k : {"dp_sharding", "seq_len", "micro_batch_size", "num_microbatches", "vpp", "recompute", "gpus_per_node",
                          "dispatcher", "gpu_memory_gib", "imbalance"}) {
      if (!t.contains(k) || std::find(searched.begin(), searched.end(), k) != searched.end()) continue;
      const Json& v = t.at(k);
      if (std::string(k) == "gpu_memory_gib" && v.is_number() && v.get<double>() <= 0) continue;  // 0 = no budget given
      // search --routing sizes each layout's memory by its own sample: no one imbalance (header.h).
      if (std::string(k) == "imbalance" && r.contains("header") && r.at("header").value("imbalance_per_layout", false)) {
        text += fmt::format("{}imbalance each layout's own routing sample", text.empty() ? "" : ", ");
        continue;
      }
      // Numbers as a person reads them: 4 significant digits (an imbalance of 1.0833333333333333 reads 1.083).
      const std::string value = v.is_number_float() ? fmt::format("{:.4g}", v.get<double>()) : JsonText(v);
      text += fmt::format("{}{} {}", text.empty() ? "" : ", ", k, value);
    }
    if (!searched.empty()) {
      std::string list;
      for (const auto& s : searched) list += (list.empty() ? "" : ", ") + s;
      text += fmt::format("{}searched: {}", text.empty() ? "" : "; ", list);
    }
    Row(inputs, "training", text);
  }
  if (r.contains("cluster")) {
    const Json& c = r.at("cluster");
    std::string text = c.is_object() ? JsonText(c.value("name", Json("?"))) + ":" : JsonText(c);
    if (c.is_object()) {
      for (auto it = c.begin(); it != c.end(); ++it) {
        if (it.key() == "name") continue;
        // 0 there means unset (cluster.h: nodes 0 = any number of nodes, nvlink_domain_gpus 0 = one node).
        if ((it.key() == "nodes" || it.key() == "nvlink_domain_gpus") && it.value().is_number() && it.value().get<double>() == 0) continue;
        text += fmt::format(" {} {}", it.key(), JsonText(it.value()));
      }
    }
    Row(inputs, "cluster (calibration)", text);
  }
  if (r.contains("routing"))
    Row(inputs, "routing", JsonText(r.at("routing")) + (r.contains("seed") ? " (seed " + JsonText(r.at("seed")) + ")" : ""));
  if (r.contains("run")) {
    const Json& run = r.at("run");
    Row(inputs, "run",
        fmt::format("backend {}, {} tokens/rank, routing {}, seed {}, {} timed iterations", JsonText(run.at("backend")),
                    JsonText(run.at("tokens_per_rank")), JsonText(run.at("routing")), JsonText(run.at("seed")), JsonText(run.at("iters"))));
  }
  if (r.contains("notes")) {
    for (const auto& note : r.at("notes")) Row(inputs, "note", JsonText(note));
  }
  if (r.contains("warnings")) {
    for (const auto& warning : r.at("warnings")) Row(inputs, "warning", JsonText(warning));
  }
  const std::string version =
      gen.contains("version") ? JsonText(gen.at("version")) : JsonText(r.value("dockyard_version", Json(kDockyardVersion)));
  // The commit the binary was built from, as --version prints it (provenance.git_commit).
  const std::string commit =
      prov.is_object() && prov.contains("git_commit") ? fmt::format(" (git commit {})", JsonText(prov.at("git_commit"))) : "";
  Row(inputs, "generator", fmt::format("{} {}{}", JsonText(gen.value("name", Json(kind))), version, commit));
  if (prov.is_object()) {
    if (prov.contains("argv")) {
      std::string argv;
      for (const auto& a : prov.at("argv")) argv += (argv.empty() ? "" : " ") + JsonText(a);
      Row(inputs, "command", argv);
    }
    if (prov.contains("inputs")) {
      for (const auto& in : prov.at("inputs")) {
        Row(inputs, "input",
            fmt::format("{} ({} bytes, sha256 {})", JsonText(in.value("path", Json("?"))), JsonText(in.value("bytes", Json("?"))),
                        JsonText(in.value("sha256", Json("?")))));
      }
    }
  }
  return inputs;
}

// Headline numbers: the same fields the JSON report and the terminal table give.
std::string HeadlineNumbers(const Json& r, const std::string& kind) {
  std::string headline;
  auto head = [&](const std::string& k, const std::string& v) {
    headline += fmt::format("<div class=\"num\"><b>{}</b><span>{}</span></div>", Esc(v), Esc(k));
  };
  if (r.contains("model") && r.at("model").is_object() && r.at("model").contains("total_params")) {
    head("total params", FormatCount(r.at("model").at("total_params").get<int64_t>()));
    head("active params / token", FormatCount(r.at("model").at("active_params").get<int64_t>()));
  }
  if (r.contains("memory")) {
    const Json& m = r.at("memory");
    head(fmt::format("peak memory (rank {})", JsonText(m.at("worst_rank"))), FormatBytes(m.at("worst_peak_bytes").get<int64_t>()));
    if (m.contains("headroom_bytes")) {
      const int64_t headroom = m.at("headroom_bytes").get<int64_t>();
      head("headroom vs budget", headroom >= 0 ? FormatBytes(headroom) : "over by " + FormatBytes(-headroom));
    }
    if (m.contains("over_budget_ranks") && !m.at("over_budget_ranks").empty()) {
      head("stage worst ranks over budget", m.at("over_budget_ranks").dump());
    }
  }
  if (r.contains("communication")) {
    const Json& c = r.at("communication");
    head(fmt::format("wire bytes / step (rank {})", JsonText(c.at("rank"))), FormatBytes(c.at("total_wire_bytes").get<int64_t>()));
    head("of which cross-node", FormatBytes(c.at("total_cross_node_bytes").get<int64_t>()));
  }
  if (r.contains("predicted") && r.at("predicted").is_object() && r.at("predicted").contains("step_time_us")) {
    const Json& c = r.at("predicted");
    head("step time (predicted)", fmt::format("{:.1f} ms", c.at("step_time_us").get<double>() / 1e3));
    head("tokens/s per GPU", fmt::format("{:.0f}", c.at("tokens_per_s_per_gpu").get<double>()));
    head("MFU", fmt::format("{:.1f}%", 100 * c.at("mfu").get<double>()));
    head("dominant phase", JsonText(c.at("dominant_phase")));
    head("routing imbalance", fmt::format("{:.2f}", c.at("routing_imbalance").get<double>()));
  }
  if (kind == "search") {
    head("layouts enumerated", JsonText(r.at("enumerated")));
    head("invalid", JsonText(r.at("invalid")));
    head(fmt::format("over the {:.1f} GiB budget", r.at("budget_gib").get<double>()), JsonText(r.at("over_budget")));
    head("ranked", JsonText(r.at("ranked")));
    if (!r.at("top").empty())
      head("best tokens/s per GPU", fmt::format("{:.0f}", r.at("top").at(0).at("tokens_per_s_per_gpu").get<double>()));
  }
  if (r.contains("validation")) {
    const Json& v = r.at("validation");
    head("validation", v.at("passed").get<bool>() ? "passed" : "FAILED");
    head("wrong / checked", fmt::format("{} / {}", JsonText(v.at("wrong")), JsonText(v.at("checked"))));
    head("max abs error", JsonText(v.at("max_abs_error")));
  }
  return headline;
}

}  // namespace

void Header(Page& p, const Json& r, const std::string& kind) {
  p.body +=
      fmt::format("<header><h1>dockyard {} report</h1>\n<div class=\"nums\">{}</div>\n<table class=\"inputs\">\n{}</table></header>\n",
                  Esc(kind), HeadlineNumbers(r, kind), InputRows(r, kind));
}

}  // namespace dockyard::html
