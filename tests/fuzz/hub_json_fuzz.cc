// libFuzzer target: every JSON document the Hub client reads, through the
// checked accessor layer: the Hub's answers (hub/answers.h: revision, tree
// page, preupload, LFS batch, commit, repo creation, refs list, commits
// page), the bodies of HTTP error answers (hub/errors.h StatusFromHttp) and
// the cache's trees/<commit>.json (cache/tree_cache.h). Any text must give a
// value or a Status, never an exception, a crash or a hang. Dictionary:
// hub_json.dict.
#include <cstddef>
#include <cstdint>
#include <string>

#include "cache/tree_cache.h"
#include "hub/answers.h"
#include "hub/errors.h"
#include "util/json.h"

using namespace hubload;
using namespace hubload::hub_internal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  const std::string doc = "http://fuzz/doc";
  (void)cache_internal::ParseTreeCacheText(text, "/fuzz/trees/x.json");
  // The same bytes as the body of an error answer: the HTTP status decides the code.
  {
    HttpHeaders h;
    ErrorContext ctx;
    ctx.repo_id = "org/m";
    ctx.url = doc;
    Status e = StatusFromHttp(404, h, text, ctx);
    if (e.code() != Code::kRepoNotFound || e.context().http_status != 404) __builtin_trap();
    h.Add("X-Error-Code", "EntryNotFound");
    if (StatusFromHttp(404, h, text, ctx).code() != Code::kEntryNotFound) __builtin_trap();
    if (StatusFromHttp(500, HttpHeaders(), text, ctx).code() != Code::kServerError) __builtin_trap();
  }
  auto j = util::ParseJson(text, doc);
  if (!j.ok()) {
    if (j.status().code() != Code::kInvalidFormat) __builtin_trap();
    return 0;
  }
  auto check = [](const Status& s) {
    if (!s.ok() && s.code() != Code::kInvalidFormat) __builtin_trap();
  };
  check(ParseRevisionSha(*j, doc).status());
  check(ParseTreePage(*j, doc).status());
  check(ParsePreupload(*j, doc).status());
  auto lfs = ParseLfsBatch(*j, doc);
  check(lfs.status());
  if (lfs.ok())
    for (auto& o : *lfs)
      for (size_t i = 1; i < o.parts.size(); ++i)
        if (o.parts[i - 1].first > o.parts[i].first) __builtin_trap();  // parts come sorted
  check(ParseCommitAnswer(*j, doc).status());
  check(ParseRepoUrl(*j, doc).status());
  auto refs = ParseRefs(*j, doc);
  check(refs.status());
  if (refs.ok())  // every accepted ref names a 40-hex commit
    for (auto* list : {&refs->branches, &refs->tags, &refs->pull_requests})
      for (auto& r : *list)
        if (r.target_commit.size() != 40) __builtin_trap();
  auto commits = ParseCommitsPage(*j, doc);
  check(commits.status());
  if (commits.ok())
    for (auto& c : *commits)
      if (c.commit_id.size() != 40) __builtin_trap();
  return 0;
}
