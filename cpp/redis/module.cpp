// bloomline's Redis module: `redis-server --loadmodule $(bloomline redis-module)`.
//
// Two commands over plain Redis strings, one per filter shard, each taking a
// batch of positions computed by the client (positions.hpp) as one bytes
// argument:
//
//   BLOOMLINE.ADD shard answerkey ttl_ms positions
//       test-and-set every key of the batch, atomically; reply: a bulk
//       string with one byte per key, '1' where the key was new. The reply
//       is also kept at answerkey for ttl_ms, and a repeat of the command
//       (a client retrying after a dropped connection) gets it back instead
//       of adding again: a key is new to exactly one caller.
//   BLOOMLINE.CADD shard answerkey stages count ttl_ms expected positions
//       the same for a stage of a scalable chain: refused with "-STALE n"
//       unless the string at `stages` is `expected` (the client's idea of
//       the chain's length), and the count of new keys added to the integer
//       at `count`. The four keys share a slot (one hash tag).
//   BLOOMLINE.HAS shard positions
//       reply: one byte per key, '1' where every bit is set.
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
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bloomline/positions.hpp"

namespace {

struct Ctx;
struct Str;
struct Key;
using CmdFunc = int (*)(Ctx*, Str**, int);

constexpr int kOk = 0, kErr = 1, kApiVersion1 = 1;
constexpr int kRead = 1 << 0, kWrite = 1 << 1;
constexpr int kKeyTypeEmpty = 0, kKeyTypeString = 1;

// The API functions this module uses, fetched by name at load.
int (*GetApi)(const char*, void*);
int (*CreateCommand)(Ctx*, const char*, CmdFunc, const char*, int, int, int);
void (*SetModuleAttribs)(Ctx*, const char*, int, int);
int (*IsModuleNameBusy)(const char*);
int (*WrongArity)(Ctx*);
int (*ReplyWithError)(Ctx*, const char*);
int (*ReplyWithStringBuffer)(Ctx*, const char*, std::size_t);
Key* (*OpenKey)(Ctx*, Str*, int);
void (*CloseKey)(Key*);
int (*KeyType)(Key*);
char* (*StringDMA)(Key*, std::size_t*, int);
const char* (*StringPtrLen)(const Str*, std::size_t*);
Str* (*CreateString)(Ctx*, const char*, std::size_t);
void (*FreeString)(Ctx*, Str*);
int (*StringSet)(Key*, Str*);
int (*SetExpire)(Key*, long long);
int (*ReplicateVerbatim)(Ctx*);
int (*StringToLongLong)(const Str*, long long*);

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

// The shard's bytes for reading or writing; an error reply when there is
// no such string.
unsigned char* shard_bytes(Ctx* ctx, Key* key, int mode, std::size_t* len) {
    const int type = KeyType(key);
    if (type == kKeyTypeEmpty) {
        ReplyWithError(ctx, "ERR bloomline: no such filter shard (create the filter first)");
        return nullptr;
    }
    if (type != kKeyTypeString) {
        ReplyWithError(ctx, "WRONGTYPE bloomline: the shard key holds a value that is not a string");
        return nullptr;
    }
    return reinterpret_cast<unsigned char*>(StringDMA(key, len, mode));
}

// The answer kept for a batch already done, if any.
bool replay(Ctx* ctx, Str* answer_key) {
    OpenedKey done(ctx, answer_key, kRead);
    if (!done.k || KeyType(done.k) != kKeyTypeString) return false;
    std::size_t len = 0;
    const char* p = StringDMA(done.k, &len, kRead);
    ReplyWithStringBuffer(ctx, p, len);
    return true;
}

std::string read_string(Ctx* ctx, Str* name) {
    OpenedKey key(ctx, name, kRead);
    if (!key.k || KeyType(key.k) != kKeyTypeString) return {};
    std::size_t len = 0;
    const char* p = StringDMA(key.k, &len, kRead);
    return std::string(p, len);
}

void set_string(Ctx* ctx, Str* name, const std::string& value, long long ttl_ms) {
    OpenedKey key(ctx, name, kWrite);
    Str* v = CreateString(ctx, value.data(), value.size());
    StringSet(key.k, v);
    FreeString(ctx, v);
    if (ttl_ms > 0) SetExpire(key.k, ttl_ms);
}

// Test-and-set a batch into a shard; the answer is kept at answer_key.
// Returns false when it has replied with an error.
bool add_batch(Ctx* ctx, Str* shard_key, Str* answer_key, long long ttl, Str* positions, std::string* answer) {
    OpenedKey shard(ctx, shard_key, kRead | kWrite);
    std::size_t len = 0;
    unsigned char* bytes = shard_bytes(ctx, shard.k, kWrite, &len);
    if (!bytes) return false;
    std::size_t blob_len = 0;
    const auto* blob = reinterpret_cast<const unsigned char*>(StringPtrLen(positions, &blob_len));
    std::string error;
    if (!bloomline::apply_positions(blob, blob_len, bytes, len, true, answer, &error, [](std::size_t, std::size_t) {})) {
        ReplyWithError(ctx, error.c_str());
        return false;
    }
    set_string(ctx, answer_key, *answer, ttl);
    return true;
}

bool parse_ttl(Ctx* ctx, Str* arg, long long* ttl) {
    if (StringToLongLong(arg, ttl) == kOk && *ttl >= 1) return true;
    ReplyWithError(ctx, "ERR bloomline: ttl_ms must be a positive integer");
    return false;
}

int cmd_add(Ctx* ctx, Str** argv, int argc) {
    if (argc != 5) return WrongArity(ctx);
    long long ttl = 0;
    if (!parse_ttl(ctx, argv[3], &ttl) || replay(ctx, argv[2])) return kOk;
    std::string answer;
    if (!add_batch(ctx, argv[1], argv[2], ttl, argv[4], &answer)) return kOk;
    ReplicateVerbatim(ctx);
    return ReplyWithStringBuffer(ctx, answer.data(), answer.size());
}

int cmd_chain_add(Ctx* ctx, Str** argv, int argc) {
    if (argc != 8) return WrongArity(ctx);
    long long ttl = 0;
    if (!parse_ttl(ctx, argv[5], &ttl) || replay(ctx, argv[2])) return kOk;
    const std::string stages = read_string(ctx, argv[3]);
    if (stages != text(argv[6])) return ReplyWithError(ctx, ("STALE " + (stages.empty() ? "0" : stages)).c_str());
    std::string answer;
    if (!add_batch(ctx, argv[1], argv[2], ttl, argv[7], &answer)) return kOk;
    long long news = 0;
    for (char c : answer) news += c == '1';
    const std::string count = read_string(ctx, argv[4]);
    const long long before = count.empty() ? 0 : std::strtoll(count.c_str(), nullptr, 10);
    set_string(ctx, argv[4], std::to_string(before + news), 0);
    ReplicateVerbatim(ctx);
    return ReplyWithStringBuffer(ctx, answer.data(), answer.size());
}

int cmd_has(Ctx* ctx, Str** argv, int argc) {
    if (argc != 3) return WrongArity(ctx);
    OpenedKey shard(ctx, argv[1], kRead);
    std::size_t len = 0;
    unsigned char* bytes = shard_bytes(ctx, shard.k, kRead, &len);
    if (!bytes) return kOk;
    std::size_t blob_len = 0;
    const auto* blob = reinterpret_cast<const unsigned char*>(StringPtrLen(argv[2], &blob_len));
    std::string answer, error;
    if (!bloomline::apply_positions(blob, blob_len, bytes, len, false, &answer, &error, [](std::size_t, std::size_t) {}))
        return ReplyWithError(ctx, error.c_str());
    return ReplyWithStringBuffer(ctx, answer.data(), answer.size());
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int RedisModule_OnLoad(Ctx* ctx, Str**, int) {
    GetApi = reinterpret_cast<int (*)(const char*, void*)>(reinterpret_cast<void**>(ctx)[0]);
    const bool ok = api("RedisModule_CreateCommand", &CreateCommand) &&
                    api("RedisModule_SetModuleAttribs", &SetModuleAttribs) &&
                    api("RedisModule_WrongArity", &WrongArity) && api("RedisModule_ReplyWithError", &ReplyWithError) &&
                    api("RedisModule_ReplyWithStringBuffer", &ReplyWithStringBuffer) &&
                    api("RedisModule_OpenKey", &OpenKey) && api("RedisModule_CloseKey", &CloseKey) &&
                    api("RedisModule_KeyType", &KeyType) && api("RedisModule_StringDMA", &StringDMA) &&
                    api("RedisModule_StringPtrLen", &StringPtrLen) &&
                    api("RedisModule_CreateString", &CreateString) && api("RedisModule_FreeString", &FreeString) &&
                    api("RedisModule_StringSet", &StringSet) && api("RedisModule_SetExpire", &SetExpire) &&
                    api("RedisModule_ReplicateVerbatim", &ReplicateVerbatim) &&
                    api("RedisModule_StringToLongLong", &StringToLongLong);
    if (!ok) return kErr;
    if (api("RedisModule_IsModuleNameBusy", &IsModuleNameBusy) && IsModuleNameBusy("bloomline")) return kErr;
    SetModuleAttribs(ctx, "bloomline", 1, kApiVersion1);
    // Keys: 1-2 for ADD (the shard and its answer key, one slot in a
    // cluster), 1-4 for CADD, 1 for HAS.
    if (CreateCommand(ctx, "bloomline.add", cmd_add, "write deny-oom", 1, 2, 1) != kOk) return kErr;
    if (CreateCommand(ctx, "bloomline.cadd", cmd_chain_add, "write deny-oom", 1, 4, 1) != kOk) return kErr;
    if (CreateCommand(ctx, "bloomline.has", cmd_has, "readonly fast", 1, 1, 1) != kOk) return kErr;
    return kOk;
}
