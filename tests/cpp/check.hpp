// A small test runner for the core's C++ tests, with no dependency: the
// tests run wherever the core compiles, cross-compiled ones under qemu
// included. Each tests/cpp/test_*.cpp is one executable (one CTest test):
//
//   TEST("what it checks") { CHECK(cond); CHECK_EQ(a, b); CHECK_THROWS(expr, "text in the message"); }
//
// A failed check prints its file, line, expression and values and the case
// goes on; an exception escaping a case fails it. The executable prints one
// line per case and "N passed, N failed" (cases) at the end, and exits 1 if
// any case failed. Arguments: case names to run only those.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace check {

struct Case {
    const char* name;
    void (*fn)();
};

inline std::vector<Case>& cases() {
    static std::vector<Case> all;
    return all;
}

struct Register {
    Register(const char* name, void (*fn)()) { cases().push_back({name, fn}); }
};

struct Counts {
    std::uint64_t checks = 0;
    std::uint64_t failed_checks = 0;
};
inline Counts& counts() {
    static Counts c;
    return c;
}

inline bool record(bool ok, const char* expr, const char* file, int line, const std::string& detail = "") {
    ++counts().checks;
    if (!ok) {
        ++counts().failed_checks;
        std::printf("  %s:%d: CHECK failed: %s%s%s\n", file, line, expr, detail.empty() ? "" : "\n    ", detail.c_str());
    }
    return ok;
}

template <class T>
std::string show(const T& v) {
    std::ostringstream s;
    if constexpr (std::is_same_v<T, unsigned char> || std::is_same_v<T, signed char>)
        s << static_cast<int>(v);
    else
        s << v;
    return s.str();
}

template <class A, class B>
bool record_eq(const A& a, const B& b, const char* ea, const char* eb, const char* file, int line) {
    const bool ok = a == b;
    return record(ok, (std::string(ea) + " == " + eb).c_str(), file, line, ok ? "" : show(a) + " != " + show(b));
}

inline int run(int argc, char** argv) {
    int passed = 0, failed = 0;
    for (const Case& c : cases()) {
        bool wanted = argc <= 1;
        for (int i = 1; i < argc; ++i) wanted = wanted || std::strcmp(argv[i], c.name) == 0;
        if (!wanted) continue;
        const std::uint64_t before = counts().failed_checks;
        bool ok = true;
        try {
            c.fn();
        } catch (const std::exception& e) {
            std::printf("  exception: %s\n", e.what());
            ok = false;
        } catch (...) {
            std::printf("  unknown exception\n");
            ok = false;
        }
        ok = ok && counts().failed_checks == before;
        std::printf("%s  %s\n", ok ? "ok    " : "FAILED", c.name);
        (ok ? passed : failed)++;
    }
    std::printf("%llu checks\n%d passed, %d failed\n", static_cast<unsigned long long>(counts().checks), passed, failed);
    return failed == 0 && passed > 0 ? 0 : 1;
}

}  // namespace check

#define CHECK_CAT2(a, b) a##b
#define CHECK_CAT(a, b) CHECK_CAT2(a, b)
#define TEST(name)                                                                          \
    static void CHECK_CAT(check_case_, __LINE__)();                                         \
    static const check::Register CHECK_CAT(check_reg_, __LINE__)(name, CHECK_CAT(check_case_, __LINE__)); \
    static void CHECK_CAT(check_case_, __LINE__)()

#define CHECK(cond) check::record(static_cast<bool>(cond), #cond, __FILE__, __LINE__)
#define CHECK_EQ(a, b) check::record_eq((a), (b), #a, #b, __FILE__, __LINE__)
// expr must throw a std::exception whose what() contains text.
#define CHECK_THROWS(expr, text)                                                                       \
    do {                                                                                               \
        std::string check_what_;                                                                       \
        bool check_threw_ = false;                                                                     \
        try {                                                                                          \
            (void)(expr);                                                                              \
        } catch (const std::exception& e) {                                                            \
            check_threw_ = true;                                                                       \
            check_what_ = e.what();                                                                    \
        }                                                                                              \
        check::record(check_threw_ && check_what_.find(text) != std::string::npos, #expr " throws \"" text "\"", \
                      __FILE__, __LINE__, check_threw_ ? "threw: " + check_what_ : "did not throw");   \
    } while (0)
