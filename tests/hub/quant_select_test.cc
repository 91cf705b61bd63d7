// Field failure B55: a multi-part artifact chosen by a quant tag
// (hubload/quant.h) against the repo tree of ../shared/docs/field-failures.md,
// served by the in-process `hubload serve`; the set of files the client asked
// the server for comes from its access log.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "field_support.h"
#include "hubload/hub.h"
#include "hubload/quant.h"
#include "testing/status_matchers.h"

using hubload::Code;
using hubload::testing::TempDir;
using namespace hubload::testing::field;  // NOLINT(build/namespaces)

namespace {

const std::vector<std::string> kTree = {
    "Q4_K_M/m-Q4_K_M-00001-of-00003.gguf", "Q4_K_M/m-Q4_K_M-00002-of-00003.gguf",
    "Q4_K_M/m-Q4_K_M-00003-of-00003.gguf", "m-Q8_0.gguf",
    "m-mxfp4-00001-of-00002.gguf",         "m-mxfp4-00002-of-00002.gguf",
    "m-IQ4_NL-00001-of-00002.gguf",        "best-of-breed.gguf",
    "m-Q2_K-00000-of-00002.gguf",          "README.md"};

struct Pull {
  hubload::Result<hubload::QuantSelection> sel = hubload::Status::Ok();
  std::set<std::string> asked;  // files the client sent a /resolve/ request for
};

// Lists org/q, selects `tag`, downloads the selection.
Pull PullTag(const std::string& tag) {
  TempDir logs, cache;
  auto hub = HubWithLog(logs);
  Pull out;
  if (!hub) return out;
  std::map<std::string, std::string> files;
  for (auto& p : kTree) files[p] = "GGUF" + p;
  hub->AddRepo("org/q", files);
  hubload::HubClient client(Opts(*hub, cache.str()));
  auto listing = client.ListFiles("org/q", "main");
  EXPECT_OK(listing);
  if (!listing.ok()) return out;
  std::vector<std::string> paths;
  for (auto& f : listing->files) paths.push_back(f.path);
  out.sel = hubload::SelectQuantFiles(paths, tag);
  if (out.sel.ok()) {
    hubload::Status st = client.DownloadFiles("org/q", "main", hubload::RepoType::kModel, out.sel->files, {});
    EXPECT_OK(st);
  }
  for (auto& j : AccessLog(*hub, logs)) {
    std::string path = j.value("path", "");
    size_t r = path.find("/resolve/");  // /org/q/resolve/<revision>/<file>
    if (r == std::string::npos) continue;
    std::string rest = path.substr(r + 9);
    out.asked.insert(rest.substr(rest.find('/') + 1));
  }
  return out;
}

}  // namespace

TEST(FieldB55, ATagPicksEveryPartOfItsSplitInOrderWhateverItsCase) {
  for (const std::string tag : {"Q4_K_M", "q4_k_m"}) {
    Pull p = PullTag(tag);
    ASSERT_OK(p.sel) << tag << ": " << p.sel.status().ToString();
    EXPECT_EQ(p.sel->files, (std::vector<std::string>{"Q4_K_M/m-Q4_K_M-00001-of-00003.gguf",
                                                      "Q4_K_M/m-Q4_K_M-00002-of-00003.gguf",
                                                      "Q4_K_M/m-Q4_K_M-00003-of-00003.gguf"}));
    EXPECT_EQ(p.sel->parts, 3);
    EXPECT_EQ(p.asked, std::set<std::string>(p.sel->files.begin(), p.sel->files.end())) << tag;
  }
  for (const std::string tag : {"MXFP4", "mxfp4"}) {
    Pull p = PullTag(tag);
    ASSERT_OK(p.sel) << tag << ": " << p.sel.status().ToString();
    EXPECT_EQ(p.asked, (std::set<std::string>{"m-mxfp4-00001-of-00002.gguf", "m-mxfp4-00002-of-00002.gguf"}));
    EXPECT_EQ(p.sel->files.front(), "m-mxfp4-00001-of-00002.gguf");
  }
  Pull q8 = PullTag("Q8_0");
  ASSERT_OK(q8.sel);
  EXPECT_EQ(q8.asked, (std::set<std::string>{"m-Q8_0.gguf"}));
  Pull best = PullTag("best");
  ASSERT_OK(best.sel);
  EXPECT_EQ(best.asked, (std::set<std::string>{"best-of-breed.gguf"}));  // one file, never a part
  EXPECT_EQ(best.sel->parts, 1);
}

TEST(FieldB55, IncompleteAmbiguousAndMalformedChoicesAreRefusedBeforeAnyRequest) {
  struct Case {
    std::string tag, reason, says;
  };
  for (const Case& c : std::vector<Case>{{"IQ4_NL", "IncompleteSplit", "incomplete split: 1 of 2 parts present"},
                                         {"", "NoSuchQuant", "m-Q8_0"},  // no tag: the list of what is there
                                         {"Q5_K_S", "NoSuchQuant", "Q4_K_M/m-Q4_K_M (3 parts)"},
                                         {"Q2_K", "BadPartName", "m-Q2_K-00000-of-00002.gguf"},
                                         {"m", "AmbiguousQuant", "m-mxfp4 (2 parts)"}}) {
    Pull p = PullTag(c.tag);
    ASSERT_FALSE(p.sel.ok()) << "'" << c.tag << "' chose " << (p.sel.ok() ? p.sel->artifact : "");
    EXPECT_EQ(p.sel.status().code(), Code::kInvalidArgument);
    EXPECT_EQ(p.sel.status().reason(), c.reason) << c.tag << ": " << p.sel.status().ToString();
    EXPECT_NE(p.sel.status().message().find(c.says), std::string::npos) << c.tag << ": " << p.sel.status().message();
    EXPECT_TRUE(p.asked.empty()) << "'" << c.tag << "': a file was requested";
  }
}
