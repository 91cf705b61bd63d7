#!/usr/bin/env bash
# Self-test of tools/lint-json.sh: every known-bad snippet alone in a scratch
# tree must make it fail (naming the file), every known-good one must pass.
# Usage: tests/lint/lint_json_selftest.sh  (exit 0 when all cases behave)
set -uo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
lint="$here/tools/lint-json.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0
# run CASE_NAME EXPECT(bad|good) FILE(relative) CONTENT: writes the case's
# scratch tree; all cases are linted afterwards in one Python process (the
# lint's own main() per tree, so the verdict is the command's).
run() {
  local name=$1 expect=$2 file=$3 content=$4 root="$tmp/$1"
  mkdir -p "$root/$(dirname "$file")"
  printf '%s\n' "$content" >"$root/$file"
  printf '%s\t%s\t%s\n' "$name" "$expect" "$file" >>"$tmp/cases.tsv"
}
# ---- known bad: each must be flagged --------------------------------------
run value bad hub/x.cc 'int n = j.value("size", 0);'
run value_arrow bad hub/x.cc 'int n = p->value("k", 0);'
run value_split bad hub/x.cc $'int n = j.value(\n    "size", 0);'
run value_spaces bad cache/x.cc 'int n = j . value ( "size" , 0 );'
run get bad loader/x.cc 'auto s = j.get<std::string>();'
run get_arrow bad hub/x.cc 'auto s = p->get<int>();'
run template_get bad hub/x.h 'auto s = j["size"].template get<uint64_t>();'
run get_spaces bad hub/x.cc 'auto s = j . get < int > ();'
run get_split bad hub/x.cc $'auto s = j\n    .get<int>();'
run get_to bad hub/x.cc 'j.get_to(m);'
run at bad hub/x.cc 'auto v = j.at("k");'
run at_arrow bad hub/x.cc 'auto v = p->at("k");'
run at_space bad tools/hubload/x.cc 'auto v = j.at ("k");'
run get_ref bad hub/x.cc 'auto& s = j.get_ref<const std::string&>();'
run parse bad hub/x.cc 'auto j = nlohmann::json::parse(s);'
run parse_ordered bad tools/hubload/x.cc 'auto j = nlohmann::ordered_json::parse(s);'
run parse_noexc_outside_core bad hub/x.cc 'auto j = json::parse(s, nullptr, /*allow_exceptions=*/false);'
run from_json bad hub/x.cc 'nlohmann::from_json(j, m);'
run pointer bad hub/x.cc 'auto v = j[nlohmann::json::json_pointer("/a")];'
run subscript_conversion bad hub/x.cc 'std::string a = j["path"];'
run subscript_cast bad hub/x.cc 'auto a = static_cast<std::string>(j["x"]);'
run subscript_check bad hub/x.cc 'if (j["size"].is_number()) {}'
run subscript_chain_read bad hub/x.cc 'f(j["a"]["b"]);'
run dump bad hub/x.cc 'std::string t = j.dump();'
run dump_indent bad tools/hubload/x.cc 'std::printf("%s", out.dump(2).c_str());'
run dump_arrow bad cache/x.cc 'std::string t = p->dump();'
run hpp bad hub/x.hpp 'auto s = j.get<int>();'
run inc bad loader/x.inc 'auto s = j.get<int>();'
run cu bad loader/device/x.cu 'auto s = j.get<int>();'
run server bad hub/server/x.cc 'auto s = j.at("k");'
run core_unmarked bad loader/safetensors/header.cc 'uint64_t n = v.get<uint64_t>();'
run core_wrong_type bad loader/safetensors/index.cc $'if (v.is_string()) {\n  int n = v.get<int>();  // json: checked (is_string)\n}'
run core_check_missing bad loader/safetensors/index.cc 'auto n = v.get<uint64_t>();  // json: checked (is_number_unsigned)'
run core_check_far bad loader/safetensors/index.cc $'if (v.is_string()) {}\n\n\n\n\n\n\n\n\n\nauto s = v.get<std::string>();  // json: checked (is_string)'
run core_parse_throwing bad loader/safetensors/header.cc 'json j = json::parse(sv.begin(), sv.end());'
run core_get_ref_unmarked bad loader/safetensors/index.cc 'const std::string& s = v.get_ref<const std::string&>();'
# ---- known good: none may be flagged --------------------------------------
run optional_value good hub/x.cc 'int n = opt.value();'
run optional_value_space good hub/x.cc 'int n = opt.value( );'
run write good hub/x.cc 'j["path"] = p;'
run write_chain good hub/x.cc 'j["a"]["b"] = 1;'
run write_push good hub/x.cc 'j["list"].push_back(1);'
run compare_write good hub/x.cc 'e["names"] = c.names;'
run dump_helper good hub/x.cc 'std::string t = util::DumpJson(j, 2);'
run dump_replace good loader/safetensors/writer.cc "text = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);"
run comment good hub/x.cc '// never call j.at("k") or j.get<int>() here'
run block_comment good hub/x.cc '/* j.value("k", 0) */ int x = 0;'
run string good hub/x.cc 'std::string m = "use .at( and .get<int>() never";'
run jsonin good hub/x.cc 'HUBLOAD_ASSIGN_OR_RETURN(uint64_t n, in.Uint("size"));'
run parse_helper good hub/x.cc 'auto j = util::ParseJson(text, doc);'
run sax_parse good loader/safetensors/common.cc 'return nlohmann::json::sax_parse(t.begin(), t.end(), &sax);'
run get_ptr good tools/hubload/x.cc 'const std::string* s = v.get_ptr<const std::string*>();'
run map_find good hub/x.cc 'auto it = m.find(k);'
run other_ext good hub/x.py 'j.get<int>()'
run outside good util/x.cc 'auto s = j.get<int>();'
run core_marked good loader/safetensors/index.cc $'if (v.is_number_unsigned()) {\n  total = v.get<uint64_t>();  // json: checked (is_number_unsigned)\n}'
run core_get_ref_marked good loader/safetensors/index.cc $'if (!v.is_string()) return;\nconst std::string& s = v.get_ref<const std::string&>();  // json: checked (is_string)'
run core_parse_noexc good loader/safetensors/header.cc 'json j = json::parse(sv.begin(), sv.end(), nullptr, /*allow_exceptions=*/false);'
# ---- lint every case -------------------------------------------------------
out=$(python3 - "$here/tools/lint-json.py" "$tmp" <<'PY'
import contextlib, importlib.util, io, sys
spec = importlib.util.spec_from_file_location("lint_json", sys.argv[1])
lint = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lint)
tmp = sys.argv[2]
for line in open(tmp + "/cases.tsv"):
    name, expect, path = line.rstrip("\n").split("\t")
    text = io.StringIO()
    sys.argv = ["lint-json", tmp + "/" + name]
    with contextlib.redirect_stdout(text), contextlib.redirect_stderr(text):
        rc = lint.main()
    if expect == "bad" and (rc != 1 or path + ":" not in text.getvalue()):
        print("FAIL (not flagged, rc %d): %s" % (rc, name))
    elif expect == "good" and rc != 0:
        print("FAIL (flagged): %s\n%s" % (name, text.getvalue()))
print("checked %d cases" % sum(1 for _ in open(tmp + "/cases.tsv")))
PY
) || { echo "FAIL: the case runner did not finish"; fails=$((fails + 1)); }
echo "$out"
fails=$((fails + $(grep -c '^FAIL' <<<"$out")))
# ---- the repository itself is clean ----------------------------------------
"$lint" >/dev/null || { echo "FAIL: the repository does not pass the lint"; fails=$((fails + 1)); }
if [[ $fails -ne 0 ]]; then echo "lint-json self-test: $fails case(s) failed"; exit 1; fi
echo "lint-json self-test: all cases behave"
