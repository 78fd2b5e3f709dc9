#include "core/state_io.h"

#include "absl/strings/str_cat.h"

namespace bandit {

StateWriter::StateWriter(bandit::v1::PolicyState* out, absl::string_view policy, uint32_t version)
    : out_(out) {
  out_->Clear();
  out_->set_policy(std::string(policy));
  out_->set_version(version);
}

void StateWriter::Put(absl::string_view name, const Eigen::MatrixXd& m) {
  auto* t = out_->add_tensors();
  t->set_name(std::string(name));
  t->set_rows(m.rows());
  t->set_cols(m.cols());
  t->mutable_data()->Assign(m.data(), m.data() + m.size());
}

void StateWriter::Put(absl::string_view name, const Eigen::VectorXd& v) {
  auto* t = out_->add_tensors();
  t->set_name(std::string(name));
  t->set_rows(v.size());
  t->set_cols(1);
  t->mutable_data()->Assign(v.data(), v.data() + v.size());
}

void StateWriter::PutScalar(absl::string_view name, double value) {
  auto* s = out_->add_scalars();
  s->set_name(std::string(name));
  s->set_value(value);
}

void StateWriter::PutInt(absl::string_view name, int64_t value) {
  auto* s = out_->add_ints();
  s->set_name(std::string(name));
  s->set_value(value);
}

void StateWriter::PutRng(const Rng& rng) { out_->set_rng(rng.Save()); }

void StateWriter::PutArmIds(const std::vector<std::string>& ids) {
  for (const auto& id : ids) out_->add_arm_ids(id);
}

absl::Status StateReader::Expect(absl::string_view policy, uint32_t version) const {
  if (in_.policy() != policy)
    return absl::InvalidArgumentError(
        absl::StrCat("state is for policy '", in_.policy(), "', expected '", policy, "'"));
  if (in_.version() != version)
    return absl::InvalidArgumentError(absl::StrCat("state version ", in_.version(), " of policy '",
                                                   policy, "' is not supported, expected ",
                                                   version));
  return absl::OkStatus();
}

absl::Status StateReader::Get(absl::string_view name, Eigen::MatrixXd* m, int64_t rows,
                              int64_t cols) const {
  for (const auto& t : in_.tensors()) {
    if (t.name() != name) continue;
    // The declared shape must be non-negative and hold exactly the values given; the product
    // is checked by division, so huge dimensions whose product wraps around cannot pass.
    const bool fills = t.rows() >= 0 && t.cols() >= 0 &&
                       (t.cols() == 0 ? t.data_size() == 0
                                      : t.data_size() % t.cols() == 0 &&
                                            t.data_size() / t.cols() == t.rows());
    if ((rows >= 0 && t.rows() != rows) || (cols >= 0 && t.cols() != cols) || !fills)
      return absl::InvalidArgumentError(absl::StrCat("state tensor '", name, "' is ", t.rows(), "x",
                                                     t.cols(), " with ", t.data_size(),
                                                     " values, expected ", rows, "x", cols));
    *m = Eigen::Map<const Eigen::MatrixXd>(t.data().data(), t.rows(), t.cols());
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("state tensor '", name, "' is missing"));
}

absl::Status StateReader::Get(absl::string_view name, Eigen::VectorXd* v, int64_t size) const {
  Eigen::MatrixXd m;
  if (auto s = Get(name, &m, size, 1); !s.ok()) return s;
  *v = m.col(0);
  return absl::OkStatus();
}

absl::Status StateReader::GetScalar(absl::string_view name, double* value) const {
  for (const auto& s : in_.scalars())
    if (s.name() == name) {
      *value = s.value();
      return absl::OkStatus();
    }
  return absl::InvalidArgumentError(absl::StrCat("state scalar '", name, "' is missing"));
}

absl::Status StateReader::GetInt(absl::string_view name, int64_t* value) const {
  for (const auto& s : in_.ints())
    if (s.name() == name) {
      *value = s.value();
      return absl::OkStatus();
    }
  return absl::InvalidArgumentError(absl::StrCat("state integer '", name, "' is missing"));
}

absl::Status StateReader::GetRng(Rng* rng) const { return rng->Restore(in_.rng()); }

std::vector<std::string> StateReader::ArmIds() const {
  return {in_.arm_ids().begin(), in_.arm_ids().end()};
}

}  // namespace bandit
