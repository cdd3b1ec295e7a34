// SentencePiece-style tokenization as llama.cpp's llm_tokenizer_spm_session: start from UTF-8
// characters, repeatedly merge the adjacent pair that forms the vocabulary token with the
// highest score (ties: leftmost), then emit tokens; a symbol that is no token (a single
// character outside the vocabulary) falls back to <0xXX> byte tokens. (llama.cpp's rev_merge
// re-split is unreachable: only pairs whose text is a token are merged, so it is left out.)
#include <queue>

#include "common/error.h"
#include "model/tokenizer_internal.h"
#include "model/unicode.h"

namespace tpnode::model {
namespace {

struct Symbol {
  int prev;
  int next;
  size_t offset;  // into the text
  size_t n;       // bytes; 0 once merged into its left neighbour
};

struct Bigram {
  int left;
  int right;
  float score;
  size_t size;
};

struct BigramOrder {  // the top of the queue: highest score, then leftmost
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.score < r.score || (l.score == r.score && l.left > r.left);
  }
};

class SpmSession {
 public:
  SpmSession(const TokenizerTables& t, std::string_view text) : t_(t), text_(text) {}

  void run(std::vector<TokenId>& out) {
    size_t offset = 0;
    int index = 0;
    while (offset < text_.size()) {
      const size_t len =
          std::min(utf8SequenceLength(static_cast<uint8_t>(text_[offset])), text_.size() - offset);
      Symbol sym{index - 1, offset + len == text_.size() ? -1 : index + 1, offset, len};
      offset += len;
      ++index;
      symbols_.push_back(sym);
    }
    for (int i = 1; i < static_cast<int>(symbols_.size()); ++i) tryAddBigram(i - 1, i);

    while (!queue_.empty()) {
      const Bigram b = queue_.top();
      queue_.pop();
      Symbol& left = symbols_[b.left];
      Symbol& right = symbols_[b.right];
      if (left.n == 0 || right.n == 0 || left.n + right.n != b.size) continue;  // stale
      left.n += right.n;
      right.n = 0;
      left.next = right.next;
      if (right.next >= 0) symbols_[right.next].prev = b.left;
      tryAddBigram(left.prev, b.left);
      tryAddBigram(b.left, left.next);
    }
    if (symbols_.empty()) return;
    for (int i = 0; i != -1; i = symbols_[i].next) resegment(symbols_[i], out);
  }

 private:
  std::string_view textOf(const Symbol& s) const { return text_.substr(s.offset, s.n); }

  void tryAddBigram(int left, int right) {
    if (left == -1 || right == -1) return;
    const std::string_view text =
        text_.substr(symbols_[left].offset, symbols_[left].n + symbols_[right].n);
    const TokenId id = t_.find(text);
    if (id < 0) return;
    queue_.push(Bigram{left, right, t_.score[id], text.size()});
  }

  void resegment(const Symbol& s, std::vector<TokenId>& out) {
    const std::string_view text = textOf(s);
    if (const TokenId id = t_.find(text); id >= 0) {
      out.push_back(id);
      return;
    }
    for (const char c : text) out.push_back(byteToken(static_cast<uint8_t>(c)));
  }

  TokenId byteToken(uint8_t byte) const {
    static constexpr char kHex[] = "0123456789ABCDEF";
    const char name[6] = {'<', '0', 'x', kHex[byte >> 4], kHex[byte & 15], '>'};
    if (const TokenId id = t_.find(std::string_view(name, 6)); id >= 0) return id;
    if (const TokenId id = t_.find(std::string_view(reinterpret_cast<const char*>(&byte), 1));
        id >= 0) {
      return id;
    }
    if (t_.unk >= 0) return t_.unk;
    fail(ErrorCode::kInvalidData,
         "SentencePiece vocabulary has no byte token <0x{:02X}> and no unknown token for byte "
         "fallback",
         byte);
  }

  const TokenizerTables& t_;
  std::string_view text_;
  std::vector<Symbol> symbols_;
  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue_;
};

}  // namespace

void encodeSpm(const TokenizerTables& t, std::string_view text, std::vector<TokenId>& out) {
  SpmSession(t, text).run(out);
}

}  // namespace tpnode::model
