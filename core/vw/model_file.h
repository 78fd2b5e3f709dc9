// Vowpal Wabbit 9.11.2's binary model file, both ways: what `vw -f` writes and `vw -i` reads,
// for the learner served (core/vw/cb_learner.h). VW's layout (parse_regressor.cc
// save_load_header, then each reduction's save_load from the top of the stack down):
//   header: version "9.11.2", id, 'm', min/max label, -b, lda, ngram and skip counts, the kept
//     options as one string (sorted by long name: " --cb_adf --cb_explore_adf --cb_type mtr
//     --csoaa_ldf multiline --csoaa_rank --epsilon 0.200000002980232 --quadratic UA"), and a
//     checksum (MurmurHash3 x86_32 chained over the header's fields);
//   --squarecb's counter or --first's remaining rounds (u64), cb_adf's event and action sums
//     (u64 each);
//   gd: the resume flag (1: VW's default), 128 bytes of online state (t, the normalizer's sums,
//     the label range, l1/l2 state, ...), then each weight not all zero as its index (u32) and
//     its floats (weight, adaptive sum, normalizer: as many as the update keeps), to the end.
// What a file does not keep, VW does not keep either: --l1, --l2, --initial_t.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/vw/cb_learner.h"

namespace bandit::vw {

// The learner's model as `vw -f` writes it (save_resume layout).
std::string WriteModelFile(const CbLearner& learner);

// What a VW model file holds, as this learner serves it: the arguments (the file's kept
// options less those cb_adf sets itself, with -b from the header) and the learned state.
struct ModelFile {
  std::string arguments;
  std::unique_ptr<CbLearner> learner;
};

// Reads a model written by `vw -f` (or WriteModelFile). `extra_arguments` adds what a file
// does not keep (e.g. "--l2 1e-5"). INVALID_ARGUMENT naming what is wrong: not a VW model, a
// version other than 9.x, a checksum that does not match, a reduction or option this learner
// does not serve (named as the arguments parser names it), a truncated or corrupted weight list.
absl::StatusOr<ModelFile> ReadModelFile(absl::string_view bytes, absl::string_view extra_arguments,
                                        uint64_t seed);

// Whether `bytes` begin as a VW 9 model file does (its version string), as opposed to, say, the
// service's own snapshot.
bool IsModelFile(absl::string_view bytes);

// The policy state (Policy::Save) of a `vw` policy as a VW model file, and back: what the
// service's export and import use, so the server never touches the learner itself.
absl::StatusOr<std::string> ModelFileFromState(const bandit::v1::PolicyConfig& config,
                                               const bandit::v1::PolicyState& state);
struct ImportedModel {
  std::string arguments;
  bandit::v1::PolicyState state;
};
absl::StatusOr<ImportedModel> StateFromModelFile(absl::string_view bytes,
                                                 absl::string_view extra_arguments);

}  // namespace bandit::vw
