// safetensors header parsing and validation (loading-semantics.md E.1), the
// header-only file reader, and the read-only mapping.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <utility>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "hubload/safetensors.h"
#include "hubload/reasons.h"
#include "loader/safetensors/internal.h"

namespace hubload::safetensors {

using internal::FormatError;
using internal::ShapeString;
using json = nlohmann::json;

namespace {

constexpr std::string_view kLfsMagic = "version https://git-lfs.github.com/spec/v1";

bool LooksLikeLfsPointer(const uint8_t* b, size_t n) {
  size_t k = std::min(n, kLfsMagic.size());
  return k >= 8 && std::memcmp(b, kLfsMagic.data(), k) == 0;
}

bool LooksLikeHtml(const uint8_t* b, size_t n) {
  size_t i = 0;
  while (i < n && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n')) ++i;
  for (std::string_view tok : {std::string_view("<!doctype"), std::string_view("<html")}) {
    size_t m = std::min(tok.size(), n - i);
    if (m < 5) continue;
    bool eq = true;
    for (size_t k = 0; k < m && eq; ++k) {
      uint8_t c = b[i + k];
      if (c >= 'A' && c <= 'Z') c = static_cast<uint8_t>(c - 'A' + 'a');
      eq = c == static_cast<uint8_t>(tok[k]);
    }
    if (eq) return true;
  }
  return false;
}

uint64_t ReadLe64(const uint8_t* b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | b[i];
  return v;
}

std::string Range(uint64_t b, uint64_t e) {
  return "[" + std::to_string(b) + "," + std::to_string(e) + "]";
}

// Reads a JSON array of non-negative integers into `out`.
bool ReadU64Array(const json& j, std::vector<uint64_t>* out) {
  if (!j.is_array()) return false;
  out->clear();
  out->reserve(j.size());
  for (const auto& v : j) {
    if (!v.is_number_unsigned()) return false;
    out->push_back(v.get<uint64_t>());  // json: checked (is_number_unsigned)
  }
  return true;
}

}  // namespace

Result<uint64_t> PeekHeaderLength(const uint8_t* bytes, size_t n_bytes_available, uint64_t file_size,
                                  std::string_view file_label) {
  size_t avail = static_cast<size_t>(std::min<uint64_t>(n_bytes_available, file_size));
  if (avail > 0 && LooksLikeLfsPointer(bytes, avail)) {
    return FormatError(reason::kGitLfsPointer, file_label, {},
                       "file is a Git LFS pointer (text starting \"version https://git-lfs.github.com/spec/v1\"), "
                       "not the safetensors data; fetch the LFS object instead");
  }
  if (avail > 0 && LooksLikeHtml(bytes, avail)) {
    return FormatError(reason::kHtmlPage, file_label, {},
                       "file is an HTML page (starts with <!DOCTYPE or <html>), not safetensors data; "
                       "the server probably returned an error or login page");
  }
  if (file_size < 8) {
    return FormatError(reason::kHeaderTooSmall, file_label, {},
                       "file is " + std::to_string(file_size) +
                           " bytes, shorter than the 8-byte header length prefix");
  }
  if (avail < 8) {
    return Status(Code::kInvalidArgument,
                  std::string(file_label) + ": need the first 8 bytes to read the header length, got " +
                      std::to_string(avail));
  }
  uint64_t n = ReadLe64(bytes);
  if (n > kMaxHeaderSize || n > SIZE_MAX) {
    // A text file read as safetensors gives an absurd length: say what it looks like.
    std::string hint;
    if (bytes[0] == '{' || bytes[0] == '[' || bytes[0] == ' ' || bytes[0] == '\n' || bytes[0] == '\t')
      hint = " (the file starts like JSON text: it is not a safetensors file; an index "
             "*.safetensors.index.json is read as an index)";
    return FormatError(reason::kHeaderTooLarge, file_label, {},
                       "header length " + std::to_string(n) + " exceeds the limit of " +
                           std::to_string(kMaxHeaderSize) + " bytes" + hint);
  }
  uint64_t need = 8 + n;  // cannot overflow: n <= kMaxHeaderSize
  if (need > file_size) {
    return FormatError(reason::kInvalidHeaderLength, file_label, {},
                       "truncated: header length " + std::to_string(n) + " needs " + std::to_string(need) +
                           " bytes but the file has only " + std::to_string(file_size));
  }
  return need;
}

Result<Header> ParseHeader(const uint8_t* bytes, size_t n_bytes_available, uint64_t file_size,
                           std::string_view file_label) {
  HUBLOAD_ASSIGN_OR_RETURN(uint64_t need, PeekHeaderLength(bytes, n_bytes_available, file_size, file_label));
  if (n_bytes_available < need) {
    return Status(Code::kInvalidArgument, std::string(file_label) + ": need " + std::to_string(need) +
                                              " bytes to parse the header, got " +
                                              std::to_string(n_bytes_available));
  }
  Header h;
  h.header_len = need - 8;
  h.data_start = need;
  h.file_size = file_size;
  const uint8_t* text = bytes + 8;
  size_t text_len = static_cast<size_t>(h.header_len);

  // Rule 5: UTF-8.
  size_t bad = internal::FindInvalidUtf8(text, text_len);
  if (bad != std::string_view::npos) {
    return FormatError(reason::kInvalidHeaderUtf8, file_label, {},
                       "header byte " + std::to_string(bad) + " (file offset " + std::to_string(8 + bad) +
                           ") is not valid UTF-8");
  }
  std::string_view sv(reinterpret_cast<const char*>(text), text_len);

  // Rule 6: JSON object with well-typed entries. Bound nesting first.
  size_t written_keys = 0;
  if (!internal::JsonDepthWithin(sv, internal::kMaxJsonDepth, &written_keys)) {
    return FormatError(reason::kInvalidHeaderJson, file_label, {},
                       "header JSON nests deeper than " + std::to_string(internal::kMaxJsonDepth) + " levels");
  }
  // Plain DOM parse (nlohmann's callback parser is quadratic in the number of
  // members of the top-level object); duplicates are found by counting names.
  json j = json::parse(sv.begin(), sv.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return FormatError(reason::kInvalidHeaderJson, file_label, {}, "header is not valid JSON");
  }
  if (!j.is_object()) {
    return FormatError(reason::kInvalidHeaderJson, file_label, {},
                       std::string("header is a JSON ") + j.type_name() + ", not an object");
  }
  h.tensors.reserve(j.size());
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    if (key == "__metadata__") {
      if (v.is_null()) continue;
      if (!v.is_object()) {
        return FormatError(reason::kInvalidHeaderJson, file_label, {},
                           std::string("__metadata__ is a JSON ") + v.type_name() + ", not an object of strings");
      }
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) {
          return FormatError(reason::kInvalidHeaderJson, file_label, {},
                             "__metadata__ value for key " + util::Quoted(m.key()) + " is a JSON " +
                                 m.value().type_name() + ", not a string");
        }
        h.metadata.emplace(m.key(), m.value().get<std::string>());  // json: checked (is_string)
      }
      continue;
    }
    if (!v.is_object()) {
      return FormatError(reason::kInvalidHeaderJson, file_label, key,
                         std::string("entry is a JSON ") + v.type_name() +
                             ", not an object {dtype, shape, data_offsets}");
    }
    TensorInfo t;
    t.name = key;
    auto d = v.find("dtype");
    if (d == v.end() || !d->is_string()) {
      return FormatError(reason::kInvalidHeaderJson, file_label, key, "\"dtype\" is missing or not a string");
    }
    const std::string& dtype_name = d->get_ref<const std::string&>();  // json: checked (is_string)
    auto s = v.find("shape");
    if (s == v.end() || !ReadU64Array(*s, &t.shape)) {
      return FormatError(reason::kInvalidHeaderJson, file_label, key,
                         "\"shape\" is missing or not an array of non-negative integers");
    }
    auto o = v.find("data_offsets");
    std::vector<uint64_t> offs;
    if (o == v.end() || !ReadU64Array(*o, &offs) || offs.size() != 2) {
      return FormatError(reason::kInvalidHeaderJson, file_label, key,
                         "\"data_offsets\" is missing or not an array of exactly 2 non-negative integers");
    }
    t.begin = offs[0];
    t.end = offs[1];
    auto dt = DtypeFromName(dtype_name);
    if (!dt) {
      return FormatError(reason::kUnknownDtype, file_label, key,
                         "dtype " + util::Quoted(dtype_name) + " is not a safetensors dtype");
    }
    t.dtype = *dt;
    h.tensors.push_back(std::move(t));
  }
  if (written_keys != j.size()) {
    std::string dup_key, unused;
    internal::FindDuplicateKeys(sv, {}, &dup_key, &unused);
    return FormatError(reason::kDuplicateTensor, file_label, dup_key, "name appears more than once in the header");
  }

  // Rules 7-10, per tensor in (begin, end) order as the Rust `validate`.
  std::sort(h.tensors.begin(), h.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return a.name < b.name;
  });
  uint64_t start = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo& t : h.tensors) {
    if (t.end < t.begin) {
      return FormatError(reason::kInvalidOffset, file_label, t.name,
                         "data_offsets " + Range(t.begin, t.end) + " end before they begin");
    }
    if (t.begin != start) {
      std::string what = "data_offsets " + Range(t.begin, t.end) + " ";
      if (!prev) {
        what += "begin at " + std::to_string(t.begin) + " but the first tensor must begin at 0";
      } else if (t.begin > start) {
        what += "leave a hole of " + std::to_string(t.begin - start) + " bytes after tensor " +
                util::Quoted(prev->name) + " (ends at " + std::to_string(start) + ")";
      } else {
        what += "overlap tensor " + util::Quoted(prev->name) + " (ends at " + std::to_string(start) + ")";
      }
      return FormatError(reason::kInvalidOffset, file_label, t.name, what);
    }
    start = t.end;
    prev = &t;
    uint64_t elems = 1;
    for (uint64_t dim : t.shape) {
      if (__builtin_mul_overflow(elems, dim, &elems)) {
        return FormatError(reason::kValidationOverflow, file_label, t.name,
                           "element count of shape " + ShapeString(t.shape) + " overflows 64 bits");
      }
    }
    uint64_t bits;
    if (__builtin_mul_overflow(elems, static_cast<uint64_t>(DtypeBits(t.dtype)), &bits)) {
      return FormatError(reason::kValidationOverflow, file_label, t.name,
                         "bit size of shape " + ShapeString(t.shape) + " of " + DtypeName(t.dtype) +
                             " overflows 64 bits");
    }
    if (bits % 8 != 0) {
      return FormatError(reason::kMisalignedSlice, file_label, t.name,
                         "shape " + ShapeString(t.shape) + " of " + DtypeName(t.dtype) + " holds " +
                             std::to_string(bits) + " bits, not a whole number of bytes");
    }
    if (t.end - t.begin != bits / 8) {
      return FormatError(reason::kTensorInvalidInfo, file_label, t.name,
                         "data_offsets " + Range(t.begin, t.end) + " hold " + std::to_string(t.end - t.begin) +
                             " bytes but shape " + ShapeString(t.shape) + " of " + DtypeName(t.dtype) +
                             " needs " + std::to_string(bits / 8));
    }
  }
  // Rule 11.
  uint64_t expected;
  if (__builtin_add_overflow(h.data_start, start, &expected) || expected > file_size) {
    return FormatError(reason::kMetadataIncompleteBuffer, file_label, {},
                       "truncated: the header describes " + std::to_string(start) + " data bytes after byte " +
                           std::to_string(h.data_start) + " but the file has only " + std::to_string(file_size) +
                           " bytes");
  }
  if (expected < file_size) {
    return FormatError(reason::kMetadataIncompleteBuffer, file_label, {},
                       std::to_string(file_size - expected) + " trailing bytes after the data section (file has " +
                           std::to_string(file_size) + " bytes, header describes " + std::to_string(expected) + ")");
  }
  h.by_name.resize(h.tensors.size());
  for (size_t i = 0; i < h.tensors.size(); ++i) h.by_name[i] = static_cast<uint32_t>(i);
  std::sort(h.by_name.begin(), h.by_name.end(),
            [&](uint32_t a, uint32_t b) { return h.tensors[a].name < h.tensors[b].name; });
  return h;
}

const TensorInfo* Header::Find(std::string_view name) const {
  if (!tensors.empty() && by_name.size() == tensors.size()) {
    auto it = std::lower_bound(by_name.begin(), by_name.end(), name, [&](uint32_t i, std::string_view n) {
      return i < tensors.size() && tensors[i].name < n;
    });
    if (it != by_name.end() && *it < tensors.size() && tensors[*it].name == name) return &tensors[*it];
    return nullptr;
  }
  for (const auto& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

uint64_t Header::data_size() const {
  uint64_t s = 0;
  for (const auto& t : tensors) s += t.nbytes();
  return s;
}

namespace {

// Reads exactly n bytes at `off` (short only at end of file).
Result<size_t> PreadFull(int fd, uint8_t* buf, size_t n, uint64_t off, const std::string& path) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd, buf + got, n - got, static_cast<off_t>(off + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      return util::IoError("cannot read", path, errno);
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

Status NotRegular(const std::string& path) {
  ErrorContext ctx;
  ctx.file = path;
  return Status(Code::kIOError, path + ": not a regular file", {}, std::move(ctx));
}

struct Fd {
  int fd = -1;
  uint64_t size = 0;  // of the regular file, from fstat
  Fd() = default;
  Fd(const Fd&) = delete;
  Fd(Fd&& o) noexcept : fd(std::exchange(o.fd, -1)), size(o.size) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Opens `path` read-only; refuses anything but a regular file.
Result<Fd> OpenRegular(const std::string& path) {
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) return util::IoError("cannot open", path, errno);
  struct stat st;
  if (::fstat(f.fd, &st) != 0) return util::IoError("cannot fstat", path, errno);
  if (!S_ISREG(st.st_mode)) return NotRegular(path);
  f.size = static_cast<uint64_t>(st.st_size);
  return f;
}

}  // namespace

Result<Header> ReadMetadata(const std::string& path) {
  HUBLOAD_ASSIGN_OR_RETURN(Fd f, OpenRegular(path));
  uint64_t size = f.size;
  std::vector<uint8_t> buf(static_cast<size_t>(std::min<uint64_t>(size, 4096)));
  HUBLOAD_ASSIGN_OR_RETURN(size_t got, PreadFull(f.fd, buf.data(), buf.size(), 0, path));
  buf.resize(got);
  HUBLOAD_ASSIGN_OR_RETURN(uint64_t need, PeekHeaderLength(buf.data(), buf.size(), size, path));
  if (need > buf.size()) {
    size_t old = buf.size();
    buf.resize(static_cast<size_t>(need));
    HUBLOAD_ASSIGN_OR_RETURN(size_t more, PreadFull(f.fd, buf.data() + old, buf.size() - old, old, path));
    buf.resize(old + more);
  }
  return ParseHeader(buf.data(), buf.size(), size, path);
}

Result<std::shared_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  HUBLOAD_ASSIGN_OR_RETURN(Fd f, OpenRegular(path));
  std::shared_ptr<MappedFile> m(new MappedFile());
  m->path_ = path;
  m->size_ = f.size;
  if (m->size_ > 0) {
    void* p = ::mmap(nullptr, static_cast<size_t>(m->size_), PROT_READ, MAP_SHARED, f.fd, 0);
    if (p == MAP_FAILED) return util::IoError("cannot mmap", path, errno);
    m->data_ = static_cast<const uint8_t*>(p);
  }
  return m;
}

Result<std::shared_ptr<MappedFile>> MappedFile::FromFd(int fd, uint64_t size, std::string label) {
  std::shared_ptr<MappedFile> m(new MappedFile());
  m->path_ = std::move(label);
  m->size_ = size;
  if (size > 0) {
    void* p = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return util::IoError("cannot mmap", m->path_, errno);
    m->data_ = static_cast<const uint8_t*>(p);
  }
  return m;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), static_cast<size_t>(size_));
}

Result<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  HUBLOAD_ASSIGN_OR_RETURN(auto m, MappedFile::Open(path));
  HUBLOAD_ASSIGN_OR_RETURN(Header h, ParseHeader(m->data(), static_cast<size_t>(m->size()), m->size(), path));
  SafetensorsFile f;
  f.mapping_ = std::move(m);
  f.header_ = std::move(h);
  return f;
}

Result<SafetensorsFile> SafetensorsFile::FromParts(std::shared_ptr<MappedFile> mapping, Header header) {
  if (!mapping || header.file_size > mapping->size())
    return Status(Code::kInvalidArgument, "SafetensorsFile::FromParts: the header describes " +
                                              std::to_string(header.file_size) + " bytes, more than the mapping",
                  reason::kInvalidArgument);
  SafetensorsFile f;
  f.mapping_ = std::move(mapping);
  f.header_ = std::move(header);
  return f;
}

std::span<const uint8_t> SafetensorsFile::data(const TensorInfo& t) const {
  if (!mapping_ || t.end < t.begin) return {};
  uint64_t b, e;
  if (__builtin_add_overflow(header_.data_start, t.begin, &b) ||
      __builtin_add_overflow(header_.data_start, t.end, &e) || e > mapping_->size()) {
    return {};
  }
  if (b == e) return {};
  return {mapping_->data() + b, static_cast<size_t>(e - b)};
}

std::span<const uint8_t> SafetensorsFile::data(std::string_view name, bool* found) const {
  const TensorInfo* t = header_.Find(name);
  if (found) *found = t != nullptr;
  return t ? data(*t) : std::span<const uint8_t>();
}

}  // namespace hubload::safetensors
