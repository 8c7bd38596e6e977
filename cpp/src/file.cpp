#include "bloomline/file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/syscall.h>  // SYS_renameat2 (glibc before 2.28 has no wrapper)
#endif

#include <sys/file.h>

#include <pthread.h>
#if defined(__APPLE__)
#include <sys/param.h>  // MAXPATHLEN, for F_GETPATH
#endif

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <stdio.h>  // renameatx_np (macOS)
#include <functional>
#include <cstring>
#include <mutex>
#include <random>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace bloomline {

FileError::FileError(int err, const std::string& doing, const std::string& path)
    : std::system_error(err, std::generic_category(), doing + " '" + path + "'"), path_(path) {
    message_ = std::generic_category().message(err);
    if (!doing.empty()) message_ += " (" + doing + ")";
}

// Is path mapped for writing by some handle (the writers' lock, below)?
// Then std::invalid_argument naming it.
void refuse_if_mapped_for_writing(const std::string& path);
// The same check, made for a save's rename: the descriptor it returns (-1:
// nothing there) holds the file's header lock until it is closed, so no
// writer opens the file between the check and the rename (below). kUnheld:
// a file the saver may replace but cannot open (mode 0200, not root), which
// no writer of this user maps: replaced unheld, as before the hold.
constexpr int kUnheld = -2;
int hold_unmapped_for_replace(int dir_fd, const std::string& name, const std::string& path);

namespace {
[[noreturn]] void refuse_mapped(const std::string& path) {
    throw std::invalid_argument("'" + path +
                                "' is open for writing through a map (open(path, 'r+')); saving over it would "
                                "lose that handle's later adds: flush() or close() it, or save elsewhere");
}
}  // namespace

namespace {

[[noreturn]] void os_error(const std::string& what, const std::string& path) {
    throw FileError(errno, what, path);
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

// What a file of this mode is, for an error that refuses it.
const char* kind_of_file(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

[[noreturn]] void refuse_special(const std::string& path, mode_t mode, const char* doing) {
    throw std::invalid_argument("'" + path + "' is " + kind_of_file(mode) + ": bloomline " + doing +
                                " regular files only (use a file object for a stream)");
}

// The file a save to path replaces: path itself, or, through any symlinks,
// the file they lead to (a link is followed, never replaced; a dangling
// link leads to the new file it names). Relative link targets are taken
// from the link's directory. At most 40 links, as the kernel allows.
//
// Following by hand, the kernel's protected_symlinks rule is ours to keep:
// a link in a sticky, world-writable directory (/tmp) that belongs neither
// to the caller nor to the directory's owner is not followed, so a link
// planted there by another user cannot aim a save at any file.
std::string resolve_links(const std::string& path) {
    std::string at = path;
    for (int hops = 0; hops <= 40; ++hops) {
        struct stat st {};
        if (::lstat(at.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return at;
        struct stat dir {};
        if (::stat(dir_of(at).c_str(), &dir) == 0 && (dir.st_mode & S_ISVTX) && (dir.st_mode & S_IWOTH) &&
            st.st_uid != ::geteuid() && st.st_uid != dir.st_uid) {
            errno = EACCES;
            os_error("will not follow a symbolic link that another user owns in a sticky, world-writable directory",
                     at);
        }
        std::string target;
        for (std::size_t room = static_cast<std::size_t>(st.st_size > 0 ? st.st_size : 256) + 1;; room *= 2) {
            target.assign(room, '\0');
            const ssize_t n = ::readlink(at.c_str(), &target[0], target.size());
            if (n < 0) os_error("cannot read the symbolic link", at);
            if (static_cast<std::size_t>(n) < room) {  // (== room: the link grew meanwhile; read it again)
                target.resize(static_cast<std::size_t>(n));
                break;
            }
        }
        at = !target.empty() && target[0] == '/' ? target : dir_of(at) + "/" + target;
    }
    errno = ELOOP;
    os_error("cannot follow the symbolic links of", path);
}

// Open a file that must be regular: O_NONBLOCK, so that a FIFO is refused
// instead of waiting for a writer (it has no effect on a regular file).
int open_regular(const std::string& path, int flags, const char* doing) {
    struct stat before {};
    if (::stat(path.c_str(), &before) == 0 && !S_ISREG(before.st_mode)) refuse_special(path, before.st_mode, doing);
    const int fd = ::open(path.c_str(), flags | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) os_error("cannot open", path);
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        const int e = errno;
        ::close(fd);
        if (!S_ISREG(st.st_mode) && st.st_mode != 0) refuse_special(path, st.st_mode, doing);
        errno = e;
        os_error("cannot stat", path);
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);  // only for the open: FUSE would pass it on
    return fd;
}

// The mode a save over target gives its new file (0: a new path, the
// default mode), after refusing a target that is not a regular file, is
// mapped for writing, or is read-only. target has its links resolved.
mode_t checked_target_mode(const std::string& target, const std::string& shown) {
    struct stat st {};
    // What the path itself leads to (stat follows /proc's fd links too):
    // a pipe behind /proc/self/fd/1 is as much a pipe as a FIFO.
    if (::stat(shown.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) refuse_special(shown, st.st_mode, "saves to");
    if (::stat(target.c_str(), &st) != 0) {
        if (errno == ENOENT) return 0;  // a new file
        os_error("cannot stat", shown);
    }
    // Never replace a device node, a FIFO or a socket by a regular file (and
    // never open a FIFO to test its locks: that blocks).
    if (!S_ISREG(st.st_mode)) refuse_special(shown, st.st_mode, "saves to");
    refuse_if_mapped_for_writing(target);
    // Root may write anything, so "read-only" is also "no write bit at all"
    // (chmod 444): replacing such a file silently would undo its protection.
    const bool denied = ::faccessat(AT_FDCWD, target.c_str(), W_OK, AT_EACCESS) != 0 && errno == EACCES;
    if (denied || (st.st_mode & 0222) == 0) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        throw FileError(EACCES,
                        std::string("a read-only file, mode ") + mode +
                            ", is not replaced: make it writable (chmod u+w) or save elsewhere",
                        shown);
    }
    return st.st_mode & 07777;
}

// The temporary file's name beside target: target.tmp-PID-N, its last
// component cut so that it stays within the file system's name limit.
std::string temporary_name(const std::string& target) {
    std::random_device rd;
    const std::string suffix = ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
    const auto slash = target.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "" : target.substr(0, slash + 1);
    std::string base = slash == std::string::npos ? target : target.substr(slash + 1);
    constexpr std::size_t kNameMax = 255;  // NAME_MAX of Linux and macOS file systems
    if (base.size() + suffix.size() > kNameMax) {
        std::size_t cut = kNameMax - suffix.size();
        while (cut > 0 && (static_cast<unsigned char>(base[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 character
        base.resize(cut);
    }
    return dir + base + suffix;
}

// An unnamed file in the directory dir_fd (Linux's O_TMPFILE), which the kernel frees if
// the process dies before commit() names it; -1 where the kernel, the file
// system or a missing /proc (commit names it through /proc/self/fd) rules
// it out, and the caller makes a named one instead.
int unnamed_file(int dir_fd) {
#if defined(O_TMPFILE)
    if (::access("/proc/self/fd", X_OK) != 0) return -1;
    return ::openat(dir_fd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
#else
    (void)dir_fd;
    return -1;
#endif
}

}  // namespace

void check_save_target(const std::string& path) { checked_target_mode(resolve_links(path), path); }

AtomicFile::AtomicFile(const std::string& path) : path_(path), target_(resolve_links(path)) {
    const mode_t mode = checked_target_mode(target_, path);
    tmp_ = temporary_name(target_);
    // Every step after this one is relative to the directory opened here:
    // a chdir of another thread meanwhile cannot send the file elsewhere.
    dir_fd_ = ::open(dir_of(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    // Errors name the path the caller gave, not the temporary file.
    if (dir_fd_ < 0) os_error("cannot create a temporary file beside it to save", path);
    tmp_name_ = tmp_.substr(tmp_.find_last_of('/') + 1);
    target_name_ = target_.substr(target_.find_last_of('/') + 1);
    fd_ = unnamed_file(dir_fd_);
    unnamed_ = fd_ >= 0;
    if (!unnamed_) {
        fd_ = ::openat(dir_fd_, tmp_name_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        named_ = fd_ >= 0;
    }
    if (fd_ < 0) give_up("cannot create a temporary file beside it to save");
    // fchmod, unlike open's mode, is not cut by the umask: the replaced file's mode exactly.
    if (mode != 0 && ::fchmod(fd_, mode) != 0) give_up("cannot set the mode of the file being saved");
}

// A constructor's failure (errno says why): what it made is undone, since
// no destructor follows, and the error raised.
void AtomicFile::give_up(const char* doing) {
    const int e = errno;
    abort();
    ::close(dir_fd_);
    dir_fd_ = -1;
    errno = e;
    os_error(doing, path_);
}

AtomicFile::~AtomicFile() {
    abort();
    if (dir_fd_ >= 0) ::close(dir_fd_);
}

void AtomicFile::abort() {
    if (fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
    }
    remove_temporary();
}

// The temporary's name, if this writer made it (an unnamed file has one
// only once commit() links it): removed.
void AtomicFile::remove_temporary() {
    if (named_) ::unlinkat(dir_fd_, tmp_name_.c_str(), 0);
    named_ = false;
}

void AtomicFile::write(const void* data, std::size_t n) {
    if (fd_ < 0) throw std::invalid_argument("write to an AtomicFile that is committed or aborted");
    write_all(fd_, static_cast<const unsigned char*>(data), n, path_);
}

void AtomicFile::write_at(std::size_t offset, const void* data, std::size_t n) {
    if (fd_ < 0) throw std::invalid_argument("write to an AtomicFile that is committed or aborted");
    const auto* p = static_cast<const unsigned char*>(data);
    while (n > 0) {
        const ssize_t w = ::pwrite(fd_, p, n, static_cast<off_t>(offset));
        if (w < 0) {
            if (errno == EINTR) continue;
            os_error("cannot write", path_);
        }
        p += w;
        offset += static_cast<std::size_t>(w);
        n -= static_cast<std::size_t>(w);
    }
}

namespace {

// renameat, but only where `to` does not exist (EEXIST if it does); where
// the system or file system cannot tell (ENOSYS, EINVAL), a plain rename.
int rename_if_absent(int dir_fd, const char* from, const char* to) {
#if defined(__linux__) && defined(SYS_renameat2)
    if (::syscall(SYS_renameat2, dir_fd, from, dir_fd, to, 1 /* RENAME_NOREPLACE */) == 0) return 0;
    if (errno != ENOSYS && errno != EINVAL) return -1;
#elif defined(__APPLE__) && defined(RENAME_EXCL)
    if (::renameatx_np(dir_fd, from, dir_fd, to, RENAME_EXCL) == 0) return 0;
    if (errno != ENOTSUP && errno != EINVAL) return -1;
#endif
    return ::renameat(dir_fd, from, dir_fd, to);
}

}  // namespace

void AtomicFile::commit() {
    if (fd_ < 0) throw std::invalid_argument("commit of an AtomicFile that is committed or aborted");
    if (::fsync(fd_) != 0) os_error("cannot fsync the file being saved", path_);
    if (unnamed_) {
        // Named only now, just for the rename: a process killed before this
        // leaves nothing behind, and the window to the rename is a few
        // directory operations. Closed after the rename: its data is
        // fsynced, and the local file systems that have O_TMPFILE report
        // nothing at close (NFS, which may, has no O_TMPFILE).
        const std::string self_fd = "/proc/self/fd/" + std::to_string(fd_);
        if (::linkat(AT_FDCWD, self_fd.c_str(), dir_fd_, tmp_name_.c_str(), AT_SYMLINK_FOLLOW) != 0) {
            const int e = errno;
            abort();
            errno = e;
            os_error("cannot name the file being saved", path_);
        }
        named_ = true;
    } else {
        const int fd = fd_;
        fd_ = -1;
        if (::close(fd) != 0) {
            const int e = errno;
            remove_temporary();
            errno = e;
            os_error("cannot close the file being saved", path_);
        }
    }
    // Again: a writer may have opened it while we wrote. Held to the rename
    // (hold_unmapped_for_replace): a writer that opens the old file meanwhile
    // waits for its header lock, then finds the path names the new file and
    // opens that (open_writer); checked and then renamed unheld, its later
    // adds went to the unlinked old file, without a word. Where nothing was
    // there, the rename takes the path only if it is still free: a file
    // another save put there meanwhile, which a writer may map, is held and
    // checked first.
    constexpr int kTries = 10000;  // (as hold_unmapped_for_replace's: each try follows another save)
    for (int i = 0;; ++i) {
        int held = -1;
        try {
            held = hold_unmapped_for_replace(dir_fd_, target_name_, target_);
        } catch (...) {
            abort();
            throw;
        }
        struct Held {
            int fd;
            ~Held() {
                if (fd >= 0) ::close(fd);  // (drops the lock)
            }
        } hold{held};
        const int rc = held == -1 ? rename_if_absent(dir_fd_, tmp_name_.c_str(), target_name_.c_str())
                                  : ::renameat(dir_fd_, tmp_name_.c_str(), dir_fd_, target_name_.c_str());
        if (rc == 0) break;
        if (held == -1 && errno == EEXIST && i + 1 < kTries) continue;
        const int e = errno;
        abort();
        errno = e;
        os_error("cannot rename the saved file over it", path_);
    }
    named_ = false;  // (renamed: nothing of ours to remove any more)
    if (fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
    }
    if (::fsync(dir_fd_) != 0 && errno != EINVAL && errno != ENOTSUP)
        os_error("cannot fsync the directory", dir_of(target_));
}

// The payload is a snapshot (filter_io.hpp), written chunk by chunk as it
// is copied, so the save needs no second copy of a large filter; the header,
// whose fill is known only at the end, goes in last, at the front.
template <class T>
void save_filter(const T& f, const std::string& path) {
    AtomicFile out(path);
    unsigned char head[kHeaderSize] = {}, trailer[kTrailerSize];
    out.write(head, kHeaderSize);
    std::vector<unsigned char> buffer;
    const Snapshot s = snapshot_payload(
        f,
        [&buffer](std::size_t, std::size_t n) {
            buffer.resize(n);
            return buffer.data();
        },
        [&out](const unsigned char* p, std::size_t n) { out.write(p, n); });
    write_u64(trailer, 0, s.payload_checksum);
    out.write(trailer, kTrailerSize);
    encode_header(s.header, head);
    out.write_at(0, head, kHeaderSize);
    out.commit();
}

template void save_filter<BloomFilter>(const BloomFilter&, const std::string&);
template void save_filter<CountingBloomFilter>(const CountingBloomFilter&, const std::string&);

// ---- writers of one mapped file -------------------------------------------------
//
// Several handles (threads or processes) may map one file for writing. Bit
// writes are atomic (the filter is told its memory is shared), and the
// header is kept true with two advisory locks on the file, taken with
// open-file-description locks (Linux: they belong to a handle's own open
// file, so two handles in one process exclude each other as two processes
// do, and the kernel drops them when a process dies):
//  - byte 0, exclusive, held while a handle reads and rewrites the header;
//  - byte 1, shared, held by every writer for as long as it is open.
// Whoever can turn its byte-1 lock exclusive is the only writer alive. The
// last writer to close writes a current checksum and marks the file clean;
// a writer that opens a dirty file and finds itself alone knows the others
// died, and repairs the header (fill recounted from the payload, insert
// count at least the estimate from it).
//
// Without open-file-description locks (macOS, the BSDs), or built with
// BLOOMLINE_FORCE_FLOCK (CMake -DBLOOMLINE_FLOCK=ON, so that Linux CI runs
// this path), a file takes one writer at a time: see the #else below.

#if defined(F_OFD_SETLK) && !defined(BLOOMLINE_FORCE_FLOCK)
#define BLOOMLINE_OFD_LOCKS 1
#endif

namespace {

#ifdef BLOOMLINE_OFD_LOCKS
bool file_lock(int fd, short type, off_t byte, bool wait, const std::string& path) {
    struct flock fl {};
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = byte;
    fl.l_len = 1;
    for (;;) {
        if (::fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl) == 0) return true;
        if (errno == EINTR) continue;
        if (!wait && (errno == EAGAIN || errno == EACCES)) return false;
        os_error("cannot lock", path);
    }
}
bool locked_by_a_writer(int fd, const std::string& path) {
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = kWriterLockByte;
    fl.l_len = 1;
    if (::fcntl(fd, F_OFD_GETLK, &fl) != 0) os_error("cannot test the locks of", path);
    return fl.l_type != F_UNLCK;
}
// A writer's open takes the header lock exclusive and joins the writers
// before it lets go: once this shared hold on the header is had, a writer
// has either joined (and is seen) or waits for the hold to go.
bool hold_if_no_writer(int fd, const std::string& path, bool exclusive) {
    try {
        file_lock(fd, exclusive ? F_WRLCK : F_RDLCK, kHeaderLockByte, true, path);
    } catch (const FileError& e) {
        const int err = e.code().value();  // (a file system without these locks: the test alone, as before)
        if (err != ENOLCK && err != EINVAL && err != EOPNOTSUPP) throw;
    }
    return !locked_by_a_writer(fd, path);
}
bool writer_maps(int fd, const std::string& path) { return locked_by_a_writer(fd, path); }
#else
// One writer at a time. POSIX record locks (F_SETLK) cannot stand in for
// OFD locks: they belong to the process, so two handles in one process
// would not exclude each other, and closing any descriptor of the file
// drops them all. flock locks belong to the open file, like OFD locks, and
// die with the process, but have no byte ranges: one exclusive whole-file
// flock is both the header lock and the writer lock. A writer takes it
// before it reads the header and keeps it until its final flush; taking it
// again on the same descriptor succeeds, so the sole writer's header
// updates and sole_writer() need nothing more. A second writer (another
// process, or another handle in this one) is refused at once with an error
// saying why, never made to wait (a crawler would hang on it) and never let
// in (with no shared lock the writer count could not be kept true).
[[noreturn]] void refuse_second_writer(const std::string& path) {
    throw std::invalid_argument("'" + path +
                                "' is open for writing by another handle, and this build allows one writer per file "
                                "(it has flock locks only, as on macOS): close that handle first, or share the "
                                "filter through Redis (bloomline.redis); a save replacing the file holds it for that "
                                "instant too: then try again");
}
bool file_lock(int fd, short type, off_t byte, bool, const std::string& path) {
    if (type == F_UNLCK) {
        // Unlocking the header is not leaving the writers: the flock stays
        // until the writer-lock byte is unlocked (the final flush).
        if (byte != kHeaderLockByte && ::flock(fd, LOCK_UN) != 0) os_error("cannot unlock", path);
        return true;
    }
    for (;;) {
        if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
        if (errno == EINTR) continue;
        if (errno == EWOULDBLOCK) refuse_second_writer(path);
        os_error("cannot lock", path);
    }
}
// One flock: held shared, it keeps a writer from opening (refused, as a
// second writer is) until it is let go.
bool hold_if_no_writer(int fd, const std::string& path, bool) {
    for (;;) {
        if (::flock(fd, LOCK_SH | LOCK_NB) == 0) return true;
        if (errno == EINTR) continue;
        if (errno == EWOULDBLOCK) return false;
        os_error("cannot test the locks of", path);
    }
}
bool writer_maps(int fd, const std::string& path) { return !hold_if_no_writer(fd, path, false); }  // (closed next)
#endif

void write_header(const MappedFile& f, const Header& h) {
    unsigned char header[kHeaderSize];
    encode_header(h, header);
    std::memcpy(f.data(), header, kHeaderSize);
}

}  // namespace

ReaderLock::ReaderLock(int fd, const std::string& path) : fd_(fd), path_(path) {
#ifdef BLOOMLINE_OFD_LOCKS
    try {
        held_ = file_lock(fd_, F_RDLCK, kHeaderLockByte, true, path_);
    } catch (const FileError& e) {
        const int err = e.code().value();
        if (err != ENOLCK && err != EINVAL && err != EOPNOTSUPP) throw;
    }
#else
    // The flock path has no shared header lock: its one flock is held by
    // the writer for as long as the file is open, so a reader waiting on
    // it would wait for the writer to close, and a reader holding it would
    // turn a writer away. Readers read unlocked (docs/design/sharing.md).
#endif
}
ReaderLock::~ReaderLock() {
    if (!held_) return;
    try {
        file_lock(fd_, F_UNLCK, kHeaderLockByte, false, path_);
    } catch (...) {  // as HeaderLock: closing the fd drops it anyway
    }
}

HeaderLock::HeaderLock(const MappedFile& f) : f_(f) { file_lock(f_.fd(), F_WRLCK, kHeaderLockByte, true, f_.path()); }
HeaderLock::~HeaderLock() {
    try {
        file_lock(f_.fd(), F_UNLCK, kHeaderLockByte, false, f_.path());
    } catch (...) {  // unlocking cannot fail on an open descriptor; the fd's close drops it anyway
    }
}

// Holding the header lock and a shared writer lock: is this the only
// writer alive? (The writer lock is shared again afterwards.)
bool sole_writer(const MappedFile& f) {
    if (!file_lock(f.fd(), F_WRLCK, kWriterLockByte, false, f.path())) return false;
    file_lock(f.fd(), F_RDLCK, kWriterLockByte, false, f.path());
    return true;
}

void join_writers(const MappedFile& f) { file_lock(f.fd(), F_RDLCK, kWriterLockByte, false, f.path()); }
void leave_writers(const MappedFile& f) { file_lock(f.fd(), F_UNLCK, kWriterLockByte, false, f.path()); }

std::size_t read_whole_file(const std::string& path, const std::function<unsigned char*(std::size_t)>& alloc) {
    const int fd = open_regular(path, O_RDONLY, "reads");
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    const ReaderLock lock(fd, path);
    struct stat st {};
    if (::fstat(fd, &st) != 0) os_error("cannot stat", path);
    const auto size = static_cast<std::size_t>(st.st_size);  // the file's real size, not a header's claim
    unsigned char* into = alloc(size);
    std::size_t got = 0;
    while (got < size) {
        const ssize_t r = ::read(fd, into + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) errno = EIO;  // shorter than fstat said: truncated while read
        if (r <= 0) os_error("cannot read", path);
        got += static_cast<std::size_t>(r);
    }
    return size;
}

Memory read_file(const std::string& path, std::size_t* size_out) {
    Memory mem;
    *size_out = read_whole_file(path, [&mem](std::size_t size) {
        mem = Memory::zeroed(size == 0 ? 1 : size);
        return mem.data;
    });
    return mem;
}

void refuse_if_mapped_for_writing(const std::string& path) {
    // O_NONBLOCK: should path have become a FIFO meanwhile, the open must not wait for a writer.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return;  // nothing there (or unreadable: the save will say so)
    bool mapped = false;
    try {
        mapped = writer_maps(fd, path);  // (a test, never a wait: this runs before a save writes, the GIL held)
    } catch (...) {
        ::close(fd);
        throw;
    }
    ::close(fd);
    if (mapped) refuse_mapped(path);
}

int hold_unmapped_for_replace(int dir_fd, const std::string& name, const std::string& path) {
    // (name in dir_fd, the directory the save began in: the working
    // directory may have changed since; path names it in errors.) Each try
    // after the first follows another save that replaced the file: progress,
    // so the bound is far past any number of saves at once.
    constexpr int kTries = 10000;
    for (int i = 0; i < kTries; ++i) {
        // Opened for writing where it may be, for the lock exclusive: two
        // saves then take turns, and one never renames over a file the other
        // put there (which a writer may have mapped) while holding the file
        // it replaced. O_NONBLOCK: should path have become a FIFO meanwhile,
        // the open must not wait for a writer.
        bool exclusive = true;
        int fd = ::openat(dir_fd, name.c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0 && (errno == EACCES || errno == EPERM || errno == EROFS || errno == ETXTBSY)) {
            exclusive = false;
            fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        }
        if (fd < 0 && errno == ENOENT) return -1;                       // nothing there
        if (fd < 0 && (errno == EACCES || errno == EPERM)) return kUnheld;  // ours to replace, not to open
        // Anything else (no descriptor left, no memory) leaves the file
        // unchecked: a save that went on could rename over a writer's file.
        if (fd < 0) os_error("cannot check for writers before replacing", path);
        bool free = false;
        struct stat held {}, now {};
        try {
            free = hold_if_no_writer(fd, path, exclusive);
        } catch (...) {
            ::close(fd);
            throw;
        }
        if (!free) {
            ::close(fd);
            refuse_mapped(path);
        }
        // The file held must be the one at the path still: another save may
        // have renamed a new one over it before the lock was had.
        if (::fstat(fd, &held) == 0 && ::fstatat(dir_fd, name.c_str(), &now, 0) == 0 && held.st_dev == now.st_dev &&
            held.st_ino == now.st_ino)
            return fd;
        ::close(fd);
        if (::fstatat(dir_fd, name.c_str(), &now, 0) != 0 && errno == ENOENT) return -1;  // gone meanwhile
    }
    throw FileError(EAGAIN, "was replaced by other saves " + std::to_string(kTries) + " times while this one checked it",
                    path);
}

std::shared_ptr<MappedFile> open_writer(const std::string& path, std::unique_ptr<HeaderLock>& lock) {
    // A save that renamed a new file over path between this open and its
    // header lock left this handle the old, unlinked file: its adds would
    // reach no one. So the path is checked under the lock, which a save
    // holds over its rename (hold_unmapped_for_replace), and opened again.
    constexpr int kTries = 16;
    for (int i = 0;; ++i) {
        auto file = std::make_shared<MappedFile>(path, true);
        lock = std::make_unique<HeaderLock>(*file);
        if (file->is(path)) return file;
        lock.reset();
        if (i + 1 == kTries)
            throw FileError(EAGAIN, "was replaced by a save " + std::to_string(kTries) + " times while it was opened",
                            path);
    }
}

// ---- a forked child lets go of its parent's writer locks ------------------------
//
// A child forked from a process that maps files for writing shares each
// map's open file, and with it the writer locks (OFD and flock locks belong
// to the open file, which the child's descriptor and its mapping both hold
// open). The child never writes through those handles (flush_mapped refuses,
// the filters refuse adds), but its copy kept the locks after the parent
// died: the next writer did not find itself alone, so a killed writer's
// header went unrepaired and a save over the file was refused while the
// child lived. So the child, at its fork, maps each such file again through
// an open file of its own (the same inode: /proc/self/fd on Linux,
// F_GETPATH on macOS, checked by device and inode) at the same address, and
// closes the inherited one: its memory reads the same pages, and the locks
// stay with the parent alone. Where the file cannot be opened again (gone
// from /proc, its mode changed), the child keeps the inherited one, as before.

namespace {

// (Never destroyed: a map may be closed after static destructors have run,
// by a thread still running at exit.)
std::mutex& writable_maps_mutex() {
    static std::mutex* m = new std::mutex;
    return *m;
}
std::vector<MappedFile*>& writable_maps() {
    static std::vector<MappedFile*>* maps = new std::vector<MappedFile*>;
    return *maps;
}

// The same file as fd, opened anew (O_RDWR), or -1. Async-signal-safe calls
// only: this runs in the child of a process that may have other threads.
int reopen_same_file(int fd) {
#if defined(__linux__)
    char name[32] = "/proc/self/fd/";
    char digits[12];
    int n = 0;
    for (unsigned v = static_cast<unsigned>(fd); n == 0 || v != 0; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
    std::size_t at = 14;
    while (n > 0) name[at++] = digits[--n];
    name[at] = '\0';
    return ::open(name, O_RDWR | O_CLOEXEC);
#elif defined(__APPLE__) && defined(F_GETPATH)
    char name[MAXPATHLEN];
    if (::fcntl(fd, F_GETPATH, name) != 0) return -1;
    return ::open(name, O_RDWR | O_CLOEXEC);
#else
    (void)fd;
    return -1;
#endif
}

}  // namespace

void MappedFile::let_go_of_parents_locks() noexcept {
    if (base_ == nullptr) {
        // Forked while another thread was making this map: that thread is
        // not in the child, so the map is never finished here; its
        // descriptor (the writer's open file) is let go of.
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
        return;
    }
    const int fd = reopen_same_file(fd_);
    if (fd < 0) return;
    struct stat st {};
    if (::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_dev) != dev_ ||
        static_cast<std::uint64_t>(st.st_ino) != ino_) {
        ::close(fd);
        return;
    }
    // MAP_FIXED replaces the inherited mapping in one step (the child has
    // one thread here); should it fail, the inherited file is mapped back.
    if (::mmap(base_, size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
        ::mmap(base_, size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd_, 0);
        ::close(fd);
        return;
    }
#if defined(MADV_RANDOM)
    ::madvise(base_, size_, MADV_RANDOM);
#endif
    ::close(fd_);
    fd_ = fd;
}

void MappedFile::open_tracked(const std::string& path) {
    static const bool hooked = [] {
        ::pthread_atfork([] { writable_maps_mutex().lock(); }, [] { writable_maps_mutex().unlock(); },
                         [] {
                             for (MappedFile* f : writable_maps()) f->let_go_of_parents_locks();
                             writable_maps_mutex().unlock();
                         });
        return true;
    }();
    (void)hooked;
    // Opened and known to the hook in one step: a fork from another thread
    // never finds the descriptor unknown (a child would keep it, and the
    // writer's locks with it).
    std::lock_guard<std::mutex> hold(writable_maps_mutex());
    writable_maps().reserve(writable_maps().size() + 1);  // (no allocation can fail once the file is open)
    fd_ = open_regular(path, O_RDWR, "maps");
    writable_maps().push_back(this);
}

void MappedFile::close_fd() noexcept {
    const int e = errno;  // (for the error about to be raised)
    if (writable_) {
        // Unmapped, closed and forgotten by the hook in one step: a fork
        // never finds a descriptor number that may be another file's by now.
        std::lock_guard<std::mutex> hold(writable_maps_mutex());
        auto& maps = writable_maps();
        maps.erase(std::remove(maps.begin(), maps.end(), this), maps.end());
        if (base_ != nullptr) ::munmap(base_, size_);
        if (fd_ >= 0) ::close(fd_);
    } else {
        if (base_ != nullptr) ::munmap(base_, size_);
        if (fd_ >= 0) ::close(fd_);
    }
    base_ = nullptr;
    fd_ = -1;
    errno = e;
}

MappedFile::MappedFile(const std::string& path, bool writable) : path_(path), writable_(writable) {
    if (writable)
        open_tracked(path);
    else
        fd_ = open_regular(path, O_RDONLY, "maps");
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
        close_fd();
        os_error("cannot stat", path);
    }
    dev_ = static_cast<std::uint64_t>(st.st_dev);
    ino_ = static_cast<std::uint64_t>(st.st_ino);
    size_ = static_cast<std::size_t>(st.st_size);
    // Root may write anything: a file with no write bit at all (chmod 444)
    // is refused for writing as every save refuses to replace it.
    if (writable && (st.st_mode & 0222) == 0) {
        close_fd();
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        throw FileError(EACCES, std::string("a read-only file, mode ") + mode +
                                    ", is not opened for writing: make it writable (chmod u+w) or open it 'r'",
                        path);
    }
#if defined(__linux__)
    // A sparse file's holes get their blocks only when a page is first
    // written, and on a full file system that write kills the process with
    // SIGBUS. Reserve every block now (a no-op where they exist), and refuse
    // with ENOSPC up front. A file system without fallocate is mapped as is.
    // Only a file with holes (fewer blocks than bytes), whose header says
    // it is this long: a fully written file needs nothing (and ZFS or an
    // old btrfs would ask for free space it does not need), and a file that
    // is no filter is refused below without its holes filled. Copy-on-write
    // file systems (btrfs, ZFS) need new blocks at every write anyway: no
    // reservation can promise them (docs/design/sharing.md).
    unsigned char head[kHeaderSize];
    bool holes = writable && size_ >= kHeaderSize + kTrailerSize &&
                 static_cast<std::uint64_t>(st.st_blocks) * 512 < static_cast<std::uint64_t>(size_) &&
                 ::pread(fd_, head, kHeaderSize, 0) == static_cast<ssize_t>(kHeaderSize);
    if (holes) {
        try {
            holes = encoded_length(head) == size_;
        } catch (const std::invalid_argument&) {
            holes = false;
        }
    }
    if (holes) {
        int r;
        do {
            r = ::fallocate(fd_, 0, 0, static_cast<off_t>(size_));
        } while (r != 0 && errno == EINTR);
        if (r != 0 && errno != EOPNOTSUPP && errno != ENOSYS && errno != EINVAL) {
            close_fd();
            os_error("cannot reserve the disk blocks of the file (a sparse file that cannot be filled in) to map",
                     path);
        }
    }
#endif
    if (size_ < kHeaderSize + kTrailerSize) {
        close_fd();
        throw std::invalid_argument("invalid bloomline data: '" + path + "' is " + std::to_string(size_) +
                                    " bytes, shorter than the 136-byte minimum (truncated?)");
    }
    // A writable map is made under the hook's lock: a child forked
    // meanwhile would hold the mapping (and the writer's open file with it)
    // where the hook saw no map to make again.
    void* p;
    int map_errno;
    {
        std::unique_lock<std::mutex> hold(writable_maps_mutex(), std::defer_lock);
        if (writable_) hold.lock();
        p = ::mmap(nullptr, size_, writable ? (PROT_READ | PROT_WRITE) : PROT_READ, MAP_SHARED, fd_, 0);
        map_errno = errno;
        if (p != MAP_FAILED) base_ = static_cast<unsigned char*>(p);
    }
    if (p == MAP_FAILED) {
        errno = map_errno;
        close_fd();
        os_error("cannot map", path);
    }
#if defined(MADV_RANDOM)
    ::madvise(base_, size_, MADV_RANDOM);  // probes are random: no read-ahead
#endif
}

MappedFile::~MappedFile() {
    close_fd();  // drops this handle's locks too
}

void MappedFile::sync() const {
    if (writable_ && ::msync(base_, size_, MS_SYNC) != 0) os_error("cannot msync", path_);
}

bool MappedFile::is(const std::string& path) const {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return false;
    return static_cast<std::uint64_t>(st.st_dev) == dev_ && static_cast<std::uint64_t>(st.st_ino) == ino_;
}

void flush_mapped(MappedFile& file, std::uint64_t insert_count, const std::function<std::uint64_t()>& count_fill,
                  bool final) {
    if (!file.writable() || file.released()) return;
    if (file.inherited()) {
        // A forked child: its close only lets go of its copy; the parent's
        // locks and its place among the writers stay as they are.
        if (final) return file.release();
        throw std::invalid_argument("'" + file.path() +
                                    "' was opened for writing by a parent of this process, before a fork: a child "
                                    "must not flush its parent's handle; open the file again in this process with "
                                    "open(path, 'r+')");
    }
    HeaderLock lock(file);
    Header h = decode_header(file.data(), file.size());
    // This handle's new keys since its last flush (fewer: a counting
    // filter's removes), the sum held in [0, kMaxCount] as a reader takes it.
    h.insert_count = insert_count >= file.insert_base
                         ? std::min(kMaxCount, h.insert_count + std::min(kMaxCount, insert_count - file.insert_base))
                         : h.insert_count - std::min(h.insert_count, file.insert_base - insert_count);
    file.insert_base = insert_count;
    h.fill = count_fill();  // under the header lock: a closing last writer counts a still payload
    if (final) {
        if (sole_writer(file)) {
            if (h.writers > 1) repair_insert_count(h);  // writers that never closed were killed
            h.flags = 0;
            h.writers = 0;
            write_u64(file.data(), trailer_offset(h), checksum64(file.data() + kHeaderSize, h.payload_len));
        } else {
            h.writers = h.writers > 1 ? h.writers - 1 : 1;
        }
    }
    write_header(file, h);
    file.sync();
    if (final) {
        leave_writers(file);
        file.release();
    }
}

template <class T>
MappedFilter<T> map_filter(const std::string& path, bool writable, bool verify) {
    std::shared_ptr<MappedFile> file;  // (declared first: the locks go before it)
    std::unique_ptr<HeaderLock> lock;
    std::unique_ptr<ReaderLock> reading;
    file = writable ? open_writer(path, lock) : std::make_shared<MappedFile>(path, false);
    unsigned char* base = file->data();
    if (!writable) reading = std::make_unique<ReaderLock>(file->fd(), path);
    Header h = decode_header(base, file->size());
    if (h.kind == Kind::windowed)
        throw std::invalid_argument(
            "a WindowedBloomFilter cannot be memory-mapped as one filter; use WindowedBloomFilter.open(path) for "
            "one saved with shared=True, or WindowedBloomFilter.load(path)");
    if (h.kind == Kind::scalable)
        throw std::invalid_argument("a ScalableBloomFilter cannot be memory-mapped; use load(path)");
    if (h.kind != KindOf<T>::value)
        throw std::invalid_argument(std::string("invalid bloomline data: this holds a ") + kind_name(h.kind) +
                                    ", not a " + kind_name(KindOf<T>::value));
    const bool was_dirty = (h.flags & kFlagDirty) != 0;
    bool fill_known = !was_dirty;
    // The first writer of a clean file checks its payload whatever verify
    // says: the last writer's close writes a fresh checksum, and must never
    // bless damage that was there before anyone wrote.
    if (verify || (writable && !was_dirty)) {
        checked_payload(base, file->size(), h);  // the checksum, if the file is clean
        const std::uint64_t fill = checked_fill(h, base + kHeaderSize);
        // Asked to verify: a wrong fill is an error. Checked as the first
        // writer only: the checksum vouches for the payload, so a fill an
        // older export got wrong is recounted (the header is rewritten).
        if (!was_dirty && fill != h.fill && verify)
            throw std::invalid_argument("invalid bloomline data: fill " + fmt(h.fill) + " does not match the payload (" +
                                        fmt(fill) + ")");
        h.fill = fill;
        fill_known = true;
    }
    if (writable) {
        join_writers(*file);  // a writer, until close
        if (!was_dirty) {
            h.flags |= kFlagDirty;
            h.writers = 1;
        } else if (sole_writer(*file)) {
            // Dirty with no writer alive: they were killed. Repair the
            // counts from the payload; the checksum is made at the last close.
            h.fill = checked_fill(h, base + kHeaderSize);
            fill_known = true;
            repair_insert_count(h);
            h.writers = 1;
        } else {
            h.writers += 1;
        }
        write_header(*file, h);
        file->sync();
        file->insert_base = h.insert_count;
    } else if (was_dirty) {
        // Read as it is now (decode_filter does the same): the fill from
        // the payload, the insert count at least its estimate.
        h.fill = checked_fill(h, base + kHeaderSize);
        fill_known = true;
        repair_insert_count(h);
    }
    lock.reset();
    reading.reset();
    Memory payload;
    payload.data = base + kHeaderSize;
    payload.size = h.payload_len;
    payload.owner = file;
    MappedFilter<T> m{filter_over<T>(h, std::move(payload), fill_known), file};
    if (writable)
        m.filter->share_memory();
    else
        m.filter->set_read_only("mapped read-only from '" + path + "'; use copy(), or open(path, 'r+') to write");
    return m;
}

const char* file_lock_kind() {
#ifdef BLOOMLINE_OFD_LOCKS
    return "ofd";
#else
    return "flock";
#endif
}

template MappedFilter<BloomFilter> map_filter<BloomFilter>(const std::string&, bool, bool);
template MappedFilter<CountingBloomFilter> map_filter<CountingBloomFilter>(const std::string&, bool, bool);

}  // namespace bloomline
