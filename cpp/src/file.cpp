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

void save_atomic(const Header& h, const unsigned char* payload, const std::string& path) {
    std::random_device rd;
    const std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) os_error("cannot create", tmp);
    try {
        unsigned char header[kHeaderSize];
        Header clean = h;
        clean.flags = 0;
        encode_header(clean, header);
        write_all(fd, header, kHeaderSize, tmp);
        write_all(fd, payload, h.payload_len, tmp);
        unsigned char trailer[kTrailerSize];
        write_u64(trailer, 0, checksum64(payload, h.payload_len));
        write_all(fd, trailer, kTrailerSize, tmp);
        if (::fsync(fd) != 0) os_error("cannot fsync", tmp);
    } catch (...) {
        ::close(fd);
        ::unlink(tmp.c_str());
        throw;
    }
    if (::close(fd) != 0) {
        ::unlink(tmp.c_str());
        os_error("cannot close", tmp);
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        const int e = errno;
        ::unlink(tmp.c_str());
        errno = e;
        os_error("cannot rename over", path);
    }
    const int dfd = ::open(dir_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        ::fsync(dfd);  // best effort: some file systems refuse directory fsync
        ::close(dfd);
    }
}

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

void Backing::flush(std::uint64_t insert_count, std::uint64_t fill, bool final) const {
    if (!file || !file->writable()) return;
    unsigned char* base = file->data();
    Header h = decode_header(base, file->size());
    h.insert_count = insert_count;
    h.fill = fill;
    h.flags = final ? 0 : kFlagDirty;
    if (final) {
        write_u64(base, trailer_offset(h), checksum64(base + kHeaderSize, h.payload_len));
    }
    unsigned char header[kHeaderSize];
    encode_header(h, header);
    std::memcpy(base, header, kHeaderSize);
    file->sync();
}

MappedFilter map_filter(const std::string& path, bool writable, bool verify) {
    MappedFilter m;
    m.file = std::make_shared<MappedFile>(path, writable);
    unsigned char* base = m.file->data();
    m.header = decode_header(base, m.file->size());
    if (m.header.kind == Kind::scalable)
        throw std::invalid_argument("a ScalableBloomFilter cannot be memory-mapped; use load(path)");
    if (verify) checked_payload(base, m.file->size(), m.header);
    if (writable && !(m.header.flags & kFlagDirty)) {
        m.header.flags |= kFlagDirty;
        unsigned char header[kHeaderSize];
        encode_header(m.header, header);
        std::memcpy(base, header, kHeaderSize);
        m.file->sync();
    }
    m.payload.data = base + kHeaderSize;
    m.payload.size = m.header.payload_len;
    m.payload.owner = m.file;
    return m;
}

}  // namespace bloomline
