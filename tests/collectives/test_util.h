// Helpers for the collectives tests: ranks as threads, typed test data, and the serial
// reference that implements the documented summation orders (docs/collectives.md)
// independently of the kernels under test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/half.h"
#include "collectives/options.h"
#include "collectives/slicing.h"

namespace tpnode::collectives::testing {

using Bytes = std::vector<std::byte>;

// Runs fn(rank) on `n` threads; rethrows the first exception after joining all.
inline void runRanks(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  std::exception_ptr first;
  std::mutex mutex;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        std::lock_guard lock(mutex);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

inline float loadElem(const Bytes& b, size_t i, DType dtype) {
  if (dtype == DType::kF32) {
    float v;
    std::memcpy(&v, b.data() + i * 4, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, b.data() + i * 2, 2);
  return dtype == DType::kF16 ? f16ToF32(h) : bf16ToF32(h);
}

inline void storeElem(Bytes& b, size_t i, DType dtype, float v) {
  if (dtype == DType::kF32) {
    std::memcpy(b.data() + i * 4, &v, 4);
    return;
  }
  const uint16_t h = dtype == DType::kF16 ? f32ToF16(v) : f32ToBf16(v);
  std::memcpy(b.data() + i * 2, &h, 2);
}

// Random values in [-1, 1) (or small integers when `integers`), seeded by `seed`.
inline Bytes makeData(size_t count, DType dtype, uint32_t seed, bool integers = false) {
  Bytes b(count * dtypeSize(dtype));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  std::uniform_int_distribution<int> whole(-8, 8);
  for (size_t i = 0; i < count; ++i) {
    storeElem(b, i, dtype, integers ? static_cast<float>(whole(rng)) : real(rng));
  }
  return b;
}

// round(sum over inputs in the given order), f32 accumulation, one rounding.
inline Bytes referenceSum(const std::vector<const Bytes*>& inputs, size_t count, DType dtype) {
  Bytes out(count * dtypeSize(dtype));
  for (size_t i = 0; i < count; ++i) {
    float acc = loadElem(*inputs[0], i, dtype);
    for (size_t k = 1; k < inputs.size(); ++k) acc += loadElem(*inputs[k], i, dtype);
    storeElem(out, i, dtype, acc);
  }
  return out;
}

enum class RefAlgo { kDirect, kRing };

// The reference order of what the collectives run for `algo` (never kAuto: pass the choice).
// The tree sums in the direct order.
inline RefAlgo refAlgoOf(InterAlgo algo) {
  return algo == InterAlgo::kRing ? RefAlgo::kRing : RefAlgo::kDirect;
}

// The documented order of the hierarchical all-reduce: data[node][local] -> result.
// Local: each local slice (sliceRange over local ranks, cache-line aligned) is summed over local
// ranks in order and rounded: the node partial. Inter-node, per local slice:
//  - direct: round(sum over nodes 0..M-1 of the partials), f32 accumulation;
//  - ring: the slice is cut into M segments (sliceRange); segment g is summed starting at node
//    g, then g+1, ..., ending with node g-1 (mod M), rounding to the dtype after every hop.
//  - tree: node 0 sums in the direct order and sends the result back.
// `sliced` = false (leader mode) treats the whole vector as a single local slice.
inline Bytes referenceAllReduce(const std::vector<std::vector<Bytes>>& data, size_t count,
                                DType dtype, RefAlgo algo, bool sliced = true) {
  const int nodes = static_cast<int>(data.size());
  const int locals = static_cast<int>(data[0].size());
  std::vector<Bytes> partial;
  for (int m = 0; m < nodes; ++m) {
    std::vector<const Bytes*> in;
    for (int l = 0; l < locals; ++l) in.push_back(&data[m][l]);
    partial.push_back(referenceSum(in, count, dtype));
  }
  Bytes out(count * dtypeSize(dtype));
  const int slices = sliced ? locals : 1;
  for (int l = 0; l < slices; ++l) {
    const Range s = sliceRange(count, slices, l, cacheLineElems(dtypeSize(dtype)));
    if (algo == RefAlgo::kDirect) {
      for (size_t i = s.begin; i < s.end; ++i) {
        float acc = loadElem(partial[0], i, dtype);
        for (int m = 1; m < nodes; ++m) acc += loadElem(partial[m], i, dtype);
        storeElem(out, i, dtype, acc);
      }
      continue;
    }
    for (int g = 0; g < nodes; ++g) {
      const Range seg = sliceRange(s.size(), nodes, g);
      for (size_t j = s.begin + seg.begin; j < s.begin + seg.end; ++j) {
        const int first = g;
        Bytes acc(dtypeSize(dtype));
        storeElem(acc, 0, dtype, loadElem(partial[first], j, dtype));
        for (int h = 1; h < nodes; ++h) {
          const int m = (first + h) % nodes;
          storeElem(acc, 0, dtype, loadElem(acc, 0, dtype) + loadElem(partial[m], j, dtype));
        }
        storeElem(out, j, dtype, loadElem(acc, 0, dtype));
      }
    }
  }
  return out;
}

}  // namespace tpnode::collectives::testing
