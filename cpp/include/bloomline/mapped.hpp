// A file mapped into memory, and what a filter remembers about the file
// behind its memory (see file.hpp for why and how files are mapped).
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

namespace bloomline {

class MappedFile {
public:
    MappedFile(const std::string& path, bool writable);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    unsigned char* data() const { return base_; }
    std::size_t size() const { return size_; }
    bool writable() const { return writable_; }
    const std::string& path() const { return path_; }

    // Write back dirty pages (msync) and wait for them.
    void sync() const;

private:
    std::string path_;
    unsigned char* base_ = nullptr;
    std::size_t size_ = 0;
    int fd_ = -1;
    bool writable_ = false;
};

// What a filter remembers about the file behind its memory, if any.
struct Backing {
    std::shared_ptr<MappedFile> file;  // null: plain memory
    bool read_only = false;
    bool closed = false;

    void check_open() const {
        if (closed) throw std::invalid_argument("I/O operation on a closed filter");
    }
    void check_write() const {
        check_open();
        if (read_only)
            throw std::invalid_argument("the filter is read-only (loaded with mmap=True); use copy() or open(path, 'r+')");
    }
    // Bring the mapped header up to date (insert count, fill; with final, a current
    // payload checksum and the dirty flag cleared) and msync.
    void flush(std::uint64_t insert_count, std::uint64_t fill, bool final) const;
};

}  // namespace bloomline
