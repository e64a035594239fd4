// The HTML report checked as data: the page is well-formed XML, self-contained, every figure has
// a legend, and each figure draws what its JSON says (hottest cells, node outlines, bar heights,
// schedule slots, search points).
#include "planner/report/html_report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "planner/cost/cluster.h"
#include "planner/cost/cost.h"
#include "planner/base/error.h"
#include "planner/accounting/memory.h"
#include "planner/layout/plan.h"
#include "planner/report/report.h"
#include "planner/routing/routing.h"
#include "planner/search/search.h"
#include "planner/accounting/workload.h"
#include "tests/test_models.h"

namespace dockyard {
namespace {

// One element of the page: its tag, attributes, the id of the figure it is in, and the text
// of its direct children (for <title>).
struct Element {
  std::string tag;
  std::map<std::string, std::string> attrs;
  std::string figure;
  std::string text;
  std::string Attr(const std::string& k) const {
    auto it = attrs.find(k);
    return it == attrs.end() ? "" : it->second;
  }
  bool HasClass(const std::string& c) const {
    const std::string cls = " " + Attr("class") + " ";
    return cls.find(" " + c + " ") != std::string::npos;
  }
  double Num(const std::string& k) const { return std::stod(Attr(k)); }
};

// Replaces the five XML entities the page uses; anything else after '&' is a malformed page.
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    const size_t semi = s.find(';', i);
    REQUIRE_MESSAGE(semi != std::string::npos, "bare '&' at ", i);
    const std::string ent = s.substr(i, semi - i + 1);
    if (ent == "&amp;")
      out += '&';
    else if (ent == "&lt;")
      out += '<';
    else if (ent == "&gt;")
      out += '>';
    else if (ent == "&quot;")
      out += '"';
    else if (ent == "&#39;")
      out += '\'';
    else
      FAIL("unknown entity " << ent);
    i = semi;
  }
  return out;
}

// A strict well-formedness check (every tag closed in order, attributes quoted, entities
// known, no '<' in text); <script> content is raw text up to </script>. Returns every element.
std::vector<Element> ParsePage(const std::string& html) {
  std::vector<Element> all;
  std::vector<size_t> stack;  // indices into all
  size_t i = 0;
  const std::string doctype = "<!DOCTYPE html>";
  REQUIRE(html.compare(0, doctype.size(), doctype) == 0);
  i = doctype.size();
  auto figure_of_stack = [&]() -> std::string {
    for (size_t k = stack.size(); k-- > 0;) {
      if (all[stack[k]].tag == "figure") return all[stack[k]].Attr("id");
    }
    return "";
  };
  while (i < html.size()) {
    const size_t lt = html.find('<', i);
    const std::string text = html.substr(i, (lt == std::string::npos ? html.size() : lt) - i);
    REQUIRE(text.find('>') == std::string::npos);
    if (!stack.empty()) {
      const std::string t = Unescape(text);
      all[stack.back()].text += t;
      // A <title>'s text is also its parent's (the hover text of a cell).
      if (all[stack.back()].tag == "title" && stack.size() > 1) all[stack[stack.size() - 2]].text += t;
    }
    if (lt == std::string::npos) break;
    if (html[lt + 1] == '/') {
      const size_t gt = html.find('>', lt);
      const std::string name = html.substr(lt + 2, gt - lt - 2);
      REQUIRE_MESSAGE(!stack.empty(), "stray </", name, ">");
      REQUIRE_MESSAGE(all[stack.back()].tag == name, "</", name, "> closes <", all[stack.back()].tag, ">");
      stack.pop_back();
      i = gt + 1;
      continue;
    }
    // <name attr="value" ...> or .../>
    size_t j = lt + 1;
    while (j < html.size() && (std::isalnum(static_cast<unsigned char>(html[j])) || html[j] == '-')) ++j;
    Element e;
    e.tag = html.substr(lt + 1, j - lt - 1);
    REQUIRE_MESSAGE(!e.tag.empty(), "bad tag at ", lt);
    bool self_closing = false;
    while (true) {
      while (html[j] == ' ' || html[j] == '\n') ++j;
      if (html[j] == '>') {
        ++j;
        break;
      }
      if (html.compare(j, 2, "/>") == 0) {
        self_closing = true;
        j += 2;
        break;
      }
      const size_t eq = html.find('=', j);
      const std::string key = html.substr(j, eq - j);
      REQUIRE_MESSAGE(html[eq + 1] == '"', "unquoted attribute ", key, " of <", e.tag, ">");
      const size_t end = html.find('"', eq + 2);
      const std::string raw = html.substr(eq + 2, end - eq - 2);
      REQUIRE(raw.find('<') == std::string::npos);
      REQUIRE_MESSAGE(e.attrs.count(key) == 0, "duplicate attribute ", key);
      e.attrs[key] = Unescape(raw);
      j = end + 1;
    }
    e.figure = e.tag == "figure" ? e.Attr("id") : figure_of_stack();
    all.push_back(e);
    if (e.tag == "script" || e.tag == "style") {
      const std::string close = "</" + e.tag + ">";
      const size_t end = html.find(close, j);
      REQUIRE(end != std::string::npos);
      all.back().text = html.substr(j, end - j);
      i = end + close.size();
      continue;
    }
    if (!self_closing) stack.push_back(all.size() - 1);
    i = j;
  }
  REQUIRE_MESSAGE(stack.empty(), "unclosed <", all[stack.back()].tag, ">");
  return all;
}

std::vector<Element> Select(const std::vector<Element>& all, const std::string& figure, const std::string& tag,
                            const std::string& cls = "") {
  std::vector<Element> out;
  for (const auto& e : all) {
    if (e.figure == figure && e.tag == tag && (cls.empty() || e.HasClass(cls))) out.push_back(e);
  }
  return out;
}

std::vector<std::string> FigureIds(const std::vector<Element>& all) {
  std::vector<std::string> ids;
  for (const auto& e : all) {
    if (e.tag == "figure") ids.push_back(e.Attr("id"));
  }
  return ids;
}

// Checks shared by every page: figures have a caption and a legend; nothing is fetched.
void CheckSelfContained(const std::string& html, const std::vector<Element>& all) {
  for (const auto& id : FigureIds(all)) {
    CHECK_MESSAGE(Select(all, id, "figcaption").size() == 1, id);
    CHECK_MESSAGE(Select(all, id, "div", "legend").size() >= 1, id, " has no legend");
  }
  for (const auto& e : all) {
    for (const char* k : {"src", "href", "xlink:href"}) {
      const std::string v = e.Attr(k);
      CHECK_MESSAGE(v.find("http") == std::string::npos, "<", e.tag, "> ", k, "=", v);
    }
    CHECK(e.tag != "img");
    CHECK(e.tag != "link");
    CHECK(e.tag != "iframe");
  }
  CHECK(html.find("@import") == std::string::npos);
  CHECK(html.find("url(http") == std::string::npos);
  CHECK(html.find("fetch(") == std::string::npos);
}

struct PlanPage {
  Plan plan;
  Json report, routing;
  std::string html;
  std::vector<Element> all;
};

PlanPage MakePlanPage(const ModelSpec& model, int64_t world, int64_t ep, int64_t pp, int64_t gpus_per_node, double budget_gib) {
  PlanPage p;
  ParallelDimsOptions dims;
  dims.world_size = world;
  dims.ep = ep;
  dims.pp = pp;
  TrainingConfig t;
  dockyard::Machine machine;
  machine.gpus_per_node = gpus_per_node;
  machine.gpu_memory_gib = budget_gib;
  t.seq_len = 64;
  p.plan = BuildPlan(model, dims, t, machine);
  p.report = PlanToJson(p.plan, "tiny", ComputeMemory(p.plan));
  p.routing = UniformRoutingSample(p.plan);
  p.html = ReportToHtml(p.report, p.routing);
  p.all = ParsePage(p.html);
  return p;
}

TEST_CASE("A plan page is well-formed, self-contained and has the plan's figures, each with a legend") {
  const PlanPage p = MakePlanPage(testing::TinyMixtral(), 16, 4, 2, 2, 1.0);
  CheckSelfContained(p.html, p.all);
  const std::vector<std::string> ids = FigureIds(p.all);
  for (const char* id : {"fig-mesh-dense", "fig-mesh-sparse", "fig-experts", "fig-tokens", "fig-memory", "fig-traffic"}) {
    CHECK_MESSAGE(std::count(ids.begin(), ids.end(), id) == 1, id);
  }
  // Simulate-only figures are absent from a plan page.
  CHECK(std::count(ids.begin(), ids.end(), "fig-pipeline") == 0);
}

TEST_CASE("The rank grid draws one cell per rank and world / gpus_per_node node outlines") {
  // world 16, gpus_per_node 2: 16 / 2 = 8 nodes.
  const PlanPage p = MakePlanPage(testing::TinyMixtral(), 16, 4, 1, 2, 0);
  for (const char* fig : {"fig-mesh-dense", "fig-mesh-sparse"}) {
    CHECK(Select(p.all, fig, "rect", "r").size() == 16);
    CHECK(Select(p.all, fig, "rect", "node").size() == 8);
  }
  // The sparse grid is coloured by ep: ep 4 over 16 ranks gives 16 / 4 = 4 groups; ranks 0-3
  // form group 0 (meshes.sparse.groups.ep[0] = [0, 1, 2, 3]), so cells 0 and 3 share a colour
  // and cell 4 (group 1) has another.
  const auto cells = Select(p.all, "fig-mesh-sparse", "rect", "r");
  CHECK(p.report["meshes"]["sparse"]["groups"]["ep"][0] == Json({0, 1, 2, 3}));
  CHECK(cells[0].Attr("fill") == cells[3].Attr("fill"));
  CHECK(cells[0].Attr("fill") != cells[4].Attr("fill"));
  CHECK(cells[5].text.find("ep group 1") != std::string::npos);
}

// TinyMixtral widened so that 8192 ranks shard it as FSDP2 allows: with ep 8, efsdp = 1024 and
// the experts are cut on dim 1 (efsdp * ep > 8 experts), which must divide by 1024:
// gate_up [8, 2F = 1024, D], down [8, D = 1024, F].
ModelSpec WideTinyMixtral() {
  ModelSpec m = testing::TinyMixtral();
  m.hidden_size = 1024;
  m.moe.moe_intermediate_size = 512;
  return m;
}

TEST_CASE("Beyond 4096 ranks the rank grid draws one cell per node") {
  // world 8192, 8 GPUs per node: 8192 / 8 = 1024 node cells and 1024 outlines.
  const PlanPage p = MakePlanPage(WideTinyMixtral(), 8192, 8, 1, 8, 0);
  CHECK(Select(p.all, "fig-mesh-dense", "rect", "r").size() == 1024);
  CHECK(Select(p.all, "fig-mesh-dense", "rect", "node").size() == 1024);
}

TEST_CASE("Beyond 4096 nodes the rank grid draws one cell per block of nodes") {
  // world 8192, 1 GPU per node: 8192 nodes > 4096, so blocks of ceil(8192 / 4096) = 2 nodes: 4096 cells.
  const PlanPage p = MakePlanPage(WideTinyMixtral(), 8192, 8, 1, 1, 0);
  CHECK(Select(p.all, "fig-mesh-sparse", "rect", "r").size() == 4096);
  CHECK(Select(p.all, "fig-mesh-sparse", "rect", "node").size() == 4096);
  CHECK(p.html.find("one cell per block of 2 nodes (2 ranks)") != std::string::npos);
}

TEST_CASE("Expert ownership draws one bar per EP rank over exactly the experts the report gives it") {
  // TinyMixtral: 8 experts, ep 4: EP rank r owns experts 2r and 2r + 1.
  const PlanPage p = MakePlanPage(testing::TinyMixtral(), 16, 4, 1, 8, 0);
  const auto bars = Select(p.all, "fig-experts", "rect", "own");
  REQUIRE(bars.size() == 4);
  const double px_per_expert = bars[0].Num("width") / 2;
  for (int r = 0; r < 4; ++r) {
    const Json& own = p.report["experts"]["ownership"][r];
    CHECK(own["experts"] == Json({2 * r, 2 * r + 1}));
    CHECK(bars[r].text == fmt::format("EP rank {}: experts {}-{}", r, 2 * r, 2 * r + 1));
    CHECK(bars[r].Num("width") == doctest::Approx(2 * px_per_expert));
    CHECK(bars[r].Num("x") - bars[0].Num("x") == doctest::Approx(2 * r * px_per_expert));
  }
}

TEST_CASE("The tokens-per-expert heatmap marks each layer's hottest expert with the JSON's maximum") {
  const PlanPage p = MakePlanPage(testing::TinyMixtral(), 16, 4, 1, 2, 0);
  const Json& layers = p.routing["layers"];
  REQUIRE(layers.size() == 1);  // UniformRoutingSample: one layer
  const auto tpe = layers[0]["tokens_per_expert"].get<std::vector<int64_t>>();
  const int64_t json_max = *std::max_element(tpe.begin(), tpe.end());
  const auto cells = Select(p.all, "fig-tokens", "rect", "cell");
  REQUIRE(cells.size() == 8);  // 8 experts
  const auto hot = Select(p.all, "fig-tokens", "rect", "hot");
  REQUIRE(hot.size() == 1);
  CHECK(hot[0].Num("data-v") == json_max);
  double drawn_max = 0;
  for (const auto& c : cells) drawn_max = std::max(drawn_max, c.Num("data-v"));
  CHECK(drawn_max == json_max);
  // Tokens per rank: seq_len 64 x micro-batch 1 = 64 routed tokens on each of 4 EP ranks, top_k
  // 2: the sample's assignments sum to 64 x 4 x 2 = 512.
  int64_t sum = 0;
  for (int64_t v : tpe) sum += v;
  CHECK(sum == 512);
}

TEST_CASE("The dispatch heatmap's hottest cell is the dispatch matrix's maximum and node pairs show as inter-node") {
  const PlanPage p = MakePlanPage(testing::TinyMixtral(), 16, 4, 1, 2, 0);
  const auto d = p.routing["layers"][0]["dispatch"].get<std::vector<int64_t>>();
  const auto cells = Select(p.all, "fig-traffic", "rect", "cell");
  REQUIRE(cells.size() == 16);  // ep 4 x 4
  const auto hot = Select(p.all, "fig-traffic", "rect", "hot");
  REQUIRE(hot.size() == 1);
  CHECK(hot[0].Num("data-v") == *std::max_element(d.begin(), d.end()));
  // EP group 0 = ranks 0-3 on nodes 0, 0, 1, 1 (2 GPUs per node): of the 16 pairs, 2 x 2 x 2 = 8
  // cross a node boundary.
  int inter = 0;
  for (size_t i = 0; i < cells.size(); ++i) {
    CHECK(cells[i].Num("data-v") == d[i]);
    inter += cells[i].text.find("inter-node") != std::string::npos;
  }
  CHECK(inter == 8);
  // One node boundary inside the group (between ranks 1 and 2): one line across, one down.
  CHECK(Select(p.all, "fig-traffic", "line", "nodeline").size() == 2);
}

TEST_CASE("An EP group larger than 64 ranks is drawn per node pair, the sums of the dispatch matrix") {
  ModelSpec m = testing::TinyMixtral();
  m.moe.num_experts = 128;
  // ep 128 on 128 ranks, 8 per node: 16 x 16 node pairs.
  const PlanPage p = MakePlanPage(m, 128, 128, 1, 8, 0);
  const auto d = p.routing["layers"][0]["dispatch"].get<std::vector<int64_t>>();
  std::vector<int64_t> sums(16 * 16, 0);
  for (int s = 0; s < 128; ++s) {
    for (int t = 0; t < 128; ++t) sums[(s / 8) * 16 + t / 8] += d[s * 128 + t];
  }
  const auto cells = Select(p.all, "fig-traffic", "rect", "cell");
  REQUIRE(cells.size() == 256);
  for (size_t i = 0; i < cells.size(); ++i) CHECK(cells[i].Num("data-v") == sums[i]);
  const auto hot = Select(p.all, "fig-traffic", "rect", "hot");
  REQUIRE(hot.size() == 1);
  CHECK(hot[0].Num("data-v") == *std::max_element(sums.begin(), sums.end()));
}

TEST_CASE("Memory bars stack the report's five kinds with heights proportional to the bytes, peak = their sum") {
  const PlanPage p = MakePlanPage(testing::TinyMixtral(), 16, 4, 2, 8, 1.0);
  const Json& stages = p.report["memory"]["stages"];
  const auto bars = Select(p.all, "fig-memory", "g", "bar");
  REQUIRE(bars.size() == stages.size());
  REQUIRE(stages.size() == 2);
  const auto segs = Select(p.all, "fig-memory", "rect", "seg");
  REQUIRE(segs.size() == 2 * 5);
  double px_per_byte = -1;
  for (size_t s = 0; s < stages.size(); ++s) {
    CHECK(bars[s].Attr("data-peak") == stages[s]["peak_bytes"].dump());
    double height = 0;
    int64_t bytes = 0;
    for (size_t k = 0; k < 5; ++k) {
      const Element& seg = segs[s * 5 + k];
      CHECK(seg.Attr("data-bytes") == stages[s][seg.Attr("data-kind")].dump());
      height += seg.Num("height");
      bytes += std::stoll(seg.Attr("data-bytes"));
    }
    CHECK(bytes == stages[s]["peak_bytes"].get<int64_t>());
    // One scale for every bar: pixels per byte equal (to the 3 printed decimals).
    const double ratio = height / static_cast<double>(bytes);
    if (px_per_byte < 0) px_per_byte = ratio;
    CHECK(ratio == doctest::Approx(px_per_byte).epsilon(1e-3));
  }
  // The budget line is drawn (1 GiB given).
  CHECK(Select(p.all, "fig-memory", "line", "budget").size() == 1);
}

// A simulate page of TinyMixtral on 8 ranks, ep 4, pp 2, seq_len 64, h100-sxm, uniform routing,
// with M micro-batches and vpp model chunks per rank: the page, its routing sample and the cost.
struct SimulatePage {
  Json page;
  RoutingResult sample;
  CostBreakdown cost;
};
SimulatePage TinySimulatePage(int64_t num_microbatches, int64_t vpp) {
  ParallelDimsOptions dims;
  dims.world_size = 8;
  dims.ep = 4;
  dims.pp = 2;
  TrainingConfig t;
  t.seq_len = 64;
  t.num_microbatches = num_microbatches;
  t.run.vpp = vpp;
  const Plan plan = BuildPlan(testing::TinyMixtral(), dims, t);
  const ClusterSpec cluster = ClusterPreset("h100-sxm");
  SimulatePage s;
  s.sample = SampleRouting(ParseRoutingSpec("uniform"), 8, 2, plan.dims.ep, ComputeWorkload(plan).routed_tokens, 2);
  s.cost = SimulateStep(plan, cluster, s.sample);
  s.page = PlanToJson(plan, "tiny", ComputeMemory(plan));
  s.page["predicted"] = CostToJson(s.cost);
  s.page["cluster"] = ClusterToJson(cluster);
  s.page["routing"] = "uniform";
  return s;
}

TEST_CASE("A simulate page draws the predicted MoE phases and a schedule whose bubbles sum to the predicted bubble") {
  const SimulatePage sim = TinySimulatePage(3, 1);
  const Json& page = sim.page;
  const RoutingResult& sample = sim.sample;
  const CostBreakdown& cost = sim.cost;
  const std::string html = ReportToHtml(page, RoutingSampleToJson(sample));
  const auto all = ParsePage(html);
  CheckSelfContained(html, all);
  // Phase bars: per MoE phase a forward and a backward bar with the JSON's times.
  std::map<std::string, double> fwd;
  for (const auto& ph : page["predicted"]["phases"]) {
    if (ph["layer_kind"] == "moe" && ph["direction"] == "forward") fwd[ph["name"].get<std::string>()] = ph["time_us"].get<double>();
  }
  const auto bars = Select(all, "fig-phases", "rect", "pbar");
  REQUIRE(bars.size() == 2 * fwd.size());
  for (size_t i = 0; i < bars.size(); i += 2) {
    const std::string name = bars[i].text.substr(0, bars[i].text.find(' '));
    REQUIRE(fwd.count(name) == 1);
    CHECK(bars[i].Num("data-us") == doctest::Approx(fwd[name]));
  }
  // Schedule: pp 2, 3 micro-batches: 3 + 2 - 1 = 4 slots per stage, 3 busy and 1 bubble each.
  CHECK(Select(all, "fig-pipeline", "rect", "busy").size() == 6);
  const auto bubbles = Select(all, "fig-pipeline", "rect", "bubble");
  REQUIRE(bubbles.size() == 2);
  // Each stage idles (pp - 1) = 1 slot = predicted.pipeline_bubble_us (pp 2).
  CHECK(bubbles[0].Num("data-us") * (2 - 1) == doctest::Approx(cost.pipeline_bubble_us));
  // Each busy slot ends with its backward: the share of backward in the MoE layers' predicted
  // phases (TinyMixtral: 2 MoE layers, no dense layer), times the slot.
  double fwd_us = 0, all_us = 0;
  for (const auto& ph : cost.phases) {
    if (ph.layer_kind != LayerKind::kMoe) continue;
    all_us += ph.time_us;
    if (ph.direction == Direction::kForward) fwd_us += ph.time_us;
  }
  const auto bwd = Select(all, "fig-pipeline", "rect", "bwd");
  REQUIRE(bwd.size() == 6);
  CHECK(bwd[0].Num("data-us") == doctest::Approx(cost.stage_microbatch_us * (1 - fwd_us / all_us)));
  CHECK(fwd_us > 0);
  CHECK(fwd_us < all_us);
  // Routing-dependent phases per EP rank: 4 EP ranks.
  CHECK(!Select(all, "fig-rank-phases", "rect").empty());
}

TEST_CASE("A simulate page with EP overlap says in the phase figure what the overlap hid and what it cost") {
  SimulatePage sim = TinySimulatePage(3, 1);
  // Without EP overlap the report has no ep_overlap object and the page no such sentence.
  REQUIRE(!sim.page["predicted"].contains("ep_overlap"));
  CHECK(ReportToHtml(sim.page, RoutingSampleToJson(sim.sample)).find("EP overlap (combined 1F1B") == std::string::npos);
  // The numbers of moe_sync_test's hand case: 3 of 4 forwards paired, all-to-alls 100 us alone
  // and 300 us added, the host synchronization 616 us alone and (1 - 0.75) x 616 = 154 us left:
  // net (100 + 616) - (300 + 154) = 262 us saved.
  sim.page["predicted"]["ep_overlap"] = {{"paired_share", 0.75},        {"a2a_alone_us", 100.0},         {"a2a_added_us", 300.0},
                                         {"sync_idle_alone_us", 616.0}, {"sync_idle_exposed_us", 154.0}, {"saved_us", 262.0}};
  const std::string html = ReportToHtml(sim.page, RoutingSampleToJson(sim.sample));
  const auto all = ParsePage(html);
  CheckSelfContained(html, all);
  const size_t fig = html.find("id=\"fig-phases\"");
  REQUIRE(fig != std::string::npos);
  const size_t at = html.find("EP overlap (combined 1F1B; 75 % of the forwards", fig);
  REQUIRE(at != std::string::npos);
  CHECK(at < html.find("</figure>", fig));  // in the phase figure's note
  CHECK(html.find("take 100.0 us alone and add 300.0 us with it", at) != std::string::npos);
  CHECK(html.find("616.0 us alone, 154.0 us left", at) != std::string::npos);
  CHECK(html.find("net 262.0 us saved", at) != std::string::npos);
  // A loss is named: 100 + 616 - (900 + 154) = -338 us.
  sim.page["predicted"]["ep_overlap"]["a2a_added_us"] = 900.0;
  CHECK(ReportToHtml(sim.page, RoutingSampleToJson(sim.sample)).find("net 338.0 us LOST") != std::string::npos);
  // A report whose ep_overlap lacks a key is refused, naming it.
  sim.page["predicted"]["ep_overlap"].erase("sync_idle_exposed_us");
  CHECK_THROWS_WITH_AS(ReportToHtml(sim.page, RoutingSampleToJson(sim.sample)),
                       doctest::Contains("predicted.ep_overlap.sync_idle_exposed_us: missing or not a number"), Error);
}

// A small search of TinyMixtral on 16 GPUs, every ranked layout kept.
SearchOptions TinySearch() {
  SearchOptions s;
  s.world_size = 16;
  s.cluster = ClusterPreset("h100-sxm");
  s.training.seq_len = 256;
  s.top = 1000;
  s.routing_layers = 1;
  return s;
}

TEST_CASE("Every search point is a ranked layout of the report, and the Pareto points are exactly the non-dominated ones") {
  SearchOptions s = TinySearch();
  const SearchResult result = SearchLayouts(testing::TinyMixtral(), s);
  Json j = SearchResultToJson(result);
  j["world_size"] = 16;
  j["model"] = "tiny";
  j["top_rows"] = 3;  // as dockyard-plan search --top 3 --html: the first 3 rows are the top rows
  const std::string html = ReportToHtml(j);
  const auto all = ParsePage(html);
  CheckSelfContained(html, all);
  const Json& top = j["top"];
  REQUIRE(top.size() >= 3);
  const auto points = Select(all, "fig-search", "circle", "pt");
  REQUIRE(points.size() == top.size());
  std::vector<bool> seen(top.size(), false);
  for (const auto& pt : points) {
    const size_t row = std::stoul(pt.Attr("data-row"));
    REQUIRE(row < top.size());
    CHECK(!seen[row]);
    seen[row] = true;
    const Json& x = top[row];
    // The hover title names the row's degrees.
    CHECK(pt.text.find(fmt::format("pp {} dp_replicate {} dp_shard {} cp {} tp {} ep {} etp {} {}", x["pp"].get<int64_t>(),
                                   x["dp_replicate"].get<int64_t>(), x["dp_shard"].get<int64_t>(), x["cp"].get<int64_t>(),
                                   x["tp"].get<int64_t>(), x["ep"].get<int64_t>(), x["etp"].get<int64_t>(),
                                   x["dispatcher"].get<std::string>())) != std::string::npos);
    // Pareto: no other row has more tokens/s with no more memory.
    bool dominated = false;
    for (const auto& y : top) {
      dominated = dominated || (y["tokens_per_s_per_gpu"].get<double>() > x["tokens_per_s_per_gpu"].get<double>() &&
                                y["peak_bytes"].get<int64_t>() <= x["peak_bytes"].get<int64_t>());
    }
    CHECK(pt.HasClass("pareto") == !dominated);
    CHECK(pt.HasClass("top") == (row < 3));
  }
}

// The cells of each row of the table with class `cls` in `figure`, in page order.
std::vector<std::vector<std::string>> TableCells(const std::vector<Element>& all, const std::string& figure, const std::string& cls) {
  std::vector<std::vector<std::string>> rows;
  bool in = false;
  for (const auto& e : all) {
    if (e.figure != figure) continue;
    if (e.tag == "table") in = e.HasClass(cls);
    if (!in) continue;
    if (e.tag == "tr") rows.emplace_back();
    if (e.tag == "td") rows.back().push_back(e.text);
  }
  if (!rows.empty() && rows.front().empty()) rows.erase(rows.begin());  // the heading row (th cells)
  return rows;
}

TEST_CASE("The search page has the text rows' columns, the Pareto front and the counts by outcome") {
  SearchOptions s = TinySearch();
  s.global_batch_size = 8;  // 8 sequences: layouts with dp > 8 (dp 16) are not divisible
  s.micro_batch_sizes = {1, 2};
  s.keep_all = true;
  const SearchResult result = SearchLayouts(testing::TinyMixtral(), s);
  Json j = SearchResultToJson(result);
  j["world_size"] = 16;
  j["model"] = "tiny";
  // Row 1 as torchtitan's accumulation loop of 3 schedules of 2 with deepep and EP overlap, and a
  // dominant phase with markup: its cells read "3x2", "deepep+ov" and the phase unescaped.
  Json& first = j["top"][0];
  first["pp"] = 2;  // accumulation steps of a pipeline schedule
  first["grad_accumulation_steps"] = 3;
  first["num_microbatches"] = 2;
  first["dispatcher"] = "deepep";
  first["overlap_moe_ep_comm"] = true;
  first["dominant_phase"] = "<a&b>";
  const std::string html = ReportToHtml(j);
  const auto all = ParsePage(html);
  CheckSelfContained(html, all);
  const auto rows = TableCells(all, "fig-search", "search-rows");
  REQUIRE(rows.size() == std::min<size_t>(20, j["top"].size()));
  // #, layout, vpp, mbs, micro-batches, recompute, dp sharding, dispatcher, step, vs best, tok/s, MFU, peak, headroom, phase
  REQUIRE(rows[0].size() == 15);
  CHECK(rows[0][4] == "3x2");
  {
    // With pp 1 there is no schedule: the 3 x 2 = 6 micro-batches as one count (MicroBatchesText).
    Json flat = j;
    flat["top"][0]["pp"] = 1;
    CHECK(TableCells(ParsePage(ReportToHtml(flat)), "fig-search", "search-rows")[0][4] == "6");
  }
  CHECK(rows[0][7] == "deepep+ov");
  {
    // A row that names its flex backend (search.cc RankedLayoutToJson) shows it as the text rows do.
    Json named = j;
    named["top"][0]["moe_flex_dispatcher_backend"] = "hybridep";
    CHECK(TableCells(ParsePage(ReportToHtml(named)), "fig-search", "search-rows")[0][7] == "deepep[hybridep]+ov");
  }
  CHECK(rows[0][14] == "<a&b>");
  CHECK(rows[0][9] == "best");  // the first row is the best (search.cc VersusBestText)
  CHECK(html.find("&lt;a&amp;b&gt;") != std::string::npos);
  for (size_t i = 1; i < rows.size(); ++i) {
    const Json& x = j["top"][i];
    CHECK(rows[i][0] == std::to_string(i + 1));
    // The text table's columns, efsdp included (search.cc RankedLayoutsTable).
    CHECK(rows[i][1] == fmt::format("pp{} dpr{} dps{} cp{} tp{} ep{} etp{} efsdp{}", x["pp"].get<int64_t>(),
                                    x["dp_replicate"].get<int64_t>(), x["dp_shard"].get<int64_t>(), x["cp"].get<int64_t>(),
                                    x["tp"].get<int64_t>(), x["ep"].get<int64_t>(), x["etp"].get<int64_t>(), x["efsdp"].get<int64_t>()));
    CHECK(rows[i][2] == std::to_string(x["vpp"].get<int64_t>()));
    CHECK(rows[i][3] == std::to_string(x["micro_batch_size"].get<int64_t>()));
    // One schedule here: micro-batches per step = 8 / (dp x mbs).
    CHECK(x["grad_accumulation_steps"] == 1);
    const int64_t dp = x["dp_replicate"].get<int64_t>() * x["dp_shard"].get<int64_t>();
    CHECK(rows[i][4] == std::to_string(8 / (dp * x["micro_batch_size"].get<int64_t>())));
    CHECK(rows[i][5] == x["recompute"].get<std::string>());
    CHECK(rows[i][6] == x["dp_sharding"].get<std::string>());
    CHECK(rows[i][7] == x["dispatcher"].get<std::string>() + (x["overlap_moe_ep_comm"].get<bool>() ? "+ov" : ""));
    // vs best: the difference from the best in per cent, " =" when its 80 % interval reaches it.
    const double ratio = x["vs_best"]["ratio"].get<double>();
    CHECK(rows[i][9] == (ratio == 1.0 ? std::string("best")
                                      : fmt::format("{:+.1f}%{}", 100 * (ratio - 1), x["vs_best"]["tied"].get<bool>() ? " =" : "")));
    CHECK(rows[i][11] == fmt::format("{:.1f}%", 100 * x["mfu"].get<double>()));
    CHECK(rows[i][12] == fmt::format("{:.2f}", x["peak_bytes"].get<double>() / 1073741824.0));
    CHECK(rows[i][13] == fmt::format("{:.2f}", x["headroom_gib"].get<double>()));
    CHECK(rows[i][14] == x["dominant_phase"].get<std::string>());
  }
  // The Pareto front: one row per JSON point, by peak ascending.
  const auto pareto = TableCells(all, "fig-search", "search-pareto");
  REQUIRE(!j["pareto"].empty());
  REQUIRE(pareto.size() == j["pareto"].size());
  for (size_t i = 0; i < pareto.size(); ++i) {
    CHECK(pareto[i][11] == fmt::format("{:.2f}", j["pareto"][i]["peak_bytes"].get<double>() / 1073741824.0));
  }
  // Counts: enumerated = invalid + not divisible + over budget + ranked, each from the JSON.
  const auto counts = TableCells(all, "fig-search", "search-counts");
  REQUIRE(counts.size() == 6);
  std::map<std::string, int64_t> n;
  for (const auto& c : counts) n[c[0]] = std::stoll(c[1]);
  CHECK(n["global batch not divisible"] == j["not_divisible"].get<int64_t>());
  CHECK(n["global batch not divisible"] > 0);
  CHECK(n["enumerated"] == n["invalid by rule"] + n["global batch not divisible"] +
                               n[fmt::format("over the {:.1f} GiB budget", j["budget_gib"].get<double>())] + n["ranked"]);
  CHECK(n["ranked"] == j["ranked"].get<int64_t>());
  CHECK(n["of which pruned by the static-memory bound"] == j["pruned"].get<int64_t>());
  // With a reserve, the over-budget row names the limit in force, as the text's count line does.
  Json reserved = j;
  reserved["training"]["memory_reserve_gib"] = 2.0;
  const auto with_reserve = TableCells(ParsePage(ReportToHtml(reserved)), "fig-search", "search-counts");
  CHECK(with_reserve[3][0] == fmt::format("over the {:.1f} GiB budget less the 2.0 GiB reserve", j["budget_gib"].get<double>()));
}

TEST_CASE("The search tables scroll instead of clipping, one line per row, and the training row lists searched settings") {
  SearchOptions s = TinySearch();
  s.global_batch_size = 8;
  s.micro_batch_sizes = {1, 2};  // micro_batch_size searched; recompute, vpp, dp sharding pinned (training's)
  s.keep_all = true;
  const SearchResult result = SearchLayouts(testing::TinyMixtral(), s);
  const Json j = SearchReportToJson(result, s, "tiny", 2, Json::object());
  const std::string html = ReportToHtml(j);
  CheckSelfContained(html, ParsePage(html));
  // Both row tables sit in a horizontally scrolling box whose cells do not wrap (issue 31: the
  // 14 columns were clipped at 1,400 px and the layout cell wrapped to five lines).
  CHECK(html.find("<div class=\"scroll\"><table class=\"rows search-rows\">") != std::string::npos);
  CHECK(html.find("<div class=\"scroll\"><table class=\"rows search-pareto\">") != std::string::npos);
  CHECK(html.find(".scroll{overflow-x:auto;max-width:100%}table.rows td,table.rows th{white-space:nowrap}") != std::string::npos);
  // The training row: micro_batch_size and the dispatcher are searched (SearchedSettings), so they
  // are not shown as fixed values; recompute (none) is.
  REQUIRE(j["training"]["searched"] == Json::array({"micro_batch_size", "dispatcher"}));
  const size_t row = html.find("<td>seq_len 256");
  REQUIRE(row != std::string::npos);
  const std::string training = html.substr(row, html.find("</td>", row) - row);
  CHECK(training.find("micro_batch_size 1") == std::string::npos);
  CHECK(training.find("dispatcher all_to_all") == std::string::npos);
  CHECK(training.find("recompute none") != std::string::npos);
  CHECK(training.find("; searched: micro_batch_size, dispatcher") != std::string::npos);
}

TEST_CASE("A search point's hover title names its searched settings; the cluster row leaves out unset nodes and NVLink domain") {
  SearchOptions s = TinySearch();
  s.global_batch_size = 8;
  s.micro_batch_sizes = {1, 2};  // rows with the same degrees differ in micro_batch_size only
  s.keep_all = true;
  const SearchResult result = SearchLayouts(testing::TinyMixtral(), s);
  const Json j = SearchReportToJson(result, s, "tiny", 2, Json::object());
  const std::string html = ReportToHtml(j);
  // Issue 31's new-user check: points #1-#23 showed two distinct labels, the settings left out.
  CHECK(html.find(", micro_batch_size 1, recompute none") != std::string::npos);
  CHECK(html.find(", micro_batch_size 2, recompute none") != std::string::npos);
  // The cluster's nodes and nvlink_domain_gpus are 0 (unset: cluster.h) in the tiny search: not shown.
  REQUIRE(j.contains("cluster"));
  CHECK(html.find("nodes 0") == std::string::npos);
  CHECK(html.find("nvlink_domain_gpus 0") == std::string::npos);
}

TEST_CASE("The training row leaves out an unset budget and shows the imbalance to 4 significant digits") {
  PlanPage p = MakePlanPage(testing::TinyMixtral(), 8, 2, 1, 8, 0);  // no budget: gpu_memory_gib 0
  p.report["training"]["imbalance"] = 13.0 / 12.0;                    // 1.0833333333333333 in JSON
  REQUIRE(p.report["training"]["gpu_memory_gib"] == 0.0);
  const std::string html = ReportToHtml(p.report, p.routing);
  CHECK(html.find("gpu_memory_gib") == std::string::npos);
  CHECK(html.find("imbalance 1.083") != std::string::npos);
  CHECK(html.find("1.08333") == std::string::npos);
  p.report["training"]["gpu_memory_gib"] = 80.0;  // a budget given: shown
  CHECK(ReportToHtml(p.report, p.routing).find("gpu_memory_gib 80") != std::string::npos);
}

TEST_CASE("A VPP simulate page draws the interleaved bubble, (pp - 1) / vpp slots, and says so") {
  // 2 chunks of TinyMixtral's 2 layers per rank: pp x vpp = 4 <= 2 + 2.
  const SimulatePage sim = TinySimulatePage(4, 2);
  const Json& page = sim.page;
  const RoutingResult& sample = sim.sample;
  const CostBreakdown& cost = sim.cost;
  REQUIRE(page["training"]["vpp"] == 2);
  const std::string html = ReportToHtml(page, RoutingSampleToJson(sample));
  const auto all = ParsePage(html);
  CheckSelfContained(html, all);
  CHECK(html.find("does not model virtual stages") == std::string::npos);
  CHECK(html.find("interleaved 1F1B with 2 model chunks per rank: the bubble is (pp - 1) / vpp = 0.50 slots") != std::string::npos);
  // 4 micro-batches on each of 2 stages; stage 0 waits 1/2 slot after, stage 1 1/2 slot before.
  CHECK(Select(all, "fig-pipeline", "rect", "busy").size() == 8);
  const auto bubbles = Select(all, "fig-pipeline", "rect", "bubble");
  REQUIRE(bubbles.size() == 2);
  // (pp - 1) / vpp x the slot = 0.5 slot per stage; pipeline_bubble_us (cost/step.cc) adds the
  // flush's unoverlapped pipeline transfers, drawn after the last slot.
  CHECK(bubbles[0].Num("data-us") == doctest::Approx(0.5 * cost.stage_microbatch_us));
  const auto flush = Select(all, "fig-pipeline", "rect", "flush");
  REQUIRE(flush.size() == 2);
  CHECK(flush[0].Num("data-us") > 0);
  CHECK(bubbles[0].Num("data-us") + flush[0].Num("data-us") == doctest::Approx(cost.pipeline_bubble_us));
  // A stage's cells add up to the step (QA: the flush and the host were left out under vpp):
  // 4 busy slots + its bubbles + the flush + DP comm + optimizer + host.
  const auto host = Select(all, "fig-pipeline", "rect", "host");
  REQUIRE(host.size() == 2);
  CHECK(host[0].Num("data-us") == doctest::Approx(cost.host_overhead_us));
  double stage0 = 0;
  for (const auto& r : Select(all, "fig-pipeline", "rect", "busy")) stage0 += r.Num("data-us") / 2;  // 8 busy cells, 2 stages
  const auto dp = Select(all, "fig-pipeline", "rect", "dp"), opt = Select(all, "fig-pipeline", "rect", "opt");
  REQUIRE(dp.size() == 2);
  REQUIRE(opt.size() == 2);
  CHECK(dp[0].Num("data-us") == doctest::Approx(cost.dp_step_comm_us));
  CHECK(opt[0].Num("data-us") == doctest::Approx(cost.optimizer_us));
  stage0 += bubbles[0].Num("data-us") + flush[0].Num("data-us") + dp[0].Num("data-us") + opt[0].Num("data-us") + host[0].Num("data-us");
  CHECK(stage0 == doctest::Approx(cost.step_time_us));
}

TEST_CASE("Names with markup characters are escaped: the page stays well-formed") {
  PlanPage p = MakePlanPage(testing::TinyMixtral(), 8, 2, 1, 8, 0);
  // A model path and a command line holding each of < > & " ' .
  p.report["model"]["source"] = "a<b>&\"c'd.json";
  p.report["generator"]["provenance"] = {{"argv", {"dockyard-plan", "--model", "</title><script>x</script>"}}};
  const std::string html = ReportToHtml(p.report, p.routing);
  const auto all = ParsePage(html);
  CheckSelfContained(html, all);
  CHECK(html.find("a&lt;b&gt;&amp;&quot;c&#39;d.json") != std::string::npos);
  int scripts = 0;
  for (const auto& e : all) scripts += e.tag == "script";
  CHECK(scripts == 1);  // only the page's own
}

TEST_CASE("The generator row names the program, its version and the git commit it was built from") {
  PlanPage p = MakePlanPage(testing::TinyMixtral(), 8, 2, 1, 8, 0);
  p.report["generator"]["provenance"] = {{"argv", {"dockyard-plan"}}, {"git_commit", "2cb30b2"}};
  const std::string html = ReportToHtml(p.report, p.routing);
  // report.cc PlanToJson: generator {name dockyard-plan, version kDockyardVersion}.
  CHECK(html.find(fmt::format("dockyard-plan {} (git commit 2cb30b2)", kDockyardVersion)) != std::string::npos);
}

TEST_CASE("A document that is no report is refused with a message naming --html") {
  // An empty object has neither meshes, top nor kind.
  CHECK_THROWS_WITH_AS(ReportToHtml(Json::object()), doctest::Contains("--html"), Error);
  // A plan report whose meshes lost a field: a clear error, not a crash.
  PlanPage p = MakePlanPage(testing::TinyMixtral(), 8, 2, 1, 8, 0);
  p.report["meshes"]["dense"].erase("sizes");
  CHECK_THROWS_WITH_AS(ReportToHtml(p.report), doctest::Contains("--html"), Error);
}

}  // namespace
}  // namespace dockyard
