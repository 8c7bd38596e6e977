// Python face of the sizing math (bloomline/sizing.hpp).
#include <pybind11/pybind11.h>

#include "args_py.hpp"
#include "bloomline/layout_blocked.hpp"
#include "bloomline/sizing.hpp"
#include "register.hpp"

namespace bloomline {

namespace py = pybind11;

namespace {

// A rate of n keys in a geometry, its arguments checked and named.
using RateOf = double (*)(double, std::uint64_t, std::uint32_t, Layout);
template <RateOf rate>
double rate_of(py_args::Float n, py_args::Int num_bits, py_args::Int num_hashes, py_args::LayoutName layout) {
    return rate(py_args::to_double(n, "n"), py_args::to_u64(num_bits, "num_bits", 1, kMaxBits, "[1, 2**48]"),
                static_cast<std::uint32_t>(py_args::to_u64(num_hashes, "num_hashes", 1, kMaxHashes, "[1, 64]")),
                py_args::to_layout(layout));
}

}  // namespace

void register_sizing(py::module_& m) {
    // The blocked layout's block, for Python code that reads a payload by
    // blocks (bloomline.analysis) or checks a size (bloomline.sizing).
    m.attr("BLOCK_BITS") = BlockedLayout::kBits;
    m.def(
        "optimal_params",
        [](py_args::Int capacity, py_args::Float error_rate, py_args::LayoutName layout) {
            const auto n = py_args::to_count(capacity, "capacity", 1, kMaxBits, "[1, 2**48]");
            const double p = py_args::to_double(error_rate, "error_rate");
            const Params r = optimal_params(static_cast<double>(n), p, py_args::to_layout(layout));
            return py::make_tuple(r.num_bits, r.num_hashes, r.bits_per_key, r.expected_fp_rate);
        },
        py::arg("capacity"), py::arg("error_rate"), py::arg("layout") = "blocked");
    m.def("false_positive_rate", &rate_of<false_positive_rate>, py::arg("n"), py::arg("num_bits"),
          py::arg("num_hashes"), py::arg("layout") = "blocked");
    m.def(
        "expected_rate", &rate_of<expected_rate>,
        py::arg("n"), py::arg("num_bits"), py::arg("num_hashes"), py::arg("layout") = "blocked",
        "The rate a filter of this geometry holding n keys reports as expected_fp_rate (exact on small standard "
        "filters of the second index, else false_positive_rate's).");
    m.def(
        "optimal_num_hashes",
        [](py_args::Int num_bits, py_args::Float n, py_args::LayoutName layout) {
            return optimal_num_hashes(py_args::to_u64(num_bits, "num_bits", 1, kMaxBits, "[1, 2**48]"),
                                      py_args::to_double(n, "n"), py_args::to_layout(layout));
        },
        py::arg("num_bits"), py::arg("n"), py::arg("layout") = "blocked");
    m.def(
        "estimate_count",
        [](py_args::Int bits_set, py_args::Int num_bits, py_args::Int num_hashes, py_args::LayoutName layout) {
            return estimate_count(py_args::to_u64(bits_set, "bits_set", 0, kMaxBits, "[0, 2**48]"),
                                  py_args::to_u64(num_bits, "num_bits", 1, kMaxBits, "[1, 2**48]"),
                                  static_cast<std::uint32_t>(
                                      py_args::to_u64(num_hashes, "num_hashes", 1, kMaxHashes, "[1, 64]")),
                                  py_args::to_layout(layout));
        },
        py::arg("bits_set"), py::arg("num_bits"), py::arg("num_hashes"), py::arg("layout") = "blocked");
}

}  // namespace bloomline
