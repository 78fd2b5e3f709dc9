#include "server/storage/storage.h"

#include "absl/synchronization/notification.h"

namespace bandit::server {

absl::Status Storage::WaitDurable(uint64_t seq) {
  absl::Notification done;
  absl::Status result;
  WhenDurable(seq, [&](absl::Status s) {
    result = std::move(s);
    done.Notify();
  });
  done.WaitForNotification();
  return result;
}

}  // namespace bandit::server
