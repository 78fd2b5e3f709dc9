#include "server/service/status_util.h"

namespace bandit::server {

std::string CappedMessage(const absl::Status& s) {
  std::string msg(s.message());
  if (msg.size() > kMaxErrorMessageBytes) {
    msg.resize(kMaxErrorMessageBytes);
    msg += "...";
  }
  return msg;
}

void ToItemStatus(const absl::Status& s, bandit::v1::ItemStatus* out) {
  out->set_code(static_cast<int>(s.code()));
  if (s.ok()) {
    out->clear_message();
  } else {
    out->set_message(CappedMessage(s));
  }
}

}  // namespace bandit::server
