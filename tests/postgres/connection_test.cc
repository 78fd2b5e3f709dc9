// The PostgreSQL access layer (server/storage/postgres/connection.h) against a real PostgreSQL
// started by the test: parameters and results in both formats, batches in and out of pipeline
// mode, transactions, and the mapping of failures to absl::Status.
#include "server/storage/postgres/connection.h"

#include <gtest/gtest.h>

#include <endian.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/integration/postgres_process.h"

namespace bandit::server::pg {
namespace BANDIT_UNITY_ID {

using bandit::testing::SharedPostgres;

std::unique_ptr<Connection> Open(const std::string& role = "") {
  ConnectOptions o;
  o.dsn = SharedPostgres().CreateDatabase();
  o.role = role;
  auto c = Connection::Open(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

TEST(PostgresConnection, TextAndBinaryParametersAndResults) {
  auto conn = Open();
  ASSERT_NE(conn, nullptr);
  ASSERT_TRUE(conn->Exec("CREATE TABLE t (k bigint, name text, blob bytea, note text)").ok());
  const std::string blob("a\0b\xff", 4);  // bytes a text parameter could not carry
  const uint64_t key = htobe64(42);
  Params p;
  p.BinaryRef(absl::string_view(reinterpret_cast<const char*>(&key), 8), kOidInt8)
      .Text("it's \"quoted\"", kOidText)
      .BinaryRef(blob, kOidBytea);
  ASSERT_TRUE(conn->Exec("INSERT INTO t VALUES ($1, $2, $3, NULL)", p).ok());

  auto text = conn->Query("SELECT k, name, note FROM t");
  ASSERT_TRUE(text.ok()) << text.status();
  ASSERT_EQ(text->rows(), 1);
  EXPECT_EQ(text->uint(0, 0), 42u);
  EXPECT_EQ(text->text(0, 1), "it's \"quoted\"");
  EXPECT_TRUE(text->null(0, 2));
  EXPECT_EQ(text->text(0, 2), "");

  auto binary =
      conn->Query("SELECT k, blob FROM t WHERE name = $1", {"it's \"quoted\""}, Format::kBinary);
  ASSERT_TRUE(binary.ok()) << binary.status();
  ASSERT_EQ(binary->rows(), 1);
  EXPECT_EQ(binary->big_endian(0, 0), 42u);
  EXPECT_EQ(binary->bytes(0, 1), blob);

  auto value = conn->Value("SELECT count(*) FROM t WHERE k = $1::bigint", {"42"});
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, "1");
  auto none = conn->Value("SELECT k FROM t WHERE k = 7");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, "");
}

TEST(PostgresConnection, ArrayLiteralsQuoteEveryElement) {
  auto conn = Open();
  ASSERT_NE(conn, nullptr);
  const std::vector<std::string> names = {"plain", "with \"quotes\"", "back\\slash", "a,b", ""};
  auto res = conn->Query("SELECT x FROM unnest($1::text[]) WITH ORDINALITY AS f(x, i) ORDER BY i",
                         {TextArray(names)});
  ASSERT_TRUE(res.ok()) << res.status();
  ASSERT_EQ(res->rows(), static_cast<int>(names.size()));
  for (int i = 0; i < res->rows(); ++i) EXPECT_EQ(res->text(i, 0), names[i]);
  auto sum = conn->Value("SELECT sum(x) FROM unnest($1::bigint[]) AS f(x)", {IntArray({1, 2, 40})});
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ(*sum, "43");
}

TEST(PostgresConnection, BatchesRunInOrderWithAndWithoutPipelineMode) {
  for (bool pipelined : {false, true}) {
    SCOPED_TRACE(pipelined ? "pipelined" : "one round trip each");
    auto conn = Open();
    ASSERT_NE(conn, nullptr);
    ASSERT_TRUE(conn->Exec("CREATE TABLE t (i integer, s text)").ok());
    // Many statements with copied parameters: the vector reallocates, the values must move
    // with their statements.
    std::vector<Statement> batch;
    batch.push_back({"BEGIN"});
    for (int i = 0; i < 100; ++i) {
      Statement st{"INSERT INTO t VALUES ($1::integer, $2)"};
      st.params.Text(absl::StrCat(i)).Text(absl::StrCat("row ", i));
      batch.push_back(std::move(st));
    }
    batch.push_back({"COMMIT", "COMMIT"});
    ASSERT_TRUE(conn->ExecAll(batch, pipelined).ok());
    std::vector<int> seen;
    ASSERT_TRUE(conn->ForEachRow("SELECT i, s FROM t ORDER BY i", {}, Format::kText,
                                 [&](const Result& row) {
                                   EXPECT_EQ(row.rows(), 1);
                                   EXPECT_EQ(row.text(0, 1), absl::StrCat("row ", row.uint(0, 0)));
                                   seen.push_back(static_cast<int>(row.uint(0, 0)));
                                 })
                    .ok());
    ASSERT_EQ(seen.size(), 100u);
    for (int i = 0; i < 100; ++i) EXPECT_EQ(seen[i], i);

    // A failing statement fails the batch; the COMMIT after it answers ROLLBACK, so nothing
    // of the transaction is stored, and the session is usable afterwards.
    std::vector<Statement> failing;
    failing.push_back({"BEGIN"});
    failing.push_back({"INSERT INTO t VALUES (1000, 'kept?')"});
    failing.push_back({"INSERT INTO no_such_table VALUES (1)"});
    failing.push_back({"COMMIT", "COMMIT"});
    absl::Status s = conn->ExecAll(failing, pipelined);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    if (conn->in_transaction()) {
      ASSERT_TRUE(conn->Exec("ROLLBACK").ok());
    }
    auto count = conn->Value("SELECT count(*) FROM t");
    ASSERT_TRUE(count.ok()) << count.status();
    EXPECT_EQ(*count, "100");
  }
}

TEST(PostgresConnection, TransactionCommitsOrRollsBack) {
  auto conn = Open();
  ASSERT_NE(conn, nullptr);
  ASSERT_TRUE(conn->Exec("CREATE TABLE t (i integer)").ok());
  ASSERT_TRUE(
      conn->Transaction("the first insert", [&] { return conn->Exec("INSERT INTO t VALUES (1)"); })
          .ok());
  // The body refuses: rolled back, its status returned.
  absl::Status refused = conn->Transaction("a refused insert", [&]() -> absl::Status {
    if (auto s = conn->Exec("INSERT INTO t VALUES (2)"); !s.ok()) return s;
    return absl::FailedPreconditionError("changed my mind");
  });
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(conn->in_transaction());
  // The body ignores a failed statement: the COMMIT answers ROLLBACK, which is an error.
  absl::Status lost = conn->Transaction("an insert after a failure", [&] {
    (void)conn->Exec("SELECT 1 / 0");
    (void)conn->Exec("INSERT INTO t VALUES (3)");
    return absl::OkStatus();
  });
  EXPECT_EQ(lost.code(), absl::StatusCode::kUnavailable) << lost;
  EXPECT_TRUE(absl::StrContains(lost.message(), "committing an insert after a failure")) << lost;
  EXPECT_FALSE(conn->in_transaction());
  auto rows = conn->Value("SELECT string_agg(i::text, ',' ORDER BY i) FROM t");
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(*rows, "1");
}

TEST(PostgresConnection, RefusalsTheSchemaRaisesAreAbortedEverythingElseUnavailable) {
  auto conn = Open("cluster membership");
  ASSERT_NE(conn, nullptr);
  ASSERT_TRUE(conn->Exec("CREATE FUNCTION refuse() RETURNS integer LANGUAGE plpgsql AS $$ "
                         "BEGIN RAISE EXCEPTION 'not yours' USING ERRCODE = 'BF001'; END $$")
                  .ok());
  absl::Status fenced = conn->Exec("SELECT refuse()");
  EXPECT_EQ(fenced.code(), absl::StatusCode::kAborted) << fenced;
  EXPECT_TRUE(absl::StrContains(fenced.message(), "not yours")) << fenced;

  absl::Status broken = conn->Exec("SELEC 1");
  EXPECT_EQ(broken.code(), absl::StatusCode::kUnavailable) << broken;
  EXPECT_TRUE(absl::StrContains(broken.message(), "PostgreSQL (cluster membership): SELEC 1"))
      << broken;
  EXPECT_TRUE(absl::StrContains(broken.message(), "syntax error")) << broken;
  EXPECT_TRUE(conn->Probe().ok());
}

TEST(PostgresConnection, UnreachableIsUnavailableWithThePasswordHidden) {
  ConnectOptions o;
  o.dsn = "host=/nonexistent-dir port=1 dbname=x password=s3cret";
  o.password = "other-s3cret";
  auto c = Connection::Open(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(c.status().message(), "cannot connect to PostgreSQL"));
  EXPECT_FALSE(absl::StrContains(c.status().message(), "s3cret")) << c.status();
}

}  // namespace
}  // namespace bandit::server::pg
