#include "server/storage/postgres/connection.h"

#include <libpq-fe.h>

#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/env/log.h"

namespace bandit::server::pg {
namespace {

std::string Trimmed(const char* msg) {
  return std::string(absl::StripAsciiWhitespace(msg ? msg : ""));
}

// A statement as error messages name it: its start (a multi-row INSERT runs to megabytes).
std::string Shortened(absl::string_view sql) {
  constexpr size_t kShown = 60;
  return sql.size() <= kShown ? std::string(sql) : absl::StrCat(sql.substr(0, kShown), "...");
}

// SQLSTATE class of the exceptions the schema raises to refuse a transaction on purpose.
constexpr absl::string_view kRefusedSqlStateClass = "BF";

}  // namespace

std::string RedactedDsn(const std::string& dsn) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(dsn.c_str(), &err);
  if (opts == nullptr) {
    if (err) PQfreemem(err);
    return "(unparseable connection string)";
  }
  std::vector<std::string> parts;
  for (PQconninfoOption* o = opts; o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    if (std::strcmp(o->keyword, "password") == 0) {
      parts.push_back("password=(hidden)");
      continue;
    }
    parts.push_back(absl::StrCat(o->keyword, "=", o->val));
  }
  PQconninfoFree(opts);
  return absl::StrJoin(parts, " ");
}

std::string TextArray(const std::vector<std::string>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += '"';
    for (char c : values[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

std::string IntArray(const std::vector<uint64_t>& values) {
  return absl::StrCat("{", absl::StrJoin(values, ","), "}");
}

// ---- Params ----

Params& Params::Text(std::string value, unsigned type) {
  owned_.push_back(std::move(value));
  return TextRef(owned_.back(), type);
}

Params& Params::TextRef(const std::string& value, unsigned type) {
  values_.push_back(value.c_str());  // text is sent up to its NUL
  lengths_.push_back(0);
  formats_.push_back(0);
  types_.push_back(type);
  return *this;
}

Params& Params::BinaryRef(absl::string_view value, unsigned type) {
  values_.push_back(value.data());
  lengths_.push_back(static_cast<int>(value.size()));
  formats_.push_back(1);
  types_.push_back(type);
  return *this;
}

// ---- Result ----

Result::Result(PGresult* res) : res_(res) {}
Result::Result(Result&& other) noexcept : res_(other.res_) { other.res_ = nullptr; }
Result& Result::operator=(Result&& other) noexcept {
  if (this != &other) {
    if (res_) PQclear(res_);
    res_ = other.res_;
    other.res_ = nullptr;
  }
  return *this;
}
Result::~Result() {
  if (res_) PQclear(res_);
}

int Result::rows() const { return res_ ? PQntuples(res_) : 0; }
int Result::columns() const { return res_ ? PQnfields(res_) : 0; }
bool Result::null(int row, int column) const { return PQgetisnull(res_, row, column) == 1; }

absl::string_view Result::bytes(int row, int column) const {
  if (null(row, column)) return {};
  return absl::string_view(PQgetvalue(res_, row, column), PQgetlength(res_, row, column));
}

uint64_t Result::big_endian(int row, int column) const {
  const absl::string_view b = bytes(row, column);
  uint64_t v = 0;
  for (char c : b) v = (v << 8) | static_cast<unsigned char>(c);
  return v;
}

uint64_t Result::uint(int row, int column) const {
  uint64_t v = 0;
  if (!absl::SimpleAtoi(bytes(row, column), &v)) return 0;
  return v;
}

std::string Result::command() const { return res_ ? PQcmdStatus(res_) : ""; }

// ---- Connection ----

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(const ConnectOptions& options) {
  // Defaults first; the operator's connection string (expanded from "dbname") overrides them;
  // a password from --postgres_password_file overrides everything.
  std::vector<const char*> keys = {
      "connect_timeout",  "application_name", "keepalives_idle", "keepalives_interval",
      "keepalives_count", "tcp_user_timeout", "dbname"};
  std::vector<const char*> values = {
      "5", options.application_name.c_str(), "10", "5", "3", "15000", options.dsn.c_str()};
  if (!options.password.empty()) {
    keys.push_back("password");
    values.push_back(options.password.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  std::unique_ptr<Connection> conn(
      new Connection(PQconnectdbParams(keys.data(), values.data(), 1), options.role));
  // Server notices (e.g. "terminating connection due to administrator command") into our log.
  PQsetNoticeProcessor(
      conn->get(),
      [](void*, const char* message) { BANDIT_LOG_WARN("PostgreSQL: ", Trimmed(message)); },
      nullptr);
  if (!conn->ok())
    return absl::UnavailableError(absl::StrCat("cannot connect to PostgreSQL (",
                                               RedactedDsn(options.dsn),
                                               "): ", Trimmed(PQerrorMessage(conn->get()))));
  if (auto s = conn->Exec("SET client_min_messages TO warning"); !s.ok()) return s;
  return conn;
}

Connection::~Connection() { PQfinish(conn_); }

bool Connection::ok() const { return PQstatus(conn_) == CONNECTION_OK; }

absl::Status Connection::Probe() const {
  if (PQconsumeInput(conn_) != 1 || !ok())
    return absl::UnavailableError(
        absl::StrCat("PostgreSQL: the connection was lost: ", Trimmed(PQerrorMessage(conn_))));
  return absl::OkStatus();
}

bool Connection::in_transaction() const { return PQtransactionStatus(conn_) != PQTRANS_IDLE; }

absl::Status Connection::Error(absl::string_view what, const PGresult* res) const {
  std::string why = res ? Trimmed(PQresultErrorMessage(res)) : "";
  if (why.empty()) why = Trimmed(PQerrorMessage(conn_));
  if (why.empty() && res) why = PQresStatus(PQresultStatus(res));
  const std::string prefix =
      role_.empty() ? "PostgreSQL" : absl::StrCat("PostgreSQL (", role_, ")");
  const char* state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  if (state != nullptr && absl::string_view(state).substr(0, 2) == kRefusedSqlStateClass)
    return absl::AbortedError(absl::StrCat(prefix, ": ", why));
  return absl::UnavailableError(absl::StrCat(prefix, ": ", what, ": ", why));
}

absl::Status Connection::Check(absl::string_view what, const Result& res,
                               const char* expect_tag) const {
  const auto status = PQresultStatus(res.get());
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) return Error(what, res.get());
  // COMMIT of a failed transaction answers ROLLBACK, with no error.
  if (expect_tag != nullptr && res.command() != expect_tag)
    return absl::UnavailableError(
        absl::StrCat("PostgreSQL: ", what, " answered ", res.command(), ", not ", expect_tag));
  return absl::OkStatus();
}

absl::StatusOr<Result> Connection::Query(absl::string_view sql, const Params& params,
                                         Format format) const {
  const std::string statement(sql);
  // Without parameters in text: the simple protocol, which also runs several commands.
  Result res(params.empty() && format == Format::kText
                 ? PQexec(conn_, statement.c_str())
                 : PQexecParams(conn_, statement.c_str(), params.size(), params.types(),
                                params.values(), params.lengths(), params.formats(),
                                static_cast<int>(format)));
  if (auto s = Check(Shortened(sql), res); !s.ok()) return s;
  return res;
}

absl::Status Connection::Exec(absl::string_view sql, const Params& params) const {
  return Query(sql, params).status();
}

absl::StatusOr<std::string> Connection::Value(absl::string_view sql, const Params& params) const {
  auto res = Query(sql, params);
  if (!res.ok()) return res.status();
  return res->rows() > 0 ? res->text(0, 0) : "";
}

absl::Status Connection::CopyIn(
    absl::string_view sql,
    absl::FunctionRef<absl::Status(absl::FunctionRef<absl::Status(absl::string_view)> put)> write)
    const {
  const std::string statement(sql);
  {
    Result started(PQexec(conn_, statement.c_str()));
    if (PQresultStatus(started.get()) != PGRES_COPY_IN) {
      absl::Status s = Error(Shortened(sql), started.get());
      // A connection left in COPY state by some other error: every result read, so the session
      // is ready for the next statement.
      while (PGresult* raw = PQgetResult(conn_)) PQclear(raw);
      return s;
    }
  }
  absl::Status status = write([this, &sql](absl::string_view data) -> absl::Status {
    if (data.empty()) return absl::OkStatus();
    if (PQputCopyData(conn_, data.data(), static_cast<int>(data.size())) != 1)
      return Error(absl::StrCat(Shortened(sql), " (sending data)"));
    return absl::OkStatus();
  });
  if (PQputCopyEnd(conn_, status.ok() ? nullptr : "the data could not be produced") != 1 &&
      status.ok())
    status = Error(absl::StrCat(Shortened(sql), " (ending the copy)"));
  // Every result is read, also after an error: the session is ready for the next statement.
  while (PGresult* raw = PQgetResult(conn_)) {
    Result res(raw);
    if (status.ok() && PQresultStatus(raw) != PGRES_COMMAND_OK) status = Error(Shortened(sql), raw);
  }
  return status;
}

absl::Status Connection::ForEachRow(absl::string_view sql, const Params& params, Format format,
                                    const std::function<void(const Result& row)>& row) const {
  const std::string statement(sql);
  if (!PQsendQueryParams(conn_, statement.c_str(), params.size(), params.types(), params.values(),
                         params.lengths(), params.formats(), static_cast<int>(format)) ||
      !PQsetSingleRowMode(conn_))
    return Error(Shortened(sql));
  absl::Status status;
  // Every result is read, also after an error: the session is ready for the next statement.
  while (PGresult* raw = PQgetResult(conn_)) {
    Result res(raw);
    const auto st = PQresultStatus(raw);
    if (st == PGRES_TUPLES_OK) continue;  // the end
    if (st != PGRES_SINGLE_TUPLE) {
      if (status.ok()) status = Error(Shortened(sql), raw);
      continue;
    }
    if (status.ok()) row(res);
  }
  return status;
}

absl::Status Connection::ExecAll(const std::vector<Statement>& statements, bool pipelined) const {
  auto send = [&](const Statement& st) {
    return PQsendQueryParams(conn_, st.sql.c_str(), st.params.size(), st.params.types(),
                             st.params.values(), st.params.lengths(), st.params.formats(), 0) == 1;
  };
  if (!pipelined) {
    for (const auto& st : statements) {
      if (!send(st)) return Error("sending a statement");
      absl::Status s;
      while (PGresult* raw = PQgetResult(conn_)) {
        Result res(raw);
        if (s.ok()) s = Check(Shortened(st.sql), res, st.expect_tag);
      }
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (PQenterPipelineMode(conn_) != 1) return Error("entering pipeline mode");
  for (const auto& st : statements)
    if (!send(st)) return Error("sending a statement in pipeline mode");
  if (PQpipelineSync(conn_) != 1) return Error("sending the pipeline sync");
  absl::Status s;
  for (const auto& st : statements) {
    PGresult* raw = PQgetResult(conn_);
    if (raw == nullptr) return Error("reading a pipeline result");
    Result res(raw);
    if (s.ok()) s = Check(Shortened(st.sql), res, st.expect_tag);
    // Each statement's results end with a null.
    while (PGresult* extra = PQgetResult(conn_)) PQclear(extra);
  }
  Result sync(PQgetResult(conn_));
  if (sync.get() == nullptr || PQresultStatus(sync.get()) != PGRES_PIPELINE_SYNC)
    return s.ok() ? Error("reading the pipeline sync") : s;
  if (PQexitPipelineMode(conn_) != 1 && s.ok()) return Error("leaving pipeline mode");
  return s;
}

absl::Status Connection::Transaction(absl::string_view what,
                                     const std::function<absl::Status()>& body) const {
  if (auto s = Exec("BEGIN"); !s.ok()) return s;
  if (absl::Status s = body(); !s.ok()) {
    (void)Exec("ROLLBACK");
    return s;
  }
  Result res(PQexec(conn_, "COMMIT"));
  return Check(absl::StrCat("committing ", what), res, "COMMIT");
}

}  // namespace bandit::server::pg
