// `hubload serve` never dies from a request (issue 14 item 3): every read and
// write endpoint fed bodies of the wrong shape (each field set to each wrong
// JSON type, fields missing, non-JSON, huge numbers, deep nesting), malformed
// headers (raw socket) and query strings. Each answer must be a 4xx with a
// JSON {"error": ...} body (never a 5xx or a dropped connection), and the
// server must answer a normal request right after.
#include <cctype>
#include <thread>

#include "server/server_fixture.h"

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
  std::string big = RandomBytes(2500, 5);
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

}  // namespace
}  // namespace hubload::testing
