// What the four compiled modules share at the Python boundary (nanobind; placer/native.py is the Python side).
//
// Arrays cross the boundary as typed one-dimensional C-contiguous CPU arrays: nanobind checks the dtype, the
// rank and the layout when the call is made, and `array("name")` refuses any conversion (an int32 or strided
// array is a TypeError naming the expected type, never a silent copy -- a copy of an output would not be written
// back). Lengths and values are the callee's to check (`require`: ValueError). Loops run without the GIL
// (`nb::gil_scoped_release` around them only: nanobind objects are never copied or freed inside), and
// std::bad_alloc reaches Python as MemoryError (nanobind translates it).
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace placer {

namespace nb = nanobind;
using i64 = int64_t;

// A one-dimensional C-contiguous CPU array of T (const T: read only).
template <typename T>
using Array = nb::ndarray<T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using In64 = Array<const int64_t>;  // int64 input
using Out64 = Array<int64_t>;       // int64 output, written in place
using OutBool = Array<bool>;        // bool output, written in place

// The keyword argument `name`, an array taken as it is (no implicit dtype or layout conversion).
inline constexpr auto array(const char* name) { return nb::arg(name).noconvert(); }

// The number of entries of a one-dimensional array, as the loops count.
template <typename A>
inline i64 length(const A& a) {
  return i64(a.shape(0));
}

// ValueError "<function>: <what>" unless `ok`.
inline void require(bool ok, const char* function, const char* what) {
  if (!ok) throw nb::value_error((std::string(function) + ": " + what).c_str());
}

// A NumPy array that owns `data` (malloc'd, `n` entries): freed by the last reference to it, never copied.
template <typename T>
nb::ndarray<nb::numpy, T, nb::ndim<1>> owned_array(T* data, size_t n) {
  nb::capsule owner(data, [](void* p) noexcept { std::free(p); });
  return nb::ndarray<nb::numpy, T, nb::ndim<1>>(data, {n}, owner);
}

}  // namespace placer
