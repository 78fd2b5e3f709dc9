// StateWriter / StateReader, the generic PolicyState every policy saves into: what is written
// reads back exactly (values, shapes, column-major order as Eigen holds them), and every
// getter refuses a missing or misshapen entry with INVALID_ARGUMENT and the exact message
// naming it, leaving its output untouched.
#include "core/state_io.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/rng.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

using absl::StatusCode;
namespace v1 = bandit::v1;

TEST(StateIo, WhatIsWrittenReadsBackExactly) {
  v1::PolicyState st;
  Eigen::MatrixXd m(2, 3);
  m << 1, 2, 3, 4, 5, 6;
  Eigen::VectorXd v(4);
  v << -1.5, 0, 1e300, 4.9e-324;  // extremes survive: doubles are stored as they are
  Rng rng(99);
  for (int i = 0; i < 7; ++i) rng.Uniform();
  {
    StateWriter w(&st, "demo", 3);
    w.Put("m", m);
    w.Put("v", v);
    w.PutScalar("s", 0.125);
    w.PutInt("n", -(int64_t{1} << 62));
    w.PutRng(rng);
    w.PutArmIds({"x", "y"});
  }
  // Column-major, as Eigen stores it: m(0,0), m(1,0), m(0,1), ...
  ASSERT_EQ(st.tensors(0).data_size(), 6);
  EXPECT_EQ(st.tensors(0).data(1), 4.0);
  EXPECT_EQ(st.tensors(0).data(2), 2.0);

  StateReader r(st);
  EXPECT_TRUE(r.Expect("demo", 3).ok());
  Eigen::MatrixXd m2;
  ASSERT_TRUE(r.Get("m", &m2, 2, 3).ok());
  EXPECT_EQ(m2, m);
  ASSERT_TRUE(r.Get("m", &m2).ok());  // any shape
  EXPECT_EQ(m2, m);
  Eigen::VectorXd v2;
  ASSERT_TRUE(r.Get("v", &v2, 4).ok());
  EXPECT_EQ(v2, v);
  double s = 0;
  ASSERT_TRUE(r.GetScalar("s", &s).ok());
  EXPECT_EQ(s, 0.125);
  int64_t n = 0;
  ASSERT_TRUE(r.GetInt("n", &n).ok());
  EXPECT_EQ(n, -(int64_t{1} << 62));
  Rng restored(1);
  ASSERT_TRUE(r.GetRng(&restored).ok());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(restored.Uniform(), rng.Uniform());
  EXPECT_EQ(r.ArmIds(), (std::vector<std::string>{"x", "y"}));
}

TEST(StateIo, AWriterStartsFromAnEmptyState) {
  v1::PolicyState st;
  st.add_scalars()->set_name("stale");
  st.add_arm_ids("stale");
  StateWriter w(&st, "p", 1);
  EXPECT_EQ(st.scalars_size(), 0);
  EXPECT_EQ(st.arm_ids_size(), 0);
  EXPECT_EQ(st.policy(), "p");
  EXPECT_EQ(st.version(), 1u);
}

TEST(StateIo, RefusalsNameTheEntryAndLeaveTheOutputUntouched) {
  v1::PolicyState st;
  {
    StateWriter w(&st, "demo", 2);
    w.Put("m", Eigen::MatrixXd(Eigen::MatrixXd::Ones(2, 2)));
  }
  StateReader r(st);
  EXPECT_EQ(r.Expect("other", 2),
            absl::InvalidArgumentError("state is for policy 'demo', expected 'other'"));
  EXPECT_EQ(
      r.Expect("demo", 3),
      absl::InvalidArgumentError("state version 2 of policy 'demo' is not supported, expected 3"));

  Eigen::MatrixXd out = Eigen::MatrixXd::Constant(1, 1, 7.0);
  EXPECT_EQ(r.Get("m", &out, 3, 2),
            absl::InvalidArgumentError("state tensor 'm' is 2x2 with 4 values, expected 3x2"));
  EXPECT_EQ(r.Get("absent", &out), absl::InvalidArgumentError("state tensor 'absent' is missing"));
  EXPECT_EQ(out, Eigen::MatrixXd::Constant(1, 1, 7.0));
  Eigen::VectorXd vout = Eigen::VectorXd::Constant(1, 7.0);
  EXPECT_EQ(r.Get("m", &vout, 4).code(), StatusCode::kInvalidArgument);  // 2x2 is no vector
  EXPECT_EQ(vout, Eigen::VectorXd::Constant(1, 7.0));
  double s = 7;
  EXPECT_EQ(r.GetScalar("s", &s), absl::InvalidArgumentError("state scalar 's' is missing"));
  int64_t n = 7;
  EXPECT_EQ(r.GetInt("n", &n), absl::InvalidArgumentError("state integer 'n' is missing"));
  EXPECT_EQ(s, 7);
  EXPECT_EQ(n, 7);

  // Values that do not fill the declared shape (a damaged or hand-made state).
  st.mutable_tensors(0)->mutable_data()->RemoveLast();
  EXPECT_EQ(r.Get("m", &out),
            absl::InvalidArgumentError("state tensor 'm' is 2x2 with 3 values, expected -1x-1"));
}

TEST(StateIo, NegativeDimensionsAreRefusedEvenWhenTheirProductMatches) {
  // rows = cols = -1 multiply to 1, the number of values: the shape must still be refused, not
  // handed to Eigen (which would map a matrix of negative size).
  v1::PolicyState st;
  st.set_policy("demo");
  auto* t = st.add_tensors();
  t->set_name("m");
  t->set_rows(-1);
  t->set_cols(-1);
  t->add_data(1.0);
  StateReader r(st);
  Eigen::MatrixXd out;
  EXPECT_EQ(r.Get("m", &out),
            absl::InvalidArgumentError("state tensor 'm' is -1x-1 with 1 values, expected -1x-1"));
  // Dimensions whose product wraps around to the number of values (2^32 x 2^32 = 2^64 = 0 in
  // 64 bits) are refused too.
  t->set_rows(int64_t{1} << 32);
  t->set_cols(int64_t{1} << 32);
  t->clear_data();
  EXPECT_EQ(r.Get("m", &out).code(), StatusCode::kInvalidArgument);
  // An empty shape with no values is a valid (empty) matrix.
  t->set_rows(0);
  t->set_cols(5);
  ASSERT_TRUE(r.Get("m", &out).ok());
  EXPECT_EQ(out.rows(), 0);
  EXPECT_EQ(out.cols(), 5);
}

}  // namespace
}  // namespace bandit
