// Byte-level BPE as llama.cpp's llm_tokenizer_bpe_session: pre-tokenize into words, map each
// word's bytes to GPT-2's alphabet, repeatedly merge the adjacent pair of lowest merge rank
// (ties: leftmost), then emit each symbol's token (a symbol that is no token is emitted byte
// by byte where single bytes are tokens, as llama.cpp does).
#include <queue>

#include "model/tokenizer_internal.h"
#include "model/unicode.h"

namespace tpnode::model {
namespace {

struct Symbol {
  int prev;
  int next;
  size_t offset;  // into the current word
  size_t n;       // bytes; 0 once merged into its left neighbour
};

struct Bigram {
  int left;
  int right;
  int32_t rank;
  size_t size;  // bytes of left + right when queued
};

struct BigramOrder {  // the top of the queue: lowest rank, then leftmost
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.rank > r.rank || (l.rank == r.rank && l.left > r.left);
  }
};

class BpeSession {
 public:
  explicit BpeSession(const TokenizerTables& t) : t_(t) {}

  void run(std::string_view text, std::vector<TokenId>& out) {
    decodeUtf8(text, cpts_);
    classes_.resize(cpts_.size());
    for (size_t i = 0; i < cpts_.size(); ++i) classes_[i] = charClass(cpts_[i]);
    splitWords(t_.pre, cpts_, classes_, lengths_);
    size_t start = 0;
    for (const size_t len : lengths_) {
      word_.clear();
      utf8_.clear();
      for (size_t i = start; i < start + len; ++i) appendUtf8(cpts_[i], utf8_);
      for (const char c : utf8_) word_ += byteToUtf8(static_cast<uint8_t>(c));
      encodeWord(out);
      start += len;
    }
  }

 private:
  void encodeWord(std::vector<TokenId>& out) {
    symbols_.clear();
    queue_ = {};
    if (t_.ignore_merges) {
      if (const TokenId id = t_.find(word_); id >= 0) {
        out.push_back(id);
        return;
      }
    }
    for (size_t offset = 0; offset < word_.size();) {
      const size_t len =
          std::min(utf8SequenceLength(static_cast<uint8_t>(word_[offset])), word_.size() - offset);
      const int index = static_cast<int>(symbols_.size());
      symbols_.push_back(
          Symbol{index - 1, offset + len == word_.size() ? -1 : index + 1, offset, len});
      offset += len;
    }
    for (int i = 1; i < static_cast<int>(symbols_.size()); ++i) addBigram(i - 1, i);
    while (!queue_.empty()) {
      const Bigram b = queue_.top();
      queue_.pop();
      Symbol& left = symbols_[b.left];
      Symbol& right = symbols_[b.right];
      // Stale if either side changed since it was queued (llama.cpp compares the texts; the
      // symbols only grow to the right, so comparing sizes is the same test).
      if (left.n == 0 || right.n == 0 || left.n + right.n != b.size) continue;
      left.n += right.n;
      right.n = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = b.left;
      addBigram(left.prev, b.left);
      addBigram(b.left, left.next);
    }
    for (const Symbol& s : symbols_) {
      if (s.n == 0) continue;
      const std::string_view text = std::string_view(word_).substr(s.offset, s.n);
      if (const TokenId id = t_.find(text); id >= 0) {
        out.push_back(id);
        continue;
      }
      for (const char c : text) {
        if (const TokenId id = t_.find(std::string_view(&c, 1)); id >= 0) out.push_back(id);
      }
    }
  }

  void addBigram(int left, int right) {
    if (left == -1 || right == -1) return;
    const std::string_view w(word_);
    const Symbol& l = symbols_[left];
    const Symbol& r = symbols_[right];
    const int32_t rank = t_.rank(w.substr(l.offset, l.n), w.substr(r.offset, r.n), key_);
    if (rank < 0) return;
    queue_.push(Bigram{left, right, rank, l.n + r.n});
  }

  const TokenizerTables& t_;
  std::vector<uint32_t> cpts_;
  std::vector<CharClass> classes_;
  std::vector<size_t> lengths_;
  std::string utf8_;
  std::string word_;
  std::string key_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue_;
};

}  // namespace

void encodeBpe(const TokenizerTables& t, std::string_view text, std::vector<TokenId>& out) {
  BpeSession(t).run(text, out);
}

}  // namespace tpnode::model
