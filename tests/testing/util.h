// Test utilities shared by every test binary.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace hubload::testing {

/// A fresh directory under $TMPDIR, removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

/// ../shared/data/real (or $HUBLOAD_SHARED_DATA); empty path when absent.
/// Tests that need it call GTEST_SKIP() with a message when it is empty.
std::filesystem::path SharedDataDir();

/// Path of the built `hubload` CLI ($HUBLOAD_BIN, set by ctest).
std::string HubloadBin();

/// Whole file as bytes. Aborts the test (ADD_FAILURE) and returns {} if unreadable.
std::vector<uint8_t> ReadFileBytes(const std::filesystem::path& p);
void WriteFileBytes(const std::filesystem::path& p, const void* data, size_t n);
void WriteFileBytes(const std::filesystem::path& p, const std::string& s);

/// Lower-case hex sha256 of a buffer (OpenSSL, independent of hubload code).
std::string Sha256Hex(const void* data, size_t n);

/// `n` deterministic pseudo-random bytes (xorshift32), different for each
/// `seed`: the one byte generator of the suites (file contents, blobs, shards).
std::string PatternBytes(size_t n, uint32_t seed);

/// True when a symbolic link lies anywhere below `root`; its path in `*which`.
bool HasSymlinkBelow(const std::filesystem::path& root, std::string* which);

/// Sets the access and modification times of `path` to `age_s` seconds ago
/// (ADD_FAILURE when it cannot).
void SetFileAge(const std::string& path, double age_s);
/// Git blob id (git hash-object) of `content`: sha1 of "blob <size>\0" + content (OpenSSL).
std::string GitBlobSha1Hex(const std::string& content);

/// A TCP port of 127.0.0.1 that was free a moment ago (bound to port 0, then closed); 0 on failure.
uint16_t FreeLoopbackPort();

/// Runs `cmd` through /bin/sh; returns exit status (or -1) and fills stdout/stderr.
int RunCommand(const std::string& cmd, std::string* out, std::string* err = nullptr);

}  // namespace hubload::testing
