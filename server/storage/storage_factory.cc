#include "server/storage/storage_factory.h"

#include "absl/strings/str_cat.h"

namespace bandit::server {

absl::StatusOr<BuiltStorage> MakeStorage(StorageSettings settings) {
  BuiltStorage built;
  if (settings.kind == "file") {
    built.description = absl::StrCat("file (data_dir=", settings.file.dir, ")");
    built.storage = std::make_unique<FileStorage>(std::move(settings.file));
    return built;
  }
  if (settings.kind == "postgres") {
    built.description =
        absl::StrCat("postgres (", PostgresStorage::RedactedDsn(settings.postgres.dsn), ")");
    const bool cluster = !settings.postgres.cluster_node_id.empty();
    auto pg = std::make_unique<PostgresStorage>(std::move(settings.postgres));
    if (cluster) built.fence = pg.get();
    built.storage = std::move(pg);
    return built;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--storage=", settings.kind, " is not one of file, postgres"));
}

}  // namespace bandit::server
