// The driver's per-shard watermarks (loader/pipeline/shard_state.h): when a
// load counts as downloading, which decides how many threads convert
// (LoadOptions::conversion_threads automatic). Torch-free.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "loader/pipeline/shard_state.h"
#include "testing/status_matchers.h"
#include "testing/util.h"

namespace hubload::pipeline_internal {
namespace {

using hubload::testing::TempDir;

PlannedShard Shard(const TempDir& dir, const std::string& name, const std::string& bytes) {
  std::ofstream(dir.path() / name, std::ios::binary) << bytes;
  PlannedShard s;
  s.file = name;
  s.local_path = (dir.path() / name).string();
  s.size = bytes.size();
  return s;
}

TEST(ShardState, DownloadsInFlightOnlyWhileAPartialFileLands) {
  TempDir dir;
  FetchPlan plan;
  plan.shards = {Shard(dir, "a.safetensors", "0123456789"), Shard(dir, "b.safetensors", "abc")};
  DriverCallbacks cb;
  ShardState state(plan, /*max_in_flight=*/0, cb);
  EXPECT_FALSE(state.DownloadsInFlight());  // nothing has started
  const int fd = ::open(plan.shards[0].local_path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  state.Bytes("a.safetensors", fd, 1, 4);  // 4 of 10 bytes landed
  EXPECT_TRUE(state.DownloadsInFlight());
  state.Bytes("other.bin", fd, 1, 4);  // a file outside the plan changes nothing
  state.Done("a.safetensors", plan.shards[0].local_path);
  // a verified, b not started (a cached or local file, or the source waiting): not downloading.
  EXPECT_FALSE(state.DownloadsInFlight());
  state.Bytes("b.safetensors", fd, 1, 1);
  EXPECT_TRUE(state.DownloadsInFlight());
  state.SourceFinished(Status::Ok());  // the source ended (here: without verifying b)
  EXPECT_FALSE(state.DownloadsInFlight());
  ::close(fd);
}

TEST(ShardState, ALocalSourceLeavesNothingDownloading) {
  TempDir dir;
  FetchPlan plan;
  plan.local = true;
  plan.shards = {Shard(dir, "a.safetensors", "0123456789"), Shard(dir, "b.safetensors", "abc")};
  DriverCallbacks cb;
  ShardState state(plan, 0, cb);
  auto source = MakeLocalSource(plan);
  ASSERT_OK(source->Run(state));
  EXPECT_FALSE(state.DownloadsInFlight());
  // Both verified at their full size.
  for (size_t i = 0; i < plan.shards.size(); ++i) {
    int fd = -1;
    uint64_t available = 0, generation = 0;
    bool verified = false;
    ASSERT_OK(state.WaitFor(i, kNever, true, &fd, &available, &verified, &generation));
    EXPECT_TRUE(verified);
    EXPECT_EQ(available, plan.shards[i].size);
  }
}

}  // namespace
}  // namespace hubload::pipeline_internal
