// Argument checks shared by the bound classes: Python values -> C++ values,
// with errors that name the parameter and show what was passed.
#pragma once

#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "bloomline/common.hpp"
#include "bloomline/parallel.hpp"

namespace bloomline::py_args {

namespace py = pybind11;

// A bytes object of n bytes (a copy of from, or to be filled): MemoryError
// where there is no room (py::bytes' own constructor raised RuntimeError,
// which the CLI showed as a traceback).
inline py::bytes new_bytes(std::size_t n, const void* from = nullptr) {
    PyObject* b = PyBytes_FromStringAndSize(static_cast<const char*>(from), static_cast<Py_ssize_t>(n));
    if (b == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::bytes>(b);
}

// An int (or an object with __index__) in [lo, hi]; bool and float refused.
std::uint64_t to_u64(py::handle v, const char* name, std::uint64_t lo, std::uint64_t hi, const char* range);
// A count such as a capacity: an int, or a float that is a whole number
// (1e6, as the CLI and sizing tables write it); 1.5, nan, inf and bool are
// refused with the parameter's name and the value.
std::uint64_t to_count(py::handle v, const char* name, std::uint64_t lo, std::uint64_t hi, const char* range);
// A real number (int or float).
double to_double(py::handle v, const char* name);
Layout to_layout(py::handle v);

// The bytes of a bytes-like argument, held for the life of this object.
class BytesView {
public:
    BytesView(py::handle obj, const char* name);
    ~BytesView() { PyBuffer_Release(&view_); }
    BytesView(const BytesView&) = delete;
    BytesView& operator=(const BytesView&) = delete;
    const unsigned char* data() const { return static_cast<const unsigned char*>(view_.buf); }
    std::size_t size() const { return static_cast<std::size_t>(view_.len); }

private:
    Py_buffer view_{};
};

// ---- what help() shows -------------------------------------------------
// Parameter types that only name, in the signatures pybind11 writes into
// docstrings, what a parameter takes (capacity: int, not object), as the
// stubs (_core.pyi) do. Each accepts any object: the binding checks it
// (to_u64, to_double, ...) and its errors name the parameter and value.
// A public method takes only these (and filters), never a C++ bool, double
// or string: those need pybind11's converting pass, which explain_bad_calls'
// overload would pre-empt (it matches in the first, non-converting pass).
inline int any_object(PyObject*) { return 1; }
#define BLOOMLINE_HINT(Name)                                 \
    class Name : public py::object {                         \
    public:                                                  \
        PYBIND11_OBJECT_DEFAULT(Name, object, any_object)    \
    };
BLOOMLINE_HINT(Int)
BLOOMLINE_HINT(OptInt)
BLOOMLINE_HINT(Float)
BLOOMLINE_HINT(OptFloat)
BLOOMLINE_HINT(LayoutName)
BLOOMLINE_HINT(NullsName)
BLOOMLINE_HINT(CounterBits)
BLOOMLINE_HINT(Key)
BLOOMLINE_HINT(Keys)
BLOOMLINE_HINT(Buffer)
BLOOMLINE_HINT(PathOrFile)
BLOOMLINE_HINT(OptBool)
BLOOMLINE_HINT(Bool)
BLOOMLINE_HINT(ModeName)
#undef BLOOMLINE_HINT

// pybind11 answers a call that fits no overload with its "incompatible
// function arguments" block, which names neither the bad keyword nor the
// accepted ones. A filter method's parameters, from its pybind11 record,
// and the TypeError Python itself would give for the call.
struct Signature {
    std::string qualname;             // "BloomFilter.add_many", "BloomFilter" for the constructor
    std::vector<std::string> names;   // without self
    std::vector<bool> required;
    std::size_t positional = 0;       // how many of names may be passed by position
    bool star_args = false;           // takes *args
};
// The signature of a pybind11 function (a bound method's or constructor's
// function; self is dropped); false if fn is not one.
bool signature_of(py::handle fn, const std::string& qualname, bool is_method, Signature& out);
// Raises Python's TypeError for arguments that cannot bind to sig (an
// unknown or repeated keyword, too many positional arguments, a missing
// one); returns when they can.
void check_call(const Signature& sig, const py::tuple& args, const py::dict& kwargs);
// After every def of cls: each public method that pybind11 bound gets a
// last overload, reached only when no other fits, that raises check_call's
// TypeError (or, when the names fit but a type does not, one saying which
// types were given), at no cost to a call that fits. Operators are left
// alone: they must answer NotImplemented.
void explain_bad_calls(py::handle cls);

}  // namespace bloomline::py_args

namespace bloomline {

// threads= of the batch calls: 0 means one per CPU.
inline unsigned parse_threads(pybind11::handle threads) {
    const auto t = static_cast<unsigned>(py_args::to_u64(threads, "threads", 0, kMaxThreads, "[0, 1024]"));
    return t != 0 ? t : std::min(available_cpus(), kMaxThreads);
}

}  // namespace bloomline

namespace pybind11::detail {
#define BLOOMLINE_HINT_NAME(Name, text) \
    template <>                          \
    struct handle_type_name<bloomline::py_args::Name> { static constexpr auto name = const_name(text); };
BLOOMLINE_HINT_NAME(Int, "int")
BLOOMLINE_HINT_NAME(OptInt, "int | None")
BLOOMLINE_HINT_NAME(Float, "float")
BLOOMLINE_HINT_NAME(OptFloat, "float | None")
BLOOMLINE_HINT_NAME(LayoutName, "typing.Literal['blocked', 'standard', 'standard-v1']")
BLOOMLINE_HINT_NAME(NullsName, "typing.Literal['raise', 'skip']")
BLOOMLINE_HINT_NAME(CounterBits, "typing.Literal[4, 8, 16]")
BLOOMLINE_HINT_NAME(Key, "Key")
BLOOMLINE_HINT_NAME(Keys, "Keys")
BLOOMLINE_HINT_NAME(Buffer, "collections.abc.Buffer")
BLOOMLINE_HINT_NAME(PathOrFile, "str | os.PathLike | typing.BinaryIO")
BLOOMLINE_HINT_NAME(OptBool, "bool | None")
BLOOMLINE_HINT_NAME(Bool, "bool")
BLOOMLINE_HINT_NAME(ModeName, "typing.Literal['r', 'r+']")
#undef BLOOMLINE_HINT_NAME
}  // namespace pybind11::detail
