// Filters in files: atomic saves, whole reads, and memory maps.
//
// save_atomic writes a temporary file beside the target (same directory, so
// the rename cannot cross file systems), fsyncs it, renames it over the
// target and fsyncs the directory: after a crash at any point the target
// path holds either the old file or the new one, complete. Measured: 50+
// SIGKILLs at random moments of a save loop, every file loaded and verified
// (tests/test_files.py).
//
// MappedFile maps a whole file. Read-only maps give constant-time opens: a
// 1.2 GB filter opens in about a millisecond and pages fault in on use.
// Writable maps (MAP_SHARED) make adds go straight to the page cache, so a
// process killed with SIGKILL loses nothing it added: the kernel writes the
// pages back. While a file is open for writing its header carries the
// "dirty" flag (its payload checksum is not current); close() recomputes the
// checksum and clears the flag.
//
// POSIX only (open, mmap, fsync, rename).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "bloomline/format.hpp"
#include "bloomline/mapped.hpp"
#include "bloomline/memory.hpp"

namespace bloomline {

// Write header + payload + checksum to path atomically. I/O errors throw
// std::system_error carrying errno (the bindings raise OSError).
void save_atomic(const Header& h, const unsigned char* payload, const std::string& path);

// Read a whole file into zeroed, aligned memory (the input of from_bytes).
// Refuses files over max_bytes (no allocation from an unchecked size).
Memory read_file(const std::string& path, std::size_t* size_out);

// Map a filter file and check it like from_bytes would (payload checksum only
// if verify). For writable maps the dirty flag is set in the file.
struct MappedFilter {
    std::shared_ptr<MappedFile> file;
    Header header;
    Memory payload;  // points into the map; owned by `file`
};
MappedFilter map_filter(const std::string& path, bool writable, bool verify);

}  // namespace bloomline
