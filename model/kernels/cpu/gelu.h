// GeGLU as ggml's CPU backend computes it (ggml_vec_geglu_f32 with GGML_GELU_FP16): the gate
// is rounded to f16 and looked up in a table of f16(gelu_tanh(x)) for every f16 x; gates
// <= -10 give 0 and >= 10 pass through. Matching the table (not the exact tanh) keeps greedy
// tokens equal to llama.cpp's. Thread-safe (the table is built once, on first use).
#pragma once

#include <cstdint>

namespace tpnode::model::kernels {

// gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))), in float.
float geluTanh(float x);

// g = gelu(g) * u, through the f16 table: the AVX2 + F16C variant where the CPU has it (and
// TPNODE_CPU_ISA is not scalar), else the scalar one; both give the same bits.
void geglu(float* g, const float* u, int64_t n);

// The variants behind geglu, for tests: the scalar loop always, AVX2 + F16C (8 values per step,
// the table read with a gather) where the CPU has it (nullptr elsewhere).
using GegluFn = void (*)(float* g, const float* u, int64_t n);
void gegluScalar(float* g, const float* u, int64_t n);
GegluFn gegluAvx2();

}  // namespace tpnode::model::kernels
