// Python face of files (file.hpp): paths and binary file objects as saves
// and loads take them (files_py.hpp), and AtomicWriter, the one atomic
// writer for bytes written from Python (a scalable chain, the Scrapy
// journal) with the refusals every save shares.
#include "files_py.hpp"

#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "args_py.hpp"
#include "bloomline/file.hpp"
#include "bloomline/format.hpp"
#include "bloomline/memory.hpp"
#include "register.hpp"

namespace bloomline {

namespace py = pybind11;

namespace py_files {

bool is_path(py::handle obj) {
    return PyUnicode_Check(obj.ptr()) || PyBytes_Check(obj.ptr()) ||
           PyObject_HasAttrString(reinterpret_cast<PyObject*>(Py_TYPE(obj.ptr())), "__fspath__");
}

std::string fs_path(py::handle path) {
    std::string p = py::module_::import("os").attr("fsencode")(path).cast<std::string>();
    if (p.find('\0') != std::string::npos)
        throw std::invalid_argument("path must not contain a NUL byte, got " + py::repr(path).cast<std::string>());
    return p;
}

py::bytes read_path(const std::string& path) {
    py::bytes out;
    py::gil_scoped_release nogil;
    read_whole_file(path, [&out](std::size_t size) {
        py::gil_scoped_acquire gil;
        out = py_args::new_bytes(size);
        return reinterpret_cast<unsigned char*>(PyBytes_AS_STRING(out.ptr()));
    });
    return out;
}

namespace {

std::string type_name(py::handle obj) { return py::type::handle_of(obj).attr("__name__").cast<std::string>(); }

// A text file (io.TextIOBase) takes and gives str: say which mode to use.
void refuse_text(py::handle file, const char* mode) {
    if (py::isinstance(file, py::module_::import("io").attr("TextIOBase")))
        throw py::type_error(std::string("file must be opened in binary mode ('") + mode + "'), got a text file");
}

// The method `name` of a file object, or a TypeError saying what a save or
// load takes.
py::object method_of(py::handle file, const char* name) {
    if (!py::hasattr(file, name))
        throw py::type_error(std::string("path must be str, bytes, os.PathLike or a binary file object (with ") +
                             name + "()), got " + type_name(file));
    return file.attr(name);
}

// Up to n bytes of a stream into out; returns how many (fewer only at its end).
std::size_t read_into(py::object& read, unsigned char* out, std::size_t n) {
    constexpr std::size_t kPiece = std::size_t{64} << 20;  // a bogus length meets the end, not one huge read
    std::size_t done = 0;
    while (done < n) {
        const std::size_t asked = std::min(n - done, kPiece);
        py::object piece = read(static_cast<py::ssize_t>(asked));
        if (piece.is_none())
            throw std::invalid_argument("file.read() returned None (a non-blocking file with no data ready): "
                                        "load needs a blocking file");
        if (PyUnicode_Check(piece.ptr()))
            throw py::type_error("file must be opened in binary mode ('rb'), got a text file");
        const py_args::BytesView view(piece, "file.read()");
        if (view.size() == 0) break;
        if (view.size() > asked)
            throw std::invalid_argument("file.read(" + std::to_string(asked) + ") returned " +
                                        std::to_string(view.size()) + " bytes (it must return at most as many as asked)");
        std::memcpy(out + done, view.data(), view.size());
        done += view.size();
    }
    return done;
}

}  // namespace

void write_stream(py::handle file, py::handle data) {
    py::object write = method_of(file, "write");
    refuse_text(file, "wb");
    const py_args::BytesView view(data, "data");
    py::memoryview all = py::memoryview::from_memory(view.data(), static_cast<py::ssize_t>(view.size()));
    // A raw file may take part of a write: the rest follows, as
    // BufferedWriter does it.
    std::size_t done = 0;
    while (done < view.size()) {
        const std::size_t offered = view.size() - done;
        py::object n = write(all[py::slice(static_cast<py::ssize_t>(done), static_cast<py::ssize_t>(view.size()), 1)]);
        if (n.is_none()) throw std::invalid_argument("the file took no bytes (a non-blocking file is not supported)");
        if (!PyLong_Check(n.ptr()) || PyBool_Check(n.ptr()))
            throw py::type_error("file.write() must return the number of bytes it took, got " +
                                 py::type::handle_of(n).attr("__name__").cast<std::string>());
        const long long took = PyLong_AsLongLong(n.ptr());
        if (took == -1 && PyErr_Occurred()) throw py::error_already_set();
        if (took <= 0 || static_cast<unsigned long long>(took) > offered)
            throw std::invalid_argument("file.write() returned " + std::to_string(took) + " for " +
                                        std::to_string(offered) + " bytes offered (it must be 1.." +
                                        std::to_string(offered) + "): the save is incomplete");
        done += static_cast<std::size_t>(took);
    }
}

py::bytes read_stream(py::handle file) {
    py::object read = method_of(file, "read");
    refuse_text(file, "rb");
    unsigned char header[kHeaderSize];
    const std::size_t got = read_into(read, header, kHeaderSize);
    if (got < kHeaderSize)
        throw std::invalid_argument("the file ended after " + std::to_string(got) + " of a header's " +
                                    std::to_string(kHeaderSize) + " bytes (truncated, or no filter here)");
    const std::uint64_t total = encoded_length(header);
    // The whole length first, from the filters' own allocator: a header that
    // asks for more than memory holds is refused (OutOfMemory, naming the
    // bytes) before a byte of an endless stream is read. (Not a std::string:
    // a sanitizer's malloc aborts on such a size instead of throwing.)
    Memory whole = Memory::zeroed(static_cast<std::size_t>(total));
    std::memcpy(whole.data, header, kHeaderSize);
    const std::size_t read_total = kHeaderSize + read_into(read, whole.data + kHeaderSize, total - kHeaderSize);
    if (read_total < total)
        throw std::invalid_argument("the file ended after " + std::to_string(read_total) + " of the filter's " +
                                    std::to_string(total) + " bytes (truncated)");
    return py_args::new_bytes(static_cast<std::size_t>(total), whole.data);
}

}  // namespace py_files

namespace {

class PyAtomicWriter {
public:
    explicit PyAtomicWriter(py::handle path) : file_(std::make_unique<AtomicFile>(py_files::fs_path(path))) {}
    void write(py::handle data) {
        const py_args::BytesView view(data, "data");
        live().write(view.data(), view.size());
    }
    void commit() {
        AtomicFile& f = live();
        py::gil_scoped_release nogil;
        f.commit();
        file_.reset();
    }
    void abort() { file_.reset(); }

private:
    AtomicFile& live() {
        if (!file_) throw std::invalid_argument("the AtomicWriter is committed or aborted");
        return *file_;
    }
    std::unique_ptr<AtomicFile> file_;
};

}  // namespace

void register_files(py::module_& m) {
    py::class_<PyAtomicWriter>(m, "AtomicWriter",
                               "Write a file atomically: a temporary file beside path, renamed over it by commit() "
                               "after fsync (and the directory fsynced). Leaving a with-block without commit(), or "
                               "by an exception, removes the temporary file and leaves path untouched.")
        .def(py::init<py::handle>(), py::arg("path"))
        .def_static(
            "check",
            [](py::handle path) {
                const std::string p = py_files::fs_path(path);
                py::gil_scoped_release nogil;
                check_save_target(p);
            },
            py::arg("path"),
            "Raise what a save to path would refuse before writing anything: ValueError if a handle maps it for "
            "writing, PermissionError if it is read-only.")
        .def("write", &PyAtomicWriter::write, py::arg("data"))
        .def("commit", &PyAtomicWriter::commit)
        .def("abort", &PyAtomicWriter::abort)
        .def("__enter__", [](py::object self) { return self; })
        .def("__exit__", [](PyAtomicWriter& w, py::args) {
            w.abort();
            return false;
        });

    m.def(
        "save_bytes",
        [](py::handle target, py::handle data) {
            if (!py_files::is_path(target)) return py_files::write_stream(target, data);
            PyAtomicWriter out(target);
            out.write(data);
            out.commit();
        },
        py::arg("target"), py::arg("data"),
        "Save a filter's bytes as every save does: to a path atomically (AtomicWriter), or to a binary file "
        "object at its position.");

    m.def(
        "load_bytes",
        [](py::handle source) {
            return py_files::is_path(source) ? py_files::read_path(py_files::fs_path(source))
                                             : py_files::read_stream(source);
        },
        py::arg("source"),
        "A saved filter's bytes as every load reads them: a whole file under its header lock (read_file), or one "
        "filter from a binary file object at its position (nothing past it).");

    m.def(
        "read_file", [](py::handle path) { return py_files::read_path(py_files::fs_path(path)); }, py::arg("path"),
        "A whole file's bytes, read as load() reads a filter file: holding its header lock shared, so that a file "
        "writers share is read clean or marked dirty, never half of each.");
}

}  // namespace bloomline
