// Filters in files: the one atomic writer, whole reads, and memory maps.
//
// AtomicFile writes a temporary file beside the target (same directory, so
// the rename cannot cross file systems), fsyncs it, renames it over the
// target and fsyncs the directory: after a crash at any point the target
// path holds either the old file or the new one, complete
// (tests/test_files.py kills savers at random moments). Every save in
// bloomline goes through it: filters, scalable chains, and the Scrapy
// request journal (through the bindings).
//
// Maps: a mapped filter's memory is the file's payload. Read-only maps give
// constant-time opens (pages fault in on use). Writable maps (MAP_SHARED)
// make adds go straight to the page cache, so a process killed with SIGKILL
// loses nothing it added: the kernel writes the pages back. Several handles
// and processes may map one file for writing at once (file.cpp says how the
// header stays true). While a file is open for writing its header carries
// the "dirty" flag and the count of writers (the payload checksum is not
// current); the last writer's close recomputes the checksum and clears
// both. The filter knows nothing of this: MappedFilter pairs it with its
// file.
//
// A mapped file that another process truncates kills the mapping process
// with SIGBUS when it next touches a page past the new end: mmap offers no
// way to turn that into an error (docs/design/sharing.md).
//
// Readers of a file that writers share take the header lock shared while
// they read (read_file; map_filter's header and verify), so a whole read or
// a verified map sees the file either clean with no writer in it, or
// marked dirty: never a clean header over a payload that a writer who
// opened meanwhile is changing (docs/design/sharing.md).
//
// POSIX only (open, mmap, fsync, rename). I/O errors throw FileError, a
// std::system_error carrying errno and the path the caller gave (the
// bindings raise OSError with that filename).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <system_error>

#include "bloomline/filter_io.hpp"
#include "bloomline/format.hpp"
#include "bloomline/memory.hpp"

namespace bloomline {

// An I/O error on a path: errno, what failed, and the path as the caller
// gave it (never the name of a temporary file). what() reads
// "<doing> '<path>': <system message>"; message() is
// "<system message> (<doing>)", for OSError beside the path.
class FileError : public std::system_error {
public:
    FileError(int err, const std::string& doing, const std::string& path);
    const std::string& path() const { return path_; }
    // The system message and what failed, without the path.
    const std::string& message() const { return message_; }

private:
    std::string path_, message_;
};

// The one way bloomline replaces a file: every save (filters, scalable
// chains, the CLI, the Scrapy journal) goes through it.
//  - A target that some handle maps for writing is refused
//    (std::invalid_argument): the rename would send its later adds to the
//    unlinked old file. Checked when the writer is made and again just
//    before the rename.
//  - A target that is read-only (no write permission for the caller; for
//    root, no write bit at all, as chmod 444) is refused with EACCES,
//    untouched.
//  - Only regular files are replaced: a FIFO, a device node, a socket or a
//    directory is refused (std::invalid_argument naming what it is), never
//    opened (a FIFO would block) nor replaced.
//  - A symlink is followed, not replaced: the file it leads to is the
//    target (checked as above, and replaced by the rename), the link stays.
//  - The new file keeps the mode of the file it replaces; a new path gets
//    0644 (less the umask).
//  - The new file is written unnamed (Linux's O_TMPFILE) where the file
//    system allows, so a process killed while it writes leaves nothing
//    behind; it is named target.tmp-PID-N only for the rename. Elsewhere it
//    is written under that name (and a kill leaves it). The name is cut to
//    fit the name limit (255 bytes) when the target's own name is long.
class AtomicFile {
public:
    // Checks the target as above, then creates the temporary file beside it.
    explicit AtomicFile(const std::string& path);
    // Not committed: the temporary file is removed, the target untouched.
    ~AtomicFile();
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    void write(const void* data, std::size_t n);
    // Overwrite bytes already written (a header known only at the end).
    void write_at(std::size_t offset, const void* data, std::size_t n);
    // fsync, close, rename over the target, fsync the directory. A directory
    // fsync that the file system does not support (EINVAL, ENOTSUP) is
    // skipped; any other failure throws, since the rename may not be durable.
    void commit();
    void abort();

private:
    void remove_temporary();
    [[noreturn]] void give_up(const char* doing);

    std::string path_;    // as the caller gave it (errors name it)
    std::string target_;  // the file replaced: path_ with its symlinks followed
    std::string tmp_;
    std::string tmp_name_, target_name_;  // their last components, in dir_fd_
    int dir_fd_ = -1;                     // the directory of both, opened once
    int fd_ = -1;
    bool unnamed_ = false;  // written through O_TMPFILE: tmp_ exists only once commit() links it
    bool named_ = false;    // tmp_name_ is a name this writer made, and has not renamed yet
};

// Write a filter to path through an AtomicFile.
template <class T>
void save_filter(const T& f, const std::string& path);

// Read a whole file into the memory alloc(size) gives, size being the
// file's real size (never a size read from its contents), holding the
// header lock shared meanwhile (above). Returns the size.
std::size_t read_whole_file(const std::string& path, const std::function<unsigned char*(std::size_t)>& alloc);
// The same into zeroed, aligned memory.
Memory read_file(const std::string& path, std::size_t* size_out);

// The advisory locks of writable maps (file.cpp).
constexpr long kHeaderLockByte = 0, kWriterLockByte = 1;

// Which locks this build takes on files mapped for writing: "ofd"
// (open-file-description locks: any number of writers per file, Linux) or
// "flock" (one writer per file at a time, a second one refused with
// std::invalid_argument: macOS, the BSDs, and builds with BLOOMLINE_FLOCK).
const char* file_lock_kind();

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
    int fd() const { return fd_; }
    // Is path this file (the same device and inode)?
    bool is(const std::string& path) const;

    // Write back dirty pages (msync) and wait for them.
    void sync() const;

    // Writable maps: this handle's insert count when it last wrote the
    // header, and whether it has left the writers (its final flush).
    std::uint64_t insert_base = 0;
    bool released() const { return released_; }
    void release() { released_ = true; }
    // Is this process a fork of the one that opened the file? Then it owns
    // neither the locks nor the writer's place in the header (memory.hpp).
    bool inherited() const { return generation_ != fork_generation(); }

private:
    // A writable map is known to the fork hook, which has a child map it
    // again through an open file of its own (file.cpp): the parent's locks
    // are not the child's to keep.
    void open_tracked(const std::string& path);
    void close_fd() noexcept;
    void let_go_of_parents_locks() noexcept;

    std::string path_;
    std::uint64_t dev_ = 0, ino_ = 0;
    bool released_ = false;
    std::uint32_t generation_ = fork_generation();
    unsigned char* base_ = nullptr;
    std::size_t size_ = 0;
    int fd_ = -1;
    bool writable_ = false;
};

// The locks of a file mapped for writing (file.cpp), for writers of a
// file whose header is not a filter's alone (a windowed file's ring,
// window_file.hpp). The header lock: exclusive, held for each
// read-modify-write of anything that must change in one piece.
class HeaderLock {
public:
    explicit HeaderLock(const MappedFile& f);
    ~HeaderLock();
    HeaderLock(const HeaderLock&) = delete;
    HeaderLock& operator=(const HeaderLock&) = delete;

private:
    const MappedFile& f_;
};
// A reader's shared hold on the header lock, for as long as it reads the
// header and (for a whole read or a verify) the payload: writers cannot
// open, flush or close the file meanwhile, so a clean header it sees has no
// writer changing the payload under it. A file system without these locks
// (ENOLCK, EINVAL, EOPNOTSUPP), or the flock build, reads unlocked.
class ReaderLock {
public:
    ReaderLock(int fd, const std::string& path);
    ~ReaderLock();
    ReaderLock(const ReaderLock&) = delete;
    ReaderLock& operator=(const ReaderLock&) = delete;

private:
    int fd_;
    std::string path_;
    bool held_ = false;
};
// A file mapped for writing, with its header lock taken: opened again if a
// save replaced the path before the lock was had (file.cpp says why).
std::shared_ptr<MappedFile> open_writer(const std::string& path, std::unique_ptr<HeaderLock>& lock);
// The writers' lock: each writer holds it shared from its open to its final
// flush. Holding the header lock: is this handle the only writer alive?
void join_writers(const MappedFile& f);
bool sole_writer(const MappedFile& f);
void leave_writers(const MappedFile& f);

// A filter whose memory is a mapped file's payload, and that file.
template <class T>
struct MappedFilter {
    std::unique_ptr<T> filter;
    std::shared_ptr<MappedFile> file;
};

// Map a filter file, checked like decode_filter (the payload checksum only
// if verify). A read-only map makes a read-only filter; a writable map sets
// the file's dirty flag.
template <class T>
MappedFilter<T> map_filter(const std::string& path, bool writable, bool verify);

// A writable map's header brought up to date under the header lock: this
// handle's new inserts since its last flush added to the insert count, the
// fill from count_fill() (the filter's recount), and msync. With final the
// handle leaves the writers; the last one out writes a current payload
// checksum and marks the file clean.
void flush_mapped(MappedFile& file, std::uint64_t insert_count, const std::function<std::uint64_t()>& count_fill,
                  bool final);

// What AtomicFile checks before it writes anything (above): the target is
// not mapped for writing by any handle, and not read-only. Callers that
// produce output before they save (the CLI's dedup) check it up front.
void check_save_target(const std::string& path);

}  // namespace bloomline
