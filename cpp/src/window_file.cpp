#include "bloomline/window_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "bloomline/filter_io.hpp"
#include "bloomline/words.hpp"

namespace bloomline {

namespace {

// A record head's fields (format.hpp): byte length, count, number.
constexpr std::size_t kCountAt = 8, kNumberAt = 16;

std::int64_t load_number(const unsigned char* head) {
    const auto* p = reinterpret_cast<const std::uint64_t*>(head + kNumberAt);
    return static_cast<std::int64_t>(to_le64(__atomic_load_n(p, __ATOMIC_ACQUIRE)));
}
void store_number(unsigned char* head, std::int64_t n) {
    auto* p = reinterpret_cast<std::uint64_t*>(head + kNumberAt);
    __atomic_store_n(p, to_le64(static_cast<std::uint64_t>(n)), __ATOMIC_RELEASE);
}
std::uint64_t load_count(const unsigned char* head) {
    return to_le64(atomic_load(reinterpret_cast<const std::uint64_t*>(head + kCountAt)));
}
void store_count(unsigned char* head, std::uint64_t n) {
    atomic_store(reinterpret_cast<std::uint64_t*>(head + kCountAt), to_le64(n));
}

std::int64_t place_of(std::int64_t n, std::size_t places) {
    const auto p = static_cast<std::int64_t>(places);
    return ((n % p) + p) % p;
}

}  // namespace

MappedWindow::MappedWindow(const std::string& path, bool writable, bool verify) {
    // Writers check and mark the file under the header lock; a read-only map
    // reads it under the readers' share of it (as map_filter does), so that
    // no writer opens, flushes or closes while its header and ring are read.
    std::unique_ptr<HeaderLock> lock;
    std::unique_ptr<ReaderLock> reading;
    file_ = writable ? open_writer(path, lock) : std::make_shared<MappedFile>(path, false);
    unsigned char* base = file_->data();
    if (!writable) reading = std::make_unique<ReaderLock>(file_->fd(), path);
    std::vector<StageBytes> records;
    params_ = read_window(base, file_->size(), &records);
    if (!params_.ring)
        throw std::invalid_argument("'" + path + "' holds a windowed filter in its compact form, which cannot be "
                                    "mapped: write it with save(path, shared=True) first");
    const bool was_dirty = params_.dirty;
    // The first writer of a clean file checks every byte (its last close
    // must not bless damage); decode_window checks each place's geometry.
    if (verify || (writable && !was_dirty)) decode_window(base, file_->size());
    const double rate = window_generation_error_rate(params_.error_rate, params_.generations);
    const Params want = optimal_params(static_cast<double>(params_.capacity), rate, params_.layout);
    for (std::size_t i = 0; i < records.size(); ++i) {
        const StageBytes& r = records[i];
        const Header h = decode_header(r.data, r.len);
        if (h.kind != Kind::bloom || h.capacity != params_.capacity || h.error_rate != rate ||
            h.num_slots != want.num_bits || h.num_hashes != want.num_hashes || h.layout != params_.layout ||
            h.seed != params_.seed)
            throw std::invalid_argument("invalid bloomline data: generation " + fmt(i) +
                                        " does not match the window's parameters");
        const std::int64_t n = r.number;
        if (n != kGenerationNone && n != kGenerationStarting && place_of(n, records.size()) != static_cast<std::int64_t>(i))
            throw std::invalid_argument("invalid bloomline data: generation " + fmt(i) + " has number " +
                                        std::to_string(n) + ", not its place's");
        heads_.push_back(static_cast<std::size_t>(r.data - base) - kRingRecordHead);
        headers_.push_back(h);
        counted_number_.push_back(n);
        counted_.push_back(0);  // (the places' filters count this handle's adds from zero: restart_counts)
    }
    if (!writable) return;
    join_writers(*file_);  // a writer, until its final flush
    Header top = decode_header(base, file_->size());
    if (!was_dirty) {
        top.writers = 1;
    } else if (sole_writer(*file_)) {
        top.writers = 1;  // dirty with no writer alive: they were killed; the last close repairs
    } else {
        top.writers += 1;
    }
    top.flags = kFlagRing | kFlagDirty;
    unsigned char buf[kHeaderSize];
    encode_header(top, buf);
    std::memcpy(base, buf, kHeaderSize);
    for (std::size_t i = 0; i < headers_.size(); ++i) {
        Header h = headers_[i];
        h.flags = kFlagDirty;
        encode_header(h, buf);
        std::memcpy(head(i) + kRingRecordHead, buf, kHeaderSize);
    }
    file_->sync();
}

std::unique_ptr<BloomFilter> MappedWindow::place_filter(std::size_t i) const {
    const Header& h = headers_.at(i);
    Memory payload;
    payload.data = head(i) + kRingRecordHead + kHeaderSize;
    payload.size = h.payload_len;
    payload.owner = file_;
    std::unique_ptr<BloomFilter> f = filter_over<BloomFilter>(h, std::move(payload), false);
    if (file_->writable())
        f->share_memory();
    else
        f->set_read_only("mapped read-only from '" + file_->path() + "'; use copy(), or open(path, 'r+') to write");
    return f;
}

std::unique_ptr<BloomFilter> MappedWindow::view(std::size_t i, std::uint64_t count) const {
    Header h = headers_.at(i);
    h.insert_count = count;
    Memory payload;
    payload.data = head(i) + kRingRecordHead + kHeaderSize;
    payload.size = h.payload_len;
    payload.owner = file_;
    std::unique_ptr<BloomFilter> f = filter_over<BloomFilter>(h, std::move(payload), false);
    f->share_memory();  // (read with atomic loads, as other processes write it)
    return f;
}

void MappedWindow::encode(bool ring, std::int64_t now, const std::vector<std::uint64_t>& adds,
                          const std::function<unsigned char*(std::size_t)>& alloc) const {
    if (file_->released()) throw std::invalid_argument("I/O operation on a closed filter");
    if (adds.size() != heads_.size()) throw std::invalid_argument("encode: one insert count per place");
    // A forked child's descriptor shares its parent's locks (they belong to
    // the open file): it would not wait for its parent's rotation, and its
    // unlock would drop the parent's lock. It locks a descriptor of its own,
    // on the same file. (Declared first: closed after the lock is let go.)
    struct OwnFd {
        int fd = -1;
        ~OwnFd() {
            if (fd >= 0) ::close(fd);
        }
    } own;
    std::unique_ptr<HeaderLock> lock;
    std::unique_ptr<ReaderLock> reading;
    if (file_->inherited()) {
        own.fd = ::open(file_->path().c_str(), O_RDONLY | O_CLOEXEC);
        struct stat mine {}, mapped {};
        if (own.fd < 0 || ::fstat(own.fd, &mine) != 0 || ::fstat(file_->fd(), &mapped) != 0 ||
            mine.st_dev != mapped.st_dev || mine.st_ino != mapped.st_ino)
            throw std::invalid_argument("'" + file_->path() + "' is no longer the file a parent of this process "
                                        "mapped: open it again in this process");
        reading = std::make_unique<ReaderLock>(own.fd, file_->path());
    } else if (file_->writable()) {
        lock = std::make_unique<HeaderLock>(*file_);
    } else {
        reading = std::make_unique<ReaderLock>(file_->fd(), file_->path());
    }
    const auto held = [](std::int64_t n) { return n != kGenerationNone && n != kGenerationStarting; };
    std::int64_t newest = now;
    for (std::size_t i = 0; i < heads_.size(); ++i)
        if (held(number(i))) newest = std::max(newest, number(i));
    std::vector<std::pair<std::int64_t, std::size_t>> chosen;  // (number, place)
    for (std::size_t i = 0; i < heads_.size(); ++i) {
        const std::int64_t n = number(i);
        // (unsigned: the difference of two int64 with n <= newest fits)
        const bool live = held(n) && static_cast<std::uint64_t>(newest) - static_cast<std::uint64_t>(n) <= params_.generations;
        if (ring)
            chosen.emplace_back(held(n) ? n : kGenerationNone, i);
        else if (live)
            chosen.emplace_back(n, i);
    }
    if (!ring) std::sort(chosen.begin(), chosen.end());
    std::vector<std::unique_ptr<BloomFilter>> views;
    std::vector<const BloomFilter*> gens;
    std::vector<std::uint64_t> counts;
    std::vector<std::int64_t> numbers;
    for (const auto& [n, i] : chosen) {
        std::uint64_t count = 0;
        if (n != kGenerationNone) {
            // The file's count, and this handle's adds not yet flushed: since
            // its last flush of this generation, or all its filter counts if
            // another handle restarted the place since (the filter's count
            // restarted when this handle's sync saw it, before this call).
            count = load_count(head(i));
            if (counted_number_[i] != n)
                count += adds[i];
            else if (adds[i] >= counted_[i])
                count += adds[i] - counted_[i];
        }
        // (bits are only set while the lock is held: the copy has at least these)
        count = std::min(count, view(i, 0)->bits_set());
        views.push_back(view(i, count));
        gens.push_back(views.back().get());
        counts.push_back(count);
        numbers.push_back(n);
    }
    WindowHeader p = params_;
    p.ring = false;  // (set again by the ring's encoder)
    p.dirty = false;
    const std::size_t len = window_encoded_size(gens, ring);
    unsigned char* out = alloc(len);
    if (ring)
        encode_window_ring(p, gens, counts, numbers, out, len);
    else
        encode_window(p, gens, counts, numbers, out, len);
}

std::int64_t MappedWindow::number(std::size_t i) const { return load_number(head(i)); }

void MappedWindow::check_writer(const char* doing) const {
    if (!file_->writable())
        throw std::invalid_argument("cannot " + std::string(doing) + ": '" + file_->path() + "' is mapped read-only");
    if (file_->released()) throw std::invalid_argument("I/O operation on a closed filter");
    if (file_->inherited())
        throw std::invalid_argument("'" + file_->path() +
                                    "' was opened for writing by a parent of this process, before a fork: a child "
                                    "must not write through its parent's handle; open the file again in this "
                                    "process with open(path, 'r+')");
}

void MappedWindow::empty_place(std::size_t i, std::int64_t mark) {
    unsigned char* h = head(i);
    store_number(h, kGenerationStarting);  // nobody probes nor adds to it from here
    auto* words = reinterpret_cast<std::uint64_t*>(h + kRingRecordHead + kHeaderSize);
    for (std::size_t w = 0, n = headers_[i].payload_len / 8; w < n; ++w) atomic_store(words + w, 0);
    store_count(h, 0);
    store_number(h, mark);
}

std::int64_t MappedWindow::start_generation(std::int64_t n, std::uint64_t adds) {
    check_writer("start a generation");
    if (n == kGenerationNone || n == kGenerationStarting) throw std::invalid_argument("no such generation number");
    const auto i = static_cast<std::size_t>(place_of(n, heads_.size()));
    HeaderLock lock(*file_);
    // Started already, or a newer one began while the caller waited: the
    // newest is the one to add to (n may have expired by then).
    std::int64_t newest = kGenerationNone;
    for (std::size_t p = 0; p < heads_.size(); ++p) {
        const std::int64_t held = number(p);
        if (held != kGenerationNone && held != kGenerationStarting && (newest == kGenerationNone || held > newest))
            newest = held;
    }
    if (newest != kGenerationNone && newest >= n) return newest;
    empty_place(i, n);
    counted_number_[i] = n;
    counted_[i] = adds;  // this handle's adds to the place count from here
    return n;
}

void MappedWindow::clear(const std::vector<std::uint64_t>& adds) {
    check_writer("clear");
    HeaderLock lock(*file_);
    for (std::size_t i = 0; i < heads_.size(); ++i) {
        empty_place(i, kGenerationNone);
        counted_number_[i] = kGenerationNone;
        counted_[i] = adds.at(i);
    }
}

void MappedWindow::count_adds(const std::vector<std::uint64_t>& adds) {
    if (adds.size() != heads_.size()) throw std::invalid_argument("flush: one insert count per place");
    for (std::size_t i = 0; i < heads_.size(); ++i) {
        const std::int64_t n = number(i);
        // Adds made since this handle last counted go to the place's
        // generation if it is still the one they were counted for; if
        // another handle restarted the place since, the place filter's count
        // restarted when this handle synced (Python does, before a flush),
        // and all it counts since are the new generation's.
        const bool held = n != kGenerationNone && n != kGenerationStarting;
        if (held && n == counted_number_[i] && adds[i] >= counted_[i])
            store_count(head(i), load_count(head(i)) + (adds[i] - counted_[i]));
        else if (held && n != counted_number_[i])
            store_count(head(i), load_count(head(i)) + adds[i]);
        counted_number_[i] = n;
        counted_[i] = adds[i];
    }
}

void MappedWindow::flush(const std::vector<std::uint64_t>& adds, bool final) {
    if (file_->released()) return;
    if (!file_->writable()) {  // a reader writes nothing; at close it lets go, as a writer does
        if (final) file_->release();
        return;
    }
    if (file_->inherited()) {
        if (final) return file_->release();  // a forked child lets go of its copy only
        check_writer("flush");
    }
    HeaderLock lock(*file_);
    count_adds(adds);
    unsigned char* base = file_->data();
    Header top = decode_header(base, file_->size());
    if (final && sole_writer(*file_)) {
        // The last writer out: every place's header and checksum current,
        // a place left starting by a killed rotator emptied, counts cut to
        // the bits they set, the container clean.
        std::uint64_t total = 0;
        unsigned char buf[kHeaderSize];
        for (std::size_t i = 0; i < heads_.size(); ++i) {
            if (number(i) == kGenerationStarting) empty_place(i, kGenerationNone);
            unsigned char* rec = head(i) + kRingRecordHead;
            Header h = headers_[i];
            h.flags = 0;
            h.writers = 0;
            h.fill = payload_fill(h, rec + kHeaderSize);
            const std::uint64_t count = std::min(load_count(head(i)), h.fill);
            store_count(head(i), count);
            h.insert_count = count;
            total += count;
            encode_header(h, buf);
            std::memcpy(rec, buf, kHeaderSize);
            write_u64(rec, trailer_offset(h), checksum64(rec + kHeaderSize, h.payload_len));
        }
        top.flags = kFlagRing;
        top.writers = 0;
        top.insert_count = total;
        encode_header(top, buf);
        std::memcpy(base, buf, kHeaderSize);
        finish_container(base, file_->size());
    } else if (final) {
        top.writers = top.writers > 1 ? top.writers - 1 : 1;
        unsigned char buf[kHeaderSize];
        encode_header(top, buf);
        std::memcpy(base, buf, kHeaderSize);
    }
    file_->sync();
    if (final) {
        leave_writers(*file_);
        file_->release();
    }
}

}  // namespace bloomline
