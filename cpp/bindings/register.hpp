// One registration function per bound area, called from module.cpp.
#pragma once

#include <pybind11/pybind11.h>

namespace bloomline {
void register_bloom(pybind11::module_& m);
void register_counting(pybind11::module_& m);
void register_sizing(pybind11::module_& m);
void register_chain(pybind11::module_& m);
void register_window(pybind11::module_& m);  // kind-4 codec, generation rate
void register_persistence(pybind11::module_& m);  // from_bytes, read_header
void register_files(pybind11::module_& m);        // AtomicWriter, read_file, save_bytes, load_bytes
void register_hashing(pybind11::module_& m);      // hash_many, hash_valid, key_positions, offers_arrow
void register_lines(pybind11::module_& m);        // hash_lines, select_lines
void register_redis(pybind11::module_& m);
}  // namespace bloomline
