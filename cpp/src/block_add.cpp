// See block_add.hpp: the blocked layout's one batch add, in its blind and
// look-first forms.
#include "bloomline/block_add.hpp"

#include "bloomline/bits.hpp"
#include "bloomline/index.hpp"
#include "bloomline/stream.hpp"

namespace bloomline {

namespace {

// Set the bit at `bit_index` (only its low 6 bits count, so a block offset
// 0..511 can be passed as it is) of the word at w without looking first;
// adds 1 to clear_count when it was clear.
inline void or_word_bit(std::uint64_t* w, unsigned bit_index, unsigned& clear_count) {
    std::uint64_t v = load_le(w);
#if defined(__x86_64__) && defined(__GNUC__) && !defined(BLOOMLINE_NO_INLINE_ASM)
    // bts sets the bit (its register index taken modulo 64) and leaves the
    // old value in the carry flag; sbb of -1 adds 1 - carry. GCC 12 writes
    // a shift, a not, an and and an add besides the or for the lines below
    // (benchmarks/NOTES.md, "Adds"). The sanitizer build in CI
    // defines BLOOMLINE_NO_INLINE_ASM, so the portable lines are tested too.
    asm("btsq %[b], %[v]\n\tsbbl $-1, %[c]"
        : [v] "+r"(v), [c] "+r"(clear_count)
        : [b] "r"(static_cast<std::uint64_t>(bit_index))
        : "cc");
#else
    const std::uint64_t bit = std::uint64_t{1} << (bit_index & 63);
    clear_count += (v & bit) == 0;
    v |= bit;
#endif
    atomic_store(w, to_le64(v));
}

// One key, blind: set the k offsets of h2 in `block`; returns how many were
// clear.
template <std::uint32_t kFixedK>
inline unsigned block_set_all(std::uint64_t* block, std::uint64_t h2, std::uint32_t k) {
    unsigned changed = 0;
    for_each_probe<kFixedK>(k, [&](std::uint32_t j) {
        const unsigned off = offset_in_block(h2, j);
        or_word_bit(block + (off >> 6), off, changed);
    });
    return changed;
}

// Two keys of different blocks, blind, their bits interleaved (a's bit j,
// b's bit j, a's bit j + 1, ...).
template <std::uint32_t kFixedK>
inline void block_set_all_two(std::uint64_t* block_a, std::uint64_t h2_a, std::uint64_t* block_b, std::uint64_t h2_b,
                              std::uint32_t k, unsigned& changed_a, unsigned& changed_b) {
    for_each_probe<kFixedK>(k, [&](std::uint32_t j) {
        const unsigned off_a = offset_in_block(h2_a, j);
        or_word_bit(block_a + (off_a >> 6), off_a, changed_a);
        const unsigned off_b = offset_in_block(h2_b, j);
        or_word_bit(block_b + (off_b >> 6), off_b, changed_b);
    });
}

// Keys h[0..m), blind, in order: each(i, changed) for each.
template <std::uint32_t kFixedK, class Each>
inline void add_group_blind(std::uint64_t* words, std::uint64_t num_blocks, std::uint32_t k, const Hash128* h,
                            std::size_t m, Each&& each) {
    auto block_of_key = [words, num_blocks](const Hash128& x) {
        return words + block_index(x.h1, num_blocks) * kBlockWords;
    };
    std::size_t i = 0;
    for (; i + 2 <= m; i += 2) {
        std::uint64_t* const a = block_of_key(h[i]);
        std::uint64_t* const b = block_of_key(h[i + 1]);
        if (a == b) {
            each(i, block_set_all<kFixedK>(a, h[i].h2, k));
            each(i + 1, block_set_all<kFixedK>(b, h[i + 1].h2, k));
            continue;
        }
        unsigned changed_a = 0, changed_b = 0;
        block_set_all_two<kFixedK>(a, h[i].h2, b, h[i + 1].h2, k, changed_a, changed_b);
        each(i, changed_a);
        each(i + 1, changed_b);
    }
    if (i < m) each(i, block_set_all<kFixedK>(block_of_key(h[i]), h[i].h2, k));
}

}  // namespace

AddCounts add_blocked(std::uint64_t* words, std::uint64_t num_blocks, std::uint32_t k, const BatchKeys& keys,
                      std::size_t n, AddForm form, bool* out) {
    AddCounts total;
    auto lines = [words, num_blocks](const Hash128& h, const void** addrs) {
        addrs[0] = words + block_index(h.h1, num_blocks) * kBlockWords;
        return 1u;
    };
    with_stream_source<OneLinePerKey>(keys, [&](auto& src) {
        if (form != AddForm::blind) {
            const bool shared = form == AddForm::shared;
            stream<OneLinePerKey, true>(src, n, lines, [&](const Hash128* h, std::size_t m, std::size_t first) {
                AddCounts group;
                for (std::size_t i = 0; i < m; ++i) {
                    std::uint64_t* block = words + block_index(h[i].h1, num_blocks) * kBlockWords;
                    const unsigned changed =
                        shared ? block_set_shared(block, h[i].h2, k) : block_set_look_first(block, h[i].h2, k);
                    const bool is_new = group.count(changed);
                    if (out) out[first + i] = is_new;
                }
                total += group;
            });
            return;
        }
        with_fixed_k(k, [&](auto fixed_k) {
            constexpr std::uint32_t kFixedK = decltype(fixed_k)::value;
            stream<OneLinePerKey, true>(src, n, lines, [&](const Hash128* h, std::size_t m, std::size_t first) {
                // Counts in locals: a store to the bits (a uint64_t) may
                // alias anything reached through a pointer.
                AddCounts group;
                bool* const o = out ? out + first : nullptr;
                add_group_blind<kFixedK>(words, num_blocks, k, h, m, [&](std::size_t i, unsigned changed) {
                    const bool is_new = group.count(changed);
                    if (o) o[i] = is_new;
                });
                total += group;
            });
        });
    });
    return total;
}

}  // namespace bloomline
