// StagingLoader: shard bytes → ring of pinned staging buffers → device
// memory, with copies spread over several streams and ordered by events.
//
// Piece k of the shard (tensors in file order, each cut into pieces of at
// most buffer_bytes) goes through ring buffer k % num_buffers and stream
// k % num_streams of its device. Before a buffer is refilled, the event
// recorded after its last copy (and conversion) must have completed: that is
// the only back-pressure, so reading piece k+1 overlaps the copies of up to
// num_buffers - 1 earlier pieces.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>

#include "hubload/device.h"
#include "hubload/reasons.h"
#include "loader/device/internal.h"

namespace hubload {

namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

uint64_t ElemBytes(Dtype d) { return static_cast<uint64_t>(safetensors::DtypeBits(d)) / 8; }

Status Named(Status st, const std::string& label, const std::string& tensor) {
  st = st.WithPrefix("loading tensor '" + tensor + "' of '" + label + "'");
  if (st.context().file.empty()) st.mutable_context().file = label;
  if (st.context().tensor.empty()) st.mutable_context().tensor = tensor;
  return st;
}

Status Invalid(const std::string& message, std::string_view reason) {
  return Status(Code::kInvalidArgument, "StagingLoader: " + message, reason);
}

}  // namespace

struct StagingLoader::Impl {
  std::shared_ptr<DeviceBackend> backend;
  StagingOptions options;
  std::vector<void*> ring;                     // pinned staging buffers
  std::vector<std::optional<uint64_t>> event;  // per buffer: event after its last use
  std::vector<std::string> event_tensor;       // per buffer: tensor of that use (errors)
  uint64_t piece = 0;                          // pieces issued so far (ring / stream index)
  std::map<int, std::vector<uint64_t>> streams;  // device → streams
  std::map<int, std::vector<void*>> scratch;     // device → one buffer per ring slot (conversions)
  StagingStats stats;

  ~Impl() {
    (void)DrainAll();
    for (auto& [dev, ss] : streams)
      for (uint64_t s : ss) backend->destroy_stream(s);
    for (auto& [dev, bufs] : scratch)
      for (void* p : bufs) backend->free_device(dev, p);
    for (void* p : ring) backend->free_pinned(p);
  }

  // Waits for every buffer's last event; returns the first failure.
  Status DrainAll() {
    Status first;
    for (size_t b = 0; b < event.size(); ++b) {
      if (!event[b]) continue;
      Status st = backend->wait_event(*event[b]);
      backend->destroy_event(*event[b]);
      event[b].reset();
      if (!st.ok() && first.ok()) first = st.WithPrefix("copy of tensor '" + event_tensor[b] + "'");
    }
    return first;
  }

  // Makes ring buffer b free for reading (back-pressure).
  Status Acquire(size_t b) {
    if (!event[b]) return Status::Ok();
    HUBLOAD_ASSIGN_OR_RETURN(bool done, backend->event_done(*event[b]));
    Status st;
    if (!done) {
      ++stats.buffer_waits;
      auto t0 = Clock::now();
      st = backend->wait_event(*event[b]);
      stats.wait_s += Since(t0);
    }
    backend->destroy_event(*event[b]);
    event[b].reset();
    return st;
  }

  Result<const std::vector<uint64_t>*> StreamsFor(int device) {
    auto it = streams.find(device);
    if (it != streams.end()) return &it->second;
    std::vector<uint64_t> ss;
    for (int i = 0; i < options.num_streams; ++i) {
      auto s = backend->create_stream(device);
      if (!s.ok()) {
        for (uint64_t x : ss) backend->destroy_stream(x);
        return s.status();
      }
      ss.push_back(*s);
    }
    return &(streams[device] = std::move(ss));
  }

  Result<const std::vector<void*>*> ScratchFor(int device) {
    auto it = scratch.find(device);
    if (it != scratch.end()) return &it->second;
    std::vector<void*> bufs;
    for (size_t b = 0; b < ring.size(); ++b) {
      auto p = backend->alloc_device(device, options.buffer_bytes);
      if (!p.ok()) {
        for (void* x : bufs) backend->free_device(device, x);
        return p.status().WithPrefix("allocating the conversion scratch buffers");
      }
      bufs.push_back(*p);
    }
    return &(scratch[device] = std::move(bufs));
  }

  Status Read(const ShardReader& reader, uint64_t offset, void* dst, uint64_t n) {
    auto t0 = Clock::now();
    Status st = reader(offset, dst, n);
    stats.read_s += Since(t0);
    if (st.ok()) stats.bytes_read += n;
    return st;
  }

  // One tensor to host memory (Device::kCpu): the reader writes straight into
  // it, or through a temporary buffer when converting.
  Status LoadToHost(const safetensors::TensorInfo& t, uint64_t base, const DeviceTensor& dt, bool convert,
                    const ShardReader& reader) {
    const uint64_t nbytes = t.nbytes();
    if (!convert) return Read(reader, base, dt.data, nbytes);
    const uint64_t src_size = ElemBytes(t.dtype), dst_size = ElemBytes(dt.dtype);
    const uint64_t piece_bytes = options.buffer_bytes / src_size * src_size;
    std::vector<uint8_t> tmp(std::min(piece_bytes, nbytes));
    for (uint64_t off = 0; off < nbytes; off += piece_bytes) {
      const uint64_t n = std::min(piece_bytes, nbytes - off);
      HUBLOAD_RETURN_IF_ERROR(Read(reader, base + off, tmp.data(), n));
      device_internal::ConvertOnHost(static_cast<uint8_t*>(dt.data) + off / src_size * dst_size, dt.dtype,
                                     tmp.data(), t.dtype, n / src_size);
    }
    return Status::Ok();
  }

  // One tensor to a device through the ring.
  Status LoadToDevice(const safetensors::TensorInfo& t, uint64_t base, const DeviceTensor& dt, bool convert,
                      const ShardReader& reader) {
    const int device = dt.device.index;
    HUBLOAD_ASSIGN_OR_RETURN(const std::vector<uint64_t>* ss, StreamsFor(device));
    const std::vector<void*>* scr = nullptr;
    if (convert) {
      HUBLOAD_ASSIGN_OR_RETURN(scr, ScratchFor(device));
    }
    const uint64_t nbytes = t.nbytes();
    const uint64_t src_size = ElemBytes(t.dtype), dst_size = ElemBytes(dt.dtype);
    // A converted piece holds whole elements (element-aligned conversion).
    const uint64_t piece_bytes = convert ? options.buffer_bytes / src_size * src_size : options.buffer_bytes;
    auto* dst = static_cast<uint8_t*>(dt.data);
    for (uint64_t off = 0; off < nbytes; off += piece_bytes) {
      const uint64_t n = std::min(piece_bytes, nbytes - off);
      const size_t b = static_cast<size_t>(piece % ring.size());
      const uint64_t stream = (*ss)[static_cast<size_t>(piece % ss->size())];
      ++piece;
      HUBLOAD_RETURN_IF_ERROR(Acquire(b));
      HUBLOAD_RETURN_IF_ERROR(Read(reader, base + off, ring[b], n));
      if (convert) {
        void* tmp = (*scr)[b];
        HUBLOAD_RETURN_IF_ERROR(backend->copy_to_device_async(tmp, ring[b], n, stream));
        HUBLOAD_RETURN_IF_ERROR(
            backend->convert_async(dst + off / src_size * dst_size, dt.dtype, tmp, t.dtype, n / src_size, stream));
      } else {
        HUBLOAD_RETURN_IF_ERROR(backend->copy_to_device_async(dst + off, ring[b], n, stream));
      }
      stats.bytes_copied += n;
      HUBLOAD_ASSIGN_OR_RETURN(uint64_t ev, backend->record_event(stream));
      event[b] = ev;
      event_tensor[b] = t.name;
    }
    return Status::Ok();
  }
};

Result<std::unique_ptr<StagingLoader>> StagingLoader::Create(std::shared_ptr<DeviceBackend> backend,
                                                             StagingOptions options) {
  if (!backend) return Invalid("no backend", reason::kInvalidOptions);
  if (options.buffer_bytes < 8)
    return Invalid("buffer_bytes must be at least 8 (one element of any dtype), got " +
                       std::to_string(options.buffer_bytes),
                   reason::kInvalidOptions);
  if (options.num_buffers < 2)
    return Invalid("num_buffers must be >= 2, got " + std::to_string(options.num_buffers), reason::kInvalidOptions);
  if (options.num_streams < 2)
    return Invalid("num_streams must be >= 2, got " + std::to_string(options.num_streams), reason::kInvalidOptions);
  std::unique_ptr<StagingLoader> loader(new StagingLoader());
  loader->impl_ = std::make_unique<Impl>();
  Impl& impl = *loader->impl_;
  impl.backend = std::move(backend);
  impl.options = options;
  for (int i = 0; i < options.num_buffers; ++i) {
    auto p = impl.backend->alloc_pinned(options.buffer_bytes);
    if (!p.ok()) return p.status().WithPrefix("StagingLoader: allocating the pinned staging ring");
    impl.ring.push_back(*p);  // freed by ~Impl on any later failure
  }
  impl.event.resize(impl.ring.size());
  impl.event_tensor.resize(impl.ring.size());
  return loader;
}

StagingLoader::~StagingLoader() = default;

const StagingStats& StagingLoader::stats() const { return impl_->stats; }

Status StagingLoader::LoadShard(const std::string& label, const safetensors::Header& header,
                                const ShardReader& reader, const std::function<Device(const std::string&)>& place,
                                DeviceStateDict* out) {
  Impl& impl = *impl_;
  if (!out) return Invalid("no output state dict", reason::kInvalidArgument);
  if (out->backend() != impl.backend.get())
    return Invalid("the output DeviceStateDict must be created with the loader's backend", reason::kInvalidArgument);
  const size_t first_new = out->tensors().size();

  // On failure: let the queued copies finish, then free what this call added.
  auto fail = [&](Status st) -> Status {
    (void)impl.DrainAll();
    DeviceStateDict tmp(impl.backend);
    auto& ts = out->tensors();
    tmp.tensors().assign(std::make_move_iterator(ts.begin() + static_cast<std::ptrdiff_t>(first_new)),
                         std::make_move_iterator(ts.end()));
    ts.resize(first_new);
    return st;  // tmp frees the partial tensors
  };

  for (const safetensors::TensorInfo& t : header.tensors) {
    const uint64_t bits = t.num_elements() * static_cast<uint64_t>(safetensors::DtypeBits(t.dtype));
    if (t.end < t.begin || header.data_start + t.end > header.file_size || t.nbytes() * 8 != bits)
      return fail(Named(Status(Code::kInvalidFormat, "data_offsets do not match the header's file size and shape",
                               reason::kTensorInvalidInfo),
                        label, t.name));
    const Device d = place(t.name);
    if (d.kind == Device::Kind::kDisk)
      return fail(Named(Status(Code::kInvalidArgument,
                               "device 'disk' is not a staging target (offloaded tensors are not loaded)",
                               reason::kUnsupportedDevice),
                        label, t.name));
    if (d.kind == Device::Kind::kCuda && (d.index < 0 || d.index >= impl.backend->device_count()))
      return fail(Named(Status(Code::kInvalidArgument,
                               "device '" + device_internal::DeviceName(d) + "' does not exist (the " +
                                   impl.backend->name() + " backend has " +
                                   std::to_string(impl.backend->device_count()) + " device(s))",
                               reason::kInvalidDevice),
                        label, t.name));
    const std::optional<Dtype> target = TargetDtypeToDtype(impl.options.target_dtype);
    const bool convert = target && device_internal::ConvertibleElem(t.dtype) && *target != t.dtype;
    DeviceTensor dt;
    dt.name = t.name;
    dt.source_dtype = t.dtype;
    dt.dtype = convert ? *target : t.dtype;
    dt.shape = t.shape;
    dt.device = d.kind == Device::Kind::kCpu ? Device{} : d;
    dt.bytes = convert ? t.num_elements() * ElemBytes(dt.dtype) : t.nbytes();
    if (dt.bytes > 0) {
      if (d.kind == Device::Kind::kCpu) {
        dt.data = std::aligned_alloc(64, (dt.bytes + 63) / 64 * 64);
        if (!dt.data)
          return fail(Named(Status(Code::kInternal,
                                   "cannot allocate " + std::to_string(dt.bytes) + " bytes of host memory",
                                   reason::kHostOutOfMemory),
                            label, t.name));
      } else {
        auto p = impl.backend->alloc_device(d.index, dt.bytes);
        if (!p.ok()) return fail(Named(p.status(), label, t.name));
        dt.data = *p;
      }
    }
    out->tensors().push_back(dt);
    if (t.nbytes() == 0) continue;
    const uint64_t base = header.data_start + t.begin;
    Status st = d.kind == Device::Kind::kCpu ? impl.LoadToHost(t, base, dt, convert, reader)
                                             : impl.LoadToDevice(t, base, dt, convert, reader);
    if (!st.ok()) return fail(Named(st, label, t.name));
  }
  Status st = impl.DrainAll();
  if (!st.ok()) return fail(st.WithPrefix("loading '" + label + "'"));
  return Status::Ok();
}

}  // namespace hubload
