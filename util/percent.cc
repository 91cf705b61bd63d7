// Percent-encoding over Boost.URL (util/percent.h). Boost.URL is compiled into
// this one file (boost/url/src.hpp), so no Boost library needs linking.
#include "util/percent.h"

#include <boost/url/encode.hpp>
#include <boost/url/grammar/lut_chars.hpp>
#include <boost/url/pct_string_view.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>
#include <boost/url/src.hpp>

namespace hubload::util {

std::optional<std::string> PercentDecode(std::string_view text, bool plus_as_space) {
  auto pct = boost::urls::make_pct_string_view(boost::urls::string_view(text.data(), text.size()));
  if (!pct) return std::nullopt;
  boost::urls::encoding_opts opt;
  opt.space_as_plus = plus_as_space;
  return pct->decode(opt);
}

std::string PercentEncode(std::string_view text, std::string_view keep) {
  std::string keep_s(keep);
  boost::urls::grammar::lut_chars extra(keep_s.c_str());
  return boost::urls::encode(boost::urls::string_view(text.data(), text.size()),
                             boost::urls::unreserved_chars + extra);
}

std::optional<std::vector<std::pair<std::string, std::string>>> ParseQuery(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t start = 0;
  while (start <= query.size()) {
    size_t end = query.find('&', start);
    if (end == std::string_view::npos) end = query.size();
    std::string_view kv = query.substr(start, end - start);
    if (!kv.empty()) {
      size_t eq = kv.find('=');
      auto k = PercentDecode(kv.substr(0, eq), true);
      auto v = eq == std::string_view::npos ? std::optional<std::string>("") : PercentDecode(kv.substr(eq + 1), true);
      if (!k || !v) return std::nullopt;
      out.emplace_back(std::move(*k), std::move(*v));
    }
    start = end + 1;
  }
  return out;
}

}  // namespace hubload::util
