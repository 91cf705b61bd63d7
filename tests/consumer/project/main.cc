// A program outside the hubload tree, built against the installed package.
#include <cstdio>
#include <cstdlib>

#include "hubload/config.h"

int main() {
  setenv("HF_HUB_CACHE", "/tmp/consumer-cache", 1);
  hubload::HubConfig c = hubload::HubConfig::FromEnvironment();
  if (c.cache_dir != "/tmp/consumer-cache") {
    std::fprintf(stderr, "unexpected cache_dir %s\n", c.cache_dir.c_str());
    return 1;
  }
  std::printf("ok\n");
  return 0;
}
