// `hubload serve` never dies from a request (issue 14 item 3): every read and
// write endpoint fed bodies of the wrong shape (each field set to each wrong
// JSON type, fields missing, non-JSON, huge numbers, deep nesting), malformed
// headers (raw socket) and query strings. Each answer must be a 4xx with a
// JSON {"error": ...} body (never a 5xx or a dropped connection), and the
// server must answer a normal request right after.
#include <cctype>
#include <thread>

#include "hub/server/impl.h"
#include "server/server_fixture.h"
#include "util/log_capture.h"

namespace hubload::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

enum class T { kString, kUint, kBool, kArray, kObject };

// JSON values of every type but `t` (null only when the field is required).
std::vector<std::string> WrongValues(T t, bool required) {
  std::vector<std::string> all;
  if (t != T::kUint) {
    all.push_back("42");
  } else {
    for (const char* v : {"\"2\"", "-1", "1.5", "1e300", "184467440737095516160"}) all.push_back(v);
  }
  if (t != T::kString) all.push_back("\"text\"");
  if (t != T::kBool) all.push_back("true");
  if (t != T::kArray) all.push_back("[1,2]");
  if (t != T::kObject) all.push_back("{\"x\":1}");
  if (required) all.push_back("null");
  return all;
}

struct Field {
  std::string pointer;  // JSON pointer into the valid body
  T type;
  bool required;
  std::vector<int> ok_status = {};  // statuses also accepted (e.g. 422 for LFS objects)
};

struct Endpoint {
  std::string name, method, path, content_type;
  json valid;
  std::vector<Field> fields;
  int bad_status = 400;  // what a wrong field answers
};

class RobustTest : public ServerTest {
 protected:
  void ExpectAlive(const std::string& after) {
    Reply r = Get(U("/api/models/org/model"));
    ASSERT_EQ(r.status, 200) << "server stopped answering after " << after;
    ASSERT_EQ(json::parse(r.body)["sha"], commit_) << after;
  }
  // A 4xx with a JSON error body.
  void ExpectRejected(const Reply& r, const std::string& what, std::vector<int> allowed = {}) {
    EXPECT_EQ(r.code, CURLE_OK) << what;
    if (!allowed.empty()) {
      EXPECT_NE(std::find(allowed.begin(), allowed.end(), static_cast<int>(r.status)), allowed.end())
          << what << " -> " << r.status << " " << r.body;
    } else {
      EXPECT_GE(r.status, 400) << what << " -> " << r.body;
      EXPECT_LT(r.status, 500) << what << " -> " << r.body;
    }
    auto j = json::parse(r.body, nullptr, false);
    EXPECT_TRUE(j.is_object() && j.contains("error") && j["error"].is_string()) << what << " -> " << r.body;
  }
  Reply Send(const Endpoint& e, const std::string& body) {
    std::vector<std::string> h = {Auth(kGood), "Content-Type: " + e.content_type};
    return Http(e.method, U(e.path), h, &body);
  }
  std::vector<Endpoint> JsonEndpoints() {
    std::string lfs_oid = Sha256("x");
    return {
        {"repo create", "POST", "/api/repos/create", "application/json",
         json{{"name", "newrepo"}, {"organization", "org"}, {"type", "model"}, {"private", false},
              {"visibility", "public"}, {"files", {{{"path", "a.txt"}, {"content", "YQ=="}, {"encoding", "base64"}}}}},
         {{"/name", T::kString, true},
          {"/organization", T::kString, false},
          {"/type", T::kString, false},
          {"/private", T::kBool, false},
          {"/visibility", T::kString, false},
          {"/files", T::kArray, false},
          {"/files/0", T::kObject, true},
          {"/files/0/path", T::kString, true},
          {"/files/0/content", T::kString, true},
          {"/files/0/encoding", T::kString, false}}},
        {"preupload", "POST", "/api/models/org/model/preupload/main", "application/json",
         json{{"files", {{{"path", "x.bin"}, {"size", 10}, {"sample", "eA=="}}}}},
         {{"/files", T::kArray, true}, {"/files/0", T::kObject, true}, {"/files/0/path", T::kString, true},
          {"/files/0/size", T::kUint, false}}},
        {"LFS batch", "POST", "/org/model.git/info/lfs/objects/batch", "application/vnd.git-lfs+json",
         json{{"operation", "upload"}, {"transfers", {"basic"}}, {"hash_algo", "sha256"},
              {"objects", {{{"oid", lfs_oid}, {"size", 1}}}}},
         {{"/operation", T::kString, false},
          {"/transfers", T::kArray, false},
          {"/hash_algo", T::kString, false},
          {"/objects", T::kArray, true},
          {"/objects/0", T::kObject, true, {400, 422}},
          {"/objects/0/oid", T::kString, true, {422}},
          {"/objects/0/size", T::kUint, true, {422}}}},
        {"paths-info", "POST", "/api/models/org/model/paths-info/main", "application/json",
         json{{"paths", {"config.json"}}, {"expand", true}},
         {{"/paths", T::kArray, true}, {"/paths/0", T::kString, true}, {"/expand", T::kBool, false}}},
        {"branch", "POST", "/api/models/org/model/branch/robust-branch", "application/json",
         json{{"startingPoint", "main"}, {"emptyBranch", false}, {"overwrite", true}},
         {{"/startingPoint", T::kString, false}, {"/emptyBranch", T::kBool, false}, {"/overwrite", T::kBool, false}}},
        {"tag", "POST", "/api/models/org/model/tag/main", "application/json",
         json{{"tag", "robust-tag"}, {"message", "m"}},
         {{"/tag", T::kString, true}, {"/message", T::kString, false}}},
        {"settings", "PUT", "/api/models/org/model/settings", "application/json", json{{"private", false}},
         {{"/private", T::kBool, false}}},
    };
  }
};

TEST_F(RobustTest, EveryFieldOfEveryJsonBodyWithEveryWrongType) {
  int cases = 0;
  for (const Endpoint& e : JsonEndpoints()) {
    for (const Field& f : e.fields) {
      for (const std::string& wrong : WrongValues(f.type, f.required)) {
        json body = e.valid;
        body[json::json_pointer(f.pointer)] = json::parse("null");  // placeholder, replaced as text below
        std::string text = body.dump();
        // Put the wrong value in as raw text (keeps huge numbers exact).
        size_t at = text.find("null");
        ASSERT_NE(at, std::string::npos);
        text.replace(at, 4, wrong);
        Reply r = Send(e, text);
        ExpectRejected(r, e.name + " " + f.pointer + " = " + wrong, f.ok_status);
        ++cases;
      }
      json::json_pointer ptr(f.pointer);
      if (f.required && !std::isdigit(static_cast<unsigned char>(ptr.back()[0]))) {
        // The field missing.
        json body = e.valid;
        body[ptr.parent_pointer()].erase(ptr.back());
        Reply r = Send(e, body.dump());
        ExpectRejected(r, e.name + " without " + f.pointer, f.ok_status);
        ++cases;
      }
    }
    ExpectAlive(e.name);
  }
  EXPECT_GT(cases, 150);
}

TEST_F(RobustTest, NonJsonHugeAndDeeplyNestedBodies) {
  std::string deep_array(100000, '[');
  std::string deep_object;
  for (int i = 0; i < 20000; ++i) deep_object += "{\"a\":";
  std::vector<std::string> bodies = {"", "{", "not json", "[]", "null", "\"text\"", "1", "{\"files\":[", "\xff\xfe{}",
                                     "1" + std::string(400, '0'), deep_array, deep_object,
                                     "{\"name\":\"\xc3\x28\"}"};
  for (const Endpoint& e : JsonEndpoints()) {
    for (auto& b : bodies) {
      if (e.name == "branch" && b.empty()) continue;  // an empty branch body is {} (huggingface_hub sends one)
      Reply r = Send(e, b);
      ExpectRejected(r, e.name + " body of " + std::to_string(b.size()) + " bytes starting '" + b.substr(0, 8) + "'");
    }
    ExpectAlive(e.name);
  }
}

TEST_F(RobustTest, CommitLinesWithEveryWrongType) {
  std::string lfs_oid = Sha256("x");
  struct Line {
    json valid;
    std::vector<Field> fields;
  };
  std::vector<Line> lines = {
      {json{{"key", "header"}, {"value", {{"summary", "s"}, {"description", "d"}, {"parentCommit", commit_}}}},
       {{"/key", T::kString, true},
        {"/value", T::kObject, true},
        {"/value/summary", T::kString, false},
        {"/value/description", T::kString, false},
        {"/value/parentCommit", T::kString, false}}},
      {json{{"key", "file"}, {"value", {{"path", "f.txt"}, {"content", "YQ=="}, {"encoding", "base64"}}}},
       {{"/value/path", T::kString, true}, {"/value/content", T::kString, false}, {"/value/encoding", T::kString, false}}},
      {json{{"key", "lfsFile"}, {"value", {{"path", "l.bin"}, {"oid", lfs_oid}, {"size", 1}, {"algo", "sha256"}}}},
       {{"/value/path", T::kString, true},
        {"/value/oid", T::kString, true},
        {"/value/size", T::kUint, false},
        {"/value/algo", T::kString, false}}},
      {json{{"key", "deletedFile"}, {"value", {{"path", "config.json"}}}}, {{"/value/path", T::kString, true}}},
  };
  std::string header = json{{"key", "header"}, {"value", {{"summary", "s"}}}}.dump();
  std::vector<std::string> h = {Auth(kGood), "Content-Type: application/x-ndjson"};
  for (size_t li = 0; li < lines.size(); ++li) {
    for (const Field& f : lines[li].fields) {
      for (const std::string& wrong : WrongValues(f.type, f.required)) {
        json line = lines[li].valid;
        line[json::json_pointer(f.pointer)] = nullptr;
        std::string text = line.dump();
        text.replace(text.find("null"), 4, wrong);
        std::string body = (li == 0 ? "" : header + "\n") + text + "\n";
        Reply r = Http("POST", U("/api/models/org/model/commit/main"), h, &body);
        ExpectRejected(r, "commit line " + f.pointer + " = " + wrong);
      }
    }
  }
  for (std::string body : {std::string(""), std::string("\n\n"), std::string("not json\n"), header + "\n" + header,
                           header + "\n{\"key\":\"file\"}", header + "\n{\"key\":\"bogus\",\"value\":{\"path\":\"a\"}}",
                           header + "\n{\"key\":\"file\",\"value\":{\"path\":\"../x\",\"content\":\"\"}}",
                           header + "\n{\"key\":\"file\",\"value\":{\"path\":\".git/config\",\"content\":\"\"}}",
                           header + "\n{\"key\":\"file\",\"value\":{\"path\":\"a\",\"content\":\"!!!\"}}"}) {
    Reply r = Http("POST", U("/api/models/org/model/commit/main"), h, &body);
    ExpectRejected(r, "commit body '" + body.substr(0, 40) + "'");
  }
  ExpectAlive("commit lines");
  // Nothing above committed: main is unchanged.
  EXPECT_EQ(json::parse(Get(U("/api/models/org/model")).body)["sha"], commit_);
}

TEST_F(RobustTest, MultipartCompletionBodies) {
  std::string big = PatternBytes(2500, 5);
  std::string batch = json{{"operation", "upload"},
                           {"transfers", {"basic", "multipart"}},
                           {"objects", {{{"oid", Sha256(big)}, {"size", 2500}}}}}
                          .dump();
  Reply b = Http("POST", U("/org/model.git/info/lfs/objects/batch"), {Auth(kGood)}, &batch);
  ASSERT_EQ(b.status, 200) << b.body;
  std::string href = json::parse(b.body)["objects"][0]["actions"]["upload"]["href"];
  Endpoint e{"multipart completion", "POST", "", "application/json",
             json{{"oid", Sha256(big)}, {"parts", {{{"partNumber", 1}, {"etag", "x"}}}}},
             {{"/oid", T::kString, false},
              {"/parts", T::kArray, true},
              {"/parts/0", T::kObject, true},
              {"/parts/0/partNumber", T::kUint, true},
              {"/parts/0/etag", T::kString, true}}};
  for (const Field& f : e.fields)
    for (const std::string& wrong : WrongValues(f.type, f.required)) {
      json body = e.valid;
      body[json::json_pointer(f.pointer)] = nullptr;
      std::string text = body.dump();
      text.replace(text.find("null"), 4, wrong);
      Reply r = Http("POST", href, {"Content-Type: application/json"}, &text);
      ExpectRejected(r, "completion " + f.pointer + " = " + wrong);
    }
  ExpectAlive("multipart completion");
}

TEST_F(RobustTest, MalformedQueryStrings) {
  for (const char* q : {"/api/models/org/model/tree/main?cursor=%zz", "/api/models/org/model/tree/main?cursor=abc",
                        "/api/models/org/model/tree/main?cursor=99999999999999999999",
                        "/api/models/org/model/commits/main?limit=-1", "/api/models/org/model/commits/main?p=x",
                        "/api/models/org/model/commits/main?limit=0", "/org/model/resolve/main/config.json?a=%"}) {
    Reply r = Get(U(q));
    ExpectRejected(r, q);
  }
  // Harmless oddities are answered normally.
  for (const char* q : {"/api/models/org/model/tree/main?limit=999999999999999999999",
                        "/api/models/org/model/tree/main?recursive=%ff&expand=%00", "/api/models/org/model?&&=&blobs",
                        "/api/models/org/model/refs?include_prs=maybe"}) {
    Reply r = Get(U(q));
    EXPECT_EQ(r.status, 200) << q << " " << r.body;
  }
  ExpectAlive("query strings");
}

TEST_F(RobustTest, MalformedHeadersOnARawSocket) {
  uint16_t port = hub_->server->port();
  std::string big_header = "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(70000, 'a') + "\r\n\r\n";
  struct Case {
    std::string name, bytes;
    int want;  // expected status, 0 = any 4xx or a closed connection
  } cases[] = {
      {"garbage request line", "GARBAGE\r\n\r\n", 400},
      {"binary", std::string("\x00\x01\x02\xff\r\n\r\n", 8), 400},
      {"header line without colon", "GET / HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n", 400},
      {"oversized header", big_header, 431},
      {"bad content-length", "POST /api/models/org/model/preupload/main HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
       400},
      {"bad chunked body",
       "POST /api/models/org/model/preupload/main HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer hf_good_token\r\n"
       "Transfer-Encoding: chunked\r\n\r\nzz\r\n\r\n",
       400},
      {"huge content-length", "POST /api/repos/create HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999\r\n\r\n", 413},
      {"NUL and 0xff in the path", "GET /org/model/resolve/main/%00%ff HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
       0},
      {"invalid Host", "GET /api/models/org/model HTTP/1.1\r\nHost: a b/c\r\nConnection: close\r\n\r\n", 200},
      {"CR in a header value", "GET /api/models/org/model HTTP/1.1\r\nHost: x\rY\r\nConnection: close\r\n\r\n", 400},
      {"unknown method", "BREW /api/models/org/model HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 0},
      {"HTTP/0.9", "GET /\r\n\r\n", 0},
  };
  for (auto& c : cases) {
    std::string resp = RawExchange(port, c.bytes);
    int status = RawStatus(resp);
    if (c.want) {
      EXPECT_EQ(status, c.want) << c.name << ": " << resp.substr(0, 200);
    } else {
      EXPECT_TRUE(status == 0 || (status >= 400 && status < 500)) << c.name << ": " << resp.substr(0, 200);
    }
    ExpectAlive(c.name);
  }
}

TEST_F(RobustTest, AStuckConnectionDoesNotBlockOthers) {
  // A client that sends half a request line and waits.
  std::thread stuck([&] { RawExchange(hub_->server->port(), "GET /api/models/org/mo", 1500, "127.0.0.1", false); });
  for (int i = 0; i < 5; ++i) ExpectAlive("a stuck connection");
  stuck.join();
}

size_t ThreadsOfThisProcess() {
  size_t n = 0;
  for ([[maybe_unused]] auto& e : fs::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// Stop() returns only once every connection thread has exited, so nothing of
// theirs (OpenSSL's per-thread error state: a LeakSanitizer report at exit
// of `hubload serve` stopped by SIGINT mid-transfer) outlives it.
TEST(ServerStop, EveryConnectionThreadHasExitedWhenStopReturns) {
  const size_t before = ThreadsOfThisProcess();
  {
    auto hub = StartTestHub();
    ASSERT_TRUE(hub);
    std::vector<int> socks;
    for (int i = 0; i < 8; ++i) {
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      ASSERT_GE(fd, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(hub->server->port());
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
      const std::string half = "GET /api/models/org/mo";  // a request that never ends: its thread waits in a read
      ASSERT_EQ(::send(fd, half.data(), half.size(), MSG_NOSIGNAL), static_cast<ssize_t>(half.size()));
      socks.push_back(fd);
    }
    // Every connection has its thread (the server's own threads come on top).
    for (int i = 0; i < 200 && ThreadsOfThisProcess() < before + 8; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_GE(ThreadsOfThisProcess(), before + 8);
    hub->server->Stop();
    EXPECT_EQ(ThreadsOfThisProcess(), before) << "threads left running after Stop()";
    for (int fd : socks) ::close(fd);
  }
  EXPECT_EQ(ThreadsOfThisProcess(), before);
}

TEST_F(RobustTest, BodyLargerThanTheLimitGets413) {
  server::ServerOptions o;
  o.max_json_body_bytes = 1000;
  auto small = StartTestHub(o);
  ASSERT_TRUE(small);
  small->AddRepo("org/m", {{"a.txt", "a"}});
  std::string body = "{\"files\":[" + std::string(2000, ' ') + "]}";
  Reply r = Http("POST", small->url() + "/api/models/org/m/preupload/main",
                 {"Authorization: Bearer t", "Content-Type: application/json"}, &body);
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(Get(small->url() + "/org/m/resolve/main/a.txt").body, "a");
}


// ---- issue 14 item 3 remainders --------------------------------------------

namespace {
// A TCP connection to 127.0.0.1:port sending `bytes`; -1 on failure.
int ConnectAndSend(uint16_t port, const std::string& bytes) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(bytes.size())) {
    ::close(fd);
    return -1;
  }
  return fd;
}
std::string SendRestAndRead(int fd, const std::string& bytes) {
  std::string out;
  if (::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size())) {
    char buf[65536];
    while (true) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 5000) <= 0) break;
      ssize_t k = ::recv(fd, buf, sizeof buf, 0);
      if (k <= 0) break;
      out.append(buf, static_cast<size_t>(k));
    }
  }
  ::close(fd);
  return out;
}
}  // namespace

// A handler that throws (our bug) answers 500 with a JSON error and an error
// log line, closes that connection, and every other connection goes on: one
// opened before (mid-request) and new ones after.
TEST_F(RobustTest, AThrowingHandlerAnswers500AndTheServerGoesOn) {
  struct Unhook {
    ~Unhook() { server::internal::SetDispatchHookForTesting(nullptr); }
  } unhook;
  server::internal::SetDispatchHookForTesting([](const server::internal::Request& r) {
    if (r.path.find("/explode-std") != std::string::npos) throw std::runtime_error("handler bug 42");
    if (r.path.find("/explode-int") != std::string::npos) throw 42;
  });
  const uint16_t port = hub_->server->port();
  int before = ConnectAndSend(port, "GET /api/models/org/model HTTP/1.1\r\nHost: x\r\n");
  ASSERT_GE(before, 0);
  hubload::util::WarningCapture log;
  for (const char* path : {"/api/models/org/model/explode-std", "/org/model/resolve/main/explode-int"}) {
    for (const char* method : {"GET", "POST", "HEAD"}) {
      std::string body = "{}";
      Reply r = Http(method, U(path), {Auth(kGood)}, std::string(method) == "POST" ? &body : nullptr);
      EXPECT_EQ(r.code, CURLE_OK) << method << " " << path;
      EXPECT_EQ(r.status, 500) << method << " " << path << ": " << r.body;
      EXPECT_EQ(r.h("connection"), "close") << method << " " << path;
      if (std::string(method) != "HEAD") {
        auto j = json::parse(r.body, nullptr, false);
        ASSERT_TRUE(j.is_object() && j.contains("error") && j["error"].is_string()) << r.body;
        EXPECT_NE(j["error"].get<std::string>().find("Internal server error"), std::string::npos) << r.body;
        if (std::string(path).find("std") != std::string::npos) {
          EXPECT_NE(j["error"].get<std::string>().find("handler bug 42"), std::string::npos) << r.body;
        }
      }
      ExpectAlive(std::string(method) + " " + path);
    }
  }
  // One error line per 500, naming the request and the exception.
  EXPECT_EQ(log.CountErrors("handler bug 42"), 3);
  EXPECT_EQ(log.CountErrors("explode-int: unknown exception"), 3);
  // The connection opened before the 500s completes its request.
  std::string resp = SendRestAndRead(before, "Connection: close\r\n\r\n");
  EXPECT_EQ(RawStatus(resp), 200) << resp.substr(0, 200);
  EXPECT_NE(resp.find(commit_), std::string::npos);
}

// Range, If-Range and If-None-Match values of every malformed kind: an answer
// as if the header were absent or invalid (200, 206, 304, 416), never a 5xx,
// and the bytes served are the file's.
TEST_F(RobustTest, MalformedRangeIfRangeAndIfNoneMatch) {
  const std::string& c = files_["config.json"];
  const std::string url = U("/org/model/resolve/main/config.json");
  for (const std::string& range :
       {std::string("bytes=abc"), std::string("bytes=5-2"), std::string("bytes=-"), std::string("bytes=--1"),
        std::string("bytes=0-0,2-3"), std::string("bytes=99999999999999999999-"), std::string("items=0-1"),
        std::string("bytes= 0-1"), std::string("bytes=-0"), std::string("bytes=18446744073709551615-"),
        std::string("bytes=0-18446744073709551616"), std::string("bytes"), std::string(""), std::string("bytes=1.5-2"),
        std::string("bytes=0x1-2"), "bytes=" + std::string(5000, '9') + "-", std::string("bytes=\xff-\xfe")}) {
    for (const std::string& extra : {std::string(), std::string("If-Range: garbage"), std::string("If-Range: W/\"x\""),
                                     std::string("If-Range: Tue, 15 Nov 1994 08:12:31 GMT"),
                                     std::string("If-Range: ") + std::string(4000, '"')}) {
      std::vector<std::string> h = {"Range: " + range};
      if (!extra.empty()) h.push_back(extra);
      Reply r = Get(url, h);
      const std::string what = "Range: " + range.substr(0, 40) + " / " + extra.substr(0, 40);
      EXPECT_EQ(r.code, CURLE_OK) << what;
      EXPECT_TRUE(r.status == 200 || r.status == 206 || r.status == 416) << what << " -> " << r.status << " " << r.body;
      if (r.status == 200) {
        EXPECT_EQ(r.body, c) << what;
      }
      if (r.status == 206) {
        EXPECT_NE(c.find(r.body), std::string::npos) << what;
      }
      if (r.status == 416) {
        auto j = json::parse(r.body, nullptr, false);
        EXPECT_TRUE(j.is_object() && j.contains("error")) << what << " -> " << r.body;
      }
    }
  }
  for (const std::string& inm : {std::string("*"), std::string(""), std::string("\"unterminated"),
                                 std::string("\"a\", \"b\""), std::string("W/"), std::string(8000, 'x'),
                                 std::string("\"\xff\"")}) {
    Reply r = Get(url, {"If-None-Match: " + inm});
    EXPECT_TRUE(r.status == 200 || r.status == 304) << "If-None-Match: " << inm.substr(0, 40) << " -> " << r.status;
    if (r.status == 200) {
      EXPECT_EQ(r.body, c);
    }
  }
  ExpectAlive("malformed Range / If-Range / If-None-Match");
}

// Authorization values of every malformed kind: anonymous (200 on a public
// repo), or 401 with a JSON error, never a 5xx; the good token still works.
TEST_F(RobustTest, MalformedAuthorization) {
  const std::string url = U("/api/models/org/model");
  for (const std::string& v :
       {std::string("Bearer"), std::string("Bearer "), std::string("bearer hf_good_token"),
        std::string("Basic dXNlcjpwYXNz"), std::string("Bearer hf_good_token extra"), std::string("Bearer \xff\xfe"),
        "Bearer " + std::string(6000, 't'), std::string("Token abc"), std::string("Bearer\thf_good_token"),
        std::string("Bearer  hf_good_token"), std::string(""), std::string("Bearer hf_good_token,Bearer x")}) {
    Reply r = Get(url, {"Authorization: " + v});
    const std::string what = "Authorization: " + v.substr(0, 40);
    EXPECT_EQ(r.code, CURLE_OK) << what;
    EXPECT_TRUE(r.status == 200 || r.status == 400 || r.status == 401) << what << " -> " << r.status << " " << r.body;
    if (r.status != 200) {
      auto j = json::parse(r.body, nullptr, false);
      EXPECT_TRUE(j.is_object() && j.contains("error")) << what << " -> " << r.body;
    }
    // A write with it is refused (4xx), never a 5xx.
    std::string body = json{{"files", json::array()}}.dump();
    Reply w = Http("POST", U("/api/models/org/model/preupload/main"),
                   {"Authorization: " + v, "Content-Type: application/json"}, &body);
    EXPECT_GE(w.status, 200) << what;
    EXPECT_LT(w.status, 500) << what << " -> " << w.body;
  }
  EXPECT_EQ(Get(url, {Auth(kGood)}).status, 200);
  ExpectAlive("malformed Authorization");
}

// The signed LFS endpoints (PUT upload and part, verify, complete) and DELETE
// of branches and tags with malformed bodies, sizes, part numbers, signatures
// and names: 4xx with a JSON error (or 200 where the input is harmless), never
// a 5xx, and the server goes on.
TEST_F(RobustTest, PutVerifyAndDeleteWithMalformedInput) {
  const std::string content = PatternBytes(2500, 7);  // 3 parts of the fixture's 1000-byte chunks
  const std::string oid = Sha256(content);
  std::string batch = json{{"operation", "upload"}, {"transfers", {"basic", "multipart"}},
                           {"objects", {{{"oid", oid}, {"size", content.size()}}}}}
                          .dump();
  Reply b = Http("POST", U("/org/model.git/info/lfs/objects/batch"),
                 {Auth(kGood), "Content-Type: application/vnd.git-lfs+json"}, &batch);
  ASSERT_EQ(b.status, 200) << b.body;
  auto ans = json::parse(b.body);
  auto& actions = ans["objects"][0]["actions"];
  ASSERT_TRUE(actions.contains("upload")) << b.body;
  const std::string verify = actions["verify"]["href"].get<std::string>();
  std::vector<std::string> put_urls;
  if (actions["upload"]["header"].is_object()) {
    for (auto it = actions["upload"]["header"].begin(); it != actions["upload"]["header"].end(); ++it)
      if (it.key() != "chunk_size") put_urls.push_back(it.value().get<std::string>());
  } else {
    put_urls.push_back(actions["upload"]["href"].get<std::string>());
  }
  ASSERT_FALSE(put_urls.empty());
  auto tamper = [](std::string u, const std::string& from, const std::string& to) {
    size_t p = u.find(from);
    if (p != std::string::npos) u.replace(p, from.size(), to);
    return u;
  };
  auto expect_4xx_json = [&](const Reply& r, const std::string& what) {
    EXPECT_EQ(r.code, CURLE_OK) << what;
    EXPECT_GE(r.status, 400) << what << " -> " << r.body;
    EXPECT_LT(r.status, 500) << what << " -> " << r.body;
    auto j = json::parse(r.body, nullptr, false);
    EXPECT_TRUE(j.is_object() && j.contains("error")) << what << " -> " << r.body;
  };
  const std::string& u0 = put_urls[0];
  std::string wrong = std::string(10, 'x'), empty;
  // Wrong sizes and tampered URLs (the signature covers the path: a changed size, part or oid is refused).
  expect_4xx_json(Http("PUT", u0, {}, &wrong), "PUT with the wrong byte count");
  expect_4xx_json(Http("PUT", u0, {}, &empty), "PUT empty");
  expect_4xx_json(Http("PUT", tamper(u0, oid, std::string(64, 'f')), {}, &wrong), "PUT to another oid");
  expect_4xx_json(Http("PUT", tamper(u0, "/part/1", "/part/0"), {}, &wrong), "PUT part 0");
  expect_4xx_json(Http("PUT", tamper(u0, "/part/1", "/part/99"), {}, &wrong), "PUT part 99");
  expect_4xx_json(Http("PUT", tamper(u0, "/part/1", "/part/-1"), {}, &wrong), "PUT part -1");
  expect_4xx_json(Http("PUT", tamper(u0, "/part/1", "/part/x"), {}, &wrong), "PUT part x");
  expect_4xx_json(Http("PUT", tamper(u0, "/" + std::to_string(content.size()) + "/", "/99999999999999999999999/"), {},
                       &wrong),
                  "PUT with a size over uint64");
  expect_4xx_json(Http("PUT", tamper(u0, "?", "?x=1&"), {}, &wrong), "PUT with an extra query");
  expect_4xx_json(Http("PUT", u0.substr(0, u0.find('?')), {}, &wrong), "PUT unsigned");
  // Verify before the object exists, with bodies of every shape: 404 JSON (the body is not needed).
  for (const std::string& body : {std::string(""), std::string("not json"), std::string("[]"),
                                  json{{"oid", 5}, {"size", "x"}}.dump(), json{{"oid", oid}, {"size", -1}}.dump(),
                                  std::string(100000, '[')}) {
    Reply r = Http("POST", verify, {Auth(kGood), "Content-Type: application/vnd.git-lfs+json"}, &body);
    expect_4xx_json(r, "verify with " + body.substr(0, 30));
  }
  expect_4xx_json(Http("POST", tamper(verify, oid, std::string(64, 'e')), {Auth(kGood)}, &empty), "verify tampered");
  // Branch and tag names that are not refs, and bodies that are not JSON, on DELETE.
  for (const std::string& name : {std::string("..%2F..%2Fx"), std::string("%00"), std::string(300, 'b'),
                                  std::string("a%2F%2Fb"), std::string("%ff"), std::string("no-such-branch"),
                                  std::string(".."), std::string("refs%2Fheads%2Fmain")}) {
    for (const char* kind : {"branch", "tag"}) {
      std::string body = "{not json";
      Reply r = Http("DELETE", U("/api/models/org/model/" + std::string(kind) + "/" + name), {Auth(kGood)}, &body);
      expect_4xx_json(r, std::string("DELETE ") + kind + " " + name.substr(0, 30));
    }
  }
  Reply no_name = Http("DELETE", U("/api/models/org/model/branch/"), {Auth(kGood)});
  EXPECT_GE(no_name.status, 400);
  EXPECT_LT(no_name.status, 500) << no_name.body;
  ExpectAlive("PUT / verify / DELETE");
  // main still resolves after all that.
  EXPECT_EQ(Get(U("/org/model/resolve/main/config.json")).body, files_["config.json"]);
}

}  // namespace
}  // namespace hubload::testing
