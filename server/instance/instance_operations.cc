#include "server/instance/instance_operations.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace bandit::server {

bool IsChange(bandit::v1::JournalRecord::OpCase op) {
  using R = bandit::v1::JournalRecord;
  switch (op) {
    case R::kReset:
    case R::kAddArms:
    case R::kRemoveArms:
    case R::kSetMixtureReference:
    case R::kAddShadow:
    case R::kRemoveShadow:
    case R::kPromoteShadow:
    case R::kActivate:
    case R::kConfigure:
    case R::kCreateEvaluation:
    case R::kFinishEvaluation:
    case R::kDeleteEvaluation:
    case R::kReplacePolicy:
      return true;
    default:
      return false;
  }
}

absl::Status ApplyChange(InstanceState& state, const Admission* admission, int64_t now,
                         bandit::v1::JournalRecord* rec) {
  using R = bandit::v1::JournalRecord;
  switch (rec->op_case()) {
    case R::kReset:
      return state.Reset();
    case R::kAddArms:
      if (admission != nullptr)
        if (auto s = state.AdmitArms(rec->add_arms()); !s.ok()) return s;
      return state.AddArms(rec->add_arms());
    case R::kRemoveArms:
      if (admission != nullptr)
        if (auto s = state.AdmitArmRemoval(rec->remove_arms()); !s.ok()) return s;
      return state.RemoveArms(rec->remove_arms());
    case R::kSetMixtureReference:
      return state.SetMixtureReference(rec->set_mixture_reference());
    case R::kAddShadow:
      return state.AddShadow(rec->mutable_add_shadow(), admission != nullptr
                                                            ? admission->max_shadows
                                                            : std::numeric_limits<int64_t>::max());
    case R::kRemoveShadow:
      return state.RemoveShadow(rec->remove_shadow());
    case R::kPromoteShadow:
      return state.PromoteShadow(rec->promote_shadow());
    case R::kActivate:
      return state.Activate(rec->activate(), now);
    case R::kConfigure:
      return state.Configure(rec->configure());
    case R::kCreateEvaluation:
      return state.CreateEvaluation(rec->create_evaluation());
    case R::kFinishEvaluation:
      return state.FinishEvaluation(rec->finish_evaluation());
    case R::kDeleteEvaluation:
      return state.DeleteEvaluation(rec->delete_evaluation());
    case R::kReplacePolicy:
      return state.ReplacePolicy(rec->replace_policy());
    default:
      return absl::InternalError(absl::StrCat("journal record ", rec->seq(), " has op ",
                                              rec->op_case(), ", which is not an instance change"));
  }
}

}  // namespace bandit::server
