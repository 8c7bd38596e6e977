#include "args_py.hpp"

#include <cmath>

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

std::uint64_t to_count(py::handle v, const char* name, std::uint64_t lo, std::uint64_t hi, const char* range) {
    if (!PyFloat_Check(v.ptr())) return to_u64(v, name, lo, hi, range);
    const double d = PyFloat_AS_DOUBLE(v.ptr());
    if (!std::isfinite(d) || d != std::floor(d))
        raise(PyExc_ValueError, std::string(name) + " must be a whole number (an int, or a float such as 1e6), got " +
                                    py::repr(v).cast<std::string>());
    return to_u64(py::reinterpret_steal<py::object>(PyLong_FromDouble(d)), name, lo, hi, range);
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
        // A buffer whose bytes are not in one piece (a strided NumPy view)
        // is named as such: it is bytes-like, just not contiguous.
        Py_buffer strided;
        if (PyObject_GetBuffer(obj.ptr(), &strided, PyBUF_FULL_RO) == 0) {
            PyBuffer_Release(&strided);
            raise(PyExc_TypeError, std::string(name) + " must be one contiguous block of bytes, got a non-contiguous " +
                                       py_keys::type_name(obj.ptr()) + " (copy it first: numpy.ascontiguousarray)");
        }
        PyErr_Clear();
        raise(PyExc_TypeError, std::string(name) + " must be bytes-like, got " + py_keys::type_name(obj.ptr()));
    }
}

Layout to_layout(py::handle v) {
    if (!PyUnicode_Check(v.ptr()))
        raise(PyExc_TypeError, "layout must be 'blocked' or 'standard', got " + py_keys::type_name(v.ptr()));
    return parse_layout(v.cast<std::string>());
}

// ---- calls that fit no overload --------------------------------------------

bool signature_of(py::handle fn, const std::string& qualname, bool is_method, Signature& out) {
    py::handle f = py::detail::get_function(fn);
    if (!f || !PyCFunction_Check(f.ptr())) return false;
    PyObject* self = PyCFunction_GET_SELF(f.ptr());
    const py::detail::function_record* rec = self ? py::detail::function_record_ptr_from_PyObject(self) : nullptr;
    if (rec == nullptr) return false;
    out = Signature{};
    out.qualname = qualname;
    out.star_args = rec->has_args;
    const std::size_t skip = is_method ? 1 : 0;
    for (std::size_t i = skip; i < rec->args.size(); ++i) {
        const auto& a = rec->args[i];
        const std::string name = a.name ? a.name : "";
        if ((rec->has_args && name == "args") || (rec->has_kwargs && name == "kwargs") || name.empty()) continue;
        out.names.push_back(name);
        out.required.push_back(!a.value);
        if (i < rec->nargs_pos && !rec->has_args) out.positional = out.names.size();
    }
    return true;
}

namespace {
std::string quoted(const std::string& s) { return "'" + s + "'"; }

std::string takes(const Signature& sig) {
    std::string s;
    for (std::size_t i = 0; i < sig.names.size(); ++i) {
        if (i) s += ", ";
        if (i == sig.positional && !sig.star_args) s += "*, ";
        if (i == 0 && sig.star_args) s += "*args, ";
        s += sig.names[i];
    }
    return s.empty() ? "no arguments" : s;
}
}  // namespace

void check_call(const Signature& sig, const py::tuple& args, const py::dict& kwargs) {
    const std::string head = sig.qualname + "()";
    const std::size_t given = args.size();
    if (!sig.star_args && given > sig.positional)
        raise(PyExc_TypeError, head + " takes " + std::to_string(sig.positional) + " positional argument" +
                                   (sig.positional == 1 ? "" : "s") + " but " + std::to_string(given) +
                                   (given == 1 ? " was" : " were") + " given (it takes " + takes(sig) + ")");
    std::vector<bool> bound(sig.names.size(), false);
    for (std::size_t i = 0; i < sig.names.size() && i < given && !sig.star_args; ++i) bound[i] = true;
    for (auto item : kwargs) {
        const std::string key = py::str(item.first);
        std::size_t i = 0;
        while (i < sig.names.size() && sig.names[i] != key) ++i;
        if (i == sig.names.size()) {
            std::string hint;
            py::list names;
            for (const std::string& n : sig.names) names.append(py::str(n));
            py::list close = py::module_::import("difflib").attr("get_close_matches")(key, names, 1);
            if (!close.empty()) hint = " (did you mean " + quoted(py::str(close[0])) + "?)";
            raise(PyExc_TypeError, head + " got an unexpected keyword argument " + quoted(key) + hint +
                                       "; it takes " + takes(sig));
        }
        if (bound[i]) raise(PyExc_TypeError, head + " got multiple values for argument " + quoted(key));
        bound[i] = true;
    }
    for (std::size_t i = 0; i < sig.names.size(); ++i)
        if (sig.required[i] && !bound[i])
            raise(PyExc_TypeError, head + " missing required argument " + quoted(sig.names[i]) + " (it takes " +
                                       takes(sig) + ")");
}

void explain_bad_calls(py::handle cls) {
    const std::string kind = py::str(cls.attr("__name__"));
    const py::dict members = cls.attr("__dict__");
    for (auto item : members) {
        const std::string name = py::str(item.first);
        if (name.empty() || name[0] == '_') continue;
        const bool is_static = PyObject_TypeCheck(item.second.ptr(), &PyStaticMethod_Type);
        const py::object fn = is_static ? item.second.attr("__func__") : py::reinterpret_borrow<py::object>(item.second);
        Signature sig;
        if (!signature_of(fn, kind + "." + name, !is_static, sig)) continue;  // add's fast path, properties
        auto fallback = [sig, is_static](py::args args, py::kwargs kwargs) {
            // The first argument of a method is self: not the caller's.
            py::tuple given = is_static ? py::tuple(args) : py::tuple(args[py::slice(1, args.size(), 1)]);
            check_call(sig, given, kwargs);
            std::string types;
            for (py::handle a : given) types += (types.empty() ? "" : ", ") + py_keys::type_name(a.ptr());
            for (auto kv : kwargs)
                types += (types.empty() ? "" : ", ") + py::str(kv.first).cast<std::string>() + "=" +
                         py_keys::type_name(kv.second.ptr());
            raise(PyExc_TypeError, sig.qualname + "() got arguments of the wrong type (" + types + "); see help(" +
                                       sig.qualname + ")");
        };
        // The overload is an implementation detail: help() keeps showing the
        // method's own signature and docstring, not pybind11's "Overloaded
        // function" list.
        const std::string doc = py::str(fn.attr("__doc__"));
        py::cpp_function f = is_static
                                 ? py::cpp_function(fallback, py::name(name.c_str()), py::scope(cls), py::sibling(fn))
                                 : py::cpp_function(fallback, py::name(name.c_str()), py::is_method(cls), py::sibling(fn));
        auto* func = reinterpret_cast<PyCFunctionObject*>(py::detail::get_function(f).ptr());
        std::free(const_cast<char*>(PYBIND11_PYCFUNCTION_GET_DOC(func)));
        PYBIND11_PYCFUNCTION_SET_DOC(func, PYBIND11_COMPAT_STRDUP(doc.c_str()));
        if (is_static)
            cls.attr(name.c_str()) = py::staticmethod(f);
        else
            cls.attr(name.c_str()) = f;
    }
}

}  // namespace bloomline::py_args
