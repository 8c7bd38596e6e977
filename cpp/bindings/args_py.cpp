#include "args_py.hpp"

#include "keys_py.hpp"

namespace bloomline::py_args {

namespace {
[[noreturn]] void raise(PyObject* type, const std::string& msg) {
    PyErr_SetString(type, msg.c_str());
    throw py::error_already_set();
}
}  // namespace

std::uint64_t to_u64(py::handle v, const char* name, std::uint64_t lo, std::uint64_t hi, const char* range) {
    PyObject* o = v.ptr();
    if (PyBool_Check(o) || PyFloat_Check(o) || !PyIndex_Check(o))
        raise(PyExc_TypeError, std::string(name) + " must be an int, got " + py_keys::type_name(o) + " (" +
                                   py::repr(v).cast<std::string>() + ")");
    py::object as_int = py::reinterpret_steal<py::object>(PyNumber_Index(o));
    if (!as_int) throw py::error_already_set();
    int overflow = 0;
    const long long s = PyLong_AsLongLongAndOverflow(as_int.ptr(), &overflow);
    if (s == -1 && PyErr_Occurred()) throw py::error_already_set();
    std::uint64_t u = 0;
    bool in_range = false;
    if (overflow == 0 && s >= 0) {
        u = static_cast<std::uint64_t>(s);
        in_range = u >= lo && u <= hi;
    } else if (overflow > 0) {
        const unsigned long long w = PyLong_AsUnsignedLongLong(as_int.ptr());
        if (w == static_cast<unsigned long long>(-1) && PyErr_Occurred())
            PyErr_Clear();
        else {
            u = w;
            in_range = u >= lo && u <= hi;
        }
    }
    if (!in_range) {
        const bool huge = _PyLong_NumBits(as_int.ptr()) > 256;
        raise(huge ? PyExc_OverflowError : PyExc_ValueError,
              std::string(name) + " must be in " + range + ", got " +
                  (huge ? std::string("a huge integer") : py::str(as_int).cast<std::string>()));
    }
    return u;
}

double to_double(py::handle v, const char* name) {
    PyObject* o = v.ptr();
    if (PyBool_Check(o) || !(PyFloat_Check(o) || PyLong_Check(o) || PyNumber_Check(o)) || PyUnicode_Check(o))
        raise(PyExc_TypeError, std::string(name) + " must be a number, got " + py_keys::type_name(o));
    const double d = PyFloat_AsDouble(o);
    if (d == -1.0 && PyErr_Occurred()) throw py::error_already_set();
    return d;
}

BytesView::BytesView(py::handle obj, const char* name) {
    if (PyObject_GetBuffer(obj.ptr(), &view_, PyBUF_SIMPLE) != 0) {
        PyErr_Clear();
        raise(PyExc_TypeError, std::string(name) + " must be bytes-like, got " + py_keys::type_name(obj.ptr()));
    }
}

Layout to_layout(py::handle v) {
    if (!PyUnicode_Check(v.ptr()))
        raise(PyExc_TypeError, "layout must be 'blocked' or 'standard', got " + py_keys::type_name(v.ptr()));
    return parse_layout(v.cast<std::string>());
}

}  // namespace bloomline::py_args
