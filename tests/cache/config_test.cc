// HubConfig::FromEnvironment resolves like huggingface_hub/constants.py.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <optional>
#include <string>
#include <vector>

#include "hubload/config.h"
#include "testing/util.h"

namespace {

class EnvGuard {
 public:
  EnvGuard() {
    for (const char* n : kNames) {
      const char* v = getenv(n);
      saved_.emplace_back(n, v ? std::optional<std::string>(v) : std::nullopt);
      unsetenv(n);
    }
  }
  ~EnvGuard() {
    for (auto& [n, v] : saved_) {
      if (v) setenv(n.c_str(), v->c_str(), 1);
      else unsetenv(n.c_str());
    }
  }
 private:
  static constexpr const char* kNames[] = {"HF_ENDPOINT",    "HF_TOKEN",       "HF_TOKEN_PATH",
                                           "HF_HOME",        "HF_HUB_CACHE",   "XDG_CACHE_HOME",
                                           "HF_HUB_OFFLINE", "HOME",           "HF_HUB_ETAG_TIMEOUT",
                                           "HF_HUB_DOWNLOAD_TIMEOUT"};
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST(HubConfig, DefaultsFollowHuggingfaceHub) {
  EnvGuard g;
  setenv("HOME", "/home/u", 1);
  auto c = hubload::HubConfig::FromEnvironment();
  EXPECT_EQ(c.endpoint, "https://huggingface.co");
  EXPECT_EQ(c.cache_dir, "/home/u/.cache/huggingface/hub");
  EXPECT_EQ(c.token, "");
  EXPECT_FALSE(c.offline);
}

TEST(HubConfig, XdgCacheHomeThenHfHomeThenHfHubCache) {
  EnvGuard g;
  setenv("HOME", "/home/u", 1);
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(hubload::HubConfig::FromEnvironment().cache_dir, "/xdg/huggingface/hub");
  setenv("HF_HOME", "/hfhome/", 1);
  EXPECT_EQ(hubload::HubConfig::FromEnvironment().cache_dir, "/hfhome/hub");
  setenv("HF_HUB_CACHE", "/direct", 1);
  EXPECT_EQ(hubload::HubConfig::FromEnvironment().cache_dir, "/direct");
}

TEST(HubConfig, TokenFromEnvThenTokenPathThenHfHomeFile) {
  EnvGuard g;
  hubload::testing::TempDir tmp;
  setenv("HF_HOME", tmp.str().c_str(), 1);
  hubload::testing::WriteFileBytes(tmp.path() / "token", std::string("hf_home_token\n"));
  EXPECT_EQ(hubload::HubConfig::FromEnvironment().token, "hf_home_token");
  hubload::testing::WriteFileBytes(tmp.path() / "other", std::string("  path_token \n"));
  setenv("HF_TOKEN_PATH", (tmp.path() / "other").c_str(), 1);
  EXPECT_EQ(hubload::HubConfig::FromEnvironment().token, "path_token");
  setenv("HF_TOKEN", "env_token", 1);
  EXPECT_EQ(hubload::HubConfig::FromEnvironment().token, "env_token");
}

TEST(HubConfig, EndpointAndOffline) {
  EnvGuard g;
  setenv("HOME", "/h", 1);
  setenv("HF_ENDPOINT", "http://127.0.0.1:8080/", 1);
  setenv("HF_HUB_OFFLINE", "yes", 1);
  auto c = hubload::HubConfig::FromEnvironment();
  EXPECT_EQ(c.endpoint, "http://127.0.0.1:8080");
  EXPECT_TRUE(c.offline);
  setenv("HF_HUB_OFFLINE", "0", 1);
  EXPECT_FALSE(hubload::HubConfig::FromEnvironment().offline);
}

// huggingface_hub constants: HF_HUB_ETAG_TIMEOUT / HF_HUB_DOWNLOAD_TIMEOUT,
// 10 s each by default; a value that is not a positive number of seconds is
// named in environment_errors and the default kept.
TEST(HubConfig, TimeoutsFromTheEnvironment) {
  EnvGuard g;
  setenv("HOME", "/h", 1);
  auto d = hubload::HubConfig::FromEnvironment();
  EXPECT_EQ(d.etag_timeout_s, 10.0);
  EXPECT_EQ(d.download_timeout_s, 10.0);
  EXPECT_TRUE(d.environment_errors.empty());
  setenv("HF_HUB_ETAG_TIMEOUT", "2.5", 1);
  setenv("HF_HUB_DOWNLOAD_TIMEOUT", "30", 1);
  auto c = hubload::HubConfig::FromEnvironment();
  EXPECT_EQ(c.etag_timeout_s, 2.5);
  EXPECT_EQ(c.download_timeout_s, 30.0);
  EXPECT_TRUE(c.environment_errors.empty());
  for (const char* bad : {"abc", "0", "-1", "10s", "", "1e9"}) {
    SCOPED_TRACE(bad);
    setenv("HF_HUB_ETAG_TIMEOUT", "3", 1);
    setenv("HF_HUB_DOWNLOAD_TIMEOUT", bad, 1);
    auto b = hubload::HubConfig::FromEnvironment();
    EXPECT_EQ(b.etag_timeout_s, 3.0);
    EXPECT_EQ(b.download_timeout_s, 10.0);
    if (*bad == '\0') {  // empty: unset, as huggingface_hub reads it
      EXPECT_TRUE(b.environment_errors.empty());
      continue;
    }
    ASSERT_EQ(b.environment_errors.size(), 1u);
    EXPECT_EQ(b.environment_errors[0], std::string("HF_HUB_DOWNLOAD_TIMEOUT='") + bad +
                                           "' is not a positive number of seconds");
  }
}

}  // namespace
