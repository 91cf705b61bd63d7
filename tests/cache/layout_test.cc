// Cache layout: names, validation, refs, snapshot links (huggingface_hub layout).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "hubload/cache.h"
#include "testing/util.h"
#include "util/log_capture.h"
#include "testing/status_matchers.h"

namespace fs = std::filesystem;
using hubload::RepoCache;
using hubload::RepoType;

TEST(CacheLayout, RepoFolderNameMatchesHuggingfaceHub) {
  // Examples from hub-protocol.md §3.2.
  EXPECT_EQ(hubload::RepoFolderName("julien-c/EsperBERTo-small", RepoType::kModel), "models--julien-c--EsperBERTo-small");
  EXPECT_EQ(hubload::RepoFolderName("org/name", RepoType::kDataset), "datasets--org--name");
  EXPECT_EQ(hubload::RepoFolderName("gpt2", RepoType::kModel), "models--gpt2");
  EXPECT_EQ(hubload::RepoFolderName("a/b", RepoType::kSpace), "spaces--a--b");
}

TEST(CacheLayout, NormalizeEtagStripsWeakMarkerAndQuotes) {
  EXPECT_EQ(hubload::NormalizeEtag("\"abc123\""), "abc123");
  EXPECT_EQ(hubload::NormalizeEtag("W/\"abc123\""), "abc123");
  EXPECT_EQ(hubload::NormalizeEtag("abc123"), "abc123");
  EXPECT_EQ(hubload::NormalizeEtag(" \"x\" "), "x");
}

TEST(CacheLayout, CommitHashIsFortyLowercaseHex) {
  EXPECT_TRUE(hubload::IsCommitHash(std::string(40, 'a')));
  EXPECT_FALSE(hubload::IsCommitHash(std::string(40, 'A')));
  EXPECT_FALSE(hubload::IsCommitHash(std::string(39, 'a')));
  EXPECT_FALSE(hubload::IsCommitHash("main"));
}

TEST(CacheLayout, UnsafeRepoPathsAreRejected) {
  // B16 list.
  for (const char* bad : {"../../evil.txt", "a/../../evil.txt", "..\\..\\evil.txt", "/tmp/evil", "C:\\evil.txt",
                          "C:evil.txt", "\\\\host\\share\\x", "ok/./x", "a//b", "", "a/", "..", "."}) {
    auto st = hubload::ValidateRepoPath(bad);
    EXPECT_EQ(st.code(), hubload::Code::kInvalidArgument) << "accepted: '" << bad << "'";
    EXPECT_EQ(st.reason(), "UnsafePath") << bad;
  }
  EXPECT_FALSE(hubload::ValidateRepoPath(std::string("x\0y", 3)).ok());
  for (const char* ok : {"config.json", "a/b/c.bin", "dir with space/\xc3\xbc-na\xc3\xafve.txt", "a#b.txt", "100%.txt",
                         "eval/C1_or_C2?_premise/x.json", ".gitattributes"}) {
    EXPECT_OK(hubload::ValidateRepoPath(ok)) << ok;
  }
}

TEST(CacheLayout, RepoIdValidation) {
  EXPECT_OK(hubload::ValidateRepoId("org/name"));
  EXPECT_OK(hubload::ValidateRepoId("gpt2"));
  EXPECT_FALSE(hubload::ValidateRepoId("a/b/c").ok());
  EXPECT_FALSE(hubload::ValidateRepoId("../x").ok());
  EXPECT_FALSE(hubload::ValidateRepoId("org/").ok());
  EXPECT_FALSE(hubload::ValidateRepoId("").ok());
}

TEST(CacheLayout, PathsFollowTheLayout) {
  RepoCache rc("/c/", "org/m", RepoType::kModel);
  std::string commit(40, 'c');
  EXPECT_EQ(rc.repo_dir(), "/c/models--org--m");
  EXPECT_EQ(rc.BlobPath("e1"), "/c/models--org--m/blobs/e1");
  EXPECT_EQ(rc.IncompletePath("e1"), "/c/models--org--m/blobs/e1.incomplete");
  EXPECT_EQ(rc.PointerPath(commit, "a/b.txt"), "/c/models--org--m/snapshots/" + commit + "/a/b.txt");
  EXPECT_EQ(rc.RefPath("refs/pr/1"), "/c/models--org--m/refs/refs/pr/1");
  EXPECT_EQ(rc.NoExistPath(commit, "x"), "/c/models--org--m/.no_exist/" + commit + "/x");
  EXPECT_EQ(rc.LockPath("e1"), "/c/.locks/models--org--m/e1.lock");
}

TEST(CacheLayout, RefsAreWrittenAtomicallyAndReadTrimmed) {
  hubload::testing::TempDir tmp;
  RepoCache rc(tmp.str(), "org/m", RepoType::kModel);
  std::string a(40, 'a'), b(40, 'b');
  EXPECT_FALSE(rc.ReadRef("main").has_value());
  ASSERT_OK(rc.WriteRef("main", a));
  auto bytes = hubload::testing::ReadFileBytes(rc.RefPath("main"));
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), a);  // no newline, as huggingface_hub
  ASSERT_OK(rc.WriteRef("refs/pr/1", b));
  EXPECT_TRUE(fs::is_regular_file(tmp.path() / "models--org--m/refs/refs/pr/1"));
  EXPECT_EQ(rc.ReadRef("refs/pr/1").value_or(""), b);
  // A ref written by another tool with a trailing newline (B12).
  hubload::testing::WriteFileBytes(rc.RefPath("dev"), b + "\n");
  EXPECT_EQ(rc.ReadRef("dev").value_or(""), b);
  EXPECT_FALSE(rc.WriteRef("main", "notacommit").ok());
  EXPECT_FALSE(rc.WriteRef("../escape", a).ok());
  // No temp files left behind.
  for (auto& e : fs::directory_iterator(tmp.path() / "models--org--m/refs"))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

TEST(CacheLayout, SnapshotLinkIsRelativeSymlinkToBlob) {
  hubload::testing::TempDir tmp;
  RepoCache rc(tmp.str(), "org/m", RepoType::kModel);
  std::string commit(40, 'c');
  fs::create_directories(tmp.path() / "models--org--m/blobs");
  hubload::testing::WriteFileBytes(rc.BlobPath("e1"), std::string("hello"));
  auto p = rc.LinkSnapshot(commit, "sub/dir/f.txt", "e1");
  ASSERT_OK(p);
  EXPECT_TRUE(fs::is_symlink(*p));
  EXPECT_EQ(fs::read_symlink(*p).string(), "../../../../blobs/e1");  // 2 folders below the snapshot
  auto bytes = hubload::testing::ReadFileBytes(*p);
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), "hello");
  EXPECT_EQ(rc.CachedPointer(commit, "sub/dir/f.txt").value_or(""), *p);
  auto top = rc.LinkSnapshot(commit, "g.txt", "e1");
  ASSERT_OK(top);
  EXPECT_EQ(fs::read_symlink(*top).string(), "../../blobs/e1");
}

TEST(CacheLayout, DanglingPointerCountsAsAbsent) {
  // B14(b): a snapshot written by another host whose blob is missing.
  hubload::testing::TempDir tmp;
  RepoCache rc(tmp.str(), "org/m", RepoType::kModel);
  std::string commit(40, 'c');
  fs::create_directories(fs::path(rc.SnapshotDir(commit)));
  fs::create_symlink("../../blobs/missing", rc.PointerPath(commit, "w.bin"));
  EXPECT_FALSE(rc.CachedPointer(commit, "w.bin").has_value());
}

TEST(CacheLayout, CopyModeWhenSymlinksDisabled) {
  hubload::testing::TempDir tmp;
  RepoCache rc(tmp.str(), "org/m", RepoType::kModel);
  std::string commit(40, 'c');
  fs::create_directories(tmp.path() / "models--org--m/blobs");
  hubload::testing::WriteFileBytes(rc.BlobPath("e1"), std::string("bytes"));
  auto p = rc.LinkSnapshot(commit, "f.txt", "e1", /*use_symlinks=*/false);
  ASSERT_OK(p);
  EXPECT_FALSE(fs::is_symlink(*p));
  EXPECT_EQ(fs::file_size(*p), 5u);
}

TEST(CacheLayout, NoExistMarker) {
  hubload::testing::TempDir tmp;
  RepoCache rc(tmp.str(), "org/m", RepoType::kModel);
  std::string commit(40, 'c');
  EXPECT_FALSE(rc.IsMarkedNoExist(commit, "opt/x.json"));
  ASSERT_OK(rc.MarkNoExist(commit, "opt/x.json"));
  EXPECT_TRUE(rc.IsMarkedNoExist(commit, "opt/x.json"));
  EXPECT_EQ(fs::file_size(tmp.path() / ("models--org--m/.no_exist/" + commit + "/opt/x.json")), 0u);
}

// Issue 14: refs/<rev> as other tools may leave it. Never a throw or a hang;
// absent and a folder are "no ref", anything else unusable is CorruptRef naming the file.
TEST(CacheLayout, ReadRefCheckedTellsCorruptFromAbsent) {
  hubload::testing::TempDir tmp;
  RepoCache rc(tmp.str(), "org/m", RepoType::kModel);
  const std::string a(40, 'a');
  fs::create_directories(tmp.path() / "models--org--m/refs");
  auto absent = rc.ReadRefChecked("main");
  ASSERT_OK(absent);
  EXPECT_FALSE(absent->has_value());
  // Branch feature/x makes refs/feature a folder: not a ref, not corrupt (huggingface_hub: isfile).
  ASSERT_OK(rc.WriteRef("feature/x", a));
  auto folder = rc.ReadRefChecked("feature");
  ASSERT_OK(folder);
  EXPECT_FALSE(folder->has_value());
  EXPECT_FALSE(rc.ReadRef("feature").has_value());
  EXPECT_EQ(rc.ReadRefChecked("feature/x")->value_or(""), a);
  // Unusable files: each a kInvalidFormat CorruptRef naming refs/main; ReadRef says nullopt.
  const fs::path ref = tmp.path() / "models--org--m/refs/main";
  auto expect_corrupt = [&](const std::string& what) {
    auto r = rc.ReadRefChecked("main");
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_EQ(r.status().code(), hubload::Code::kInvalidFormat) << what;
    EXPECT_EQ(r.status().reason(), "CorruptRef") << what;
    EXPECT_NE(r.status().message().find(ref.string()), std::string::npos) << what << ": " << r.status().message();
    EXPECT_EQ(r.status().context().file, ref.string()) << what;
    EXPECT_FALSE(rc.ReadRef("main").has_value()) << what;
  };
  for (const std::string& bad : {std::string("garbage\n"), std::string(""), std::string(39, 'a'), std::string(40, 'A'),
                                 a + "\n" + a, std::string(5000, ' ') + a}) {
    fs::remove_all(ref);
    hubload::testing::WriteFileBytes(ref, bad);
    expect_corrupt("bytes '" + bad.substr(0, 50) + "'");
  }
  // A fifo (opening it for reading would block until a writer came): refused at once.
  fs::remove_all(ref);
  ASSERT_EQ(::mkfifo(ref.c_str(), 0644), 0);
  expect_corrupt("fifo");
  // A symlink loop.
  fs::remove_all(ref);
  fs::create_symlink("main", ref);
  expect_corrupt("symlink loop");
  // Unreadable (not as root: root reads anything).
  if (::geteuid() != 0) {
    fs::remove_all(ref);
    hubload::testing::WriteFileBytes(ref, a);
    fs::permissions(ref, fs::perms::none);
    expect_corrupt("mode 000");
  }
  // A good ref again, with surrounding whitespace another tool wrote.
  fs::remove_all(ref);
  hubload::testing::WriteFileBytes(ref, "  " + a + "\r\n");
  EXPECT_EQ(rc.ReadRefChecked("main")->value_or(""), a);
  // WriteRef replaces a corrupt ref.
  hubload::testing::WriteFileBytes(ref, "garbage");
  ASSERT_OK(rc.WriteRef("main", a));
  auto bytes = hubload::testing::ReadFileBytes(ref);
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), a);
}

// Issue 14: .no_exist entries that are not the empty file huggingface_hub
// touches are ignored (one warning each), and MarkNoExist replaces them
// without writing through a symlink.
TEST(CacheLayout, NoExistEntriesOfAnotherKindAreIgnored) {
  hubload::testing::TempDir tmp;
  RepoCache rc(tmp.str(), "org/m", RepoType::kModel);
  const std::string commit(40, 'c');
  const fs::path dir = tmp.path() / ("models--org--m/.no_exist/" + commit);
  fs::create_directories(dir / "folder");
  hubload::testing::WriteFileBytes(dir / "nonempty.json", "{}");
  hubload::testing::WriteFileBytes(tmp.path() / "outside.txt", "keep me");
  fs::create_symlink(tmp.path() / "outside.txt", dir / "link.json");
  ASSERT_EQ(::mkfifo((dir / "fifo.json").c_str(), 0644), 0);
  hubload::testing::WriteFileBytes(dir / "empty.json", "");
  {
    hubload::util::WarningCapture log;
    EXPECT_TRUE(rc.IsMarkedNoExist(commit, "empty.json"));
    EXPECT_FALSE(rc.IsMarkedNoExist(commit, "folder"));  // markers of paths below it
    EXPECT_FALSE(rc.IsMarkedNoExist(commit, "absent.json"));
    EXPECT_EQ(log.Count(".no_exist"), 0);  // none of those is wrong
    for (const char* p : {"nonempty.json", "link.json", "fifo.json"}) {
      EXPECT_FALSE(rc.IsMarkedNoExist(commit, p)) << p;
      EXPECT_EQ(log.Count((dir / p).string()), 1) << p;
    }
  }
  // Marking replaces the wrong entries by the empty marker; the symlink's target is untouched.
  for (const char* p : {"nonempty.json", "link.json", "fifo.json"}) {
    ASSERT_OK(rc.MarkNoExist(commit, p)) << p;
    EXPECT_TRUE(rc.IsMarkedNoExist(commit, p)) << p;
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(dir / p))) << p;
    EXPECT_EQ(fs::file_size(dir / p), 0u) << p;
  }
  auto kept = hubload::testing::ReadFileBytes(tmp.path() / "outside.txt");
  EXPECT_EQ(std::string(kept.begin(), kept.end()), "keep me");
}

TEST(CacheLayout, RepoPathsMustBeUtf8) {
  for (const std::string& bad : {std::string("f\xff.txt"), std::string("a/\xc3"), std::string("\xed\xa0\x80.bin")}) {
    auto st = hubload::ValidateRepoPath(bad);
    EXPECT_EQ(st.code(), hubload::Code::kInvalidArgument) << bad;
    EXPECT_EQ(st.reason(), "UnsafePath") << bad;
    EXPECT_NE(st.message().find("UTF-8"), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find('\xff'), std::string::npos) << "the byte is shown as \\xff";
  }
  EXPECT_NE(hubload::ValidateRepoPath("f\xff.txt").message().find("f\\xff.txt"), std::string::npos);
}

TEST(CacheLayout, FileLockExcludesAndTimesOutNamingThePath) {
  hubload::testing::TempDir tmp;
  std::string path = tmp.str() + "/.locks/models--o--m/e.lock";
  auto a = hubload::FileLock::Acquire(path, 1);
  ASSERT_OK(a);
  auto b = hubload::FileLock::Acquire(path, 0.05);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().reason(), "LockTimeout");
  EXPECT_NE(b.status().message().find(path), std::string::npos);
  { auto released = std::move(*a); }
  EXPECT_OK(hubload::FileLock::Acquire(path, 0.05));
}

TEST(CacheLayout, LockOfADeadProcessIsFree) {
  // B09: the lock file exists (left by a killed process) but nobody holds it.
  hubload::testing::TempDir tmp;
  std::string path = tmp.str() + "/.locks/models--o--m/e.lock";
  pid_t pid = fork();
  if (pid == 0) {
    auto l = hubload::FileLock::Acquire(path, 1);
    _exit(l.ok() ? 0 : 1);  // dies holding it
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(fs::exists(path));
  EXPECT_OK(hubload::FileLock::Acquire(path, 0.5));
}
