// eval/haystack.cpp — context rendering with needles at the nearest boundary (see haystack.h).
// Tested by tests/unit/eval/test_haystack.cpp.
#include "eval/haystack.h"

#include <algorithm>
#include <cmath>

namespace kascade::eval {

RenderedContext render_context(const PieceSource& source, int64_t units, std::span<const Insertion> insertions) {
  // Boundary positions, ascending.
  std::vector<int64_t> boundaries;
  boundaries.push_back(0);
  for (int64_t i = 0; i < units; ++i) {
    if (i + 1 == units || source.boundary_after(i)) boundaries.push_back(i + 1);
  }
  // The boundary nearest each requested depth (ties: the lower one).
  std::vector<int64_t> position(insertions.size());
  for (size_t n = 0; n < insertions.size(); ++n) {
    const double target = std::clamp(insertions[n].depth, 0.0, 1.0) * static_cast<double>(units);
    auto it = std::lower_bound(boundaries.begin(), boundaries.end(), static_cast<int64_t>(std::ceil(target)));
    int64_t best = it == boundaries.end() ? boundaries.back() : *it;
    if (it != boundaries.begin()) {
      const int64_t below = *std::prev(it);
      if (std::abs(static_cast<double>(below) - target) <= std::abs(static_cast<double>(best) - target)) best = below;
    }
    position[n] = best;
  }
  // Insertion order at each position: by position, then by index (stable).
  std::vector<size_t> order(insertions.size());
  for (size_t n = 0; n < order.size(); ++n) order[n] = n;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return position[a] < position[b]; });

  RenderedContext out;
  out.needles.resize(insertions.size());
  std::string_view pending_separator;  // what goes before the next piece
  size_t next = 0;
  auto emit = [&](std::string_view text) {
    if (!out.text.empty()) out.text.append(pending_separator);
    const size_t offset = out.text.size();
    out.text.append(text);
    return offset;
  };
  auto emit_insertions_at = [&](int64_t p) {
    while (next < order.size() && position[order[next]] == p) {
      const size_t n = order[next];
      const size_t offset = emit(insertions[n].text);
      pending_separator = source.after_insertion;
      const double depth = units > 0 ? static_cast<double>(p) / static_cast<double>(units) : 0.0;
      out.needles[n] = NeedlePlacement{insertions[n].text, insertions[n].depth, depth, static_cast<int64_t>(offset),
                                       insertions[n].queried};
      ++next;
    }
  };
  for (int64_t i = 0; i < units; ++i) {
    emit_insertions_at(i);
    emit(source.piece(i));
    pending_separator = source.separator_after(i);
  }
  emit_insertions_at(units);
  return out;
}

PieceSource word_pieces(const WordStream& stream, int64_t start) {
  const WordStream* s = &stream;
  return PieceSource{
      [s, start](int64_t i) { return s->word(start, i); },
      [s, start](int64_t i) { return s->sentence_end(start, i); },
      [s, start](int64_t i) -> std::string_view { return s->paragraph_end(start, i) ? "\n" : " "; },
  };
}

PieceSource item_pieces(std::function<std::string_view(int64_t)> item, std::string_view separator) {
  return PieceSource{std::move(item), [](int64_t) { return true; },
                     [separator](int64_t) { return separator; }, separator};
}

}  // namespace kascade::eval
