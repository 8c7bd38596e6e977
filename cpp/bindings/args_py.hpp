// Argument checks shared by the bound classes: Python values -> C++ values,
// with errors that name the parameter and show what was passed.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "bloomline/common.hpp"

namespace bloomline::py_args {

namespace py = pybind11;

// An int (or an object with __index__) in [lo, hi]; bool and float refused.
std::uint64_t to_u64(py::handle v, const char* name, std::uint64_t lo, std::uint64_t hi, const char* range);
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

}  // namespace bloomline::py_args
