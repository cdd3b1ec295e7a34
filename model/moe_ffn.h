// MoeFfn: one rank's mixture-of-experts feed-forward block (qwen3moe, qwen2moe, Mixtral) on CPU,
// between the FFN norm and the all-reduce that LlamaRank's dense FFN ends in as well.
//
// For each token, as llama.cpp's build_moe_ffn: router logits (ffn_gate_inp . x), the top-k
// experts and their weights (model/moe_router.h), each selected expert's SwiGLU FFN, the outputs
// multiplied by their weights and added in selection order; qwen2moe adds its shared expert's
// FFN times sigmoid(ffn_gate_inp_shexp . x) (computed as silu(g) / g, as llama.cpp does).
//
// Batched: the tokens of a batch that select the same expert go through that expert's
// projections together (one matmul per expert and projection, prefill and decode alike).
// A rank computes its part of each expert it holds (MoeLayerWeights): with expert slicing its
// rows of every expert, so the partial sums over the ranks add up to the whole FFN in the
// all-reduce; routing is computed identically on every rank from the replicated router.
//
// Threading: one thread (the rank's) calls forward(); the matmuls fan out to the pool.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "model/config.h"
#include "model/kernels/cpu/matmul.h"
#include "model/kernels/cpu/thread_pool.h"
#include "model/weights.h"

namespace tpnode::model {

class MoeFfn {
 public:
  // pool must outlive this object.
  MoeFfn(const ModelConfig& config, kernels::ThreadPool& pool);

  // h: [n][n_embd] the normed FFN input (the same on every rank); out: [n][n_embd] this rank's
  // share of the FFN output, to be all-reduced.
  void forward(const MoeLayerWeights& w, const float* h, int64_t n, float* out);

  // Token-expert pairs routed to each expert, summed over layers since construction (the same
  // on every rank: the routing is replicated). Any thread (relaxed atomics).
  std::vector<uint64_t> expertPairs() const;

 private:
  // same_x: x is the previous matmul's input, unchanged (its converted activations are reused).
  void matmul(const Matrix& w, const float* x, int64_t n, float* y, bool same_x = false);
  // y[m][dim] = down(swiglu(gate . x, up . x)) for m rows of x.
  void expertFfn(const Matrix& gate, const Matrix& up, const Matrix& down, const float* x,
                 int64_t m, float* y);
  void sharedExpert(const MoeLayerWeights& w, const float* h, int64_t n, float* out);

  int64_t dim_, n_expert_, k_;
  bool normalize_;
  kernels::ThreadPool& pool_;
  std::unique_ptr<std::atomic<uint64_t>[]> expert_pairs_;  // [n_expert]
  // Scratch, grown as needed.
  std::vector<float> logits_, weights_, x_, gate_, up_, y_, slots_;
  std::vector<int32_t> selected_;
  std::vector<int64_t> count_, order_;
  kernels::MatmulScratch quant_scratch_;
};

}  // namespace tpnode::model
