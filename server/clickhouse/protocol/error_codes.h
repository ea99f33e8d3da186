// ClickHouse server error codes (src/Common/ErrorCodes.cpp) that chgate names, and the one table
// of what each means to a caller: its symbol and the absl::StatusCode it maps to. Codes not in the
// table map to kUnknown and print without a symbol. Plain data and functions, thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"

namespace chgate::clickhouse::error_code {

inline constexpr int32_t kUnsupportedMethod = 1;
inline constexpr int32_t kUnexpectedEndOfFile = 3;
inline constexpr int32_t kCannotParseText = 6;
inline constexpr int32_t kIncorrectNumberOfColumns = 7;
inline constexpr int32_t kThereIsNoColumn = 8;
inline constexpr int32_t kNotFoundColumnInBlock = 10;
inline constexpr int32_t kDuplicateColumn = 15;
inline constexpr int32_t kNoSuchColumnInTable = 16;
inline constexpr int32_t kSizeOfFixedStringDoesntMatch = 19;
inline constexpr int32_t kNumberOfColumnsDoesntMatch = 20;
inline constexpr int32_t kCannotParseEscapeSequence = 25;
inline constexpr int32_t kCannotParseQuotedString = 26;
inline constexpr int32_t kCannotParseInputAssertionFailed = 27;
inline constexpr int32_t kTooManyArgumentsForFunction = 34;
inline constexpr int32_t kTooFewArgumentsForFunction = 35;
inline constexpr int32_t kBadArguments = 36;
inline constexpr int32_t kCannotParseDate = 38;
inline constexpr int32_t kChecksumDoesntMatch = 40;
inline constexpr int32_t kCannotParseDatetime = 41;
inline constexpr int32_t kNumberOfArgumentsDoesntMatch = 42;
inline constexpr int32_t kIllegalTypeOfArgument = 43;
inline constexpr int32_t kIllegalColumn = 44;
inline constexpr int32_t kUnknownFunction = 46;
inline constexpr int32_t kUnknownIdentifier = 47;
inline constexpr int32_t kNotImplemented = 48;
inline constexpr int32_t kLogicalError = 49;
inline constexpr int32_t kUnknownType = 50;
inline constexpr int32_t kEmptyListOfColumnsQueried = 51;
inline constexpr int32_t kColumnQueriedMoreThanOnce = 52;
inline constexpr int32_t kTypeMismatch = 53;
inline constexpr int32_t kUnknownStorage = 56;
inline constexpr int32_t kTableAlreadyExists = 57;
inline constexpr int32_t kUnknownTable = 60;
inline constexpr int32_t kSyntaxError = 62;
inline constexpr int32_t kUnknownAggregateFunction = 63;
inline constexpr int32_t kArgumentOutOfBound = 69;
inline constexpr int32_t kCannotConvertType = 70;
inline constexpr int32_t kCannotParseNumber = 72;
inline constexpr int32_t kUnknownFormat = 73;
inline constexpr int32_t kIncorrectQuery = 80;
inline constexpr int32_t kUnknownDatabase = 81;
inline constexpr int32_t kDatabaseAlreadyExists = 82;
inline constexpr int32_t kUnexpectedPacketFromClient = 101;
inline constexpr int32_t kFileDoesntExist = 107;
inline constexpr int32_t kUnknownSetting = 115;
inline constexpr int32_t kIncorrectData = 117;
inline constexpr int32_t kCannotReadArrayFromText = 130;
inline constexpr int32_t kIllegalDivision = 153;
inline constexpr int32_t kTooManyRows = 158;
inline constexpr int32_t kTimeoutExceeded = 159;
inline constexpr int32_t kTooSlow = 160;
inline constexpr int32_t kTooManyColumns = 161;
inline constexpr int32_t kReadonly = 164;
inline constexpr int32_t kTooDeepAst = 167;
inline constexpr int32_t kTooBigAst = 168;
inline constexpr int32_t kIllegalAggregation = 184;
inline constexpr int32_t kSizesOfArraysDoesntMatch = 190;
inline constexpr int32_t kSetSizeLimitExceeded = 191;
inline constexpr int32_t kUnknownUser = 192;
inline constexpr int32_t kWrongPassword = 193;
inline constexpr int32_t kRequiredPassword = 194;
inline constexpr int32_t kIpAddressNotAllowed = 195;
inline constexpr int32_t kDnsError = 198;
inline constexpr int32_t kQuotaExpired = 201;
inline constexpr int32_t kTooManySimultaneousQueries = 202;
inline constexpr int32_t kNoFreeConnection = 203;
inline constexpr int32_t kAmbiguousIdentifier = 207;
inline constexpr int32_t kSocketTimeout = 209;
inline constexpr int32_t kNetworkError = 210;
inline constexpr int32_t kEmptyQuery = 211;
inline constexpr int32_t kNotAnAggregate = 215;
inline constexpr int32_t kQueryWithSameIdIsAlreadyRunning = 216;
inline constexpr int32_t kTableIsDropped = 218;
inline constexpr int32_t kDatabaseNotEmpty = 219;
inline constexpr int32_t kNoZookeeper = 225;
inline constexpr int32_t kQueryIsTooLarge = 229;
inline constexpr int32_t kAborted = 236;
inline constexpr int32_t kMemoryLimitExceeded = 241;
inline constexpr int32_t kTableIsReadOnly = 242;
inline constexpr int32_t kNotEnoughSpace = 243;
inline constexpr int32_t kCorruptedData = 246;
inline constexpr int32_t kTooManyParts = 252;
inline constexpr int32_t kNoActiveReplicas = 254;
inline constexpr int32_t kNoAvailableReplica = 265;
inline constexpr int32_t kAllConnectionTriesFailed = 279;
inline constexpr int32_t kTooFewLiveReplicas = 285;
// ZooKeeper (Keeper) errors: session expired, operation timeout, connection loss.
inline constexpr int32_t kKeeperException = 999;
inline constexpr int32_t kLimitExceeded = 290;
inline constexpr int32_t kDatabaseAccessDenied = 291;
inline constexpr int32_t kTooManyBytes = 307;
inline constexpr int32_t kUnknownStatusOfInsert = 319;
inline constexpr int32_t kValueIsOutOfRangeOfDataType = 321;
inline constexpr int32_t kSupportIsDisabled = 344;
inline constexpr int32_t kCannotInsertNullInOrdinaryColumn = 349;
inline constexpr int32_t kAmbiguousColumnName = 352;
inline constexpr int32_t kIntoOutfileNotAllowed = 358;
inline constexpr int32_t kTableSizeExceedsMaxDropSizeLimit = 359;
inline constexpr int32_t kAllReplicasAreStale = 369;
inline constexpr int32_t kCannotParseUuid = 376;
inline constexpr int32_t kCannotKill = 380;
inline constexpr int32_t kNoCommonType = 386;
inline constexpr int32_t kDictionaryAlreadyExists = 387;
inline constexpr int32_t kQueryIsProhibited = 392;
inline constexpr int32_t kThereIsNoQuery = 393;
inline constexpr int32_t kQueryWasCancelled = 394;
inline constexpr int32_t kTooManyRowsOrBytes = 396;
inline constexpr int32_t kFeatureIsNotEnabledAtBuildTime = 401;
inline constexpr int32_t kPartitionSizeExceedsMaxDropSizeLimit = 405;
inline constexpr int32_t kDecimalOverflow = 407;
inline constexpr int32_t kSystemError = 425;
inline constexpr int32_t kFunctionNotAllowed = 446;
inline constexpr int32_t kSettingConstraintViolation = 452;
inline constexpr int32_t kUnknownQueryParameter = 456;
inline constexpr int32_t kBadQueryParameter = 457;
inline constexpr int32_t kCannotParseBool = 467;
inline constexpr int32_t kViolatedConstraint = 469;
inline constexpr int32_t kInvalidSettingValue = 471;
inline constexpr int32_t kReadonlySetting = 472;
inline constexpr int32_t kDeadlockAvoided = 473;
inline constexpr int32_t kPathAccessDenied = 481;
inline constexpr int32_t kDictionaryAccessDenied = 482;
inline constexpr int32_t kUnknownDictionary = 488;
inline constexpr int32_t kAccessEntityNotFound = 492;
inline constexpr int32_t kAccessEntityAlreadyExists = 493;
inline constexpr int32_t kAccessDenied = 497;
inline constexpr int32_t kUnknownRole = 511;
inline constexpr int32_t kAuthenticationFailed = 516;
inline constexpr int32_t kNoRemoteShardAvailable = 519;
inline constexpr int32_t kAlterOfColumnIsForbidden = 524;

}  // namespace chgate::clickhouse::error_code

namespace chgate::clickhouse {

// The symbol of `code` ("UNKNOWN_TABLE"), or "" when the table does not have it.
std::string_view ClickHouseErrorName(int32_t code);

// The status code a ClickHouse exception with `code` maps to (kUnknown when not in the table):
// bad SQL, values, columns or types kInvalidArgument; unknown table, database or query
// kNotFound; existing table or running query id kAlreadyExists; read-only and access
// kPermissionDenied; login kUnauthenticated; server timeouts kDeadlineExceeded; query limits,
// quotas, memory and disk kResourceExhausted; overload, replicas and network kUnavailable.
absl::StatusCode StatusCodeForClickHouseError(int32_t code);

}  // namespace chgate::clickhouse
