// Pure functions that cut a vector of `count` elements into `parts` contiguous pieces. Every
// algorithm and the serial test reference use these, so the cut (which decides who sums what,
// and for the ring the summation order) is defined once.
#pragma once

#include <cstddef>

namespace tpnode::collectives {

struct Range {
  size_t begin = 0;
  size_t end = 0;
  size_t size() const { return end - begin; }
  bool operator==(const Range&) const = default;
};

// Piece `index` of `parts`: pieces have ceil(count/parts) elements rounded up to a multiple of
// `align` (so pieces start on cache-line boundaries), the last ones are shorter or empty.
// Requires parts >= 1, 0 <= index < parts, align >= 1.
inline Range sliceRange(size_t count, int parts, int index, size_t align = 1) {
  const size_t p = static_cast<size_t>(parts);
  size_t chunk = (count + p - 1) / p;
  chunk = (chunk + align - 1) / align * align;
  const size_t i = static_cast<size_t>(index);
  const size_t begin = i * chunk < count ? i * chunk : count;
  const size_t end = begin + chunk < count ? begin + chunk : count;
  return {begin, end};
}

// Elements per 64-byte cache line for an element size (at least 1).
inline size_t cacheLineElems(size_t elem_size) {
  return elem_size >= 64 ? 1 : 64 / elem_size;
}

}  // namespace tpnode::collectives
