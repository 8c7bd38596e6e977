// Python face of the scalable chain's core parts (bloomline/scalable.py
// builds the chain on them): its rule (sizing.hpp, ChainRule: stage sizes,
// how many stages can exist) and its kind-3 codec (filter_io.hpp).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "args_py.hpp"
#include "bloomline/filter_io.hpp"
#include "filter_py.hpp"
#include "register.hpp"

namespace bloomline {

namespace py = pybind11;
using py_filter::Handle;

void register_chain(py::module_& m) {
    py::class_<ChainRule>(m, "ChainRule",
                          "The stage rule of a scalable chain: stage i holds initial_capacity * growth**i keys at "
                          "error_rate * (1 - tightening) * tightening**i.")
        .def(py::init([](py::handle initial_capacity, py::handle error_rate, py::handle growth,
                         py::handle tightening) {
                 return ChainRule::make(
                     py_args::to_count(initial_capacity, "initial_capacity", 0, ~std::uint64_t{0}, "[0, 2**64)"),
                     py_args::to_double(error_rate, "error_rate"),
                     static_cast<std::uint32_t>(py_args::to_u64(growth, "growth", 0, 64, "{2, 4}")),
                     py_args::to_double(tightening, "tightening"));
             }),
             py::arg("initial_capacity"), py::arg("error_rate"), py::arg("growth"), py::arg("tightening"))
        .def_readonly("initial_capacity", &ChainRule::initial_capacity)
        .def_readonly("error_rate", &ChainRule::error_rate)
        .def_readonly("growth", &ChainRule::growth)
        .def_readonly("tightening", &ChainRule::tightening)
        .def("stage_capacity", &ChainRule::stage_capacity, py::arg("i"))
        .def("stage_error_rate", &ChainRule::stage_error_rate, py::arg("i"))
        .def_property_readonly("max_stages", &ChainRule::max_stages, "How many stages the chain can have (1..64).")
        .def_property_readonly("max_capacity", &ChainRule::max_capacity, "Keys the chain holds with all its stages full.");

    m.def(
        "encode_chain",
        [](const ChainRule& rule, py::handle layout, py::handle seed, const std::vector<const Handle<BloomFilter>*>& stages,
           const std::vector<std::uint64_t>& counts) {
            std::vector<const BloomFilter*> filters;
            for (const auto* h : stages) {
                (*h)->check_open();
                filters.push_back(h->f.get());
            }
            const std::size_t len = chain_encoded_size(filters);
            py::bytes out = py_args::new_bytes(len);
            encode_chain(rule, py_args::to_layout(layout), py_args::to_u64(seed, "seed", 0, ~std::uint64_t{0}, "[0, 2**64)"),
                         filters, counts, reinterpret_cast<unsigned char*>(PyBytes_AS_STRING(out.ptr())), len);
            return out;
        },
        py::arg("rule"), py::arg("layout"), py::arg("seed"), py::arg("stages"), py::arg("counts"),
        "The kind-3 bytes of a chain: its rule, layout and seed, and its stages with their counts of new keys.");

    m.def(
        "decode_chain",
        [](py::handle data) {
            Chain c;
            {
                const py_args::BytesView view(data, "data");
                c = decode_chain(view.data(), view.size());
            }
            py::list stages;
            for (ChainStage& s : c.stages)
                stages.append(py::make_tuple(Handle<BloomFilter>(std::move(s.filter)), s.count));
            return py::make_tuple(c.rule, layout_name(c.layout), c.seed, stages);
        },
        py::arg("data"), "(rule, layout, seed, [(stage, count), ...]) of kind-3 bytes, every part checked.");
}

}  // namespace bloomline
