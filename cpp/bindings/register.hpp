// One registration function per bound area, called from module.cpp.
#pragma once

#include <pybind11/pybind11.h>

namespace bloomline {
void register_bloom(pybind11::module_& m);
void register_counting(pybind11::module_& m);
void register_sizing(pybind11::module_& m);
void register_chain(pybind11::module_& m);
void register_io(pybind11::module_& m);
void register_redis(pybind11::module_& m);
}  // namespace bloomline
