// The zip container of torch.save (PyTorch >= 1.6; caffe2/serialize/
// inline_container.cc PyTorchStreamWriter/Reader), read with libminizip over
// a Source: the central directory gives every entry; for each, the local
// header is checked (unzOpenCurrentFile2 raw) and the absolute offset of its
// data taken from unzGetCurrentFileZStreamPos64. No entry data is read except
// data.pkl, version and byteorder.
#include <unzip.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "hubload/reasons.h"
#include "loader/pickle/internal.h"

namespace hubload::pickle::internal {

namespace {

// ---- minizip I/O over a Source -------------------------------------------
// Sources not in memory are read through two 16 KiB windows (minizip reads
// headers a few bytes at a time, alternating between the central directory
// and each entry's local header): one pread per window miss.
constexpr size_t kWindow = 16 * 1024;

struct Window {
  std::vector<uint8_t> bytes;
  uint64_t off = 0;
  size_t len = 0;
  uint64_t used = 0;  // last use, for replacement
};

struct ZipStream {
  const Source* src = nullptr;
  uint64_t pos = 0;
  bool failed = false;
  Status status;
  Window windows[2];
  uint64_t clock = 0;
};

voidpf ZCALLBACK ZOpen(voidpf, const void* filename, int) { return const_cast<void*>(filename); }

uLong ZCALLBACK ZRead(voidpf, voidpf stream, void* buf, uLong size) {
  auto* s = static_cast<ZipStream*>(stream);
  const uint64_t total = s->src->size();
  if (s->pos >= total) return 0;
  uint64_t n = std::min<uint64_t>(size, total - s->pos);
  Status st;
  if (const uint8_t* mem = s->src->memory()) {
    std::memcpy(buf, mem + s->pos, n);
  } else if (n >= kWindow) {
    st = s->src->ReadAt(s->pos, buf, n);
  } else {
    Window* w = nullptr;
    for (Window& c : s->windows) {
      if (c.len && s->pos >= c.off && s->pos + n <= c.off + c.len) w = &c;
    }
    if (!w) {
      w = s->windows[0].used <= s->windows[1].used ? &s->windows[0] : &s->windows[1];
      w->bytes.resize(kWindow);
      w->off = s->pos;
      w->len = static_cast<size_t>(std::min<uint64_t>(kWindow, total - s->pos));
      st = s->src->ReadAt(w->off, w->bytes.data(), w->len);
      if (!st.ok()) w->len = 0;
    }
    w->used = ++s->clock;
    if (st.ok()) std::memcpy(buf, w->bytes.data() + (s->pos - w->off), n);
  }
  if (!st.ok()) {
    s->failed = true;
    s->status = st;
    return 0;
  }
  s->pos += n;
  return static_cast<uLong>(n);
}

uLong ZCALLBACK ZWrite(voidpf, voidpf, const void*, uLong) { return 0; }

ZPOS64_T ZCALLBACK ZTell(voidpf, voidpf stream) { return static_cast<ZipStream*>(stream)->pos; }

long ZCALLBACK ZSeek(voidpf, voidpf stream, ZPOS64_T offset, int origin) {
  auto* s = static_cast<ZipStream*>(stream);
  uint64_t base = 0;
  switch (origin) {
    case ZLIB_FILEFUNC_SEEK_SET: base = 0; break;
    case ZLIB_FILEFUNC_SEEK_CUR: base = s->pos; break;
    case ZLIB_FILEFUNC_SEEK_END: base = s->src->size(); break;
    default: return -1;
  }
  uint64_t target = 0;
  if (__builtin_add_overflow(base, offset, &target) || target > s->src->size()) return -1;
  s->pos = target;
  return 0;
}

int ZCALLBACK ZClose(voidpf, voidpf) { return 0; }
int ZCALLBACK ZError(voidpf, voidpf stream) { return static_cast<ZipStream*>(stream)->failed ? 1 : 0; }

struct UnzCloser {
  void operator()(void* z) const { unzClose(z); }
};

struct Entry {
  uint64_t offset = 0;  // absolute offset of the data
  uint64_t size = 0;
};

Status ZipError(const Source& src, const ZipStream& stream, const std::string& what) {
  if (stream.failed) return stream.status;
  return Error(reason::kZipMalformed, src.label(), what);
}

// The bytes of a small entry (data.pkl, version, byteorder).
Result<std::string> ReadEntry(const Source& src, const Entry& e, uint64_t max, const std::string& name) {
  if (e.size > max) {
    return Error(reason::kPickleLimit, src.label(),
                 util::Quoted(name) + " is " + std::to_string(e.size) + " bytes (limit " + std::to_string(max) + ")");
  }
  std::string out(static_cast<size_t>(e.size), '\0');
  HUBLOAD_RETURN_IF_ERROR(src.ReadAt(e.offset, out.data(), out.size()));
  return out;
}

// miniz (PyTorch) and Python's zipfile need the end of central directory
// record; minizip alone would accept a file cut inside it when the zip64
// locator survives. The record must end the file (after its comment).
Status CheckEndRecord(const Source& src) {
  constexpr uint64_t kEocd = 22;
  const uint64_t tail_len = std::min<uint64_t>(src.size(), kEocd + 0xFFFF);
  std::string tail(static_cast<size_t>(tail_len), '\0');
  HUBLOAD_RETURN_IF_ERROR(src.ReadAt(src.size() - tail_len, tail.data(), tail.size()));
  for (size_t i = tail.size() >= kEocd ? tail.size() - kEocd + 1 : 0; i-- > 0;) {
    if (tail.compare(i, 4, "PK\x05\x06") != 0) continue;
    const auto* p = reinterpret_cast<const uint8_t*>(tail.data() + i);
    const uint64_t comment = p[20] | (p[21] << 8);
    if (i + kEocd + comment == tail.size()) return Status::Ok();
  }
  return Error(reason::kZipMalformed, src.label(),
               "no end of central directory record at the end of the file (truncated?)");
}

}  // namespace

Result<Checkpoint> ReadZip(const Source& src, const Limits& limits) {
  HUBLOAD_RETURN_IF_ERROR(CheckEndRecord(src));
  ZipStream stream;
  stream.src = &src;
  zlib_filefunc64_def funcs{};
  funcs.zopen64_file = ZOpen;
  funcs.zread_file = ZRead;
  funcs.zwrite_file = ZWrite;
  funcs.ztell64_file = ZTell;
  funcs.zseek64_file = ZSeek;
  funcs.zclose_file = ZClose;
  funcs.zerror_file = ZError;
  funcs.opaque = nullptr;
  std::unique_ptr<void, UnzCloser> zip(unzOpen2_64(&stream, &funcs));
  if (!zip) {
    return ZipError(src, stream, "not a readable zip archive (no valid end of central directory; truncated?)");
  }
  unz_global_info64 global{};
  if (unzGetGlobalInfo64(zip.get(), &global) != UNZ_OK) return ZipError(src, stream, "unreadable zip directory");
  if (global.number_entry > limits.max_zip_entries) {
    return Error(reason::kPickleLimit, src.label(),
                 "zip archive has " + std::to_string(global.number_entry) + " entries (Limits::max_zip_entries " +
                     std::to_string(limits.max_zip_entries) + ")");
  }

  std::unordered_map<std::string, Entry> entries;
  std::string first_name;
  std::vector<char> name_buf(65536);
  int rc = unzGoToFirstFile(zip.get());
  for (uint64_t i = 0; rc == UNZ_OK; ++i) {
    if (i >= global.number_entry) return ZipError(src, stream, "more zip entries than the directory announces");
    unz_file_info64 info{};
    if (unzGetCurrentFileInfo64(zip.get(), &info, name_buf.data(), name_buf.size(), nullptr, 0, nullptr, 0) !=
        UNZ_OK) {
      return ZipError(src, stream, "unreadable zip directory entry " + std::to_string(i));
    }
    std::string name(name_buf.data(), std::min<size_t>(info.size_filename, name_buf.size()));
    if (info.flag & 1) {
      return Error(reason::kZipUnsupported, src.label(), "zip entry " + util::Quoted(name) + " is encrypted",
                   {}, Code::kUnsupported);
    }
    if (info.compression_method != 0 || info.compressed_size != info.uncompressed_size) {
      return Error(reason::kZipUnsupported, src.label(),
                   "zip entry " + util::Quoted(name) + " is compressed (method " +
                       std::to_string(info.compression_method) +
                       "); torch.save stores entries uncompressed, and hubload reads only stored entries",
                   {}, Code::kUnsupported);
    }
    int method = 0, level = 0;
    if (unzOpenCurrentFile2(zip.get(), &method, &level, /*raw=*/1) != UNZ_OK) {
      return ZipError(src, stream, "zip entry " + util::Quoted(name) + ": local header does not match the directory");
    }
    Entry e;
    e.offset = unzGetCurrentFileZStreamPos64(zip.get());
    e.size = info.uncompressed_size;
    unzCloseCurrentFile(zip.get());
    if (e.offset > src.size() || e.size > src.size() - e.offset) {
      return Error(reason::kZipMalformed, src.label(),
                   "zip entry " + util::Quoted(name) + " (" + std::to_string(e.size) + " bytes at " +
                       std::to_string(e.offset) + ") reaches past the end of the file (truncated?)");
    }
    if (i == 0) first_name = name;
    if (!entries.emplace(name, e).second) {
      return Error(reason::kZipMalformed, src.label(), "zip entry " + util::Quoted(name) + " appears twice");
    }
    rc = unzGoToNextFile(zip.get());
  }
  if (rc != UNZ_END_OF_LIST_OF_FILE) return ZipError(src, stream, "unreadable zip directory");

  Checkpoint out;
  out.format = Format::kZip;
  // PyTorchStreamReader: the archive name is the folder of the first entry.
  const size_t slash = first_name.find('/');
  if (slash == std::string::npos || slash == 0) {
    return Error(reason::kNotTorchCheckpoint, src.label(),
                 "a zip archive whose first entry " + util::Quoted(first_name) +
                     " is not in a folder: not a torch.save checkpoint");
  }
  out.archive = first_name.substr(0, slash);
  const std::string prefix = out.archive + "/";
  auto pkl = entries.find(prefix + "data.pkl");
  if (pkl == entries.end()) {
    return Error(reason::kNotTorchCheckpoint, src.label(),
                 "zip archive without " + util::Quoted(prefix + "data.pkl") + ": not a torch.save checkpoint");
  }
  if (auto bo = entries.find(prefix + "byteorder"); bo != entries.end()) {
    HUBLOAD_ASSIGN_OR_RETURN(std::string order, ReadEntry(src, bo->second, 64, prefix + "byteorder"));
    if (order != "little") {
      return Error(reason::kZipUnsupported, src.label(),
                   "byteorder record is " + util::Quoted(order) + "; only little-endian checkpoints are read", {},
                   Code::kUnsupported);
    }
  }
  if (auto v = entries.find(prefix + "version"); v != entries.end()) {
    HUBLOAD_ASSIGN_OR_RETURN(std::string text, ReadEntry(src, v->second, 64, prefix + "version"));
    int64_t version = 0;
    size_t digits = 0;
    for (char c : text) {
      if (c < '0' || c > '9') break;
      if (++digits > 9) break;
      version = version * 10 + (c - '0');
    }
    std::string rest = text.substr(digits);
    if (digits == 0 || digits > 9 || (rest != "" && rest != "\n")) {
      return Error(reason::kZipMalformed, src.label(), "version record " + util::Quoted(text) + " is not a number");
    }
    out.version = version;
  }

  // The pickle: in place when the source is memory, else one read.
  std::string pkl_copy;
  const uint8_t* pkl_data = nullptr;
  if (pkl->second.size > limits.max_pickle_bytes) {
    return Error(reason::kPickleLimit, src.label(),
                 "data.pkl is " + std::to_string(pkl->second.size) + " bytes (Limits::max_pickle_bytes " +
                     std::to_string(limits.max_pickle_bytes) + ")");
  }
  if (const uint8_t* mem = src.memory()) {
    pkl_data = mem + pkl->second.offset;
  } else {
    HUBLOAD_ASSIGN_OR_RETURN(pkl_copy, ReadEntry(src, pkl->second, limits.max_pickle_bytes, prefix + "data.pkl"));
    pkl_data = reinterpret_cast<const uint8_t*>(pkl_copy.data());
  }
  size_t used = 0;
  HUBLOAD_ASSIGN_OR_RETURN(StateDictPickle sd,
                           UnpickleStateDict(pkl_data, static_cast<size_t>(pkl->second.size), src.label(),
                                             prefix + "data.pkl", limits, false, &used));
  for (Storage& s : sd.storages) {
    const std::string name = prefix + "data/" + s.key;
    auto e = entries.find(name);
    if (e == entries.end()) {
      return Error(reason::kPickleStorageMissing, src.label(),
                   "storage key " + util::Quoted(s.key) + " has no zip entry " + util::Quoted(name));
    }
    if (e->second.size != s.nbytes) {
      return Error(reason::kPickleStorageSize, src.label(),
                   "zip entry " + util::Quoted(name) + " holds " + std::to_string(e->second.size) +
                       " bytes but storage " + util::Quoted(s.key) + " declares " + std::to_string(s.numel) + " x " +
                       std::to_string(ElementSize(s.dtype)) + " = " + std::to_string(s.nbytes));
    }
    s.offset = e->second.offset;
  }
  HUBLOAD_RETURN_IF_ERROR(FinishCheckpoint(std::move(sd), src, &out));
  return out;
}

}  // namespace hubload::pickle::internal
