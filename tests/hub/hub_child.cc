// Helper process for multi-process tests: downloads one file into a cache.
//   hub_child ENDPOINT CACHE_DIR REPO_ID FILE [RLIMIT_FSIZE_BYTES]
// Env HUB_CHILD_RANGE_CHUNK=N: parallel ranges of N bytes (4 at once) for any file of >= N bytes.
// Exit: 0 ok (prints the local path), 3 DiskFull, 1 other error (message on stderr).
#include <signal.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>

#include "hubload/hub.h"

int main(int argc, char** argv) {
  if (argc < 5) return 2;
  if (argc > 5) {
    signal(SIGXFSZ, SIG_IGN);  // writes past the limit fail with EFBIG instead of killing us
    rlim_t lim = std::strtoull(argv[5], nullptr, 10);
    struct rlimit rl = {lim, lim};
    setrlimit(RLIMIT_FSIZE, &rl);
  }
  hubload::ClientOptions o;
  o.config.endpoint = argv[1];
  o.config.cache_dir = argv[2];
  o.config.token = "";
  o.retry.initial_backoff_s = 0.01;
  o.retry.max_backoff_s = 0.05;
  if (const char* c = std::getenv("HUB_CHILD_RANGE_CHUNK")) {
    o.range_chunk_bytes = std::strtoull(c, nullptr, 10);
    o.range_threshold_bytes = o.range_chunk_bytes;
    o.max_ranges_per_file = 4;
  }
  hubload::FileRequest req;
  req.repo_id = argv[3];
  req.filename = argv[4];
  auto p = hubload::HubClient(o).Download(req);
  if (!p.ok()) {
    std::fprintf(stderr, "%s\n", p.status().ToString().c_str());
    return p.status().code() == hubload::Code::kDiskFull ? 3 : 1;
  }
  std::printf("%s\n", p->c_str());
  return 0;
}
