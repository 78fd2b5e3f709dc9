// The changes of an instance other than its decisions and rewards, each defined once: a change
// is a JournalRecord whose op is the change's record, and ApplyChange is its one apply. The
// service layer makes the record from a request (DecisionService), the live path applies it and
// journals it (Instance::Change), and recovery applies the journaled record through the same
// function (Instance::Apply), so replay cannot drift from what was served.
//
// Decisions and rewards (Select, Update, their journal forms and expiry) have their own path in
// Instance: their records borrow the caller's request instead of copying it, a copy that cost
// about 5% of the server's CPU at common request sizes.
//
// Adding a change: its record (a case of JournalRecord.op in storage.proto), its case in
// ApplyChange with the InstanceState method it calls, and the DecisionService method that makes
// the record from the request the front doors pass.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "bandit/v1/storage.pb.h"
#include "server/instance/instance_state.h"

namespace bandit::server {

// What the server admits now, for a change it is asked for. Replay passes none: a change the
// server once accepted is applied whatever its limits are today.
struct Admission {
  int64_t max_shadows = 8;  // --max_shadows
};

// Validates the change `rec` holds against `state` and applies it at `now` (the clock reading
// the record carries); on error nothing changed.
// May complete the record in place (AddShadow: the normalized config) so that the journaled
// record replays into exactly what was applied. INTERNAL for a record that is not such a change.
absl::Status ApplyChange(InstanceState& state, const Admission* admission, int64_t now,
                         bandit::v1::JournalRecord* rec);

// Whether ApplyChange applies records with this op.
bool IsChange(bandit::v1::JournalRecord::OpCase op);

}  // namespace bandit::server
