// GeGLU as ggml's CPU backend computes it (ggml_vec_geglu_f32 with GGML_GELU_FP16): the gate
// is rounded to f16 and looked up in a table of f16(gelu_tanh(x)) for every f16 x; gates
// <= -10 give 0 and >= 10 pass through. Matching the table (not the exact tanh) keeps greedy
// tokens equal to llama.cpp's. Thread-safe (the table is built once, on first use).
#pragma once

#include <cstdint>

namespace tpnode::model::kernels {

// gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))), in float.
float geluTanh(float x);

// g = gelu(g) * u, through the f16 table: the AVX-512 variant where the CPU kernels are AVX-512
// ones, the AVX2 + F16C one where they are AVX2 ones (TPNODE_CPU_ISA picks them), else the
// scalar one; all give the same bits.
void geglu(float* g, const float* u, int64_t n);

// Builds the f16 table and picks the variant now (65536 gelu_tanh evaluations, a few ms), so that
// the first geglu call does not: a rank of a GeGLU model calls it at construction, as ggml builds
// its table at initialization, and a first request's time to first token does not carry it.
void gegluPrepare();

// The variants behind geglu, for tests: the scalar loop always, AVX2 + F16C (8 values per step,
// the table read with a gather) and AVX-512 (16 per step) where the CPU has them (nullptr
// elsewhere).
using GegluFn = void (*)(float* g, const float* u, int64_t n);
void gegluScalar(float* g, const float* u, int64_t n);
GegluFn gegluAvx2();
// AVX-512 F (16 values per step); nullptr where the CPU lacks the AVX-512 kernel table.
GegluFn gegluAvx512();

}  // namespace tpnode::model::kernels
