// Megatron pipeline layouts (pipeline_layout.h): the string grammar, the layout checks and the
// account-for-embedding / loss split, each against Megatron's own examples or by hand.
#include "planner/model/pipeline_layout.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "planner/base/error.h"

using dockyard::AccountForLayout;
using dockyard::ParsePipelineLayout;
using dockyard::PipeLayer;
using dockyard::PipelineStages;
using dockyard::ResolvePipelineLayout;
using dockyard::VirtualStages;

namespace {
const char* kFlag = "--pipeline-model-parallel-layout";

// Each stage as a string of its layer characters.
std::vector<std::string> Spell(const VirtualStages& stages) {
  std::vector<std::string> out;
  for (const auto& st : stages) {
    std::string s;
    for (const auto& t : st) s += static_cast<char>(t.layer);
    out.push_back(s);
  }
  return out;
}

PipelineStages Resolve(const std::string& text, int64_t pp, int64_t layers, int64_t mtp) {
  return ResolvePipelineLayout(ParsePipelineLayout(text, kFlag), pp, layers, mtp, text, kFlag);
}
}  // namespace

TEST_CASE("layout strings unroll as Megatron's parse_str_to_list") {
  // The docstring's example: "Ettt|(tt|)*29,m|L" -> [E t t t] + [t t] x 29 + [m] [L].
  const auto st = Spell(ParsePipelineLayout("Ettt|(tt|)*29,m|L", kFlag));
  REQUIRE(st.size() == 32);  // 1 + 29 + 2
  CHECK(st[0] == "Ettt");
  CHECK(st[1] == "tt");
  CHECK(st[29] == "tt");
  CHECK(st[30] == "m");
  CHECK(st[31] == "L");
  // The pattern comments: xy(ab|cd|ef)*2,pq -> xyab|cd|efab|cd|efpq, (|ab)*2,cd -> |ab|abcd;
  // single characters (including '|') repeat with c*N; empty stages are kept.
  CHECK(Spell(ParsePipelineLayout("Et(t|tt|t)*2,tL", kFlag)) == std::vector<std::string>{"Ett", "tt", "tt", "tt", "ttL"});
  CHECK(Spell(ParsePipelineLayout("(|tt)*2,L", kFlag)) == std::vector<std::string>{"", "tt", "ttL"});
  CHECK(Spell(ParsePipelineLayout("Et*3|*2L", kFlag)) == std::vector<std::string>{"Ettt", "", "L"});
  CHECK(Spell(ParsePipelineLayout("E|t*0|L", kFlag)) == std::vector<std::string>{"E", "", "L"});
  // Positions point into the string as written (commas included): the 'm' of "E,tt|m" is at 5.
  CHECK(ParsePipelineLayout("E,tt|m", kFlag)[1][0].position == 5);
}

TEST_CASE("layout string errors name the flag, the string, the position and the rule") {
  CHECK_THROWS_WITH_AS(ParsePipelineLayout("Etx|L", kFlag),
                       doctest::Contains("--pipeline-model-parallel-layout \"Etx|L\": position 2: 'x' is not a layer character"),
                       dockyard::Error);
  // A group without a count stays as characters: '(' is refused at its own position.
  CHECK_THROWS_WITH_AS(ParsePipelineLayout("E(tt|)L", kFlag), doctest::Contains("position 1: '(' is not a layer character (a group is"),
                       dockyard::Error);
  // Nested groups: the first '(' takes "(t" up to the first ')', leaving a bare '('.
  CHECK_THROWS_WITH_AS(ParsePipelineLayout("E((t)*2|)*2L", kFlag), doctest::Contains("position 2: '('"), dockyard::Error);
  CHECK_THROWS_WITH_AS(ParsePipelineLayout("E(t)*99999999L", kFlag), doctest::Contains("position 5: a repeat count above 1000000"),
                       dockyard::Error);
  CHECK_THROWS_WITH_AS(ParsePipelineLayout("E(t*1000|)*1000L", kFlag), doctest::Contains("exceeds 1000000 characters"), dockyard::Error);
}

TEST_CASE("a layout places decoder layers, embedding, loss and MTP on pipeline ranks (Megatron's vpp-major order)") {
  // DeepSeek-V3 style "Et|(tt|)*30mL" with pp 16: 32 stages -> vpp 2. Virtual stage k runs on rank
  // k % 16: stage 0 "Et" on rank 0 (layer 0), stages 1..30 "tt" on ranks 1..15, 0..14
  // (layers 1-2 on rank 1, ..., layers 29-30 on rank 15, layers 31-32 on rank 0, ...,
  // layers 59-60 on rank 14), stage 31 "mL" on rank 15.
  const PipelineStages p = Resolve("Et|(tt|)*30mL", 16, 61, 1);
  CHECK(p.vpp == 2);
  REQUIRE(p.layer_stage.size() == 61);
  CHECK(p.layer_stage[0] == 0);
  CHECK(p.layer_stage[1] == 1);
  CHECK(p.layer_stage[2] == 1);
  CHECK(p.layer_stage[30] == 15);
  CHECK(p.layer_stage[31] == 0);
  CHECK(p.layer_stage[60] == 14);
  CHECK(p.embedding_stage == 0);
  CHECK(p.loss_stage == 15);
  CHECK(p.mtp_stage == 15);
  // Rank 0 holds 1 + 2 = 3 decoder layers, rank 15 holds 2 (layers 29, 30) and the MTP + loss.
  int64_t rank0 = 0, rank15 = 0;
  for (int64_t s : p.layer_stage) {
    if (s == 0) ++rank0;
    if (s == 15) ++rank15;
  }
  CHECK(rank0 == 3);
  CHECK(rank15 == 2);
  // Without VPP: "Ett|ttt|tttt|tL" over pp 4, the loss on the last rank with 1 layer.
  const PipelineStages q = Resolve("Ett|ttt|tttt|tL", 4, 10, 0);
  CHECK(q.vpp == 1);
  CHECK(q.layer_stage == std::vector<int64_t>{0, 0, 1, 1, 1, 2, 2, 2, 2, 3});
  CHECK(q.mtp_stage == 3);  // no MTP: the loss stage
  // An MTP module standalone on its own rank (Megatron's "mtp_standalone"): "Et|t|m|L" on pp 4.
  CHECK(Resolve("Ett|tt|m|L", 4, 4, 1).mtp_stage == 2);
}

TEST_CASE("layout checks follow Megatron's validate_layer_layout") {
  CHECK_THROWS_WITH_AS(Resolve("Ett|tt|ttL", 2, 6, 0), doctest::Contains("3 stages is not a multiple of pp (2)"), dockyard::Error);
  CHECK_THROWS_WITH_AS(Resolve("tE|tL", 2, 2, 0), doctest::Contains("position 0: the first layer must be embedding (E), got t"),
                       dockyard::Error);
  CHECK_THROWS_WITH_AS(Resolve("Et|Lt", 2, 2, 0), doctest::Contains("position 4: the last layer must be loss (L), got t"), dockyard::Error);
  CHECK_THROWS_WITH_AS(Resolve("Et|EtL", 2, 2, 0), doctest::Contains("position 3: embedding must be specified exactly once"),
                       dockyard::Error);
  CHECK_THROWS_WITH_AS(Resolve("EtL|tL", 2, 2, 0), doctest::Contains("position 5: loss must be specified exactly once"), dockyard::Error);
  CHECK_THROWS_WITH_AS(Resolve("Et|tL", 2, 3, 0), doctest::Contains("2 decoder layers (t) must match num_hidden_layers (3)"),
                       dockyard::Error);
  CHECK_THROWS_WITH_AS(Resolve("Et|tL", 2, 2, 1), doctest::Contains("0 MTP layers (m) must match --mtp-layers (1)"), dockyard::Error);
  CHECK_THROWS_WITH_AS(Resolve("Et|mtL", 2, 2, 1), doctest::Contains("position 4: decoder layers must be placed before MTP layers"),
                       dockyard::Error);
  // pp 2, vpp 2: stage 1 is rank 1's chunk 0, not its last.
  CHECK_THROWS_WITH_AS(Resolve("Et|m|t|L", 2, 2, 1), doctest::Contains("position 3: an MTP layer in model chunk 0 of rank 1"),
                       dockyard::Error);
  CHECK_THROWS_WITH_AS(Resolve("Et|t|m|mL", 2, 2, 2), doctest::Contains("position 7: all of the MTP layers must be in the same one"),
                       dockyard::Error);
  CHECK_THROWS_WITH_AS(Resolve("|", 2, 2, 0), doctest::Contains("the layout has no layers"), dockyard::Error);
}

TEST_CASE("account-for-embedding / loss: Megatron's even split with embedding and loss as layers") {
  // 30 layers + embedding + loss = 32 units over pp 4: 8 per rank; rank 0 builds 7 decoder
  // layers, rank 3 builds 7, ranks 1-2 build 8 (get_num_layers_to_build).
  const VirtualStages a = AccountForLayout(30, 4, 1, true, true, 0);
  const auto sa = Spell(a);
  CHECK(sa == std::vector<std::string>{"Ettttttt", "tttttttt", "tttttttt", "tttttttL"});
  const PipelineStages pa = ResolvePipelineLayout(a, 4, 30, 0, "", "--account-for-embedding-in-pipeline-split");
  CHECK(pa.loss_stage == 3);
  // Loss only, 61 + 1 = 62 units over pp 2, vpp 31: 1 unit per chunk; chunk 61 (rank 1's last)
  // holds only the loss and the MTP module; the embedding rides on chunk 0 uncounted.
  const VirtualStages b = AccountForLayout(61, 2, 31, false, true, 1);
  const auto sb = Spell(b);
  REQUIRE(sb.size() == 62);
  CHECK(sb[0] == "Et");
  CHECK(sb[60] == "t");
  CHECK(sb[61] == "mL");
  const PipelineStages pb = ResolvePipelineLayout(b, 2, 61, 1, "", "--account-for-loss-in-pipeline-split");
  CHECK(pb.vpp == 31);
  CHECK(pb.mtp_stage == 1);
  CHECK_THROWS_WITH_AS(AccountForLayout(61, 4, 1, true, true, 0),
                       doctest::Contains("num_hidden_layers (61) + 1 (embedding) + 1 (loss) = 63 must be divisible by pp (4)"),
                       dockyard::Error);
  CHECK_THROWS_WITH_AS(AccountForLayout(30, 4, 3, true, true, 0),
                       doctest::Contains("8 layers per pipeline rank (embedding / loss counted) must be divisible by --vpp (3)"),
                       dockyard::Error);
}
