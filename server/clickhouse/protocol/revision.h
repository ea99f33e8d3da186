// Protocol revision constants (the first revision with each feature). Both sides gate every
// optional field on min(client revision, server revision).
#pragma once

#include <cstdint>

namespace chgate::clickhouse::revision {

// What this client advertises. Above it, new wire formats appear (sparse columns, Dynamic/JSON,
// size-stream Strings) that this client does not implement.
inline constexpr uint64_t kClient = 54460;

inline constexpr uint64_t kTemporaryTables = 50264;
inline constexpr uint64_t kTotalRowsInProgress = 51554;
inline constexpr uint64_t kBlockInfo = 51903;
inline constexpr uint64_t kClientInfo = 54032;
inline constexpr uint64_t kServerTimezone = 54058;
inline constexpr uint64_t kQuotaKeyInClientInfo = 54060;
inline constexpr uint64_t kServerDisplayName = 54372;
inline constexpr uint64_t kVersionPatch = 54401;
inline constexpr uint64_t kClientWriteInfo = 54420;
inline constexpr uint64_t kSettingsAsStrings = 54429;
inline constexpr uint64_t kInterserverSecret = 54441;
inline constexpr uint64_t kOpenTelemetry = 54442;
inline constexpr uint64_t kDistributedDepth = 54448;
inline constexpr uint64_t kInitialQueryStartTime = 54449;
inline constexpr uint64_t kIncrementalProfileEvents = 54451;
inline constexpr uint64_t kParallelReplicas = 54453;
inline constexpr uint64_t kCustomSerialization = 54454;
inline constexpr uint64_t kAddendum = 54458;
inline constexpr uint64_t kParameters = 54459;
inline constexpr uint64_t kServerQueryTimeInProgress = 54460;
inline constexpr uint64_t kPasswordComplexityRules = 54461;
inline constexpr uint64_t kInterserverSecretV2 = 54462;
inline constexpr uint64_t kTotalBytesInProgress = 54463;
inline constexpr uint64_t kRowsBeforeAggregation = 54469;
inline constexpr uint64_t kChunkedPackets = 54470;
inline constexpr uint64_t kVersionedParallelReplicas = 54471;
inline constexpr uint64_t kInterserverExternallyGrantedRoles = 54472;
// Fields of the server's Hello that only servers above kClient send.
inline constexpr uint64_t kServerCatalog = 54474;           // the server's changed settings
inline constexpr uint64_t kQueryPlanSerialization = 54477;  // query plan serialization version
inline constexpr uint64_t kVersionedClusterFunctionProtocol = 54479;  // that protocol's version

}  // namespace chgate::clickhouse::revision
