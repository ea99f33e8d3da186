// The component options chgate runs with, derived from its Config. The components' own option
// structs keep defaults for tests and other users of the libraries; a test
// (tests/unit/service/wiring_test.cc) checks that a default Config maps onto exactly those
// defaults, so a default cannot drift between the Config and a component.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "server/clickhouse/connection.h"
#include "server/clickhouse/pool.h"
#include "server/clickhouse/wire/tls.h"
#include "server/config/config.h"
#include "server/ingest/ingestor.h"
#include "server/service/query_service.h"
#include "server/spool/spool.h"

namespace chgate {

// Database, user, password, compression and timeouts (not TLS, counters or the password file,
// which main sets up).
clickhouse::ConnectionOptions ConnectionOptionsFrom(const config::Config& c);
// The TLS context of ClickHouse connections, or null when no endpoint uses TLS. Logs the warning
// an operator must see when certificates go unchecked. Errors: the files' (InvalidArgument,
// NotFound), prefixed "ClickHouse TLS: ".
absl::StatusOr<std::shared_ptr<clickhouse::TlsClientContext>> ClickHouseTlsFrom(
    const config::Config& c);
// ConnectionOptionsFrom with `tls` and the password file (re-read when it changes). Errors: the
// password file's, prefixed "--password-file: ".
absl::StatusOr<clickhouse::ConnectionOptions> ClickHouseConnectionFrom(
    const config::Config& c, std::shared_ptr<clickhouse::TlsClientContext> tls);
// The endpoints and the pool's limits around `connection`.
clickhouse::PoolOptions PoolOptionsFrom(const config::Config& c,
                                        const clickhouse::ConnectionOptions& connection);
ingest::IngestOptions IngestOptionsFrom(const config::Config& c);
// InvalidArgument for a --query-allowed-settings name that can never be allowed.
absl::StatusOr<service::QueryServiceOptions> QueryServiceOptionsFrom(const config::Config& c);
// The spool's bounds (used when --spool-dir is set). Replayed records are read back as they
// are sent, not held in memory.
spool::SpoolOptions SpoolOptionsFrom(const config::Config& c);
// The options of the spool that keeps committed persisted requests' idempotency keys
// (<spool-dir>/keys, ingest::KeyLog).
spool::SpoolOptions KeySpoolOptionsFrom(const config::Config& c);

}  // namespace chgate
