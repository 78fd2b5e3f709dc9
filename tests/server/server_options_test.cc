// The composition root's inputs: SanitizeOptions refuses a set of options that does not fit with
// INVALID_ARGUMENT naming the flag, fills what is derived, and is idempotent; MakeStorage builds
// the backend --storage names, with a fence only where a cluster node needs one.
#include "server/server_options.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "core/classic/linucb.h"
#include "core/dimension_limits.h"
#include "core/kernel/candidate_kernel_ucb.h"
#include "server/storage/storage_factory.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

void ExpectRefused(const ServerOptions& o, const std::string& words) {
  absl::StatusOr<ServerOptions> s = SanitizeOptions(o);
  ASSERT_FALSE(s.ok()) << words;
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.status().message(), words)) << s.status().message();
}

TEST(ServerOptions, DefaultsAreTheDenseCapAndSanitizeCleanly) {
  const ServerOptions& d = DefaultServerOptions();
  EXPECT_EQ(d.limits.instance.max_feature_dim, kMaxDenseDimension);
  EXPECT_EQ(LinUcb::kMaxDimension, kMaxDenseDimension);
  EXPECT_EQ(CandidateKernelUcb::kMaxDimension, kMaxDenseDimension);
  EXPECT_EQ(d.limits.max_instances, ServiceLimits{}.max_instances);
  absl::StatusOr<ServerOptions> s = SanitizeOptions(d);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->limits.instance.max_vector_size, kMaxDenseDimension);
  EXPECT_EQ(s->limits.max_message_bytes, d.max_message_bytes);
}

TEST(ServerOptions, DerivedFieldsFollowTheirSourcesAndSanitizingTwiceChangesNothing) {
  ServerOptions o;
  o.limits.instance.max_feature_dim = 300;
  o.max_message_bytes = 1 << 20;
  o.limits.instance.named.max_depth = 7;
  o.cluster = true;
  o.storage = "postgres";
  o.postgres_dsn = "dbname=x";
  o.listen = "127.0.0.1:7001";
  absl::StatusOr<ServerOptions> once = SanitizeOptions(o);
  ASSERT_TRUE(once.ok()) << once.status();
  EXPECT_EQ(once->limits.instance.max_vector_size, 300);
  EXPECT_EQ(once->limits.max_message_bytes, 1 << 20);
  EXPECT_EQ(once->personalizer.max_json_depth, 7);
  EXPECT_EQ(once->node_id, HostName() + "-7001");
  absl::StatusOr<ServerOptions> twice = SanitizeOptions(*once);
  ASSERT_TRUE(twice.ok()) << twice.status();
  EXPECT_EQ(twice->node_id, once->node_id);
  EXPECT_EQ(twice->limits.instance.max_vector_size, 300);
  EXPECT_EQ(twice->personalizer.max_json_depth, 7);
}

TEST(ServerOptions, EveryMisfitIsRefusedNamingTheFlag) {
  ServerOptions o;
  o.storage = "sqlite";
  ExpectRefused(o, "--storage=sqlite is not one of file, postgres");
  o = ServerOptions();
  o.storage = "postgres";
  ExpectRefused(o, "--storage=postgres needs --postgres_dsn");
  o = ServerOptions();
  o.limits.max_instances = 0;
  ExpectRefused(o, "every --max_* limit must be at least 1");
  o = ServerOptions();
  o.limits.instance.max_name_length = 129;
  ExpectRefused(o, "--max_name_length at most 128");
  o = ServerOptions();
  o.limits.instance.named.max_terms = 0;
  ExpectRefused(o, "every --max_named_* and --max_json_* limit");
  o = ServerOptions();
  o.limits.instance.max_shadows = kMaxShadows + 1;
  ExpectRefused(o, "--max_shadows=1001 is out of range, expected 0..1000");
  o = ServerOptions();
  o.http_threads = 0;
  ExpectRefused(o, "--http_threads=0 is out of range");
  o = ServerOptions();
  o.http_io_threads = 0;
  ExpectRefused(o, "--http_io_threads=0 is out of range, expected 1..64");
  o = ServerOptions();
  o.http_header_timeout_ms = 0;
  ExpectRefused(o, "--http_header_timeout_ms=0 is out of range, expected 1..86400000");
  o = ServerOptions();
  o.http_body_timeout_ms = -5;
  ExpectRefused(o, "--http_body_timeout_ms=-5 is out of range");
  o = ServerOptions();
  o.http_idle_timeout_ms = 0;
  ExpectRefused(o, "--http_idle_timeout_ms=0 is out of range");
  o = ServerOptions();
  o.http_write_timeout_ms = kMaxHttpTimeoutMs + 1;
  ExpectRefused(o, "--http_write_timeout_ms=86400001 is out of range");
  o = ServerOptions();
  o.http_max_connections = 0;
  ExpectRefused(o, "--http_max_connections=0 is out of range, expected 1..1000000");
  o = ServerOptions();
  o.http_max_connections = 100;
  o.http_max_connections_per_address = 101;
  ExpectRefused(o,
                "--http_max_connections_per_address=101 is out of range, expected 1..100 "
                "(--http_max_connections)");
  o = ServerOptions();
  o.forward_deadline_ms = 0;
  ExpectRefused(o, "--forward_deadline_ms=0");
  o = ServerOptions();
  o.cluster = true;
  ExpectRefused(o, "--cluster needs --storage=postgres");
  o.storage = "postgres";
  o.postgres_dsn = "dbname=x";
  o.durability = Durability::kNone;
  ExpectRefused(o, "--cluster needs --durability=always (got none)");
}

TEST(StorageFactory, BuildsTheNamedBackendWithAFenceOnlyInClusterMode) {
  StorageSettings file;
  file.file.dir = ::testing::TempDir() + "/factory-file";
  absl::StatusOr<BuiltStorage> f = MakeStorage(file);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_NE(f->storage, nullptr);
  EXPECT_EQ(f->fence, nullptr);
  EXPECT_TRUE(absl::StartsWith(f->description, "file (data_dir="));

  StorageSettings pg;
  pg.kind = "postgres";
  pg.postgres.dsn = "host=nowhere password=secret dbname=x";
  absl::StatusOr<BuiltStorage> single = MakeStorage(pg);
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_EQ(single->fence, nullptr);
  EXPECT_FALSE(absl::StrContains(single->description, "secret")) << single->description;
  pg.postgres.cluster_node_id = "n1";
  absl::StatusOr<BuiltStorage> clustered = MakeStorage(pg);
  ASSERT_TRUE(clustered.ok()) << clustered.status();
  EXPECT_NE(clustered->fence, nullptr);

  StorageSettings bad;
  bad.kind = "tape";
  EXPECT_EQ(MakeStorage(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace bandit::server
