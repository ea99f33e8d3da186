#include "server/clickhouse/columns/aggregate_state.h"

#include <algorithm>
#include <iterator>
#include <optional>

#include "absl/strings/str_cat.h"
#include "server/clickhouse/columns/factory.h"
#include "server/clickhouse/columns/fixed.h"
#include "text/status_macros.h"

namespace chgate::clickhouse {
namespace {

using Part = AggregateStateFormat::Part;
using Step = AggregateStateFormat::Step;

constexpr std::string_view kSupported =
    "count, sum, sumWithOverflow, sumKahan, avg, min, max, any, anyLast, argMin, argMax, uniq, "
    "uniqExact, groupArray, quantile, quantiles, and their -If, -Array and -Merge forms";

// UniquesHashSet: at most 2^16 hashes; skip degrees up to 16 (32-bit hashes) or 63 (64-bit).
constexpr uint64_t kUniqMaxSize = uint64_t{1} << 16;
// ReservoirSampler's default sample count, and the text of its generator (pcg32_fast: multiplier,
// increment, state) right after seed(123456), which an mcg generator keeps as 123456 | 3.
constexpr uint64_t kReservoirSampleCount = 8192;
constexpr std::string_view kReservoirRng = "6364136223846793005 0 123459";
// No single state part may declare more bytes than a String value may hold.
constexpr uint64_t kMaxPartBytes = kMaxStringSize;

// What a state needs to know of an argument type.
struct Arg {
  enum class Kind {
    kUInt,
    kInt,
    kFloat,
    kBool,
    kDecimal,
    kDate,
    kDateTime,
    kString,
    kFixedString,
    kOtherFixed,
    kNullable,
    kOther
  };
  Kind kind = Kind::kOther;
  uint32_t width = 0;
};

absl::StatusOr<Arg> Classify(const TypeAst& type) {
  if (type.kind != TypeAst::Kind::kType) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected an argument type, got ", FormatTypeName(type)));
  }
  CHGATE_ASSIGN_OR_RETURN(ColumnPtr column, CreateColumn(type));
  Arg arg;
  switch (column->kind()) {
    case ColumnKind::kString:
      arg.kind = Arg::Kind::kString;
      return arg;
    case ColumnKind::kNullable:
      arg.kind = Arg::Kind::kNullable;
      return arg;
    case ColumnKind::kFixed:
      break;
    default:
      return arg;
  }
  const auto& fixed = static_cast<const ColumnFixed&>(*column);
  arg.width = static_cast<uint32_t>(fixed.width());
  switch (fixed.fixed_kind()) {
    case FixedKind::kUInt:
      arg.kind = Arg::Kind::kUInt;
      break;
    case FixedKind::kInt:
      // Interval* are Int64 columns, but aggregate functions treat them as a type of their own.
      arg.kind = type.name.rfind("Interval", 0) == 0 ? Arg::Kind::kOtherFixed : Arg::Kind::kInt;
      break;
    case FixedKind::kFloat:
      arg.kind = Arg::Kind::kFloat;
      break;
    case FixedKind::kBool:
      arg.kind = Arg::Kind::kBool;
      break;
    case FixedKind::kDecimal:
      arg.kind = Arg::Kind::kDecimal;
      break;
    case FixedKind::kDate:
      arg.kind = Arg::Kind::kDate;
      break;
    case FixedKind::kDateTime:
      arg.kind = Arg::Kind::kDateTime;
      break;
    case FixedKind::kFixedString:
      arg.kind = Arg::Kind::kFixedString;
      break;
    case FixedKind::kDate32:
    case FixedKind::kDateTime64:
    case FixedKind::kBFloat16:
    case FixedKind::kTime:
    case FixedKind::kTime64:
    case FixedKind::kUuid:
    case FixedKind::kIpv4:
    case FixedKind::kIpv6:
    case FixedKind::kEnum:
      arg.kind = Arg::Kind::kOtherFixed;
      break;
    case FixedKind::kNothing:
      arg.kind = Arg::Kind::kOther;
      break;
  }
  return arg;
}

bool IsInteger(const Arg& a) {
  return (a.kind == Arg::Kind::kUInt || a.kind == Arg::Kind::kInt) && a.width <= 8;
}
bool IsNumber(const Arg& a) { return IsInteger(a) || a.kind == Arg::Kind::kFloat; }

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

// Resolves a function (with its combinators) to the steps of its state.
class AggregateFormatBuilder {
 public:
  explicit AggregateFormatBuilder(const TypeAst& type) : type_(type) {}

  absl::StatusOr<AggregateStateFormat> Build() {
    const auto& args = type_.args;
    size_t i = 0;
    uint64_t version = 0;
    if (!args.empty() && args[0].kind == TypeAst::Kind::kNumber) {
      if (args[0].number < 0) return Bad("negative state version");
      version = static_cast<uint64_t>(args[0].number);
      ++i;
    }
    if (i >= args.size() || args[i].kind != TypeAst::Kind::kType || !args[i].element_name.empty()) {
      return Bad("needs an aggregate function");
    }
    const TypeAst& function = args[i];
    AggregateStateFormat format;
    format.function_ = function.name;
    std::vector<TypeAst> arg_types(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
    CHGATE_RETURN_IF_ERROR(
        Resolve(function.name, function.args, arg_types, version, &format.steps_));
    for (const Step& step : format.steps_) AppendEmpty(step, &format.empty_state_);
    return format;
  }

 private:
  absl::Status Bad(std::string_view why) const {
    return absl::InvalidArgumentError(
        absl::StrCat("bad type ", FormatTypeName(type_), ": ", std::string(why)));
  }
  absl::Status Unknown(std::string_view function, std::string_view why) const {
    return absl::UnimplementedError(absl::StrCat(
        "column type ", FormatTypeName(type_), ": states of aggregate function ",
        std::string(function), " cannot be read by a client (", std::string(why),
        "; Native sends each state in the function's own format without its length). Readable: ",
        std::string(kSupported), "; otherwise finalize the state in SQL (e.g. ",
        std::string(function),
        "Merge) or send it as a String (e.g. toString or hex of the column)"));
  }

  static void AppendEmpty(const Step& step, std::string* out) {
    switch (step.part) {
      case Part::kFixed:
        out->append(step.width, '\0');
        return;
      case Part::kVarUInt:
      case Part::kSingleValue:
      case Part::kCountedFixed:
      case Part::kCountedString:
        out->push_back('\0');
        return;
      case Part::kSingleString:
        out->append(4, '\xff');  // Int32 -1: no value
        return;
      case Part::kUniq:
        out->append(2, '\0');  // skip degree 0, no hashes
        return;
      case Part::kUniqV1:
        out->append(3, '\0');  // flags 0, skip degree 0, no hashes
        return;
      case Part::kReservoir: {
        for (int b = 0; b < 8; ++b)
          out->push_back(static_cast<char>(kReservoirSampleCount >> (8 * b)));
        out->append(8, '\0');  // total 0
        out->push_back(static_cast<char>(kReservoirRng.size()));
        out->append(kReservoirRng);
        return;
      }
    }
  }

  // The single-value state (SingleValueData*) of an argument.
  absl::Status SingleValue(std::string_view function, const TypeAst& type,
                           std::vector<Step>* steps) const {
    CHGATE_ASSIGN_OR_RETURN(Arg arg, Classify(type));
    switch (arg.kind) {
      case Arg::Kind::kString:
        steps->push_back({Part::kSingleString});
        return absl::OkStatus();
      case Arg::Kind::kNullable:
      case Arg::Kind::kOther:
        return Unknown(function, absl::StrCat("its state of a ", FormatTypeName(type),
                                              " value is not known here"));
      default:
        steps->push_back({Part::kSingleValue, arg.width});
        return absl::OkStatus();
    }
  }

  absl::Status Resolve(std::string_view name, const std::vector<TypeAst>& params,
                       const std::vector<TypeAst>& args, uint64_t version,
                       std::vector<Step>* steps) const {
    if (version != 0 && name != "uniq") {
      return Unknown(name, absl::StrCat("state version ", version, " is not known here"));
    }
    if (!IsBase(name)) return ResolveCombinator(name, params, args, version, steps);
    const bool parametric = name == "groupArray" || name == "quantile" || name == "quantiles";
    if (!params.empty() && !parametric) {
      return Bad(absl::StrCat(std::string(name), " takes no parameters"));
    }
    if (name == "count") {
      steps->push_back({Part::kVarUInt});
      return absl::OkStatus();
    }
    for (const TypeAst& arg : args) {
      CHGATE_ASSIGN_OR_RETURN(Arg a, Classify(arg));
      if (a.kind == Arg::Kind::kNullable) {
        return Unknown(name,
                       "its state for Nullable arguments (with the Null combinator's "
                       "flag) is not known here");
      }
    }
    return ResolveBase(name, params, args, version, steps);
  }

  // The functions of IsBase but count, over arguments that are not Nullable.
  absl::Status ResolveBase(std::string_view name, const std::vector<TypeAst>& params,
                           const std::vector<TypeAst>& args, uint64_t version,
                           std::vector<Step>* steps) const {
    const size_t arity = args.size();
    if (name == "sum" || name == "sumWithOverflow" || name == "sumKahan" || name == "avg") {
      if (arity != 1) return Bad(absl::StrCat(std::string(name), " takes one argument"));
      return SumState(name, args[0], steps);
    }
    if (name == "min" || name == "max" || name == "any" || name == "anyLast") {
      if (arity != 1) return Bad(absl::StrCat(std::string(name), " takes one argument"));
      return SingleValue(name, args[0], steps);
    }
    if (name == "argMin" || name == "argMax") {
      if (arity != 2) return Bad(absl::StrCat(std::string(name), " takes two arguments"));
      CHGATE_RETURN_IF_ERROR(SingleValue(name, args[0], steps));
      return SingleValue(name, args[1], steps);
    }
    if (name == "uniq") {
      if (arity == 0) return Bad("uniq takes arguments");
      if (version > 1) {
        return Unknown(name, absl::StrCat("state version ", version, " is not known here"));
      }
      steps->push_back({version == 1 ? Part::kUniqV1 : Part::kUniq});
      return absl::OkStatus();
    }
    if (name == "uniqExact" && arity != 1) {
      return Unknown(name, "its state for several arguments is not known here");
    }
    if (name == "groupArray" && (arity != 1 || params.size() > 1)) {
      return Bad("groupArray takes one argument");
    }
    if ((name == "quantile" || name == "quantiles") && arity != 1) {
      return Bad(absl::StrCat(std::string(name), " takes one argument"));
    }
    // uniqExact, groupArray, quantile and quantiles, of one argument each.
    if (arity != 1) return Unknown(name, "its state format is not known here");
    CHGATE_ASSIGN_OR_RETURN(Arg a, Classify(args[0]));
    const bool number = IsNumber(a);
    std::optional<Step> step;
    if (name == "uniqExact") {
      if (number || a.kind == Arg::Kind::kBool) step = Step{Part::kCountedFixed, a.width};
      if (a.kind == Arg::Kind::kString || a.kind == Arg::Kind::kFixedString) {
        step = Step{Part::kCountedFixed, 16};  // SipHash128 of each value
      }
    } else if (name == "groupArray") {
      if (number || a.kind == Arg::Kind::kBool || a.kind == Arg::Kind::kDate ||
          a.kind == Arg::Kind::kDateTime) {
        step = Step{Part::kCountedFixed, a.width};
      }
      if (a.kind == Arg::Kind::kString) step = Step{Part::kCountedString};
    } else if (name == "quantile" || name == "quantiles") {
      if (number) step = Step{Part::kReservoir, a.width};
    }
    if (!step.has_value()) {
      return Unknown(name,
                     absl::StrCat("its state for ", FormatTypeName(args[0]), " is not known here"));
    }
    steps->push_back(*step);
    return absl::OkStatus();
  }

  // sum, sumWithOverflow, sumKahan and avg of one argument.
  absl::Status SumState(std::string_view name, const TypeAst& arg, std::vector<Step>* steps) const {
    CHGATE_ASSIGN_OR_RETURN(Arg a, Classify(arg));
    const bool integral =
        a.kind == Arg::Kind::kUInt || a.kind == Arg::Kind::kInt || a.kind == Arg::Kind::kBool;
    if (!integral && a.kind != Arg::Kind::kFloat && a.kind != Arg::Kind::kDecimal) {
      return Unknown(name,
                     absl::StrCat("its state for ", FormatTypeName(arg), " is not known here"));
    }
    uint32_t width = a.width;  // sumWithOverflow: the argument's own type
    if (name != "sumWithOverflow") {
      // NearestFieldType widens integers and floats to 64 bits; decimals sum as Decimal128
      // (Decimal256 stays).
      if (a.kind == Arg::Kind::kDecimal) {
        width = a.width <= 16 ? 16 : 32;
      } else {
        width = std::max<uint32_t>(a.width, 8);
      }
    }
    if (name == "sumKahan" && a.kind != Arg::Kind::kDecimal) width = 16;  // sum, compensation
    steps->push_back({Part::kFixed, width});
    if (name == "avg") steps->push_back({Part::kVarUInt});
    return absl::OkStatus();
  }

  // Combinators, innermost last in the name (sumArrayIf = If over Array over sum).
  absl::Status ResolveCombinator(std::string_view name, const std::vector<TypeAst>& params,
                                 const std::vector<TypeAst>& args, uint64_t version,
                                 std::vector<Step>* steps) const {
    if (name.size() > 2 && EndsWith(name, "If")) {
      if (args.empty()) return Bad("an -If function needs a condition argument");
      CHGATE_ASSIGN_OR_RETURN(Arg cond, Classify(args.back()));
      if (!(cond.kind == Arg::Kind::kUInt && cond.width == 1) && cond.kind != Arg::Kind::kBool) {
        return Bad("the condition of an -If function must be UInt8");
      }
      std::vector<TypeAst> inner(args.begin(), args.end() - 1);
      return Resolve(name.substr(0, name.size() - 2), params, inner, version, steps);
    }
    if (name.size() > 5 && EndsWith(name, "Array")) {
      std::vector<TypeAst> inner;
      for (const TypeAst& arg : args) {
        if (arg.kind != TypeAst::Kind::kType || arg.name != "Array" || arg.args.size() != 1) {
          return Bad("the arguments of an -Array function must be arrays");
        }
        inner.push_back(arg.args[0]);
      }
      return Resolve(name.substr(0, name.size() - 5), params, inner, version, steps);
    }
    if (name.size() > 5 && EndsWith(name, "Merge")) {
      if (args.size() != 1 || args[0].kind != TypeAst::Kind::kType ||
          args[0].name != "AggregateFunction") {
        return Bad("a -Merge function takes one AggregateFunction argument");
      }
      CHGATE_ASSIGN_OR_RETURN(AggregateStateFormat inner, AggregateStateFormat::Create(args[0]));
      if (inner.function() != name.substr(0, name.size() - 5)) {
        return Bad("a -Merge function must merge states of its own function");
      }
      steps->insert(steps->end(), inner.steps().begin(), inner.steps().end());
      return absl::OkStatus();
    }
    return Unknown(name, "its state format is not known here");
  }

  static bool IsBase(std::string_view name) {
    static constexpr std::string_view kBase[] = {
        "count",     "sum",        "sumWithOverflow", "sumKahan", "avg",    "min",
        "max",       "any",        "anyLast",         "argMin",   "argMax", "uniq",
        "uniqExact", "groupArray", "quantile",        "quantiles"};
    return std::find(std::begin(kBase), std::end(kBase), name) != std::end(kBase);
  }

  const TypeAst& type_;
};

absl::StatusOr<AggregateStateFormat> AggregateStateFormat::Create(const TypeAst& type) {
  if (type.kind != TypeAst::Kind::kType || type.name != "AggregateFunction") {
    return absl::InvalidArgumentError(
        absl::StrCat(FormatTypeName(type), " is not an AggregateFunction type"));
  }
  return AggregateFormatBuilder(type).Build();
}

namespace {

// Copies the bytes of a state from `in` to `out` as they are read.
class StateCopier {
 public:
  StateCopier(ReadBuffer& in, ByteBuffer* out) : in_(in), out_(out) {}

  absl::Status Bytes(uint64_t n) {
    if (n > kMaxPartBytes) {
      return absl::DataLossError(absl::StrCat("aggregate state part of ", n, " bytes"));
    }
    return ReadBulk(in_, static_cast<size_t>(n), out_);
  }
  template <typename T>
  absl::StatusOr<T> Fixed() {
    T v;
    CHGATE_RETURN_IF_ERROR(in_.ReadFixed(&v));
    out_->AppendFixed(v);
    return v;
  }
  // A VarUInt, copied byte for byte (a redundant encoding stays as it was).
  absl::StatusOr<uint64_t> VarUInt() {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      uint8_t byte = 0;
      CHGATE_RETURN_IF_ERROR(in_.ReadFixed(&byte));
      out_->PushBack(static_cast<char>(byte));
      if (shift < 64) v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return v;
    }
    return absl::DataLossError("VarUInt longer than 10 bytes in an aggregate state");
  }
  absl::Status Count(uint64_t n, uint64_t width) {
    if (width != 0 && n > kMaxPartBytes / width) {
      return absl::DataLossError(absl::StrCat("aggregate state of ", n, " elements"));
    }
    return Bytes(n * width);
  }

 private:
  ReadBuffer& in_;
  ByteBuffer* out_;
};

}  // namespace

absl::Status AggregateStateFormat::CopyState(ReadBuffer& in, ByteBuffer* out) const {
  StateCopier copy(in, out);
  for (const Step& step : steps_) {
    switch (step.part) {
      case Part::kFixed:
        CHGATE_RETURN_IF_ERROR(copy.Bytes(step.width));
        break;
      case Part::kVarUInt:
        CHGATE_RETURN_IF_ERROR(copy.VarUInt().status());
        break;
      case Part::kSingleValue: {
        CHGATE_ASSIGN_OR_RETURN(uint8_t has, copy.Fixed<uint8_t>());
        if (has != 0) CHGATE_RETURN_IF_ERROR(copy.Bytes(step.width));
        break;
      }
      case Part::kSingleString: {
        CHGATE_ASSIGN_OR_RETURN(int32_t size, copy.Fixed<int32_t>());
        if (size >= 0) CHGATE_RETURN_IF_ERROR(copy.Bytes(static_cast<uint64_t>(size)));
        break;
      }
      case Part::kUniq:
      case Part::kUniqV1: {
        uint64_t hash_width = 4;
        if (step.part == Part::kUniqV1) {
          CHGATE_ASSIGN_OR_RETURN(uint8_t flags, copy.Fixed<uint8_t>());
          if (flags > 1) return absl::DataLossError(absl::StrCat("uniq state flags ", flags));
          hash_width = flags == 1 ? 4 : 8;
        }
        CHGATE_ASSIGN_OR_RETURN(uint8_t skip, copy.Fixed<uint8_t>());
        if (skip > (hash_width == 4 ? 16 : 63)) {
          return absl::DataLossError(absl::StrCat("uniq state skip degree ", skip));
        }
        CHGATE_ASSIGN_OR_RETURN(uint64_t n, copy.VarUInt());
        if (n > kUniqMaxSize) return absl::DataLossError(absl::StrCat("uniq state of ", n));
        CHGATE_RETURN_IF_ERROR(copy.Count(n, hash_width));
        break;
      }
      case Part::kCountedFixed: {
        CHGATE_ASSIGN_OR_RETURN(uint64_t n, copy.VarUInt());
        CHGATE_RETURN_IF_ERROR(copy.Count(n, step.width));
        break;
      }
      case Part::kCountedString: {
        CHGATE_ASSIGN_OR_RETURN(uint64_t n, copy.VarUInt());
        // Every element takes at least one byte, so a corrupt count ends at the data's end.
        for (uint64_t i = 0; i < n; ++i) {
          CHGATE_ASSIGN_OR_RETURN(uint64_t length, copy.VarUInt());
          CHGATE_RETURN_IF_ERROR(copy.Bytes(length));
        }
        break;
      }
      case Part::kReservoir: {
        CHGATE_ASSIGN_OR_RETURN(uint64_t sample_count, copy.Fixed<uint64_t>());
        CHGATE_ASSIGN_OR_RETURN(uint64_t total, copy.Fixed<uint64_t>());
        CHGATE_ASSIGN_OR_RETURN(uint64_t rng_length, copy.VarUInt());
        CHGATE_RETURN_IF_ERROR(copy.Bytes(rng_length));
        CHGATE_RETURN_IF_ERROR(copy.Count(std::min(sample_count, total), step.width));
        break;
      }
    }
  }
  return absl::OkStatus();
}

ColumnAggregateState::ColumnAggregateState(std::string type_name, TypeAst type,
                                           AggregateStateFormat format)
    : Column(std::move(type_name), std::move(type)), format_(std::move(format)) {}

absl::Status ColumnAggregateState::AppendState(std::string_view state) {
  MemoryReadBuffer in(state);
  ByteBuffer copy;
  absl::Status read = format_.CopyState(in, &copy);
  if (!read.ok() || copy.size() != state.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not one state of ", type_name(), ": ",
                     read.ok() ? absl::StrCat(state.size() - copy.size(), " bytes left over")
                               : std::string(read.message())));
  }
  data_.Append(state);
  ends_.push_back(data_.size());
  return absl::OkStatus();
}

void ColumnAggregateState::AppendRange(const Column& src, size_t begin, size_t end) {
  const auto& s = static_cast<const ColumnAggregateState&>(src);
  if (begin == end) return;
  const uint64_t from = begin == 0 ? 0 : s.ends_[begin - 1];
  const uint64_t shift = data_.size() - from;
  data_.Append(s.data_.data() + from, static_cast<size_t>(s.ends_[end - 1] - from));
  for (size_t i = begin; i < end; ++i) ends_.push_back(s.ends_[i] + shift);
}

ColumnPtr ColumnAggregateState::CloneEmpty() const {
  return std::make_shared<ColumnAggregateState>(type_name(), type(), format_);
}

absl::Status ColumnAggregateState::LoadBody(ReadBuffer& in, size_t rows) {
  const size_t first = Size();
  for (size_t i = 0; i < rows; ++i) {
    absl::Status read = format_.CopyState(in, &data_);
    if (!read.ok()) {
      Truncate(first);
      return absl::Status(read.code(), absl::StrCat("state of row ", i, " (", format_.function(),
                                                    "): ", read.message()));
    }
    ends_.push_back(data_.size());
  }
  return absl::OkStatus();
}

}  // namespace chgate::clickhouse
