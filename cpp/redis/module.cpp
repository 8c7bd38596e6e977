// bloomline's Redis module: `redis-server --loadmodule $(bloomline redis-module)`.
//
// Commands over plain Redis strings, each taking a batch of positions
// computed by the client (positions.hpp) as one bytes argument. The client's
// side of each command (its arguments, in order, and how it is retried) is
// python/bloomline/redis/_module.py; docs/design/redis.md has the protocol.
//
//   BLOOMLINE.ADD shard count answer ttl_ms mode;bytes=<size> positions
//       test-and-set every key of the batch in one shard, atomically. Reply:
//       [answer, count]: one byte per key ('1' new, '0' present, '?'
//       unknown, see below) and the shard's count of new keys afterwards.
//       The answer is kept under the name `answer` for ttl_ms, and a repeat
//       of the command (a client re-sending after a dropped reply) gets it
//       back instead of adding again: a key is new to exactly one caller.
//   BLOOMLINE.CADD stages count answer shard_1 .. shard_n expected capacity ttl_ms mode;bytes=<sizes> positions
//       the same for a stage of a scalable chain, over all its shards in one
//       step (its keys share one hash tag): refused with "-STALE m" unless
//       the string at `stages` is `expected` (the client's idea of the
//       chain's length); the stage's count of new keys at `count` never
//       passes `capacity`: the adds stop before the key that would pass it,
//       and the reply's answer holds only the keys taken (shard 1's in
//       order, then shard 2's, ...). `positions` is each shard's blob in
//       turn, each after its length (u32, little-endian).
//   BLOOMLINE.HAS shard bytes=<size> positions
//       reply: one byte per key, '1' where every bit is set.
//   bytes=: each shard's size, after the adds' mode (a shard at another
//       size is "-WRONGSIZE <key> ..."); the forms without it, of an
//       earlier module, are taken unchecked (an AOF of theirs replays).
//   BLOOMLINE.WADD, BLOOMLINE.WHAS
//       a windowed filter's add and lookup over its ring of generations
//       (below, "a windowed filter").
//
// mode is "F" for a first send and "R" for a re-send whose first send may
// have run. A re-send finds the kept answer; if it is gone (expired past
// the client's retry window, evicted, deleted), a key found present may
// have been set by that first send, so it is answered '?' and the client
// raises rather than call it "seen".
//
// Kept answers live in the module's own memory, not as keys: an answer
// only has to outlive a re-send, and one that is lost (a restart, a
// failover to a replica that missed it, a slot moved) is safe already (the
// re-send answers '?'). A key with a TTL per answer cost the server more
// than the add itself (benchmarks/NOTES.md, "Redis"). Replicas
// run each add too (ReplicateVerbatim) and keep their own answers. Their
// invariants:
//  - an answer never outlives the dataset it describes: a FLUSHALL and a
//    load (a restart's RDB or AOF, a replica's full sync) forget them all,
//    and a command replayed from an AOF keeps none (a promotion keeps
//    them: the promoted replica's data is the one they describe);
//  - a command that comes from the primary (over the replication link) is
//    applied, never answered from memory: the primary decided it;
//  - their memory is Redis's (RedisModule_Alloc), so it counts in
//    used_memory, maxmemory refuses adds (deny-oom) when it is full, and
//    INFO bloomline shows it; expired answers are freed in the order they
//    expire, whatever order they were kept in.
//
// A key of a filter that should exist and does not (evicted, expired,
// deleted) is "-MISSING <name>", never made anew: a fresh shard would
// answer "new" for every key the filter had seen.
//
// The value stays a plain string holding the same bytes as a local filter's
// payload: GETRANGE, BITCOUNT, RDB snapshots and the plain-Redis script all
// read it, and a filter the module wrote is read by a server without it.
// Writes replicate as the command itself (one per batch): replicas and an
// AOF replay load the module too. Replicating them as standard commands
// would send a SETRANGE per changed block, up to k per key, many times the
// size of the command itself.
//
// Written against the documented module API (modules-api-ref) with our own
// declarations: the module gets each function by name through the GetApi
// pointer that Redis passes as the first field of the load context, as the
// documented RedisModule_Init does. No Redis header is used.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bloomline/positions.hpp"

namespace {

struct Ctx;
struct Str;
struct Key;
using CmdFunc = int (*)(Ctx*, Str**, int);

constexpr int kOk = 0, kErr = 1, kApiVersion1 = 1;
constexpr int kRead = 1 << 0, kWrite = 1 << 1;
constexpr int kKeyTypeEmpty = 0, kKeyTypeString = 1, kKeyTypeHash = 3;
constexpr int kHashCFields = 1 << 2;
constexpr long long kMaxTtlMs = 86'400'000;  // a day: the client's bound on answer_ttl_ms
// Counts and generation numbers stay below 2**53, where Lua's doubles (the
// plain backend's) hold them exactly.
constexpr double kMaxExact = 9007199254740992.0;  // 2**53

struct InfoCtx;
struct CallReply;
struct Event {
    std::uint64_t id, version;
};
using EventFunc = void (*)(Ctx*, Event, std::uint64_t, void*);
using InfoFunc = void (*)(InfoCtx*, int);
constexpr Event kFlushDb{2, 1}, kLoading{3, 1}, kCronLoop{8, 1}, kSwapDb{11, 1};
constexpr std::uint64_t kLoadingEnded = 3, kFlushStart = 0;
constexpr int kCtxReplicated = 1 << 12, kCtxLoading = 1 << 13;

// Command metadata (Redis 7.0+): key specs, so that ACL key permissions
// see reads as reads; laid out as the documented structs.
struct Command;
struct KeySpec {
    const char* notes;
    std::uint64_t flags;
    int begin_search_type;
    union {
        struct {
            int pos;
        } index;
        struct {
            const char* keyword;
            int startfrom;
        } keyword;
    } bs;
    int find_keys_type;
    union {
        struct {
            int lastkey, keystep, limit;
        } range;
        struct {
            int keynumidx, firstkey, keystep;
        } keynum;
    } fk;
};
struct CommandArgV1 {  // only its size is read (no args are declared)
    const char* name;
    int type, key_spec_index;
    const char *token, *summary, *since;
    int flags;
    const char* deprecated_since;
    void* subargs;
    const char* display_text;
};
struct InfoVersion {
    int version;
    std::size_t sizeof_historyentry, sizeof_keyspec, sizeof_arg;
};
struct CommandInfo {
    const InfoVersion* version;
    const char *summary, *complexity, *since;
    void* history;
    const char* tips;
    int arity;
    KeySpec* key_specs;
    void* args;
};
constexpr std::uint64_t kKeyRo = 1 << 0, kKeyRw = 1 << 1, kKeyAccess = 1 << 4, kKeyUpdate = 1 << 5,
                        kKeyNotKey = 1 << 8;
constexpr int kSearchIndex = 2, kFindRange = 2;

// The API functions this module uses, fetched by name at load.
int (*GetApi)(const char*, void*);
int (*CreateCommand)(Ctx*, const char*, CmdFunc, const char*, int, int, int);
void (*SetModuleAttribs)(Ctx*, const char*, int, int);
int (*IsModuleNameBusy)(const char*);
int (*WrongArity)(Ctx*);
int (*ReplyWithError)(Ctx*, const char*);
int (*ReplyWithStringBuffer)(Ctx*, const char*, std::size_t);
int (*ReplyWithArray)(Ctx*, long);
int (*ReplyWithLongLong)(Ctx*, long long);
Key* (*OpenKey)(Ctx*, Str*, int);
void (*CloseKey)(Key*);
int (*KeyType)(Key*);
char* (*StringDMA)(Key*, std::size_t*, int);
const char* (*StringPtrLen)(const Str*, std::size_t*);
int (*StringTruncate)(Key*, std::size_t);
int (*ReplicateVerbatim)(Ctx*);
int (*StringToLongLong)(const Str*, long long*);
long long (*Milliseconds)();
int (*GetContextFlags)(Ctx*);
void* (*Alloc)(std::size_t);
void (*Free)(void*);
int (*SubscribeToServerEvent)(Ctx*, Event, EventFunc);
int (*RegisterInfoFunc)(Ctx*, InfoFunc);
int (*InfoAddSection)(InfoCtx*, const char*);
int (*InfoAddFieldLongLong)(InfoCtx*, const char*, long long);
Command* (*GetCommand)(Ctx*, const char*);
CallReply* (*Call)(Ctx*, const char*, const char*, ...);
int (*CallReplyType)(CallReply*);
const char* (*CallReplyStringPtr)(CallReply*, std::size_t*);
long long (*CallReplyInteger)(CallReply*);
void (*FreeCallReply)(CallReply*);
int (*Replicate)(Ctx*, const char*, const char*, ...);
int (*HashGet)(Key*, int, ...);
int (*HashSet)(Key*, int, ...);
int (*SetAbsExpire)(Key*, long long);
Str* (*CreateString)(Ctx*, const char*, std::size_t);
std::size_t (*ValueLength)(Key*);
void (*FreeString)(Ctx*, Str*);
int (*SetCommandInfo)(Command*, const CommandInfo*);
int (*SetCommandACLCategories)(Command*, const char*);

template <class F>
bool api(const char* name, F* fn) {
    return GetApi(name, reinterpret_cast<void*>(fn)) == kOk;
}

// An opened key, closed on every path out.
struct OpenedKey {
    Key* k;
    OpenedKey(Ctx* ctx, Str* name, int mode) : k(OpenKey(ctx, name, mode)) {}
    ~OpenedKey() {
        if (k) CloseKey(k);
    }
    OpenedKey(const OpenedKey&) = delete;
    OpenedKey& operator=(const OpenedKey&) = delete;
};

std::string text(const Str* s) {
    std::size_t len = 0;
    const char* p = StringPtrLen(s, &len);
    return std::string(p, len);
}

int reply_error(Ctx* ctx, const std::string& message) {
    ReplyWithError(ctx, message.c_str());
    return kOk;
}

int reply_missing(Ctx* ctx, const Str* name) { return reply_error(ctx, "MISSING " + text(name)); }

// A string value's bytes, or null (and an error reply) when the key is
// missing or holds another type.
unsigned char* string_bytes(Ctx* ctx, const OpenedKey& key, const Str* name, int mode, std::size_t* len) {
    const int type = key.k ? KeyType(key.k) : kKeyTypeEmpty;
    if (type == kKeyTypeEmpty) {
        reply_missing(ctx, name);
        return nullptr;
    }
    if (type != kKeyTypeString) {
        reply_error(ctx, "WRONGTYPE bloomline: " + text(name) + " holds a value that is not a string");
        return nullptr;
    }
    return reinterpret_cast<unsigned char*>(StringDMA(key.k, len, mode));
}

// The integer in an opened string key (a count, a stage count); false
// (and an error reply) when it is missing or not an integer.
bool read_integer(Ctx* ctx, const OpenedKey& key, const Str* name, long long* value) {
    std::size_t len = 0;
    const unsigned char* p = string_bytes(ctx, key, name, kRead, &len);
    if (!p) return false;
    const std::string digits(reinterpret_cast<const char*>(p), len);
    char* end = nullptr;
    errno = 0;
    *value = std::strtoll(digits.c_str(), &end, 10);
    // (as written: a count in [0, 2**53) in its own decimal form, so that
    // adding a batch's news to it can never overflow)
    if (digits.empty() || *end != '\0' || errno != 0 || *value < 0 || static_cast<double>(*value) >= kMaxExact ||
        std::to_string(*value) != digits) {
        reply_error(ctx, "WRONGTYPE bloomline: " + text(name) + " does not hold an integer in [0, 2**53)");
        return false;
    }
    return true;
}

bool read_count(Ctx* ctx, Str* name, long long* value) {
    OpenedKey key(ctx, name, kRead);
    return read_integer(ctx, key, name, value);
}

// Answers kept for re-sends (see the top): by name, and by expiry time.
// Their memory is Redis's: allocated through RedisModule_Alloc, counted in
// kept_bytes for INFO.
std::size_t kept_bytes = 0;

template <class T>
struct RedisAllocator {
    using value_type = T;
    RedisAllocator() = default;
    template <class U>
    RedisAllocator(const RedisAllocator<U>&) {}  // NOLINT: rebinding, as the standard containers do
    T* allocate(std::size_t n) {
        void* p = Alloc(n * sizeof(T));
        if (p == nullptr) throw std::bad_alloc();
        kept_bytes += n * sizeof(T);
        return static_cast<T*>(p);
    }
    void deallocate(T* p, std::size_t n) {
        kept_bytes -= n * sizeof(T);
        Free(p);
    }
    template <class U>
    bool operator==(const RedisAllocator<U>&) const { return true; }
    template <class U>
    bool operator!=(const RedisAllocator<U>&) const { return false; }
};

using KeptString = std::basic_string<char, std::char_traits<char>, RedisAllocator<char>>;
struct Kept {
    KeptString answer;
    long long expires_ms;
};
struct KeptHash {
    std::size_t operator()(const KeptString& s) const { return std::hash<std::string_view>()({s.data(), s.size()}); }
};
std::unordered_map<KeptString, Kept, KeptHash, std::equal_to<KeptString>,
                   RedisAllocator<std::pair<const KeptString, Kept>>>
    kept_answers;
std::multimap<long long, KeptString, std::less<long long>, RedisAllocator<std::pair<const long long, KeptString>>>
    kept_expiry;

// Free answers that expired, soonest first, at most `limit` of them.
void drop_expired(long long now, std::size_t limit) {
    for (std::size_t i = 0; i < limit && !kept_expiry.empty() && kept_expiry.begin()->first <= now; ++i) {
        const auto first = kept_expiry.begin();
        const auto found = kept_answers.find(first->second);
        if (found != kept_answers.end() && found->second.expires_ms == first->first) kept_answers.erase(found);
        kept_expiry.erase(first);
    }
}

void forget_answers() {
    kept_answers.clear();
    kept_expiry.clear();
    decltype(kept_answers)().swap(kept_answers);  // its buckets too
}

void keep_answer(Ctx* ctx, const std::string& name, const std::string& answer, long long ttl_ms) {
    // A command replayed from an AOF at load: its first send is long past,
    // and the answer would come back with a fresh TTL.
    if (GetContextFlags(ctx) & kCtxLoading) return;
    const long long now = Milliseconds();
    drop_expired(now, 64);
    KeptString key(name.data(), name.size());
    const auto found = kept_answers.find(key);
    if (found != kept_answers.end()) {  // the same name kept again (a replica's replay): one entry
        found->second = Kept{KeptString(answer.data(), answer.size()), now + ttl_ms};
    } else {
        kept_answers.emplace(key, Kept{KeptString(answer.data(), answer.size()), now + ttl_ms});
    }
    kept_expiry.emplace(now + ttl_ms, std::move(key));
}

// Forget every answer when the dataset they describe is replaced (a
// SWAPDB too: the keys they describe are elsewhere now).
void on_dataset_event(Ctx*, Event e, std::uint64_t sub, void*) {
    if (e.id == kLoading.id && sub == kLoadingEnded) return;  // forgotten at the start already
    if (e.id == kFlushDb.id && sub != kFlushStart) return;
    forget_answers();
}

// The server's cron (hz times a second): expired answers go even while no add comes.
void on_cron(Ctx*, Event, std::uint64_t, void*) { drop_expired(Milliseconds(), 10'000); }

void info(InfoCtx* ctx, int) {
    InfoAddSection(ctx, "kept");
    InfoAddFieldLongLong(ctx, "answers", static_cast<long long>(kept_answers.size()));
    InfoAddFieldLongLong(ctx, "bytes", static_cast<long long>(kept_bytes));
}

// A filter's count of new keys (a decimal string), opened once for the
// add: read first, written in place after, so that its key keeps its TTL
// (a filter given one by expire()), which setting a new value would drop.
struct Count {
    OpenedKey key;
    long long value = 0;
    Count(Ctx* ctx, Str* name) : key(ctx, name, kRead | kWrite) {}
    bool read(Ctx* ctx, Str* name) { return read_integer(ctx, key, name, &value); }
    void add(long long news) {
        if (news == 0) return;
        value += news;
        const std::string digits = std::to_string(value);
        StringTruncate(key.k, digits.size());
        std::size_t len = 0;
        std::memcpy(StringDMA(key.k, &len, kWrite), digits.data(), digits.size());
    }
};

int reply_answer(Ctx* ctx, std::string_view answer, long long count) {
    ReplyWithArray(ctx, 2);
    ReplyWithStringBuffer(ctx, answer.data(), answer.size());
    return ReplyWithLongLong(ctx, count);
}

// A batch already done: its kept answer, or null. A command from the
// primary is never answered from memory: it is applied.
const Kept* kept_answer(Ctx* ctx, const std::string& answer_name) {
    if (GetContextFlags(ctx) & kCtxReplicated) return nullptr;
    const auto found = kept_answers.find(KeptString(answer_name.data(), answer_name.size()));
    if (found == kept_answers.end() || found->second.expires_ms <= Milliseconds()) return nullptr;
    return &found->second;
}

// A batch already done: its kept answer, with the count as it is now.
bool replay(Ctx* ctx, const std::string& answer_name, const Count& count) {
    const Kept* kept = kept_answer(ctx, answer_name);
    if (!kept) return false;
    reply_answer(ctx, {kept->answer.data(), kept->answer.size()}, count.value);
    return true;
}

bool parse_sizes(Ctx* ctx, const std::string& t, int shards, std::vector<std::size_t>* sizes);

// ttl_ms and mode, shared by both adds; false after an error reply. The
// mode carries the shards' sizes: "F;bytes=S1,S2,..." (parse_sizes); a
// bare "F" or "R", of an earlier module's AOF, leaves them unchecked.
// WADD (shards 0) has its own bytes argument: a bare mode only.
bool parse_add_args(Ctx* ctx, Str* ttl_arg, Str* mode_arg, int shards, long long* ttl, bloomline::Apply* mode,
                    std::vector<std::size_t>* sizes) {
    if (StringToLongLong(ttl_arg, ttl) != kOk || *ttl < 1 || *ttl > kMaxTtlMs) {
        reply_error(ctx, "ERR bloomline: ttl_ms must be an integer in [1, 86400000]");
        return false;
    }
    std::size_t len = 0;
    const char* m = StringPtrLen(mode_arg, &len);
    if (len == 0 || (m[0] != 'F' && m[0] != 'R') || (len > 1 && (m[1] != ';' || shards == 0))) {
        reply_error(ctx, "ERR bloomline: mode must be F (a first send) or R (a re-send)");
        return false;
    }
    *mode = m[0] == 'F' ? bloomline::Apply::add : bloomline::Apply::add_unsure;
    if (len == 1) {
        sizes->assign(static_cast<std::size_t>(shards), 0);
        return true;
    }
    return parse_sizes(ctx, std::string(m + 2, len - 2), shards, sizes);
}

// The shards' sizes in bytes, "bytes=S1,S2,..": one per shard, each whole
// 64-byte blocks. A shard is read only at the size its filter gave it: one
// truncated, grown or made again shorter (SETRANGE past a deleted key) read
// as it is answered keys added before "new". (The forms without sizes, of
// an AOF written by an earlier module, are read unchecked, as they were.)
// false after an error reply.
bool parse_sizes(Ctx* ctx, const std::string& t, int shards, std::vector<std::size_t>* sizes) {
    std::size_t at = 6;
    if (t.compare(0, at, "bytes=") != 0) {
        reply_error(ctx, "ERR bloomline: shard sizes must be bytes=<n>[,<n>...]");
        return false;
    }
    for (int i = 0; i < shards; ++i) {
        const std::size_t end = std::min(t.find(',', at), t.size());
        unsigned long long v = 0;
        bool ok = end > at && end - at <= 10;
        for (std::size_t j = at; ok && j < end; ++j) {
            ok = t[j] >= '0' && t[j] <= '9';
            v = v * 10 + static_cast<unsigned>(t[j] - '0');
        }
        if (!ok || v < 64 || v > (1ULL << 29) || v % 64 != 0 || (i + 1 < shards) != (end < t.size())) {
            reply_error(ctx, "ERR bloomline: shard sizes must be " + std::to_string(shards) +
                                 " multiples of 64 in [64, 2**29], as bytes=<n>[,<n>...]");
            return false;
        }
        sizes->push_back(static_cast<std::size_t>(v));
        at = end + 1;
    }
    return true;
}

// A shard at its filter's size (want 0: unchecked); false after an error
// reply, as MISSING is: WRONGSIZE, never read at another size.
bool shard_of_size(Ctx* ctx, Str* shard_key, std::size_t len, std::size_t want) {
    if (want == 0 || len == want) return true;
    reply_error(ctx, "WRONGSIZE " + text(shard_key) + " holds " + std::to_string(len) + " bytes, not " +
                         std::to_string(want));
    return false;
}

// Apply one shard's blob (see apply_positions); false after an error reply.
bool apply_to_shard(Ctx* ctx, Str* shard_key, std::size_t want, const unsigned char* blob, std::size_t blob_len,
                    bloomline::Apply mode, std::uint64_t room, std::string* answer, std::size_t* processed,
                    std::uint64_t* news) {
    OpenedKey shard(ctx, shard_key, mode == bloomline::Apply::test ? kRead : kRead | kWrite);
    std::size_t len = 0;
    unsigned char* bytes = string_bytes(ctx, shard, shard_key, mode == bloomline::Apply::test ? kRead : kWrite, &len);
    if (!bytes || !shard_of_size(ctx, shard_key, len, want)) return false;
    std::string error;
    if (!bloomline::apply_positions(blob, blob_len, bytes, len, mode, room, answer, processed, news, &error)) {
        reply_error(ctx, error);
        return false;
    }
    return true;
}

const unsigned char* bytes_of(const Str* s, std::size_t* len) {
    return reinterpret_cast<const unsigned char*>(StringPtrLen(s, len));
}

// BLOOMLINE.ADD shard count answer ttl_ms mode;bytes=<size> positions
int cmd_add(Ctx* ctx, Str** argv, int argc) {
    if (argc != 7) return WrongArity(ctx);
    Str *shard = argv[1], *count_key = argv[2];
    long long ttl = 0;
    bloomline::Apply mode{};
    std::vector<std::size_t> want;
    if (!parse_add_args(ctx, argv[4], argv[5], 1, &ttl, &mode, &want)) return kOk;
    Count count(ctx, count_key);
    std::string answer_name = text(argv[3]);
    if (!count.read(ctx, count_key) || replay(ctx, answer_name, count)) return kOk;
    std::size_t blob_len = 0;
    const unsigned char* blob = bytes_of(argv[6], &blob_len);
    std::string answer;
    std::size_t processed = 0;
    std::uint64_t news = 0;
    if (!apply_to_shard(ctx, shard, want[0], blob, blob_len, mode, ~std::uint64_t{0}, &answer, &processed, &news))
        return kOk;
    count.add(static_cast<long long>(news));
    keep_answer(ctx, answer_name, answer, ttl);
    ReplicateVerbatim(ctx);
    return reply_answer(ctx, answer, count.value);
}

// BLOOMLINE.CADD stages count answer shard_1 .. shard_n expected capacity ttl_ms mode;bytes=<sizes> positions
int cmd_chain_add(Ctx* ctx, Str** argv, int argc) {
    if (argc < 10) return WrongArity(ctx);
    const int shards = argc - 9;
    Str *stages_key = argv[1], *count_key = argv[2];
    Str** tail = argv + 4 + shards;  // expected capacity ttl_ms mode positions
    long long ttl = 0, capacity = 0, stages = 0;
    bloomline::Apply mode{};
    std::vector<std::size_t> want;
    if (!parse_add_args(ctx, tail[2], tail[3], shards, &ttl, &mode, &want)) return kOk;
    Count count(ctx, count_key);
    std::string answer_name = text(argv[3]);
    if (!count.read(ctx, count_key) || replay(ctx, answer_name, count)) return kOk;
    if (StringToLongLong(tail[1], &capacity) != kOk || capacity < 1)
        return reply_error(ctx, "ERR bloomline: capacity must be a positive integer");
    if (!read_count(ctx, stages_key, &stages)) return kOk;
    if (std::to_string(stages) != text(tail[0])) return reply_error(ctx, "STALE " + std::to_string(stages));
    std::size_t len = 0;
    const unsigned char* p = bytes_of(tail[4], &len);
    // Split the positions first: a malformed batch changes nothing (every
    // shard's blob is read whole against its shard's length, and every
    // shard checked for existence, before the first bit is touched).
    std::vector<std::pair<const unsigned char*, std::size_t>> blobs;
    for (int s = 0; s < shards; ++s) {
        if (len < 4) return reply_error(ctx, "ERR bloomline: malformed positions (shard lengths)");
        const std::size_t n = p[0] | p[1] << 8 | p[2] << 16 | static_cast<std::size_t>(p[3]) << 24;
        if (n > len - 4) return reply_error(ctx, "ERR bloomline: malformed positions (shard lengths)");
        blobs.emplace_back(p + 4, n);
        p += 4 + n;
        len -= 4 + n;
    }
    if (len != 0) return reply_error(ctx, "ERR bloomline: malformed positions (trailing bytes)");
    for (int s = 0; s < shards; ++s) {
        OpenedKey shard(ctx, argv[4 + s], kRead);
        std::size_t shard_len = 0;
        if (!string_bytes(ctx, shard, argv[4 + s], kRead, &shard_len) ||
            !shard_of_size(ctx, argv[4 + s], shard_len, want[s]))
            return kOk;
        bloomline::PositionRecords records;
        std::string error;
        if (!bloomline::read_positions(blobs[s].first, blobs[s].second, shard_len, &records, &error))
            return reply_error(ctx, error);
    }
    const std::uint64_t room = count.value >= capacity ? 0 : static_cast<std::uint64_t>(capacity - count.value);
    std::string answer;
    std::uint64_t news = 0;
    for (int s = 0; s < shards; ++s) {
        std::size_t processed = 0;
        if (!apply_to_shard(ctx, argv[4 + s], want[s], blobs[s].first, blobs[s].second, mode, room, &answer,
                            &processed, &news))
            return kOk;  // (not reached: every blob was read against its shard above)
        if (news == room) break;
    }
    if (answer.empty()) return reply_answer(ctx, answer, count.value);  // a full stage: nothing changed
    count.add(static_cast<long long>(news));
    keep_answer(ctx, answer_name, answer, ttl);
    ReplicateVerbatim(ctx);
    return reply_answer(ctx, answer, count.value);
}

// BLOOMLINE.HAS shard bytes=<size> positions   (and, without bytes=, an earlier module's form)
int cmd_has(Ctx* ctx, Str** argv, int argc) {
    if (argc != 3 && argc != 4) return WrongArity(ctx);
    std::vector<std::size_t> want{0};
    if (argc == 4 && !parse_sizes(ctx, text(argv[2]), 1, &(want = {}))) return kOk;
    std::size_t blob_len = 0;
    const unsigned char* blob = bytes_of(argv[argc - 1], &blob_len);
    std::string answer;
    std::size_t processed = 0;
    std::uint64_t news = 0;
    if (!apply_to_shard(ctx, argv[1], want[0], blob, blob_len, bloomline::Apply::test, 0, &answer, &processed,
                        &news))
        return kOk;
    return ReplyWithStringBuffer(ctx, answer.data(), answer.size());
}

// ---- a windowed filter (python/bloomline/redis/_windowed.py) ----------------
//
//   BLOOMLINE.WADD meta answer bits_0 .. bits_G gen_0 .. gen_G ttl_ms mode bytes span refresh margin_ms sig
//                  newest epoch fields at made positions
//       the plain backend's windowed add script (_plain.py, _WINDOW_ADD), in
//       the module: the server's clock picks the current generation
//       floor(t / span), never before the newest in the ring; a slot or
//       meta lost while a generation lives is "-MISSING <key>", never a
//       fresh start; then every key is tested in the older live generations
//       and test-and-set in the current one, the answer kept as ADD keeps
//       its. Reply: [answer, the current generation's count, its number,
//       the meta's epoch]. fields: the meta's fields and values, each after
//       a NUL, written where the meta must be made again. `at` and `made`
//       are "-" from a client; the command replicates (to replicas and the
//       AOF) with the generation it chose and the meta's epoch in their
//       place (the epoch followed by '#' and the start it gave a generation
//       it started), so a replica applies the primary's choice, not its own
//       clock's.
//   BLOOMLINE.WHAS meta bits_0 .. bits_G gen_0 .. gen_G bytes span sig
//                  newest epoch positions
//       newest and epoch as WADD's: a lookup that could not see the keys of
//       the caller's newest generation, or whose meta is gone while a
//       generation lives, is "-MISSING <key>", never "not seen". Reply: [one byte per key, '1' where a live generation has
//       it; the current generation's number].
// The keys and hash fields are the plain scripts' (a filter's reads,
// counts, dumps and restores run them on either backend).

constexpr int kWindowAddTail = 13, kWindowHasTail = 6;
constexpr int kReplyError = 1, kReplyInteger = 2;

// A reply refused part-way through the checks: nothing is written before
// the last check passed, so a refusal changes nothing and replicates nothing.
struct Refused {
    std::string message;
};

// One command of the server's own, run without replication (the window
// command replicates itself); its reply freed on every path.
struct Called {
    CallReply* r;
    explicit Called(CallReply* reply) : r(reply) {}
    ~Called() {
        if (r) FreeCallReply(r);
    }
    Called(const Called&) = delete;
    Called& operator=(const Called&) = delete;
    int type() const {
        if (!r) throw Refused{"ERR bloomline: a command of the server's failed"};
        const int t = CallReplyType(r);
        if (t == kReplyError) {
            std::size_t len = 0;
            const char* p = CallReplyStringPtr(r, &len);
            throw Refused{std::string(p, len)};
        }
        return t;
    }
    long long integer() const {
        if (type() != kReplyInteger) throw Refused{"ERR bloomline: a command's reply is not an integer"};
        return CallReplyInteger(r);
    }
};

// The ring's reads, through the key API: a command reads 2 (G + 1) + 4
// fields and sizes, and a RedisModule_Call costs several times the read.
const char* const kWrongType = "WRONGTYPE Operation against a key holding the wrong kind of value";

int key_type(const OpenedKey& key) { return key.k ? KeyType(key.k) : kKeyTypeEmpty; }

bool exists(Ctx* ctx, Str* name) { return key_type(OpenedKey(ctx, name, kRead)) != kKeyTypeEmpty; }

std::size_t string_length(Ctx* ctx, Str* name) {
    OpenedKey key(ctx, name, kRead);
    const int type = key_type(key);
    if (type == kKeyTypeEmpty) return 0;
    if (type != kKeyTypeString) throw Refused{kWrongType};
    return ValueLength(key.k);
}

// The writes every add makes (the meta's expiry, the generation's count),
// through the key API too; the rarer ones (a generation started, a meta
// made again) through RedisModule_Call.
void set_expiry(Ctx* ctx, Str* name, long long at_ms) {
    OpenedKey key(ctx, name, kRead | kWrite);
    if (key_type(key) == kKeyTypeEmpty || SetAbsExpire(key.k, at_ms) != kOk)
        throw Refused{"ERR bloomline: could not set the expiry of " + text(name)};
}

void set_count(Ctx* ctx, Str* name, long long value) {
    OpenedKey key(ctx, name, kRead | kWrite);
    if (key_type(key) != kKeyTypeHash) throw Refused{"MISSING " + text(name)};
    const std::string digits = std::to_string(value);
    Str* v = CreateString(ctx, digits.data(), digits.size());
    HashSet(key.k, kHashCFields, "count", v, static_cast<void*>(nullptr));
    FreeString(ctx, v);
}

bool hget(Ctx* ctx, Str* name, const std::string& field, std::string* out) {
    OpenedKey key(ctx, name, kRead);
    const int type = key_type(key);
    if (type == kKeyTypeEmpty) return false;
    if (type != kKeyTypeHash) throw Refused{kWrongType};
    Str* value = nullptr;
    if (HashGet(key.k, kHashCFields, field.c_str(), &value, static_cast<void*>(nullptr)) != kOk || !value)
        return false;
    *out = text(value);
    FreeString(ctx, value);
    return true;
}

// A generation number, a slot record or a count: a decimal integer in
// [0, 2**53) as the scripts and HINCRBY write them, or a refusal (read
// before any write, so that no later step can fail on it).
long long integer_field(Ctx* ctx, Str* key, const std::string& field, bool* found) {
    std::string v;
    *found = hget(ctx, key, field, &v);
    if (!*found) return 0;
    char* end = nullptr;
    const long long n = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || n < 0 || static_cast<double>(n) >= kMaxExact || std::to_string(n) != v)
        throw Refused{"WRONGTYPE bloomline: " + text(key) + " " + field + " is no integer in [0, 2**53)"};
    return n;
}

long long long_arg(Str* s, const char* name, long long low) {
    long long v = 0;
    if (StringToLongLong(s, &v) != kOk || v < low)
        throw Refused{std::string("ERR bloomline: ") + name + " must be an integer >= " + std::to_string(low)};
    return v;
}

// A generation number, refused where a double would not hold it exactly (a
// span so small, or a number so large, that no clock reaches it): never
// cast out of range.
long long generation_number(double v) {
    if (!(v >= 0 && v < kMaxExact)) throw Refused{"ERR bloomline: span and the clock give no generation number"};
    return static_cast<long long>(v);
}

// A windowed meta's epoch: its making (the server's time when it was made),
// then after a clear '/' and the clear's mark. An add's reply (and its kept
// answer) names the epoch, then '#' and the start of the generation it added
// to (the gen's "start": the id of the add that started it), which a handle
// sends back as it sent the epoch (_plain.py's bare and start_of).
std::string bare_epoch(const std::string& e) { return e.substr(0, e.find('#')); }
std::string making_of(const std::string& epoch) {
    const std::string e = bare_epoch(epoch);
    return e.substr(0, e.find('/'));
}

// The id of an add's batch and chunk: the last part of its answer's name.
std::string start_id(const std::string& answer_name) { return answer_name.substr(answer_name.rfind(':') + 1); }

// A new making: the wall clock in microseconds ("sec.usec", as the scripts
// write TIME), never the same twice in this process. Kept answers and
// handles tell makings apart by it, so a filter lost and made again within
// one tick of the clock (a pipelined DEL beside a busy fleet) must differ.
// (Commands run on the server's one thread: no lock.)
std::string new_making() {
    static long long last_us = 0;
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    long long us = static_cast<long long>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
    if (us <= last_us) us = last_us + 1;
    last_us = us;
    return std::to_string(us / 1000000) + "." + std::to_string(us % 1000000);
}

// When a windowed meta's epoch ("making/sec.usec", _WINDOW_CLEAR) says it was
// last cleared, in microseconds; -1 for none (or a mark not so written).
long long cleared_at(const std::string& sent) {
    const std::string epoch = bare_epoch(sent);
    const std::size_t slash = epoch.find('/'), dot = epoch.find('.', slash == std::string::npos ? 0 : slash);
    if (slash == std::string::npos || dot == std::string::npos) return -1;
    const std::string sec = epoch.substr(slash + 1, dot - slash - 1), usec = epoch.substr(dot + 1);
    const auto digits = [](const std::string& t) {
        return !t.empty() && t.size() <= 12 && t.find_first_not_of("0123456789") == std::string::npos;
    };
    if (!digits(sec) || !digits(usec)) return -1;
    return std::stoll(sec) * 1000000 + std::stoll(usec);
}

// The ring as the scripts read it: the current generation (the clock's,
// or the primary's `at`, never before a number in the ring or the meta's
// slot records), each slot's number (-1: none), and a slot lost (its bits
// there without their number, or a live generation's record without it).
struct Ring {
    Str* meta;
    Str** bits;
    Str** gens;
    int size;
    std::size_t bytes;
    double span;
    long long c = 0;
    std::vector<long long> numbers;
    mutable std::string mine_start;  // the start check_mine read of the caller's generation (none read: empty)

    // at: null, or "-", for the clock's.
    Ring(Ctx* ctx, Str* meta_key, Str** ring_keys, int ring, std::size_t nbytes, double span_s, Str* at)
        : meta(meta_key), bits(ring_keys), gens(ring_keys + ring), size(ring), bytes(nbytes), span(span_s),
          numbers(ring, -1) {
        if (!at || text(at) == "-") {
            c = generation_number(std::floor(static_cast<double>(Milliseconds()) / 1000.0 / span));
        } else {  // (a replica's or a load's: a client's was refused)
            c = generation_number(static_cast<double>(long_arg(at, "at", 0)));
        }
        std::vector<long long> started(ring, -1);
        for (int i = 0; i < ring; ++i) {
            bool found = false;
            numbers[i] = integer_field(ctx, gens[i], "number", &found);
            if (found) {
                c = std::max(c, numbers[i]);
            } else {
                numbers[i] = -1;
                if (exists(ctx, bits[i])) throw Refused{"MISSING " + text(gens[i])};
            }
            const long long s = integer_field(ctx, meta, "slot" + std::to_string(i), &found);
            if (found) started[i] = s, c = std::max(c, s);
        }
        for (int i = 0; i < ring; ++i)
            if (started[i] >= 0 && started[i] > c - ring && numbers[i] != started[i])
                throw Refused{"MISSING " + text(gens[i])};
        generation_number(static_cast<double>(c + ring));  // (room for the ring's end)
    }
    bool live(int i) const { return numbers[i] >= 0 && numbers[i] > c - size; }
    // While generation `mine` (the newest the caller added to, under the
    // meta's epoch `sent`) lives, a command that could not see its keys is
    // refused, never answered "new" or "not seen": the meta gone or of
    // another making (the filter lost whole, perhaps made again by another
    // writer), or with an older clear mark than the caller's (the server
    // went back past a clear: an older snapshot, a replica); the same epoch
    // without that generation in its slot, the ring lost under a kept meta,
    // or with it there of another start (lost, then started again by another writer).
    // A clear since: forgotten on purpose, the caller goes on. (_plain.py's
    // mine_lost is the same; MISSING: the meta is gone; REMADE: it is there.)
    void check_mine(Ctx* ctx, long long mine, const std::string& sent) const {
        if (mine < 0 || mine <= c - size) return;
        std::string epoch;
        if (!hget(ctx, meta, "epoch", &epoch)) throw Refused{"MISSING " + text(meta)};
        if (making_of(sent) != making_of(epoch) || cleared_at(epoch) < cleared_at(sent))
            throw Refused{"REMADE " + text(meta)};
        const int slot = static_cast<int>(mine % size);
        if (bare_epoch(sent) != epoch) return;
        if (numbers[slot] != mine) throw Refused{"MISSING " + text(gens[slot])};
        const std::size_t hash = sent.find('#');
        std::string began;
        if (hash != std::string::npos && !(hget(ctx, gens[slot], "start", &began) && began == sent.substr(hash + 1)))
            throw Refused{"MISSING " + text(gens[slot])};
        mine_start = began;
    }
    // The meta expires with the newest generation: gone with the ring when
    // the fleet was idle, an add makes it again; gone while a generation
    // lives (one whose keys remain), lost, for a lookup as for an add (its
    // slot records went with it, so the ring alone tells).
    void check_meta(Ctx* ctx) const {
        if (exists(ctx, meta)) return;
        for (int i = 0; i < size; ++i)
            if (live(i)) throw Refused{"MISSING " + text(meta)};
    }
    // A live slot's bits at their size: evicted or deleted is an error,
    // never read as an empty generation.
    void check_bits(Ctx* ctx, int i) const {
        const std::size_t len = string_length(ctx, bits[i]);
        if (len != bytes) throw Refused{(len == 0 ? "MISSING " : "WRONGSIZE ") + text(bits[i])};
    }
};

// sig: the parameters, '|', and the making's ident: the same parameters
// under another ident is the filter dropped and made again (REPLACED).
void check_sig(Ctx* ctx, Str* meta, Str* sig_arg) {
    std::string have;
    if (!hget(ctx, meta, "sig", &have)) return;
    const std::string sig = text(sig_arg);
    if (have == sig) return;
    const auto params = [](const std::string& s) { return s.substr(0, s.rfind('|')); };
    if (have.find('|') != std::string::npos && sig.find('|') != std::string::npos && params(have) == params(sig))
        throw Refused{"REPLACED " + text(meta)};
    throw Refused{"MISMATCH " + text(meta)};
}

double span_arg(Str* s) {
    const std::string t = text(s);
    char* end = nullptr;
    const double v = std::strtod(t.c_str(), &end);
    if (t.empty() || *end != '\0' || !(v > 0) || !std::isfinite(v))
        throw Refused{"ERR bloomline: span must be a positive number of seconds"};
    return v;
}

// A generation's size: whole 64-byte blocks, at most one Redis string's
// 2**32 bits (the client's bound), checked before anything is written.
std::size_t bytes_arg(Str* s) {
    const long long v = long_arg(s, "bytes", 64);
    if (v > (1LL << 29) || v % 64 != 0)
        throw Refused{"ERR bloomline: bytes must be a multiple of 64 in [64, 2**29]"};
    return static_cast<std::size_t>(v);
}

// Opened bits of one slot (checked at their size before), in place.
struct SlotBits {
    OpenedKey key;
    unsigned char* bytes = nullptr;
    SlotBits(Ctx* ctx, Str* name, int mode, std::size_t size) : key(ctx, name, mode) {
        std::size_t len = 0;
        if (key.k && KeyType(key.k) == kKeyTypeString)
            bytes = reinterpret_cast<unsigned char*>(StringDMA(key.k, &len, mode));
        if (!bytes || len != size) throw Refused{(bytes ? "WRONGSIZE " : "MISSING ") + text(name)};
    }
};

// The meta's fields and values, each after a NUL but the first: pairs,
// each field named.
std::vector<std::string_view> meta_fields(Str* fields) {
    std::size_t len = 0;
    const char* p = StringPtrLen(fields, &len);
    const std::string_view all(p, len);
    std::vector<std::string_view> parts;
    for (std::size_t at = 0; at <= len;) {
        std::size_t next = all.find('\0', at);
        if (next == std::string_view::npos) next = len;
        parts.push_back(all.substr(at, next - at));
        at = next + 1;
    }
    bool named = parts.size() >= 2 && parts.size() % 2 == 0;
    for (std::size_t i = 0; named && i < parts.size(); i += 2) named = !parts[i].empty();
    if (!named) throw Refused{"ERR bloomline: fields must be field, value pairs, each field named"};
    return parts;
}

int window_add(Ctx* ctx, Str** argv, int argc) {
    const int nkeys = argc - 1 - kWindowAddTail;
    if (nkeys < 6 || nkeys % 2 != 0) return WrongArity(ctx);
    const int ring = (nkeys - 2) / 2;
    Str* meta = argv[1];
    Str* answer_key = argv[2];
    Str** tail = argv + 1 + nkeys;
    Str *ttl_arg = tail[0], *mode_arg = tail[1], *sig = tail[6], *epoch_arg = tail[8], *fields = tail[9],
        *at = tail[10], *made = tail[11], *positions = tail[12];
    long long ttl = 0;
    bloomline::Apply mode{};
    std::vector<std::size_t> no_sizes;  // (its own bytes argument says the generations' size)
    if (!parse_add_args(ctx, ttl_arg, mode_arg, 0, &ttl, &mode, &no_sizes)) return kOk;
    const std::size_t size = bytes_arg(tail[2]);
    const double span = span_arg(tail[3]);
    const std::string refresh_text = text(tail[4]);
    if (refresh_text != "0" && refresh_text != "1") throw Refused{"ERR bloomline: refresh must be 0 or 1"};
    const bool refresh = refresh_text == "1";
    // A second at least: every expiry then lies ahead of the clock that chose
    // the generation (one already past would delete a key on the primary
    // that a replica, replaying the command, keeps).
    const long long margin = long_arg(tail[5], "margin_ms", 0);
    if (margin < 1000 || margin > kMaxTtlMs)
        throw Refused{"ERR bloomline: margin_ms must be an integer in [1000, 86400000]"};
    const long long mine = long_arg(tail[7], "newest", -1);
    for (Str* primary_only : {at, made})  // (the primary's choices, as it replicates them)
        if (text(primary_only) != "-" && !(GetContextFlags(ctx) & (kCtxReplicated | kCtxLoading)))
            throw Refused{std::string("ERR bloomline: ") + (primary_only == at ? "at" : "made") +
                          " is the primary's, for its replicas and AOF; a client sends -"};
    check_sig(ctx, meta, sig);
    const std::string answer_name = text(answer_key);
    const Kept* kept = kept_answer(ctx, answer_name);
    // Kept as answer|generation|epoch (below): a re-sender learns the
    // generation and the meta's making the lost reply named, as its first
    // send would have. One kept under another making of the meta (the
    // filter deleted, or lost, and made again since: this memory outlives a
    // DEL) is no answer of this filter: the add runs, as on the plain
    // backend, whose kept answers a delete removes.
    const std::string_view all = kept ? std::string_view(kept->answer.data(), kept->answer.size()) : std::string_view();
    const std::size_t bar = all.find('|'), bar2 = bar == all.npos ? all.npos : all.find('|', bar + 1);
    const std::string_view made_at = bar2 == all.npos ? std::string_view() : all.substr(bar2 + 1);
    std::string now_epoch;
    if (kept && bar2 != all.npos &&
        !(hget(ctx, meta, "epoch", &now_epoch) && making_of(now_epoch) == making_of(std::string(made_at))))
        kept = nullptr;
    if (kept) {
        const std::string_view got = bar2 == all.npos ? all : all.substr(0, bar);
        const std::string_view gen = bar2 == all.npos ? std::string_view("-1") : all.substr(bar + 1, bar2 - bar - 1);
        ReplyWithArray(ctx, 4);
        ReplyWithStringBuffer(ctx, got.data(), got.size());
        ReplyWithLongLong(ctx, -1);
        ReplyWithStringBuffer(ctx, gen.data(), gen.size());
        return ReplyWithStringBuffer(ctx, made_at.data(), made_at.size());
    }
    Ring r(ctx, meta, argv + 3, ring, size, span, at);
    const long long c = r.c;
    const double end_ms = std::ceil(static_cast<double>(c + ring) * span * 1000);
    if (!(end_ms < kMaxExact)) throw Refused{"ERR bloomline: no expiry time for generation " + std::to_string(c)};
    const long long finish = static_cast<long long>(end_ms) + margin;
    if (!(GetContextFlags(ctx) & (kCtxReplicated | kCtxLoading)) && finish <= Milliseconds())
        throw Refused{"ERR bloomline: generation " + std::to_string(c) + " would expire before it starts"};
    r.check_mine(ctx, mine, text(epoch_arg));
    r.check_meta(ctx);
    const bool meta_made = exists(ctx, meta);
    // `made` replicated: the meta's epoch, then '#' and the start this
    // command gave the generation it started (none from an earlier version).
    const std::string made_text = text(made);
    const std::size_t made_hash = made_text.find('#');
    std::string epoch;
    if (!meta_made) {
        if (made_text != "-") {
            epoch = made_text.substr(0, made_hash);
        } else {
            epoch = new_making();
        }
    } else if (!hget(ctx, meta, "epoch", &epoch) || epoch.empty()) {
        // (every making writes one: a meta without it is damaged, and an add under it could not be checked later)
        throw Refused{"WRONGTYPE bloomline: " + text(meta) + " has no epoch"};
    }
    const int cur = static_cast<int>(c % ring);
    const bool start = r.numbers[cur] != c;
    // start: the id of this add (its answer's name) and the primary's clock,
    // unique to this run of the command: one re-sent after the generation
    // it started was lost starts it under another (the handles that added
    // to the lost one are refused). A replica and the AOF take the
    // primary's (`made`).
    const std::string began_here = !start ? std::string()
        : made_text == "-" ? start_id(answer_name) + "@" + std::to_string(Milliseconds())
        : made_hash != std::string::npos ? made_text.substr(made_hash + 1) : start_id(answer_name);
    const std::string made_out = start ? epoch + "#" + began_here : epoch;
    std::vector<int> older;
    bool counted = false;
    const long long count_before = start ? 0 : integer_field(ctx, r.gens[cur], "count", &counted);
    for (int i = 0; i < ring; ++i) {
        if (i == cur && !start) r.check_bits(ctx, i);
        if (i != cur && r.live(i) && r.numbers[i] < c) {
            r.check_bits(ctx, i);
            older.push_back(i);
        }
    }
    std::size_t blob_len = 0;
    const unsigned char* blob = bytes_of(positions, &blob_len);
    bloomline::PositionRecords records;
    std::string error;
    if (!bloomline::read_positions(blob, blob_len, size, &records, &error)) throw Refused{error};
    const std::vector<std::string_view> parts = meta_made ? std::vector<std::string_view>{} : meta_fields(fields);

    // Every check passed: from here on, writes, each one's reply checked. A
    // write the server still refuses (a limit of its own) replicates the
    // command as it is, so that a replica replays the same steps to the
    // same point rather than keep a ring the primary no longer has.
    const std::string number = std::to_string(c);
    const auto replicate = [&] {
        Replicate(ctx, "bloomline.wadd", "vbbs", argv + 1, static_cast<std::size_t>(argc - 4), number.data(),
                  number.size(), made_out.data(), made_out.size(), positions);
    };
    std::string answer;
    std::uint64_t added = 0;
    long long count = 0;
    try {
        if (!meta_made) {
            for (std::size_t i = 0; i < parts.size(); i += 2)
                Called(Call(ctx, "HSET", "sbb", meta, parts[i].data(), parts[i].size(), parts[i + 1].data(),
                            parts[i + 1].size())).integer();
            Called(Call(ctx, "HSET", "scb", meta, "epoch", epoch.data(), epoch.size())).integer();
        }
        set_expiry(ctx, meta, finish);
        if (start) {
            // Generation c starts in the slot of c - ring, expired: its life
            // is its ring slices and the margin, after which the server
            // deletes it. Its bits are made whole in place (no argument of
            // the string's size, which proto-max-bulk-len would bound).
            Called(Call(ctx, "DEL", "ss", r.bits[cur], r.gens[cur])).integer();
            {
                OpenedKey bits(ctx, r.bits[cur], kRead | kWrite);
                if (!bits.k || StringTruncate(bits.k, size) != kOk)
                    throw Refused{"ERR bloomline: could not make " + text(r.bits[cur])};
            }
            Called(Call(ctx, "HSET", "scbcccb", r.gens[cur], "number", number.data(), number.size(), "count", "0",
                        "start", began_here.data(), began_here.size())).integer();
            const std::string slot = "slot" + std::to_string(cur);
            Called(Call(ctx, "HSET", "sbb", meta, slot.data(), slot.size(), number.data(), number.size())).integer();
            set_expiry(ctx, r.bits[cur], finish);
            set_expiry(ctx, r.gens[cur], finish);
        }
        {
            SlotBits current(ctx, r.bits[cur], kRead | kWrite, size);
            std::vector<std::unique_ptr<SlotBits>> opened;
            std::vector<const unsigned char*> older_bytes;
            for (int i : older) {
                opened.push_back(std::make_unique<SlotBits>(ctx, r.bits[i], kRead, size));
                older_bytes.push_back(opened.back()->bytes);
            }
            bloomline::apply_window_add(records, current.bytes, older_bytes, refresh, mode, &answer, &added);
        }
        count = count_before + static_cast<long long>(added);  // (both below 2**53: no overflow)
        set_count(ctx, r.gens[cur], count);
    } catch (...) {
        replicate();
        throw;
    }
    replicate();
    // The current generation's start: this add's own, or the one check_mine
    // read (the caller's newest is this generation), else read (none in a
    // generation an earlier version started).
    std::string began = start ? began_here : mine == c ? r.mine_start : std::string();
    if (!began.empty() || hget(ctx, r.gens[cur], "start", &began)) epoch += "#" + began;
    keep_answer(ctx, answer_name, answer + "|" + number + "|" + epoch, ttl);
    ReplyWithArray(ctx, 4);
    ReplyWithStringBuffer(ctx, answer.data(), answer.size());
    ReplyWithLongLong(ctx, count);
    ReplyWithStringBuffer(ctx, number.data(), number.size());
    return ReplyWithStringBuffer(ctx, epoch.data(), epoch.size());
}

int window_has(Ctx* ctx, Str** argv, int argc) {
    const int nkeys = argc - 1 - kWindowHasTail;
    if (nkeys < 5 || nkeys % 2 != 1) return WrongArity(ctx);
    const int ring = (nkeys - 1) / 2;
    Str** tail = argv + 1 + nkeys;
    const std::size_t size = bytes_arg(tail[0]);
    const double span = span_arg(tail[1]);
    check_sig(ctx, argv[1], tail[2]);
    const long long mine = long_arg(tail[3], "newest", -1);
    Ring r(ctx, argv[1], argv + 2, ring, size, span, nullptr);
    r.check_mine(ctx, mine, text(tail[4]));
    r.check_meta(ctx);
    std::vector<std::unique_ptr<SlotBits>> opened;
    std::vector<const unsigned char*> live;
    for (int i = 0; i < ring; ++i) {
        if (!r.live(i)) continue;
        r.check_bits(ctx, i);
        opened.push_back(std::make_unique<SlotBits>(ctx, r.bits[i], kRead, size));
        live.push_back(opened.back()->bytes);
    }
    std::size_t blob_len = 0;
    const unsigned char* blob = bytes_of(tail[5], &blob_len);
    bloomline::PositionRecords records;
    std::string error, answer;
    if (!bloomline::read_positions(blob, blob_len, size, &records, &error)) throw Refused{error};
    bloomline::apply_window_test(records, live, &answer);
    const std::string number = std::to_string(r.c);
    ReplyWithArray(ctx, 2);
    ReplyWithStringBuffer(ctx, answer.data(), answer.size());
    return ReplyWithStringBuffer(ctx, number.data(), number.size());
}

// A refusal (or a server command's error) becomes the reply.
template <int (*Command)(Ctx*, Str**, int)>
int refusing(Ctx* ctx, Str** argv, int argc) {
    try {
        return Command(ctx, argv, argc);
    } catch (const Refused& e) {
        return reply_error(ctx, e.message);
    } catch (const std::bad_alloc&) {
        return reply_error(ctx, "OOM bloomline: out of memory");
    } catch (...) {
        return reply_error(ctx, "ERR bloomline: the command failed");
    }
}

// One key spec: keys from argument `first` to `last` (last < 0: counted
// from the end, as Redis takes it), with these access flags.
KeySpec key_range(int first, int last, std::uint64_t flags) {
    KeySpec k{};
    k.flags = flags;
    k.begin_search_type = kSearchIndex;
    k.bs.index.pos = first;
    k.find_keys_type = kFindRange;
    k.fk.range.lastkey = last < 0 ? last : last - first;
    k.fk.range.keystep = 1;
    return k;
}

// Key specs and ACL categories where the server has the API (key specs
// from 7.0, categories from 7.2): ACL users see HAS as a read of its shard
// (a user with %R~ key access may look up) and the adds as writes, and
// "-@write" denies the adds. The answer argument is no key (kept in the
// module's memory) but is routed as one: NOT_KEY.
bool describe_commands(Ctx* ctx) {
    if (!api("RedisModule_GetCommand", &GetCommand) || !api("RedisModule_SetCommandInfo", &SetCommandInfo))
        return true;  // before 7.0: the (first, last, step) triplets only
    static const InfoVersion version{1, 2 * sizeof(const char*), sizeof(KeySpec), sizeof(CommandArgV1)};
    static KeySpec add[] = {key_range(1, 2, kKeyRw | kKeyAccess | kKeyUpdate), key_range(3, 3, kKeyRo | kKeyNotKey), {}};
    static KeySpec cadd[] = {key_range(1, 1, kKeyRo | kKeyAccess), key_range(2, 2, kKeyRw | kKeyAccess | kKeyUpdate),
                             key_range(3, 3, kKeyRo | kKeyNotKey), key_range(4, -6, kKeyRw | kKeyAccess | kKeyUpdate), {}};
    static KeySpec has[] = {key_range(1, 1, kKeyRo | kKeyAccess), {}};
    static KeySpec wadd[] = {key_range(1, 1, kKeyRw | kKeyAccess | kKeyUpdate), key_range(2, 2, kKeyRo | kKeyNotKey),
                             key_range(3, -1 - kWindowAddTail, kKeyRw | kKeyAccess | kKeyUpdate), {}};
    static KeySpec whas[] = {key_range(1, -1 - kWindowHasTail, kKeyRo | kKeyAccess), {}};
    struct Described {
        const char* name;
        int arity;
        KeySpec* specs;
        const char* categories;
    };
    const Described commands[] = {{"bloomline.add", 7, add, "write"},
                                  {"bloomline.cadd", -10, cadd, "write"},
                                  {"bloomline.has", -3, has, "read fast"},
                                  {"bloomline.wadd", -(7 + kWindowAddTail), wadd, "write"},
                                  {"bloomline.whas", -(6 + kWindowHasTail), whas, "read"}};
    const bool categories = api("RedisModule_SetCommandACLCategories", &SetCommandACLCategories);
    for (const Described& d : commands) {
        Command* cmd = GetCommand(ctx, d.name);
        CommandInfo info{};
        info.version = &version;
        info.arity = d.arity;
        info.key_specs = d.specs;
        if (cmd == nullptr || SetCommandInfo(cmd, &info) != kOk) return false;
        if (categories && SetCommandACLCategories(cmd, d.categories) != kOk) return false;
    }
    return true;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int RedisModule_OnLoad(Ctx* ctx, Str**, int) {
    GetApi = reinterpret_cast<int (*)(const char*, void*)>(reinterpret_cast<void**>(ctx)[0]);
    const bool ok = api("RedisModule_CreateCommand", &CreateCommand) &&
                    api("RedisModule_SetModuleAttribs", &SetModuleAttribs) &&
                    api("RedisModule_WrongArity", &WrongArity) && api("RedisModule_ReplyWithError", &ReplyWithError) &&
                    api("RedisModule_ReplyWithStringBuffer", &ReplyWithStringBuffer) &&
                    api("RedisModule_ReplyWithArray", &ReplyWithArray) &&
                    api("RedisModule_ReplyWithLongLong", &ReplyWithLongLong) &&
                    api("RedisModule_OpenKey", &OpenKey) && api("RedisModule_CloseKey", &CloseKey) &&
                    api("RedisModule_KeyType", &KeyType) && api("RedisModule_StringDMA", &StringDMA) &&
                    api("RedisModule_StringPtrLen", &StringPtrLen) &&
                    api("RedisModule_StringTruncate", &StringTruncate) &&
                    api("RedisModule_ReplicateVerbatim", &ReplicateVerbatim) &&
                    api("RedisModule_StringToLongLong", &StringToLongLong) &&
                    api("RedisModule_Milliseconds", &Milliseconds) &&
                    api("RedisModule_GetContextFlags", &GetContextFlags) && api("RedisModule_Alloc", &Alloc) &&
                    api("RedisModule_Free", &Free) &&
                    api("RedisModule_SubscribeToServerEvent", &SubscribeToServerEvent) &&
                    api("RedisModule_Call", &Call) && api("RedisModule_CallReplyType", &CallReplyType) &&
                    api("RedisModule_CallReplyStringPtr", &CallReplyStringPtr) &&
                    api("RedisModule_CallReplyInteger", &CallReplyInteger) &&
                    api("RedisModule_FreeCallReply", &FreeCallReply) && api("RedisModule_Replicate", &Replicate) &&
                    api("RedisModule_HashGet", &HashGet) && api("RedisModule_ValueLength", &ValueLength) &&
                    api("RedisModule_FreeString", &FreeString) && api("RedisModule_HashSet", &HashSet) &&
                    api("RedisModule_SetAbsExpire", &SetAbsExpire) &&
                    api("RedisModule_CreateString", &CreateString);
    if (!ok) return kErr;
    if (api("RedisModule_IsModuleNameBusy", &IsModuleNameBusy) && IsModuleNameBusy("bloomline")) return kErr;
    SetModuleAttribs(ctx, "bloomline", 4, kApiVersion1);
    // Keys (for cluster routing and slot checks): ADD's first three
    // arguments; CADD's from the first to the sixth from the end (its
    // shards); HAS's first.
    if (CreateCommand(ctx, "bloomline.add", cmd_add, "write deny-oom", 1, 3, 1) != kOk) return kErr;
    if (CreateCommand(ctx, "bloomline.cadd", cmd_chain_add, "write deny-oom", 1, -6, 1) != kOk) return kErr;
    if (CreateCommand(ctx, "bloomline.has", cmd_has, "readonly fast", 1, 1, 1) != kOk) return kErr;
    // WADD's keys: the meta to the last slot's hash (the 14th argument from
    // the end); WHAS's to the 7th from the end.
    if (CreateCommand(ctx, "bloomline.wadd", refusing<window_add>, "write deny-oom", 1, -1 - kWindowAddTail, 1) != kOk)
        return kErr;
    if (CreateCommand(ctx, "bloomline.whas", refusing<window_has>, "readonly", 1, -1 - kWindowHasTail, 1) != kOk)
        return kErr;
    if (!describe_commands(ctx)) return kErr;
    for (const Event& e : {kFlushDb, kLoading, kSwapDb})
        if (SubscribeToServerEvent(ctx, e, on_dataset_event) != kOk) return kErr;
    if (SubscribeToServerEvent(ctx, kCronLoop, on_cron) != kOk) return kErr;
    if (api("RedisModule_RegisterInfoFunc", &RegisterInfoFunc) && api("RedisModule_InfoAddSection", &InfoAddSection) &&
        api("RedisModule_InfoAddFieldLongLong", &InfoAddFieldLongLong))
        RegisterInfoFunc(ctx, info);
    return kOk;
}
