import Foundation

/// A plan's filter specialized for the record in front of it: comparisons
/// of the fetched model's own attributes with constants read the field's
/// payload and compare it in place, without building a ``QueryValue``;
/// `&&`, `||` and `!` combine them; anything else runs in the general
/// ``QueryEvaluator``.
///
/// This is what a scan with a non-indexed predicate spends its time in, so
/// the common shapes (`score > x`, `flag`, `name == "…"`, `note == nil`,
/// `name.starts(with: "…")`) get their own cases. Semantics are Swift's:
/// doubles compare with IEEE rules, strings by canonical equivalence (bytes
/// are compared directly only when both sides are ASCII, where equivalence
/// is byte equality).
indirect enum CompiledFilter {
    case int(field: Int, QueryExpr.ComparisonOperator, Int64)
    case uint(field: Int, QueryExpr.ComparisonOperator, UInt64)
    case double(field: Int, QueryExpr.ComparisonOperator, Double, isFloat: Bool)
    /// `field == value`; a nil or missing field gives `ifNil`.
    case bool(field: Int, Bool, ifNil: Bool)
    case string(field: Int, QueryExpr.ComparisonOperator, String, ascii: [UInt8]?)
    case prefix(field: Int, String, ascii: [UInt8]?)
    /// `field == nil` (true) or `field != nil` (false).
    case null(field: Int, Bool)
    case and([CompiledFilter])
    case or([CompiledFilter])
    case not(CompiledFilter)
    case general(QueryExpr)

    /// The specialized form of `expression` over records of `entity`.
    static func compile(_ expression: QueryExpr, entity: Schema.Entity) -> CompiledFilter {
        switch expression {
        case .and:
            return .and(QueryPlanner.conjuncts(expression).map { compile($0, entity: entity) })
        case .or:
            return .or(QueryPlanner.disjuncts(expression).map { compile($0, entity: entity) })
        case .not(let inner):
            return .not(compile(inner, entity: entity))
        case .compare(let op, let a, let b):
            if let field = attribute(a, entity), case .constant(let value) = b, let leaf = comparison(op, field, value) {
                return leaf
            }
            if let field = attribute(b, entity), case .constant(let value) = a, let leaf = comparison(op.mirrored, field, value) {
                return leaf
            }
        case .property:
            if let attribute = attribute(expression, entity), case .bool = attribute.storedKind {
                return .bool(field: attribute.field, true, ifNil: false)
            }
        case .prefix(let a, .constant(.scalar(.string(let prefix)))):
            if let attribute = attribute(a, entity), case .string = attribute.storedKind {
                return .prefix(field: attribute.field, prefix, ascii: asciiBytes(prefix))
            }
        default:
            break
        }
        return .general(expression)
    }

    private static func attribute(_ expression: QueryExpr, _ entity: Schema.Entity) -> Schema.Attribute? {
        guard case .property(.variable(0), let owner, let property) = expression, owner === entity,
            let attribute = property as? Schema.Attribute, entity.externalTrees[attribute.field] == nil
        else { return nil }
        return attribute
    }

    private static func comparison(_ op: QueryExpr.ComparisonOperator, _ attribute: Schema.Attribute, _ value: QueryValue)
        -> CompiledFilter?
    {
        let field = attribute.field
        if case .scalar(.null) = value {
            switch op {
            case .equal: return .null(field: field, true)
            case .notEqual: return .null(field: field, false)
            default: return nil
            }
        }
        switch (attribute.storedKind, value) {
        case (.signed, .scalar(.int(let v))): return .int(field: field, op, v)
        case (.unsigned, .scalar(.uint(let v))): return .uint(field: field, op, v)
        case (.double, .scalar(.double(let v))), (.date, .scalar(.double(let v))):
            return .double(field: field, op, v, isFloat: false)
        case (.float, .scalar(.double(let v))): return .double(field: field, op, v, isFloat: true)
        case (.bool, .scalar(.bool(let v))):
            switch op {
            case .equal: return .bool(field: field, v, ifNil: false)
            case .notEqual: return .bool(field: field, !v, ifNil: true)
            default: return nil
            }
        case (.string, .scalar(.string(let v))): return .string(field: field, op, v, ascii: asciiBytes(v))
        default: return nil
        }
    }

    private static func asciiBytes(_ text: String) -> [UInt8]? {
        let bytes = Array(text.utf8)
        return bytes.allSatisfy { $0 < 0x80 } ? bytes : nil
    }

}

extension CompiledFilter {
    /// The filter as a tree of nodes, each testing a record in place.
    func node() -> FilterNode {
        switch self {
        case .int(let field, let op, let value): return IntNode(field, op, value)
        case .uint(let field, let op, let value): return UIntNode(field, op, value)
        case .double(let field, let op, let value, let isFloat): return DoubleNode(field, op, value, isFloat: isFloat)
        case .bool(let field, let value, let ifNil): return BoolNode(field, value, ifNil: ifNil)
        case .string(let field, let op, let value, let ascii): return StringNode(field, op, value, ascii: ascii)
        case .prefix(let field, let prefix, let ascii): return PrefixNode(field, prefix, ascii: ascii)
        case .null(let field, let isNull): return NullNode(field, isNull)
        case .and(let parts): return parts.dropFirst().reduce(parts[0].node()) { AndNode($0, $1.node()) }
        case .or(let parts): return parts.dropFirst().reduce(parts[0].node()) { OrNode($0, $1.node()) }
        case .not(let inner): return NotNode(inner.node())
        case .general(let expression): return GeneralNode(expression)
        }
    }
}

/// One node of a compiled filter. Nodes are classes with immutable fields
/// and a virtual `test`, so running the filter on a row copies nothing
/// (an enum tree would be copied and reference-counted case by case).
class FilterNode {
    /// Whether the record `reader` reads passes.
    func test(_ reader: inout _RecordReader, _ evaluator: QueryEvaluator) throws -> Bool { false }

    @inline(__always)
    static func holds<V: Comparable>(_ op: QueryExpr.ComparisonOperator, _ stored: V, _ value: V) -> Bool {
        switch op {
        case .equal: return stored == value
        case .notEqual: return stored != value
        case .less: return stored < value
        case .lessOrEqual: return stored <= value
        case .greater: return stored > value
        case .greaterOrEqual: return stored >= value
        }
    }
}

final class IntNode: FilterNode {
    let field: Int
    let op: QueryExpr.ComparisonOperator
    let value: Int64
    init(_ field: Int, _ op: QueryExpr.ComparisonOperator, _ value: Int64) {
        (self.field, self.op, self.value) = (field, op, value)
    }
    override func test(_ reader: inout _RecordReader, _ evaluator: QueryEvaluator) throws -> Bool {
        guard let slot = try reader.find(field), slot.wire != RecordFormat.null else { return op == .notEqual }
        return Self.holds(op, try Int64._decode(slot, from: &reader, field: field), value)
    }
}

final class UIntNode: FilterNode {
    let field: Int
    let op: QueryExpr.ComparisonOperator
    let value: UInt64
    init(_ field: Int, _ op: QueryExpr.ComparisonOperator, _ value: UInt64) {
        (self.field, self.op, self.value) = (field, op, value)
    }
    override func test(_ reader: inout _RecordReader, _ evaluator: QueryEvaluator) throws -> Bool {
        guard let slot = try reader.find(field), slot.wire != RecordFormat.null else { return op == .notEqual }
        return Self.holds(op, try UInt64._decode(slot, from: &reader, field: field), value)
    }
}

final class DoubleNode: FilterNode {
    let field: Int
    let op: QueryExpr.ComparisonOperator
    let value: Double
    let isFloat: Bool
    init(_ field: Int, _ op: QueryExpr.ComparisonOperator, _ value: Double, isFloat: Bool) {
        (self.field, self.op, self.value, self.isFloat) = (field, op, value, isFloat)
    }
    override func test(_ reader: inout _RecordReader, _ evaluator: QueryEvaluator) throws -> Bool {
        guard let slot = try reader.find(field), slot.wire != RecordFormat.null else { return op == .notEqual }
        let stored =
            isFloat
            ? Double(Float(bitPattern: try reader.payloadFixed32(slot, field: field)))
            : Double(bitPattern: try reader.payloadFixed64(slot, field: field))
        return Self.holds(op, stored, value)
    }
}

final class BoolNode: FilterNode {
    let field: Int
    let value: Bool
    let ifNil: Bool
    init(_ field: Int, _ value: Bool, ifNil: Bool) { (self.field, self.value, self.ifNil) = (field, value, ifNil) }
    override func test(_ reader: inout _RecordReader, _ evaluator: QueryEvaluator) throws -> Bool {
        guard let slot = try reader.find(field), slot.wire != RecordFormat.null else { return ifNil }
        return try Bool._decode(slot, from: &reader, field: field) == value
    }
}

final class NullNode: FilterNode {
    let field: Int
    let isNull: Bool
    init(_ field: Int, _ isNull: Bool) { (self.field, self.isNull) = (field, isNull) }
    override func test(_ reader: inout _RecordReader, _ evaluator: QueryEvaluator) throws -> Bool {
        let slot = try reader.find(field)
        return (slot == nil || slot?.wire == RecordFormat.null) == isNull
    }
}

final class StringNode: FilterNode {
    let field: Int
    let op: QueryExpr.ComparisonOperator
    let value: String
    let ascii: [UInt8]?
    init(_ field: Int, _ op: QueryExpr.ComparisonOperator, _ value: String, ascii: [UInt8]?) {
        (self.field, self.op, self.value, self.ascii) = (field, op, value, ascii)
    }
    override func test(_ reader: inout _RecordReader, _ evaluator: QueryEvaluator) throws -> Bool {
        guard let slot = try reader.find(field), slot.wire != RecordFormat.null else { return op == .notEqual }
        if let ascii, op == .equal || op == .notEqual {
            let payload = try reader.payloadBytes(slot, field: field)
            if payload.allSatisfy({ $0 < 0x80 }) { return payload.elementsEqual(ascii) == (op == .equal) }
        }
        return Self.holds(op, try String._decode(slot, from: &reader, field: field), value)
    }
}

final class PrefixNode: FilterNode {
    let field: Int
    let prefix: String
    let ascii: [UInt8]?
    init(_ field: Int, _ prefix: String, ascii: [UInt8]?) { (self.field, self.prefix, self.ascii) = (field, prefix, ascii) }
    override func test(_ reader: inout _RecordReader, _ evaluator: QueryEvaluator) throws -> Bool {
        guard let slot = try reader.find(field), slot.wire != RecordFormat.null else { return false }
        if let ascii {
            let payload = try reader.payloadBytes(slot, field: field)
            if payload.count >= ascii.count, payload.prefix(ascii.count).elementsEqual(ascii) {
                // The prefix ends at a character boundary unless what
                // follows could join the last character (a combining
                // mark, or "\n" after "\r").
                guard payload.count > ascii.count else { return true }
                let next = payload[ascii.count]
                if next < 0x80 && !(next == 0x0A && ascii.last == 0x0D) { return true }
            } else if payload.allSatisfy({ $0 < 0x80 }) {
                return false
            }
        }
        return try String._decode(slot, from: &reader, field: field).starts(with: prefix)
    }
}

final class AndNode: FilterNode {
    let left: FilterNode
    let right: FilterNode
    init(_ left: FilterNode, _ right: FilterNode) { (self.left, self.right) = (left, right) }
    override func test(_ reader: inout _RecordReader, _ evaluator: QueryEvaluator) throws -> Bool {
        try left.test(&reader, evaluator) && right.test(&reader, evaluator)
    }
}

final class OrNode: FilterNode {
    let left: FilterNode
    let right: FilterNode
    init(_ left: FilterNode, _ right: FilterNode) { (self.left, self.right) = (left, right) }
    override func test(_ reader: inout _RecordReader, _ evaluator: QueryEvaluator) throws -> Bool {
        try left.test(&reader, evaluator) || right.test(&reader, evaluator)
    }
}

final class NotNode: FilterNode {
    let inner: FilterNode
    init(_ inner: FilterNode) { self.inner = inner }
    override func test(_ reader: inout _RecordReader, _ evaluator: QueryEvaluator) throws -> Bool {
        try !inner.test(&reader, evaluator)
    }
}

/// Anything else: the general evaluator on the record.
final class GeneralNode: FilterNode {
    let expression: QueryExpr
    init(_ expression: QueryExpr) { self.expression = expression }
    override func test(_ reader: inout _RecordReader, _ evaluator: QueryEvaluator) throws -> Bool {
        try evaluator.test(expression, row: reader.row, record: reader.bytes)
    }
}
