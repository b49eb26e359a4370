// eval/haystack.h — renders a context: `units` filler pieces (haystack words, or whole items
// such as distractor needles) with needle sentences inserted at the boundaries nearest their
// requested depths. A boundary is a position p in [0, units] (p pieces before it) at which a
// needle may go: the start, the end, and after every piece that ends a sentence (words) or
// after every item. The recorded depth is p / units (0 when units == 0).
// Tested by tests/unit/eval/test_haystack.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "eval/word_stream.h"
#include "kascade/tasks.h"

namespace kascade::eval {

struct Insertion {
  std::string text;
  double depth;   // requested, in [0, 1]
  bool queried;
};

struct RenderedContext {
  std::string text;
  std::vector<NeedlePlacement> needles;  // char_offset relative to `text`, in insertion order
};

// The pieces to render: piece(i) for i < units, whether a boundary follows piece i, and the
// separator that follows piece i.
struct PieceSource {
  std::function<std::string_view(int64_t)> piece;
  std::function<bool(int64_t)> boundary_after;
  std::function<std::string_view(int64_t)> separator_after;
  std::string_view after_insertion = " ";  // the separator that follows an inserted needle
};

// Insertions at the same boundary keep their order in `insertions`; placements are returned in
// the order of `insertions`.
RenderedContext render_context(const PieceSource& source, int64_t units, std::span<const Insertion> insertions);

// A word stream from `start`: sentence ends are boundaries, paragraph ends render as newlines.
PieceSource word_pieces(const WordStream& stream, int64_t start);

// Whole items (every gap is a boundary), joined by `separator`.
PieceSource item_pieces(std::function<std::string_view(int64_t)> item, std::string_view separator);

}  // namespace kascade::eval
