// One registration function per bound area, called from module.cpp.
#pragma once

#include <pybind11/pybind11.h>

#include "bloomline/format.hpp"

namespace bloomline {
void register_bloom(pybind11::module_& m);
void register_counting(pybind11::module_& m);
void register_sizing(pybind11::module_& m);

// bloomline.from_bytes dispatches on the header's kind to the reader that
// each filter kind registers here.
using Reader = pybind11::object (*)(pybind11::handle data);
void register_reader(Kind kind, Reader reader);
void register_from_bytes(pybind11::module_& m);
}  // namespace bloomline
