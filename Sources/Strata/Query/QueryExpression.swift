import Foundation

/// A value met while evaluating a query.
///
/// Scalars are ``KeyEncoding/Element``s, the form index keys are made of,
/// so a constant of a predicate becomes an index bound with no further
/// conversion. Dates are seconds since 2001 and enums with raw values are
/// their raw values, as in records and keys; models are row ids (the
/// expression that produced one knows its entity).
enum QueryValue {
    case scalar(KeyEncoding.Element)
    /// A model, by row id.
    case row(Int64)
    /// The models of a to-many relationship, by row id.
    case rows([Int64])
    /// A captured array, or the elements of a collection.
    case list([QueryValue])
    /// Any other value (a Codable struct, a Decimal, a Character): compared
    /// through its own `Equatable` and `Comparable` conformances.
    case opaque(Any)

    static var null: QueryValue { .scalar(.null) }

    var isNull: Bool {
        if case .scalar(.null) = self { return true }
        return false
    }
}

/// Strata's form of a predicate: what the planner reads and what the
/// evaluator runs on stored records (or, for unsaved changes, on models).
///
/// It is built from Foundation's `PredicateExpressions` tree by
/// ``PredicateConversion``; each case names the Foundation expression it
/// comes from.
indirect enum QueryExpr {
    /// `Value`, `NilLiteral`.
    case constant(QueryValue)
    /// `Variable`: 0 is the fetched model; others are bound by
    /// `flatMap`, `contains(where:)`, `allSatisfy` and `filter`.
    case variable(Int)
    /// `KeyPath` to a stored property of the model `base` evaluates to.
    case property(QueryExpr, Schema.Entity, Schema.Property)
    /// `KeyPath` to `persistentModelID`.
    case identifier(QueryExpr, Schema.Entity)
    /// `KeyPath` with a common kind: `count`, `isEmpty`, `first`, `last`.
    case collection(QueryExpr, CollectionMember)
    /// `KeyPath` to a member of a value that is not a model (a Codable
    /// struct's property).
    case member(QueryExpr, AnyKeyPath)
    /// `KeyPath` to a property of a model that is not stored (computed):
    /// evaluated on the model only.
    case modelMember(QueryExpr, AnyKeyPath)
    case not(QueryExpr)
    case and(QueryExpr, QueryExpr)
    case or(QueryExpr, QueryExpr)
    /// `Equal`, `NotEqual`, `Comparison`.
    case compare(ComparisonOperator, QueryExpr, QueryExpr)
    /// `RangeExpressionContains` over `Range` (half-open) or `ClosedRange`.
    case between(QueryExpr, lower: QueryExpr, upper: QueryExpr, closed: Bool)
    /// `SequenceContains`: the sequence, then the element.
    case contains(QueryExpr, QueryExpr)
    /// `SequenceContainsWhere`, `SequenceAllSatisfy`, `Filter`.
    case any(QueryExpr, variable: Int, QueryExpr)
    case all(QueryExpr, variable: Int, QueryExpr)
    case filter(QueryExpr, variable: Int, QueryExpr)
    /// `CollectionContainsCollection` (a substring test on strings).
    case substring(QueryExpr, QueryExpr)
    /// `localizedStandardContains`: a substring test ignoring case and
    /// diacritics.
    case localizedSubstring(QueryExpr, QueryExpr)
    /// `SequenceStartsWith`.
    case prefix(QueryExpr, QueryExpr)
    /// `Arithmetic`, `IntDivision`, `IntRemainder`, `FloatDivision`.
    case arithmetic(ArithmeticOperator, QueryExpr, QueryExpr)
    case negate(QueryExpr)
    case conditional(QueryExpr, QueryExpr, QueryExpr)
    case coalesce(QueryExpr, QueryExpr)
    case unwrap(QueryExpr)
    case flatMap(QueryExpr, variable: Int, QueryExpr)
    /// `SequenceMinimum`, `SequenceMaximum`.
    case extreme(QueryExpr, maximum: Bool)

    enum ComparisonOperator: String {
        case equal = "=="
        case notEqual = "!="
        case less = "<"
        case lessOrEqual = "<="
        case greater = ">"
        case greaterOrEqual = ">="

        /// The operator with its operands swapped (`a < b` is `b > a`).
        var mirrored: ComparisonOperator {
            switch self {
            case .equal, .notEqual: return self
            case .less: return .greater
            case .lessOrEqual: return .greaterOrEqual
            case .greater: return .less
            case .greaterOrEqual: return .lessOrEqual
            }
        }
    }

    enum ArithmeticOperator: String {
        case add = "+"
        case subtract = "-"
        case multiply = "*"
        case divide = "/"
        case remainder = "%"
    }

    enum CollectionMember: String {
        case count, isEmpty, first, last
    }

    /// True when the expression reads a property that only a model has
    /// (``modelMember``): then it cannot run on stored records.
    var needsModel: Bool {
        switch self {
        case .constant, .variable: return false
        case .modelMember: return true
        case .property(let a, _, _), .identifier(let a, _), .collection(let a, _), .member(let a, _), .not(let a),
            .negate(let a), .unwrap(let a), .extreme(let a, _):
            return a.needsModel
        case .and(let a, let b), .or(let a, let b), .compare(_, let a, let b), .contains(let a, let b),
            .any(let a, _, let b), .all(let a, _, let b), .filter(let a, _, let b), .substring(let a, let b),
            .localizedSubstring(let a, let b), .prefix(let a, let b), .arithmetic(_, let a, let b), .coalesce(let a, let b),
            .flatMap(let a, _, let b):
            return a.needsModel || b.needsModel
        case .between(let a, let b, let c, _), .conditional(let a, let b, let c):
            return a.needsModel || b.needsModel || c.needsModel
        }
    }
}

// MARK: - Readable form (used by explain)

extension QueryExpr: CustomStringConvertible {
    var description: String {
        switch self {
        case .constant(let value): return value.description
        case .variable(let id): return id == 0 ? "$0" : "$\(id)"
        case .property(let base, _, let property): return "\(base).\(property.name)"
        case .identifier(let base, _): return "\(base).persistentModelID"
        case .collection(let base, let member): return "\(base).\(member.rawValue)"
        case .member(let base, let path), .modelMember(let base, let path): return "\(base).\(Self.memberName(path))"
        case .not(let a): return "!(\(a))"
        case .and(let a, let b): return "(\(a) && \(b))"
        case .or(let a, let b): return "(\(a) || \(b))"
        case .compare(let op, let a, let b): return "\(a) \(op.rawValue) \(b)"
        case .between(let a, let lower, let upper, let closed): return "\(a) in \(lower)\(closed ? "..." : "..<")\(upper)"
        case .contains(let sequence, let element): return "\(sequence).contains(\(element))"
        case .any(let sequence, let v, let test): return "\(sequence).contains { $\(v) in \(test) }"
        case .all(let sequence, let v, let test): return "\(sequence).allSatisfy { $\(v) in \(test) }"
        case .filter(let sequence, let v, let test): return "\(sequence).filter { $\(v) in \(test) }"
        case .substring(let a, let b): return "\(a).contains(\(b))"
        case .localizedSubstring(let a, let b): return "\(a).localizedStandardContains(\(b))"
        case .prefix(let a, let b): return "\(a).starts(with: \(b))"
        case .arithmetic(let op, let a, let b): return "(\(a) \(op.rawValue) \(b))"
        case .negate(let a): return "-(\(a))"
        case .conditional(let test, let a, let b): return "(\(test) ? \(a) : \(b))"
        case .coalesce(let a, let b): return "(\(a) ?? \(b))"
        case .unwrap(let a): return "\(a)!"
        case .flatMap(let a, let v, let b): return "\(a).flatMap { $\(v) in \(b) }"
        case .extreme(let a, let maximum): return "\(a).\(maximum ? "max" : "min")()"
        }
    }

    /// The last component of a key path's description (`\Address.city` → `city`).
    static func memberName(_ path: AnyKeyPath) -> String {
        let text = "\(path)"
        // Linux prints computed members as `<computed 0x… (Type)>`: the
        // address changes from run to run, the type does not.
        if let open = text.range(of: "<computed "), let type = text[open.upperBound...].firstIndex(of: " ") {
            return "<computed" + text[type...].prefix { $0 != ">" } + ">"
        }
        return text.split(separator: ".").last.map(String.init) ?? text
    }
}

extension QueryValue: CustomStringConvertible {
    var description: String {
        switch self {
        case .scalar(let element): return element.description
        case .row(let row): return "row \(row)"
        case .rows(let rows): return "\(rows.count) rows"
        case .list(let items):
            let shown = items.prefix(5).map(\.description).joined(separator: ", ")
            return "[\(shown)\(items.count > 5 ? ", … \(items.count) values" : "")]"
        case .opaque(let value): return "\(value)"
        }
    }
}
