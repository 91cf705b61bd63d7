// The CLI's top level (tools/hubload/guard.h): an exception escaping a
// command's action is exit 1 with a message naming the command and the
// exception's text, never std::terminate. Expected texts are the test's own.
#include "tools/hubload/guard.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <system_error>

namespace {

int Guarded(const std::function<int()>& action, std::string* err) {
  ::testing::internal::CaptureStderr();
  int rc = hubload::cli::RunGuarded("download", action);
  *err = ::testing::internal::GetCapturedStderr();
  return rc;
}

}  // namespace

TEST(CliGuard, AnEscapedExceptionIsExitOneWithAMessage) {
  std::string err;
  EXPECT_EQ(Guarded([]() -> int { throw std::runtime_error("boom 17"); }, &err), 1);
  EXPECT_EQ(err, "hubload download: internal error: boom 17 (a bug: please report it)\n");

  EXPECT_EQ(Guarded(
                []() -> int {
                  throw std::filesystem::filesystem_error("is_directory", std::filesystem::path("/x/y"),
                                                          std::make_error_code(std::errc::filename_too_long));
                },
                &err),
            1);
  EXPECT_NE(err.find("hubload download: internal error: "), std::string::npos) << err;
  EXPECT_NE(err.find("/x/y"), std::string::npos) << err;

  // nlohmann's type_error, the exception issue 14 started from.
  EXPECT_EQ(Guarded([]() -> int { return static_cast<int>(nlohmann::json("2").get<int>()); }, &err), 1);
  EXPECT_NE(err.find("type_error"), std::string::npos) << err;

  EXPECT_EQ(Guarded([]() -> int { throw 42; }, &err), 1);
  EXPECT_EQ(err, "hubload download: internal error: an exception that is not a std::exception (a bug: please report it)\n");
}

TEST(CliGuard, TheActionsExitCodeIsKept) {
  std::string err;
  EXPECT_EQ(Guarded([] { return 0; }, &err), 0);
  EXPECT_EQ(Guarded([] { return 7; }, &err), 7);
  EXPECT_EQ(err, "");
}
