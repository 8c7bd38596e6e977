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

}  // namespace bloomline::py_args
