// Multi-process launch variables and NCCL id files (launch.h).
#include "runtime/cuda/launch.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include <doctest/doctest.h>
#include <unistd.h>

#include "planner/base/error.h"

namespace dockyard::runtime {
namespace {

LaunchInfo From(const std::map<std::string, std::string>& env) {
  return LaunchFromEnv([&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

std::string ErrorOf(const std::map<std::string, std::string>& env) {
  try {
    From(env);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("no launcher variables: one process drives every GPU") {
  const LaunchInfo info = From({{"PATH", "/bin"}});
  CHECK(info.launcher == "none");
  CHECK_FALSE(info.multi_process());
  CHECK(info.world_size == 1);
}

TEST_CASE("torchrun, Open MPI and Slurm variables") {
  LaunchInfo t =
      From({{"RANK", "13"}, {"WORLD_SIZE", "16"}, {"LOCAL_RANK", "5"}, {"LOCAL_WORLD_SIZE", "8"}, {"TORCHELASTIC_RUN_ID", "abc/1"}});
  CHECK(t.launcher == "torchrun");
  CHECK(t.rank == 13);
  CHECK(t.world_size == 16);
  CHECK(t.local_rank == 5);
  CHECK(t.local_world_size == 8);
  CHECK(t.job_id == "abc/1");
  CHECK(IdFileName(t.job_id, "ep", 8) == "abc_1-ep-8.ncclid");

  LaunchInfo o = From({{"OMPI_COMM_WORLD_RANK", "3"},
                       {"OMPI_COMM_WORLD_SIZE", "4"},
                       {"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
                       {"PMIX_NAMESPACE", "prterun-x-123@1"}});
  CHECK(o.launcher == "openmpi");
  CHECK(o.rank == 3);
  CHECK(o.local_world_size == 0);  // not given
  CHECK(o.job_id == "prterun-x-123@1");

  LaunchInfo s = From({{"SLURM_PROCID", "9"},
                       {"SLURM_NTASKS", "16"},
                       {"SLURM_LOCALID", "1"},
                       {"SLURM_NTASKS_PER_NODE", "8(x2)"},
                       {"SLURM_JOB_ID", "4242"},
                       {"SLURM_STEP_ID", "3"}});
  CHECK(s.launcher == "slurm");
  CHECK(s.rank == 9);
  CHECK(s.local_world_size == 8);
  CHECK(s.job_id == "4242.3");

  // torchrun's variables win over Slurm's when a torchrun runs inside an allocation.
  CHECK(
      From({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_LOCALID", "0"}})
          .launcher == "torchrun");
}

TEST_CASE("a launcher with a world of one process is a single-process run; torchrun's default run id is no id") {
  const LaunchInfo t = From({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}, {"TORCHELASTIC_RUN_ID", "none"}});
  CHECK(t.launcher == "torchrun");
  CHECK_FALSE(t.multi_process());  // one process drives every GPU
  CHECK(t.job_id.empty());         // "none" is torchrun's placeholder without --rdzv-id
  const LaunchInfo s = From({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_LOCALID", "0"}});
  CHECK_FALSE(s.multi_process());  // sbatch/salloc without srun
}

TEST_CASE("the id exchange is checked before anything starts") {
  LaunchInfo single;
  CHECK_NOTHROW(ValidateLaunch(single, ""));
  CHECK_THROWS_WITH_AS(ValidateLaunch(single, "/tmp"), doctest::Contains("--nccl-id-dir '/tmp': this process was not started"), Error);
  LaunchInfo multi = From({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"TORCHELASTIC_RUN_ID", "r7"}});
  CHECK_THROWS_WITH_AS(ValidateLaunch(multi, ""), doctest::Contains("needs --nccl-id-dir"), Error);
  CHECK_THROWS_WITH_AS(ValidateLaunch(multi, "/nonexistent/ids"), "--nccl-id-dir '/nonexistent/ids': not a directory", Error);
  CHECK_THROWS_WITH_AS(ValidateLaunch(multi, "/etc/hostname"), "--nccl-id-dir '/etc/hostname': not a directory", Error);
  CHECK_NOTHROW(ValidateLaunch(multi, "/tmp"));
  multi.job_id.clear();
  CHECK_THROWS_WITH_AS(ValidateLaunch(multi, "/tmp"), doctest::Contains("pass --nccl-job-id ID"), Error);
}

TEST_CASE("bad launcher variables name the variable, its value and the rule") {
  CHECK(ErrorOf({{"RANK", "1"}}) == "torchrun launch: RANK and WORLD_SIZE must both be set (got only RANK)");
  CHECK(ErrorOf({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}}) == "environment variable RANK=2: must be < WORLD_SIZE (2)");
  CHECK(ErrorOf({{"RANK", "-1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}}) ==
        "environment variable RANK='-1': must be a decimal integer >= 0");
  CHECK(ErrorOf({{"RANK", "0x1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}}) ==
        "environment variable RANK='0x1': must be a decimal integer >= 0");
  CHECK(ErrorOf({{"RANK", "0"}, {"WORLD_SIZE", "0"}, {"LOCAL_RANK", "0"}}) == "environment variable WORLD_SIZE=0: must be >= 1");
  CHECK(ErrorOf({{"RANK", "0"}, {"WORLD_SIZE", "2"}}) == "torchrun launch: LOCAL_RANK is not set (it picks this process's GPU)");
  CHECK(ErrorOf({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "4"}, {"LOCAL_WORLD_SIZE", "4"}}) ==
        "environment variable LOCAL_RANK=4: must be < LOCAL_WORLD_SIZE (4)");
  CHECK(ErrorOf({{"RANK", "0"}, {"WORLD_SIZE", "99999999999"}, {"LOCAL_RANK", "0"}}) ==
        "environment variable WORLD_SIZE='99999999999': must be a decimal integer >= 0");
}

std::string TempDir() {
  char tmpl[] = "/tmp/dockyard_ids_XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  return tmpl;
}

TEST_CASE("an id published by one process is read whole by the others") {
  const std::string dir = TempDir();
  std::vector<char> id(128);
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>(i * 7 + 1);
  std::vector<char> got;
  // The reader starts first and polls; the writer publishes 50 ms later.
  std::thread reader([&] { got = WaitForId(dir, "job-ep-0.ncclid", 128, 10.0); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  PublishId(dir, "job-ep-0.ncclid", id);
  reader.join();
  CHECK(got == id);
  std::remove((dir + "/job-ep-0.ncclid").c_str());
  ::rmdir(dir.c_str());
}

TEST_CASE("id files: a missing directory, a wrong-size file and a timeout are errors naming the path") {
  const std::string dir = TempDir();
  CHECK_THROWS_WITH_AS(PublishId(dir + "/missing", "a.ncclid", std::vector<char>(128)), doctest::Contains("cannot write"), Error);
  { std::ofstream(dir + "/short.ncclid") << "abc"; }
  CHECK_THROWS_WITH_AS(WaitForId(dir, "short.ncclid", 128, 1.0), doctest::Contains("holds 3 bytes, an NCCL id has 128"), Error);
  CHECK_THROWS_WITH_AS(WaitForId(dir, "never.ncclid", 128, 0.05), doctest::Contains("did not appear within 0.05 s"), Error);
  std::remove((dir + "/short.ncclid").c_str());
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace dockyard::runtime
