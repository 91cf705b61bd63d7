// A program outside the hubload tree, built against the installed package:
// writes a safetensors file with the installed library, reads it back, and
// checks the bytes on disk by hand.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "hubload/config.h"
#include "hubload/safetensors.h"

int main() {
  setenv("HF_HUB_CACHE", "/tmp/consumer-cache", 1);
  hubload::HubConfig c = hubload::HubConfig::FromEnvironment();
  if (c.cache_dir != "/tmp/consumer-cache") {
    std::fprintf(stderr, "unexpected cache_dir %s\n", c.cache_dir.c_str());
    return 1;
  }
  const float values[3] = {1.0f, 2.0f, 3.0f};
  std::string path = "/tmp/hubload-consumer-" + std::to_string(getpid()) + ".safetensors";
  hubload::safetensors::TensorToWrite t;
  t.name = "w";
  t.dtype = hubload::safetensors::Dtype::F32;
  t.shape = {3};
  t.data = values;
  t.nbytes = sizeof(values);
  hubload::Status st = hubload::safetensors::WriteFile(path, {t});
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 1;
  }
  std::ifstream in(path, std::ios::binary);
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(path.c_str());
  // Layout by hand: u64 LE header length N, N bytes of JSON, then the 12 data bytes.
  if (bytes.size() < 8 + 12) return 1;
  unsigned long long n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  if (n % 8 != 0 || 8 + n + 12 != bytes.size() || bytes[8] != '{') {
    std::fprintf(stderr, "bad layout: N=%llu size=%zu\n", n, bytes.size());
    return 1;
  }
  if (std::memcmp(bytes.data() + 8 + n, values, sizeof(values)) != 0) return 1;
  auto header = hubload::safetensors::ParseHeader(bytes.data(), bytes.size(), bytes.size(), "consumer");
  if (!header.ok() || header->tensors.size() != 1 || header->tensors[0].name != "w") return 1;
  std::printf("ok\n");
  return 0;
}
