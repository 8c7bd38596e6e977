#include "bloomline/file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <stdexcept>
#include <system_error>

namespace bloomline {

namespace {

[[noreturn]] void os_error(const std::string& what, const std::string& path) {
    throw std::system_error(errno, std::generic_category(), what + " '" + path + "'");
}

void write_all(int fd, const unsigned char* p, std::size_t n, const std::string& path) {
    while (n > 0) {
        const ssize_t w = ::write(fd, p, n > (std::size_t{1} << 30) ? (std::size_t{1} << 30) : n);
        if (w < 0) {
            if (errno == EINTR) continue;
            os_error("cannot write", path);
        }
        p += w;
        n -= static_cast<std::size_t>(w);
    }
}

std::string dir_of(const std::string& path) {
    const auto slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}

}  // namespace

AtomicFile::AtomicFile(const std::string& path) : path_(path) {
    std::random_device rd;
    tmp_ = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0) os_error("cannot create", tmp_);
}

AtomicFile::~AtomicFile() { abort(); }

void AtomicFile::abort() {
    if (fd_ < 0) return;
    ::close(fd_);
    fd_ = -1;
    ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void* data, std::size_t n) {
    if (fd_ < 0) throw std::invalid_argument("write to an AtomicFile that is committed or aborted");
    write_all(fd_, static_cast<const unsigned char*>(data), n, tmp_);
}

void AtomicFile::commit() {
    if (fd_ < 0) throw std::invalid_argument("commit of an AtomicFile that is committed or aborted");
    if (::fsync(fd_) != 0) os_error("cannot fsync", tmp_);
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) {
        const int e = errno;
        ::unlink(tmp_.c_str());
        errno = e;
        os_error("cannot close", tmp_);
    }
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
        const int e = errno;
        ::unlink(tmp_.c_str());
        errno = e;
        os_error("cannot rename over", path_);
    }
    const std::string dir = dir_of(path_);
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) os_error("cannot open the directory", dir);
    const int r = ::fsync(dfd);
    const int e = errno;
    ::close(dfd);
    if (r != 0 && e != EINVAL && e != ENOTSUP) {
        errno = e;
        os_error("cannot fsync the directory", dir);
    }
}

template <class T>
void save_filter(const T& f, const std::string& path) {
    Header h = header_of(f);
    h.flags = 0;
    unsigned char head[kHeaderSize], trailer[kTrailerSize];
    encode_header(h, head);
    const unsigned char* payload = payload_of(f);
    write_u64(trailer, 0, checksum64(payload, h.payload_len));
    AtomicFile out(path);
    out.write(head, kHeaderSize);
    out.write(payload, h.payload_len);
    out.write(trailer, kTrailerSize);
    out.commit();
}

template void save_filter<BloomFilter>(const BloomFilter&, const std::string&);
template void save_filter<CountingBloomFilter>(const CountingBloomFilter&, const std::string&);

Memory read_file(const std::string& path, std::size_t* size_out) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) os_error("cannot open", path);
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        ::close(fd);
        os_error("cannot stat", path);
    }
    const auto size = static_cast<std::size_t>(st.st_size);
    Memory mem = Memory::zeroed(size == 0 ? 1 : size);  // the file's real size, not a header's claim
    std::size_t got = 0;
    while (got < size) {
        const ssize_t r = ::read(fd, mem.data + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            ::close(fd);
            os_error("cannot read", path);
        }
        got += static_cast<std::size_t>(r);
    }
    ::close(fd);
    *size_out = size;
    return mem;
}

MappedFile::MappedFile(const std::string& path, bool writable) : path_(path), writable_(writable) {
    fd_ = ::open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
    if (fd_ < 0) os_error("cannot open", path);
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
        ::close(fd_);
        os_error("cannot stat", path);
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ < kHeaderSize + kTrailerSize) {
        ::close(fd_);
        throw std::invalid_argument("invalid bloomline data: '" + path + "' is " + std::to_string(size_) +
                                    " bytes, shorter than the 136-byte minimum (truncated?)");
    }
    void* p = ::mmap(nullptr, size_, writable ? (PROT_READ | PROT_WRITE) : PROT_READ, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) {
        ::close(fd_);
        os_error("cannot map", path);
    }
    base_ = static_cast<unsigned char*>(p);
#if defined(MADV_RANDOM)
    ::madvise(base_, size_, MADV_RANDOM);  // probes are random: no read-ahead
#endif
}

MappedFile::~MappedFile() {
    if (base_ != nullptr) ::munmap(base_, size_);
    if (fd_ >= 0) ::close(fd_);
}

void MappedFile::sync() const {
    if (writable_ && ::msync(base_, size_, MS_SYNC) != 0) os_error("cannot msync", path_);
}

void update_mapped_header(const MappedFile& file, std::uint64_t insert_count, std::uint64_t fill, bool final) {
    if (!file.writable()) return;
    unsigned char* base = file.data();
    Header h = decode_header(base, file.size());
    h.insert_count = insert_count;
    h.fill = fill;
    h.flags = final ? 0 : kFlagDirty;
    if (final) write_u64(base, trailer_offset(h), checksum64(base + kHeaderSize, h.payload_len));
    unsigned char header[kHeaderSize];
    encode_header(h, header);
    std::memcpy(base, header, kHeaderSize);
    file.sync();
}

template <class T>
MappedFilter<T> map_filter(const std::string& path, bool writable, bool verify) {
    auto file = std::make_shared<MappedFile>(path, writable);
    unsigned char* base = file->data();
    Header h = decode_header(base, file->size());
    if (h.kind == Kind::scalable)
        throw std::invalid_argument("a ScalableBloomFilter cannot be memory-mapped; use load(path)");
    if (h.kind != KindOf<T>::value)
        throw std::invalid_argument(std::string("invalid bloomline data: this holds a ") + kind_name(h.kind) +
                                    ", not a " + kind_name(KindOf<T>::value));
    if (verify) checked_payload(base, file->size(), h);
    const bool fill_known = !(h.flags & kFlagDirty);
    if (writable && !(h.flags & kFlagDirty)) {
        h.flags |= kFlagDirty;
        unsigned char header[kHeaderSize];
        encode_header(h, header);
        std::memcpy(base, header, kHeaderSize);
        file->sync();
    }
    Memory payload;
    payload.data = base + kHeaderSize;
    payload.size = h.payload_len;
    payload.owner = file;
    MappedFilter<T> m{filter_over<T>(h, std::move(payload), fill_known), file};
    if (!writable) m.filter->set_read_only("mapped read-only from '" + path + "'; use copy(), or open(path, 'r+') to write");
    return m;
}

template MappedFilter<BloomFilter> map_filter<BloomFilter>(const std::string&, bool, bool);
template MappedFilter<CountingBloomFilter> map_filter<CountingBloomFilter>(const std::string&, bool, bool);

}  // namespace bloomline
