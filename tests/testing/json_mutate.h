// Every-field x every-type mutation of an untrusted JSON document (issue 14):
// each field of a valid document is replaced by each JSON type in turn (and
// removed), and the whole document by each type; the parser must never throw,
// and any error must be kInvalidFormat naming the document. For the `checked`
// fields, every type but the accepted one must be an error naming the field
// (an optional field also accepts null and absence). Header-only; link
// nlohmann_json and gtest.
//
//   int runs = hubload::testing::MutateEveryField(doc, parse, {{"/sha", json::value_t::string}}, "doc://test");
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hubload/status.h"

namespace hubload::testing {

/// One JSON value of each type and shape (numbers: zero, positive, negative,
/// fractional, the largest unsigned; strings: text and empty; arrays and
/// objects: empty and not).
inline const std::vector<nlohmann::json>& EveryJsonType() {
  using json = nlohmann::json;
  static const std::vector<json> types = {nullptr, true, false, 0, 7, -3, 1.5, 18446744073709551615ull, "text", "",
                                          json::array(), json::array({1, "x"}), json::object(), json{{"k", "v"}}};
  return types;
}

struct JsonField {
  std::string pointer;           // JSON pointer of the field in the valid document: "/files/0/path"
  nlohmann::json::value_t type;  // the accepted type; number_unsigned also takes integers >= 0
  bool required = true;          // false: null and absence are accepted as "not given"
};

/// "/files/0/path" -> "files[0].path" (util::JsonIn's field paths); `doc`
/// tells array indices from object keys made of digits.
inline std::string JsonInPath(const nlohmann::json& doc, const nlohmann::json::json_pointer& p) {
  std::string out;
  const nlohmann::json* at = &doc;
  std::vector<std::string> segs;
  for (auto q = p; !q.empty(); q = q.parent_pointer()) segs.insert(segs.begin(), q.back());
  for (const std::string& seg : segs) {
    if (at && at->is_array()) {
      out += "[" + seg + "]";
      size_t i = std::stoul(seg);
      at = i < at->size() ? &(*at)[i] : nullptr;
    } else {
      out += out.empty() ? seg : "." + seg;
      auto it = at && at->is_object() ? at->find(seg) : nlohmann::json::const_iterator();
      at = at && at->is_object() && it != at->end() ? &*it : nullptr;
    }
  }
  return out;
}

namespace json_mutate_internal {
inline void Pointers(const nlohmann::json& j, const nlohmann::json::json_pointer& at,
                     std::vector<nlohmann::json::json_pointer>* out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      auto p = at / it.key();
      out->push_back(p);
      Pointers(it.value(), p, out);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      auto p = at / i;
      out->push_back(p);
      Pointers(j[i], p, out);
    }
  }
}
}  // namespace json_mutate_internal

/// Runs `parse` on every mutation (see the file comment); returns how many
/// mutated documents were parsed. `doc_name` must appear in every error
/// message; with `jsonin_paths` a checked field's error must also quote its
/// util::JsonIn path ("'files[0].path'"), else its key.
inline int MutateEveryField(const nlohmann::json& doc, const std::function<Status(const nlohmann::json&)>& parse,
                            const std::vector<JsonField>& checked, const std::string& doc_name,
                            bool jsonin_paths = true) {
  using json = nlohmann::json;
  std::vector<json::json_pointer> ptrs;
  json_mutate_internal::Pointers(doc, json::json_pointer(), &ptrs);
  for (auto& f : checked) {
    bool found = false;
    for (auto& p : ptrs) found |= p.to_string() == f.pointer;
    EXPECT_TRUE(found) << f.pointer << " is not a field of the valid document";
  }
  auto expect_names = [&](const Status& st, const json::json_pointer& p, const std::string& what) {
    EXPECT_NE(st.message().find(doc_name), std::string::npos) << what << ": " << st.message();
    std::string name = jsonin_paths ? "'" + JsonInPath(doc, p) + "'" : p.back();
    EXPECT_NE(st.message().find(name), std::string::npos) << what << ": " << st.message() << " (wanted " << name << ")";
  };
  int runs = 0;
  for (auto& p : ptrs) {
    const JsonField* field = nullptr;
    for (auto& f : checked)
      if (f.pointer == p.to_string()) field = &f;
    for (const json& t : EveryJsonType()) {
      json m = doc;
      m[p] = t;
      Status st;
      EXPECT_NO_THROW(st = parse(m)) << p.to_string() << " = " << t.dump();
      ++runs;
      const std::string what = p.to_string() + " = " + t.dump();
      if (!st.ok()) {
        EXPECT_EQ(st.code(), Code::kInvalidFormat) << what << ": " << st.ToString();
        EXPECT_NE(st.message().find(doc_name), std::string::npos) << what << ": " << st.message();
      }
      if (!field) continue;
      bool same = t.type() == field->type ||
                  (field->type == json::value_t::number_unsigned && t.is_number_integer() && t.get<int64_t>() >= 0) ||
                  (field->type == json::value_t::number_integer && t.is_number_unsigned() && t.get<uint64_t>() < (1ull << 63)) ||
                  (t.is_null() && !field->required);
      if (same) continue;
      EXPECT_FALSE(st.ok()) << what << " was accepted";
      if (!st.ok()) expect_names(st, p, what);
    }
    // The field removed.
    json m = doc;
    json& parent = m[p.parent_pointer()];
    if (!parent.is_object()) continue;
    parent.erase(p.back());
    Status st;
    EXPECT_NO_THROW(st = parse(m)) << p.to_string() << " removed";
    if (!st.ok()) {
      EXPECT_NE(st.message().find(doc_name), std::string::npos) << st.message();
    }
    if (field && field->required) {
      EXPECT_FALSE(st.ok()) << p.to_string() << " removed was accepted";
      if (!st.ok()) expect_names(st, p, p.to_string() + " removed");
    }
  }
  // The whole document replaced by each type.
  for (const json& t : EveryJsonType()) {
    Status st;
    EXPECT_NO_THROW(st = parse(t)) << "document = " << t.dump();
    if (!st.ok()) {
      EXPECT_EQ(st.code(), Code::kInvalidFormat) << t.dump() << ": " << st.ToString();
    }
  }
  return runs;
}

}  // namespace hubload::testing
