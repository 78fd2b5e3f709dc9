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
        if (auto s = state.AdmitArms(rec->add_arms().arms()); !s.ok()) return s;
      return state.AddArms(rec->add_arms().arms());
    case R::kRemoveArms:
      if (admission != nullptr)
        if (auto s = state.AdmitArmRemoval(rec->remove_arms().arm_ids()); !s.ok()) return s;
      return state.RemoveArms(rec->remove_arms().arm_ids());
    case R::kSetMixtureReference:
      return state.SetMixtureReference(MixtureReferenceOf(rec->set_mixture_reference()));
    case R::kAddShadow: {
      // The shadow's config is completed in the record (seed, arms), so that it replays into
      // the same shadow.
      bandit::v1::AddShadowRequest* add = rec->mutable_add_shadow();
      return state.AddShadow(add->shadow(), add->mutable_config(),
                             admission != nullptr ? admission->max_shadows
                                                  : std::numeric_limits<int64_t>::max());
    }
    case R::kRemoveShadow:
      return state.RemoveShadow(rec->remove_shadow().shadow());
    case R::kPromoteShadow:
      return state.PromoteShadow(rec->promote_shadow().shadow());
    case R::kActivate:
      return state.Activate(rec->activate().event_id(), now);
    case R::kConfigure:
      return state.Configure(LiveSettingsOf(rec->configure()));
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
