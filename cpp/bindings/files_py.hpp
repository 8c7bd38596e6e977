// Paths and binary file objects, as every save and load takes them (both
// filter kinds in filter_py.hpp; scalable chains through _core.save_bytes
// and _core.load_bytes, files_py.cpp). A path is str, bytes or
// os.PathLike; anything else is a binary file object, written (write()) or
// read (read()) at its position, as pybloom-live's tofile and fromfile do.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

namespace bloomline::py_files {

namespace py = pybind11;

// Is obj a path (str, bytes, os.PathLike) rather than a file object?
bool is_path(py::handle obj);

// A path argument as os.fsencode gives it; one with a NUL byte is refused
// (the OS would read it only up to the NUL).
std::string fs_path(py::handle path);

// A whole file's bytes, read as load() reads a filter file: under its
// header lock, shared (file.hpp, read_whole_file).
py::bytes read_path(const std::string& path);

// `data` written whole at the position of a binary file object. TypeError
// for a text file, or for an object that is neither a path nor has write().
void write_stream(py::handle file, py::handle data);

// One encoded filter read from a binary file object at its position, and
// nothing past it, so that a stream may hold several one after another: its
// 128-byte header says how long it is. ValueError if the stream ends first
// or the header is not a bloomline header; the bytes are checked whole by
// whoever decodes them.
py::bytes read_stream(py::handle file);

}  // namespace bloomline::py_files
