// The known-answer files of tests/data, shared with the Python tests
// (tests/data/make_vectors.py says where they come from).
#pragma once

#include <cstdint>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#ifndef BLOOMLINE_TEST_DATA
#error "BLOOMLINE_TEST_DATA (the tests/data directory) must be defined by the build"
#endif

namespace testdata {

inline std::string path(const std::string& name) { return std::string(BLOOMLINE_TEST_DATA) + "/" + name; }

inline std::vector<std::string> lines(const std::string& name) {
    std::ifstream in(path(name));
    if (!in) throw std::runtime_error("cannot read " + path(name));
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) out.push_back(line);
    return out;
}

inline std::vector<unsigned char> read_bytes(const std::string& name) {
    std::ifstream in(path(name), std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path(name));
    return std::vector<unsigned char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// "-" is empty; else pairs of hex digits.
inline std::string unhex(const std::string& h) {
    std::string out;
    if (h == "-") return out;
    for (std::size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
    return out;
}

}  // namespace testdata
