// The one way banditd talks to PostgreSQL: the storage backend (postgres_storage.h) and the
// cluster's membership and leases (server/cluster/) open their sessions, run their statements
// and read their rows through this small layer over libpq, so both connect with the same
// options (timeouts, keepalives, the password file) and report failures the same way.
//
// Errors are absl::Status, never exceptions: UNAVAILABLE for anything the database or the
// network refused (the caller reconnects or retries), ABORTED for a transaction a check in the
// schema refused on purpose (an exception the schema raises with SQLSTATE class BF, such as
// lease fencing): the session is fine, the transaction's writes must not be retried as they are.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

typedef struct pg_conn PGconn;
typedef struct pg_result PGresult;

namespace bandit::server::pg {

// How every banditd session connects. Defaults (a 5 s connect timeout, TCP keepalives that
// notice a dead peer within about 25 s, a 15 s TCP user timeout) come first; the operator's
// connection string overrides them; `password` overrides everything.
struct ConnectOptions {
  // libpq connection string ("host=... dbname=..." or a postgresql:// URI). A password comes
  // from PGPASSWORD, ~/.pgpass (libpq reads both) or `password`.
  std::string dsn;
  std::string password;  // from --postgres_password_file; never logged
  std::string application_name = "banditd";
  // Named in error messages ("PostgreSQL (cluster membership): ..."); empty for none.
  std::string role;
};

// The connection string with any password removed, for logs and messages.
std::string RedactedDsn(const std::string& dsn);

// Type OIDs of the binary parameters banditd sends.
inline constexpr unsigned kOidInt8 = 20, kOidText = 25, kOidInt4 = 23, kOidBytea = 17;

// A PostgreSQL array literal of text values ({"a","b"}), every element quoted.
std::string TextArray(const std::vector<std::string>& values);
// {1,2,3}
std::string IntArray(const std::vector<uint64_t>& values);

// A statement's parameters ($1, $2, ...), in text or binary format, each optionally typed by
// its OID (0: the server infers the type). Text values are copied; *Ref values are not (the
// caller keeps them alive until the statement has been sent), which lets a group commit send
// thousands of records without copying them.
class Params {
 public:
  Params() = default;
  Params(std::initializer_list<std::string> text) {
    for (const auto& v : text) Text(v);
  }
  // Moves keep the copied values where they are (a deque's elements stay put); a copy would
  // point into its source.
  Params(Params&&) = default;
  Params& operator=(Params&&) = default;
  Params(const Params&) = delete;
  Params& operator=(const Params&) = delete;
  Params& Text(std::string value, unsigned type = 0);
  Params& TextRef(const std::string& value, unsigned type = 0);
  Params& BinaryRef(absl::string_view value, unsigned type);

  bool empty() const { return values_.empty(); }
  int size() const { return static_cast<int>(values_.size()); }
  const char* const* values() const { return values_.data(); }
  const int* lengths() const { return lengths_.data(); }
  const int* formats() const { return formats_.data(); }
  const unsigned* types() const { return types_.data(); }

 private:
  std::deque<std::string> owned_;  // a deque: its elements never move
  std::vector<const char*> values_;
  std::vector<int> lengths_, formats_;
  std::vector<unsigned> types_;
};

// Whether result values come as text or in PostgreSQL's binary format (bytea as its bytes,
// integers big-endian).
enum class Format { kText = 0, kBinary = 1 };

// One statement's result (owns the PGresult).
class Result {
 public:
  Result() = default;
  explicit Result(PGresult* res);
  Result(Result&&) noexcept;
  Result& operator=(Result&&) noexcept;
  ~Result();

  int rows() const;
  int columns() const;
  bool null(int row, int column) const;
  // The value as it came (text or binary); empty for NULL.
  absl::string_view bytes(int row, int column) const;
  std::string text(int row, int column) const { return std::string(bytes(row, column)); }
  // A binary integer column (int8, int4) as unsigned.
  uint64_t big_endian(int row, int column) const;
  // A text integer column; 0 if NULL or not a number.
  uint64_t uint(int row, int column) const;
  // The command tag ("COMMIT", "ROLLBACK", "INSERT 0 3").
  std::string command() const;
  PGresult* get() const { return res_; }

 private:
  PGresult* res_ = nullptr;
};

// A statement of a batch sent in one go (Connection::ExecAll).
struct Statement {
  Statement(std::string sql, const char* expect_tag = nullptr)
      : sql(std::move(sql)), expect_tag(expect_tag) {}
  std::string sql;
  Params params;
  const char* expect_tag;  // the command tag that means success (e.g. COMMIT)
};

// One session. Not thread-safe: each owner serializes its use (a mutex, or one thread).
class Connection {
 public:
  // Connects with `options` and sets client_min_messages = warning; server notices go to the
  // log. UNAVAILABLE naming the redacted connection string when it cannot.
  static absl::StatusOr<std::unique_ptr<Connection>> Open(const ConnectOptions& options);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  bool ok() const;
  // Whether the server is still there, without a round trip: reads whatever it sent (a closed
  // socket, a termination notice). libpq's socket is non-blocking, so this never waits.
  absl::Status Probe() const;
  // Inside a transaction (or a failed one), as libpq tracks it.
  bool in_transaction() const;

  // One statement and its rows. Without parameters the simple protocol runs it, which also
  // takes several commands separated by semicolons (a migration).
  absl::StatusOr<Result> Query(absl::string_view sql, const Params& params = {},
                               Format format = Format::kText) const;
  // A statement whose rows, if any, are not needed.
  absl::Status Exec(absl::string_view sql, const Params& params = {}) const;
  // The first column of the first row as text ("" when there is none or it is NULL).
  absl::StatusOr<std::string> Value(absl::string_view sql, const Params& params = {}) const;
  // Streams the rows one at a time (single-row mode), so a large table is never held whole:
  // `row` sees a Result of one row. Stops at the first error, after reading what was sent.
  absl::Status ForEachRow(absl::string_view sql, const Params& params, Format format,
                          const std::function<void(const Result& row)>& row) const;
  // COPY ... FROM STDIN: runs `sql`, then `write` hands the data to `put` in pieces (sent as
  // they come, never gathered), then the copy ends. A writer that fails aborts the COPY (nothing
  // is copied) and its status is returned.
  absl::Status CopyIn(
      absl::string_view sql,
      absl::FunctionRef<absl::Status(absl::FunctionRef<absl::Status(absl::string_view)> put)>
          write) const;
  // Every statement, in order, stopping at the first failure. Pipelined: all of them and a sync
  // go out together and their results come back in one round trip (libpq pipeline mode);
  // otherwise one round trip each.
  absl::Status ExecAll(const std::vector<Statement>& statements, bool pipelined) const;
  // BEGIN, `body`, COMMIT; ROLLBACK when `body` fails. `what` names the transaction in the
  // error of a COMMIT that did not commit.
  absl::Status Transaction(absl::string_view what, const std::function<absl::Status()>& body) const;

  // The status for a failed statement (see the top of this file); `res` may be null.
  absl::Status Error(absl::string_view what, const PGresult* res = nullptr) const;
  PGconn* get() const { return conn_; }

 private:
  Connection(PGconn* conn, std::string role) : conn_(conn), role_(std::move(role)) {}
  absl::Status Check(absl::string_view what, const Result& res,
                     const char* expect_tag = nullptr) const;

  PGconn* conn_;
  const std::string role_;
};

}  // namespace bandit::server::pg
