// FileStore: an append-only log of records in one file, shared by every rank that opens it.
//
// Record: [u8 kind][u32 key bytes][u32 value bytes][key][value], little-endian.
//   kind 'S' sets key = value, 'D' deletes key, 'R' adds the signed 32-bit value to the
//   count of open FileStores (the last one to close removes the file).
// Writers append under an exclusive open-file-description lock (F_OFD_SETLKW), readers read
// under a shared one, so no reader ever sees half a record. OFD locks belong to the open
// file, not the process, so FileStores in different threads of one process exclude each
// other too. Each FileStore replays the records it has not seen into a map.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "comm/store.hpp"
#include "libcomm/base/guarded_file.hpp"
#include "rendezvous/store_format.hpp"

namespace comm {
namespace {

constexpr std::size_t kHeaderBytes = 9;

[[noreturn]] void throw_io(const std::string& what, const std::string& path) {
  throw IoError(what + " '" + path + "': " + std::strerror(errno) +
                    "; check that the directory exists and is writable by every rank",
                ErrorContext{.op = "FileStore"});
}

void put_u32(std::uint8_t* out, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<std::uint8_t>(value >> (8 * i));
}

std::uint32_t get_u32(const std::uint8_t* in) {
  std::uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= std::uint32_t{in[i]} << (8 * i);
  return value;
}

}  // namespace

class FileStore::Log {
 public:
  explicit Log(std::string path) : path_(std::move(path)) {
    // Only this user may read or write the job's store (it may hold the job's token), and a
    // path in a shared directory must not be redirectable by a symlink another user planted.
    auto opened = open_guarded(path_, 0600, "the store file");
    if (!opened.file.valid()) {
      throw IoError(opened.problem + "; check that the directory exists and is writable by every rank",
                    ErrorContext{.op = "FileStore"});
    }
    file_ = std::move(opened.file);
    fd_ = file_.get();
  }
  Log(const Log&) = delete;
  Log& operator=(const Log&) = delete;

  const std::string& path() const { return path_; }

  // Runs body with the map brought up to date, under a shared or exclusive file lock.
  template <class Body>
  auto locked(bool exclusive, Body&& body) {
    std::lock_guard guard(mutex_);
    FileLock lock(*this, exclusive ? F_WRLCK : F_RDLCK);
    refresh();
    return body();
  }

  const Bytes* find(const std::string& key) const { return store_format::find_value(values_, key); }
  std::vector<std::string> missing(const std::vector<std::string>& keys) const {
    return store_format::missing_keys(values_, keys);
  }
  std::size_t size() const { return values_.size(); }
  std::int64_t open_count() const { return open_count_; }

  // Appends one record; the caller holds the exclusive lock (inside locked(true, ...)).
  void append(char kind, const std::string& key, std::span<const std::uint8_t> value) {
    Bytes record(kHeaderBytes + key.size() + value.size());
    record[0] = static_cast<std::uint8_t>(kind);
    put_u32(&record[1], static_cast<std::uint32_t>(key.size()));
    put_u32(&record[5], static_cast<std::uint32_t>(value.size()));
    std::memcpy(record.data() + kHeaderBytes, key.data(), key.size());
    if (!value.empty()) std::memcpy(record.data() + kHeaderBytes + key.size(), value.data(), value.size());
    std::size_t written = 0;
    while (written < record.size()) {
      ssize_t n =
          ::pwrite(fd_, record.data() + written, record.size() - written, static_cast<off_t>(read_offset_ + written));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw_io("cannot append to store file", path_);
      written += static_cast<std::size_t>(n);
    }
    refresh();  // applies the record just written and moves past it
  }

 private:
  class FileLock {
   public:
    FileLock(Log& log, short type) : log_(log) { apply(type); }
    ~FileLock() {
      struct flock lock {};
      lock.l_type = F_UNLCK;
      lock.l_whence = SEEK_SET;
      ::fcntl(log_.fd_, F_OFD_SETLK, &lock);
    }
    FileLock(const FileLock&) = delete;
    FileLock& operator=(const FileLock&) = delete;

   private:
    void apply(short type) {
      struct flock lock {};
      lock.l_type = type;
      lock.l_whence = SEEK_SET;
      while (::fcntl(log_.fd_, F_OFD_SETLKW, &lock) != 0) {
        if (errno != EINTR) throw_io("cannot lock store file", log_.path_);
      }
    }
    Log& log_;
  };

  // Reads and applies every record appended since the last look.
  void refresh() {
    struct stat info {};
    if (::fstat(fd_, &info) != 0) throw_io("cannot stat store file", path_);
    auto end = static_cast<std::uint64_t>(info.st_size);
    if (end <= read_offset_) return;
    Bytes data(end - read_offset_);
    std::size_t done = 0;
    while (done < data.size()) {
      ssize_t n = ::pread(fd_, data.data() + done, data.size() - done, static_cast<off_t>(read_offset_ + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw_io("cannot read store file", path_);
      done += static_cast<std::size_t>(n);
    }
    std::size_t at = 0;
    while (data.size() - at >= kHeaderBytes) {
      char kind = static_cast<char>(data[at]);
      std::size_t key_bytes = get_u32(&data[at + 1]);
      std::size_t value_bytes = get_u32(&data[at + 5]);
      if (data.size() - at - kHeaderBytes < key_bytes + value_bytes) break;
      const std::uint8_t* key = &data[at + kHeaderBytes];
      const std::uint8_t* value = key + key_bytes;
      std::string name(reinterpret_cast<const char*>(key), key_bytes);
      if (kind == 'S') {
        values_[name] = Bytes(value, value + value_bytes);
      } else if (kind == 'D') {
        values_.erase(name);
      } else if (kind == 'R' && value_bytes == 4) {
        open_count_ += static_cast<std::int32_t>(get_u32(value));
      } else {
        throw IoError("store file '" + path_ + "' holds a record of unknown kind at offset " +
                          std::to_string(read_offset_ + at) +
                          "; it is not a libcomm FileStore file: delete it or pick another path",
                      ErrorContext{.op = "FileStore"});
      }
      at += kHeaderBytes + key_bytes + value_bytes;
    }
    read_offset_ += at;
  }

  std::string path_;
  OwnedDescriptor file_;
  int fd_ = -1;       // file_'s
  std::mutex mutex_;  // one thread at a time uses this FileStore's descriptor and map
  std::uint64_t read_offset_ = 0;
  std::map<std::string, Bytes> values_;
  std::int64_t open_count_ = 0;
};

namespace {

Bytes open_count_delta(std::int32_t delta) {
  Bytes bytes(4);
  put_u32(bytes.data(), static_cast<std::uint32_t>(delta));
  return bytes;
}

}  // namespace

FileStore::FileStore(std::string path, std::chrono::milliseconds timeout)
    : Store(timeout), log_(std::make_unique<Log>(std::move(path))) {
  log_->locked(true, [&] { log_->append('R', "", open_count_delta(1)); });
}

FileStore::~FileStore() {
  try {
    log_->locked(true, [&] {
      log_->append('R', "", open_count_delta(-1));
      if (log_->open_count() <= 0) ::unlink(log_->path().c_str());
    });
  } catch (const Error&) {
    // A destructor cannot report; the file then stays behind, which the next user will see.
  }
}

std::string FileStore::describe() const { return "FileStore at '" + log_->path() + "'"; }

void FileStore::do_set(const std::string& key, std::span<const std::uint8_t> value) {
  log_->locked(true, [&] { log_->append('S', key, value); });
}

Bytes FileStore::do_get(const std::string& key, std::chrono::milliseconds timeout) {
  wait_for({key}, timeout, "store.get");
  return log_->locked(false, [&] {
    const Bytes* value = log_->find(key);
    if (value == nullptr) throw_timeout("store.get", {key}, timeout);  // deleted meanwhile
    return *value;
  });
}

std::int64_t FileStore::do_add(const std::string& key, std::int64_t delta) {
  return log_->locked(true, [&] {
    std::int64_t value = store_format::added_counter(key, log_->find(key), delta);
    log_->append('S', key, store_format::encode_counter(value));
    return value;
  });
}

Bytes FileStore::do_compare_set(const std::string& key, std::span<const std::uint8_t> expected,
                                std::span<const std::uint8_t> desired) {
  return log_->locked(true, [&] {
    return store_format::compare_and_set(log_->find(key), expected, desired,
                                         [&](const Bytes& value) { log_->append('S', key, value); });
  });
}

void FileStore::do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  wait_for(keys, timeout, "store.wait");
}

void FileStore::wait_for(const std::vector<std::string>& keys, std::chrono::milliseconds timeout, const char* op) {
  // No change notification crosses a file system, so look again with a growing pause.
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::microseconds(100);
  while (true) {
    auto missing = log_->locked(false, [&] { return log_->missing(keys); });
    if (missing.empty()) return;
    if (std::chrono::steady_clock::now() >= deadline) throw_timeout(op, missing, timeout);
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(10));
  }
}

bool FileStore::do_check(const std::vector<std::string>& keys) {
  return log_->locked(false, [&] { return log_->missing(keys).empty(); });
}

bool FileStore::do_delete_key(const std::string& key) {
  return log_->locked(true, [&] {
    if (log_->find(key) == nullptr) return false;
    log_->append('D', key, {});
    return true;
  });
}

std::int64_t FileStore::do_num_keys() {
  return log_->locked(false, [&] { return static_cast<std::int64_t>(log_->size()); });
}

}  // namespace comm
