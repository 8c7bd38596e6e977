// The threads of the batch adds (parallel.hpp): a Team runs every phase on
// every member exactly once and in order, returns only when all have ended,
// rethrows a member's or the caller's exception and stays usable after it;
// and a threaded add gives one thread's bits, answers and counts, in place
// (hash arrays) and hashed (integer keys), over several super-chunks with a
// short last one and keys repeated within and across chunks; counting
// filters too (4-bit counters: two owners never share a byte). Lines split
// on several threads are the lines split on one. A hashing error in a
// pipelined add leaves the chunk added before it counted.
// Also run under -fsanitize=thread (the command is in docs/design/threads.md).
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bloomline/bloom_filter.hpp"
#include "bloomline/counting_filter.hpp"
#include "bloomline/parallel.hpp"
#include "bloomline/sizing.hpp"
#include "check.hpp"

using namespace bloomline;

namespace {

const unsigned kSizes[] = {1, 2, 3, 8, 17, 33};

// Phases per team: thousands, fewer for the large teams (each phase wakes
// every member, on a 2-CPU CI machine too, under qemu and TSAN).
unsigned phases_for(unsigned size) { return size <= 3 ? 2000 : size <= 8 ? 500 : 100; }

}  // namespace

TEST("Team: every member runs every phase exactly once, in order, and run() returns after all of them") {
    for (unsigned size : kSizes) {
        Team team(size);
        CHECK_EQ(team.size(), size);
        std::vector<std::vector<std::uint32_t>> ran(size);  // [member]: the phases it ran, in its order
        std::atomic<std::uint64_t> calls{0};
        bool all_ended = true;
        for (std::uint32_t p = 0; p < phases_for(size); ++p) {
            // p is read through the phase's own function object: a member
            // calling the wrong phase's (or a stale one) records a wrong p.
            team.run([&ran, &calls, p](unsigned t) {
                ran[t].push_back(p);
                calls.fetch_add(1, std::memory_order_relaxed);
            });
            all_ended = all_ended && calls.load() == std::uint64_t{size} * (p + 1);
        }
        CHECK(all_ended);
        bool in_order = true;
        for (unsigned t = 0; t < size; ++t) {
            in_order = in_order && ran[t].size() == phases_for(size);
            for (std::uint32_t p = 0; in_order && p < ran[t].size(); ++p) in_order = ran[t][p] == p;
        }
        if (!CHECK(in_order)) std::printf("    team of %u\n", size);
    }
}

TEST("Team: a member's exception is rethrown by run() after the phase, and the team runs the next phase") {
    for (unsigned size : {2u, 3u, 8u, 17u}) {
        Team team(size);
        const unsigned thrower = size - 1;
        for (int round = 0; round < 50; ++round) {
            std::atomic<unsigned> ran{0};
            CHECK_THROWS(team.run([&](unsigned t) {
                ran.fetch_add(1);
                if (t == thrower) throw std::runtime_error("member " + std::to_string(t) + " failed");
            }),
                         "failed");
            CHECK_EQ(ran.load(), size);  // the others ran their part of the phase
            ran = 0;
            team.run([&](unsigned) { ran.fetch_add(1); });  // no stale exception from before
            CHECK_EQ(ran.load(), size);
        }
    }
}

TEST("Team: the caller's exception is rethrown after the members have ended, and the team goes on") {
    for (unsigned size : {1u, 2u, 8u}) {
        Team team(size);
        for (int round = 0; round < 50; ++round) {
            std::atomic<unsigned> ran{0};
            CHECK_THROWS(team.run([&](unsigned t) {
                if (t == 0) throw std::runtime_error("caller failed");
                ran.fetch_add(1);
            }),
                         "caller failed");
            CHECK_EQ(ran.load(), size - 1);
            // Caller and a member both throw: one of them is rethrown, once.
            CHECK_THROWS(team.run([&](unsigned t) {
                if (t == 0 || t == size - 1) throw std::runtime_error("both failed");
            }),
                         "both failed");
            ran = 0;
            team.run([&](unsigned) { ran.fetch_add(1); });
            CHECK_EQ(ran.load(), size);
        }
    }
}

TEST("Team: destroyed right after a phase, or never run, it joins its members") {
    for (unsigned size : {2u, 3u, 8u}) {
        std::atomic<std::uint64_t> ran{0};
        // Few rounds: starting a thread costs about a millisecond under qemu.
        for (int i = 0; i < 60; ++i) {
            Team team(size);
            team.run([&](unsigned) { ran.fetch_add(1); });
        }
        CHECK_EQ(ran.load(), std::uint64_t{60} * size);
        for (int i = 0; i < 20; ++i) Team idle(size);
    }
    std::atomic<unsigned> ran{0};
    run_on_threads(5, [&](unsigned) { ran.fetch_add(1); });
    CHECK_EQ(ran.load(), 5u);
}

namespace {

std::unique_ptr<BloomFilter> sized(std::uint64_t capacity, Layout layout) {
    const Params p = optimal_params(static_cast<double>(capacity), 0.01, layout);
    return std::make_unique<BloomFilter>(Geometry{layout, p.num_bits, p.num_hashes, 5}, capacity, 0.01);
}

// n integer keys, each of n / 2 values twice, spread so that some repeats
// fall in one super-chunk and some in another.
std::vector<std::uint64_t> repeated_values(std::size_t n) {
    std::vector<std::uint64_t> v(n);
    const std::uint64_t distinct = n / 2;
    for (std::size_t i = 0; i < n; ++i) v[i] = (i * 7919) % distinct;
    return v;
}

// A threaded add of src against add_keys on one thread: same answers,
// bits, bits set and new keys. Says which differs.
template <class Src>
void check_same_as_one_thread(Layout layout, Src& src, std::size_t n, unsigned threads) {
    auto one = sized(n / 2, layout), many = sized(n / 2, layout);
    std::unique_ptr<bool[]> want(new bool[n]), got(new bool[n]);
    one->add_keys(src, n, want.get());
    std::memset(got.get(), 0, n);
    many->add_keys_on(src, n, got.get(), threads);
    std::size_t first_wrong = n;
    for (std::size_t i = 0; i < n && first_wrong == n; ++i)
        if (want[i] != got[i]) first_wrong = i;
    const bool bits = std::memcmp(one->bits().bytes(), many->bits().bytes(), one->bits().nbytes()) == 0;
    const bool ok = CHECK_EQ(first_wrong, n) && CHECK(bits) && CHECK_EQ(many->insert_count(), one->insert_count()) &&
                    CHECK_EQ(many->bits_set(), one->bits_set());
    // Without answers: the same bits and counts still.
    auto quiet = sized(n / 2, layout);
    quiet->add_keys_on(src, n, nullptr, threads);
    const bool quiet_ok = CHECK(std::memcmp(one->bits().bytes(), quiet->bits().bytes(), one->bits().nbytes()) == 0) &&
                          CHECK_EQ(quiet->insert_count(), one->insert_count());
    if (!ok || !quiet_ok)
        std::printf("    %s layout, %zu keys, %u threads\n", layout == Layout::blocked ? "blocked" : "standard", n, threads);
}

}  // namespace

TEST("threaded adds give one thread's answers, bits and counts: blocked and standard, in place and hashed") {
    for (unsigned threads : {2u, 3u, 8u, 16u}) {
        for (Layout layout : {Layout::blocked, Layout::standard}) {
            // A short last super-chunk, not a multiple of the threads. The
            // blocked layout's adds are pipelined over three chunks' buffers:
            // four and a half chunks use each again. The standard layout's
            // chunks are 2**16 keys.
            const std::size_t chunk = layout == Layout::blocked ? parallel_chunk(threads) : std::size_t{1} << 16;
            const std::size_t n = chunk * (layout == Layout::blocked ? 4 : 2) + chunk / 2 + 37;
            const std::vector<std::uint64_t> values = repeated_values(n);
            if (threads == 2 || threads == 8) {
                IntKeys<std::uint64_t> hashed{values.data(), 3};
                check_same_as_one_thread(layout, hashed, n, threads);
            } else {
                std::vector<Hash128> hashes(n);
                for (std::size_t i = 0; i < n; ++i) hashes[i] = murmur3_128_u64(values[i], 3);
                Prehashed in_place{hashes.data()};
                check_same_as_one_thread(layout, in_place, n, threads);
            }
        }
    }
}

TEST("threaded adds on a filter that has keys already, and with more threads than keys") {
    for (Layout layout : {Layout::blocked, Layout::standard}) {
        const std::vector<std::uint64_t> values = repeated_values(40000);
        IntKeys<std::uint64_t> src{values.data(), 9};
        auto one = sized(20000, layout), many = sized(20000, layout);
        one->add_keys(src, 20000, nullptr);
        many->add_keys_on(src, 20000, nullptr, 4);
        // The rest: half of it known already. Then 5 keys on 8 threads.
        IntKeys<std::uint64_t> rest{values.data() + 20000, 9};
        std::unique_ptr<bool[]> want(new bool[20000]), got(new bool[20000]);
        one->add_keys(rest, 20000, want.get());
        many->add_keys_on(rest, 20000, got.get(), 3);
        CHECK(std::memcmp(want.get(), got.get(), 20000) == 0);
        one->add_keys(src, 5, want.get());
        many->add_keys_on(src, 5, got.get(), 8);
        CHECK(std::memcmp(want.get(), got.get(), 5) == 0);
        CHECK(std::memcmp(one->bits().bytes(), many->bits().bytes(), one->bits().nbytes()) == 0);
        CHECK_EQ(many->insert_count(), one->insert_count());
    }
}

TEST("threaded adds to counting filters give one thread's answers, counters and counts") {
    // 4-bit counters saturate at 15: keys repeated 20 times take some there.
    const std::size_t n = (std::size_t{1} << 16) * 3 + 101;
    std::vector<std::uint64_t> values(n);
    for (std::size_t i = 0; i < n; ++i) values[i] = (i * 7919) % (n / 20);
    IntKeys<std::uint64_t> src{values.data(), 1};
    for (unsigned bits : {4u, 8u}) {
        for (Layout layout : {Layout::blocked, Layout::standard}) {
            for (unsigned threads : {3u, 16u}) {
                const Params p = optimal_params(static_cast<double>(n / 20), 0.01, layout);
                CountingBloomFilter one(Geometry{layout, p.num_bits, p.num_hashes, 1}, bits, n / 20, 0.01);
                CountingBloomFilter many(Geometry{layout, p.num_bits, p.num_hashes, 1}, bits, n / 20, 0.01);
                std::unique_ptr<bool[]> want(new bool[n]), got(new bool[n]);
                one.add_keys(src, n, want.get());
                many.add_keys_on(src, n, got.get(), threads);
                const bool ok = CHECK(std::memcmp(want.get(), got.get(), n) == 0) && CHECK(one.same_content(many)) &&
                                CHECK_EQ(many.nonzero_counters(), one.nonzero_counters()) &&
                                CHECK_EQ(many.saturated_counters(), one.saturated_counters()) &&
                                CHECK_EQ(many.insert_count(), one.insert_count());
                if (!ok) std::printf("    %u-bit counters, %u threads\n", bits, threads);
            }
        }
    }
}

TEST("lines split on several threads are the lines split on one: boundaries anywhere, CRLF, long lines") {
    // Lines of random lengths (empty ones, CRLF, a lone CR as content, lines
    // longer than a thread's share), blocks whose last line lacks its
    // newline or ends in a CR, cut on 2 to 9 threads at 1 MiB a thread.
    std::uint64_t state = 12345;
    auto next = [&state] { return state = state * 6364136223846793005ULL + 1442695040888963407ULL; };
    for (int round = 0; round < 6; ++round) {
        std::string block;
        const std::size_t size = (std::size_t{1} << 20) * (3 + round) + static_cast<std::size_t>(next() % 1000);
        while (block.size() < size) {
            const std::uint64_t r = next();
            const std::size_t len = r % 97 == 0 ? (std::size_t{1} << 20) + r % 5000 : (r >> 8) % 120;
            for (std::size_t i = 0; i < len; ++i) block += static_cast<char>('a' + (next() >> 33) % 26);
            if (r % 11 == 0) block += '\r';
            block += r % 5 == 0 ? "\r\n" : "\n";
        }
        if (round % 3 == 1) block += "last without newline";
        if (round % 3 == 2) block += "last\r";
        const auto* p = reinterpret_cast<const unsigned char*>(block.data());
        LineSpans one;
        split_lines(p, block.size(), &one);
        for (unsigned threads : {2u, 3u, 9u}) {
            LineSpans many;
            split_lines_on(p, block.size(), &many, threads);
            const bool same = CHECK(many.begin == one.begin) && CHECK(many.end == one.end);
            if (!same) std::printf("    %zu bytes, %u threads\n", block.size(), threads);
        }
    }
    // Lines of one length (6 bytes, "abcd\r\n" or "abcde\n") in blocks of
    // sizes that put the threads' boundaries at every place in a line: on
    // a line's first byte, its last, between CR and LF.
    for (const char* line : {"abcd\r\n", "abcde\n"}) {
        for (std::size_t extra = 0; extra < 14; ++extra) {
            std::string block;
            const std::size_t size = (std::size_t{2} << 20) + extra;
            while (block.size() + 7 <= size) block += line;
            block.append(std::string(line).substr(0, size - block.size()));
            const auto* p = reinterpret_cast<const unsigned char*>(block.data());
            LineSpans one, two;
            split_lines(p, block.size(), &one);
            split_lines_on(p, block.size(), &two, 2);
            const bool same = CHECK(two.begin == one.begin) && CHECK(two.end == one.end);
            if (!same) std::printf("    %zu bytes of \"%s\" lines\n", block.size(), line);
        }
    }
    LineSpans none;
    split_lines_on(nullptr, 0, &none, 4);
    CHECK_EQ(none.size(), std::size_t{0});
}

namespace {

// Integer keys whose hashing fails at key `at` (a source may throw).
struct FailingKeys {
    const std::uint64_t* v;
    std::size_t at;
    Hash128 operator()(std::size_t i) const {
        if (i == at) throw std::runtime_error("key " + std::to_string(i));
        return murmur3_128_u64(v[i], 3);
    }
};

}  // namespace

TEST("a key that fails to hash in a pipelined add: the call throws, the chunk added before it is counted") {
    // Keys of the second super-chunk are hashed in the phase that adds the
    // first: the first is added and counted, the second never begins.
    const unsigned threads = 4;
    const std::size_t chunk = parallel_chunk(threads), n = chunk * 3;
    std::vector<std::uint64_t> values(n);
    for (std::size_t i = 0; i < n; ++i) values[i] = i * 0x9E3779B97F4A7C15ULL;
    for (std::size_t at : {std::size_t{0}, chunk + 5, 2 * chunk + 3}) {
        auto f = sized(n, Layout::blocked), first = sized(n, Layout::blocked);
        FailingKeys bad{values.data(), at};
        std::unique_ptr<bool[]> out(new bool[n]);
        bool threw = false;
        try {
            f->add_keys_on(bad, n, out.get(), threads);
        } catch (const std::runtime_error&) {
            threw = true;
        }
        CHECK(threw);
        // What one thread makes of the whole chunks before the failing one.
        IntKeys<std::uint64_t> good{values.data(), 3};
        const std::size_t added = at / chunk * chunk;
        first->add_keys(good, added, nullptr);
        const bool same = CHECK_EQ(f->insert_count(), first->insert_count()) &&
                          CHECK_EQ(f->bits_set(), f->bits().popcount()) &&
                          CHECK(std::memcmp(f->bits().bytes(), first->bits().bytes(), f->bits().nbytes()) == 0);
        if (!same) std::printf("    failing at key %zu\n", at);
        // The filter goes on: the rest added on threads gives one thread's bits.
        f->add_keys_on(good, n, nullptr, threads);
        first->add_keys(good, n, nullptr);
        CHECK(std::memcmp(f->bits().bytes(), first->bits().bytes(), f->bits().nbytes()) == 0);
        CHECK_EQ(f->insert_count(), first->insert_count());
    }
}
