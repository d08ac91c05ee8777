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
enum CompiledFilter {
    /// The specialized filter for `expression` over records of `entity`.
    static func compile(_ expression: QueryExpr, entity: Schema.Entity) -> FilterNode {
        switch expression {
        case .and:
            let parts = QueryPlanner.conjuncts(expression).map { compile($0, entity: entity) }
            return parts.dropFirst().reduce(parts[0]) { AndNode($0, $1) }
        case .or:
            let parts = QueryPlanner.disjuncts(expression).map { compile($0, entity: entity) }
            return parts.dropFirst().reduce(parts[0]) { OrNode($0, $1) }
        case .not(let inner):
            return NotNode(compile(inner, entity: entity))
        case .compare(let op, let a, let b):
            if let field = attribute(a, entity), case .constant(let value) = b, let leaf = comparison(op, field, value) {
                return leaf
            }
            if let field = attribute(b, entity), case .constant(let value) = a, let leaf = comparison(op.mirrored, field, value) {
                return leaf
            }
        case .property:
            if let attribute = attribute(expression, entity), case .bool = attribute.storedKind {
                return BoolNode(attribute.field, true, ifNil: false)
            }
        case .prefix(let a, .constant(.scalar(.string(let prefix)))):
            if let attribute = attribute(a, entity), case .string = attribute.storedKind {
                return PrefixNode(attribute.field, prefix, ascii: asciiBytes(prefix))
            }
        default:
            break
        }
        return GeneralNode(expression)
    }

    private static func attribute(_ expression: QueryExpr, _ entity: Schema.Entity) -> Schema.Attribute? {
        guard case .property(.variable(0), let owner, let property) = expression, owner === entity,
            let attribute = property as? Schema.Attribute, entity.externalTrees[attribute.field] == nil
        else { return nil }
        return attribute
    }

    private static func comparison(_ op: QueryExpr.ComparisonOperator, _ attribute: Schema.Attribute, _ value: QueryValue)
        -> FilterNode?
    {
        let field = attribute.field
        if case .scalar(.null) = value {
            switch op {
            case .equal: return NullNode(field, true)
            case .notEqual: return NullNode(field, false)
            default: return nil
            }
        }
        // Every signed width is stored as a zigzag Int64 varint, every
        // unsigned one as a UInt64 varint, a Date as a Double; a Float
        // constant came from a Float, so narrowing it back is exact.
        switch (attribute.storedKind, value) {
        case (.signed, .scalar(.int(let v))): return Int64Node(field, op, v)
        case (.unsigned, .scalar(.uint(let v))): return UInt64Node(field, op, v)
        case (.double, .scalar(.double(let v))), (.date, .scalar(.double(let v))): return DoubleNode(field, op, v)
        case (.float, .scalar(.double(let v))): return FloatNode(field, op, Float(v))
        case (.bool, .scalar(.bool(let v))):
            switch op {
            case .equal: return BoolNode(field, v, ifNil: false)
            case .notEqual: return BoolNode(field, !v, ifNil: true)
            default: return nil
            }
        case (.string, .scalar(.string(let v))): return StringNode(field, op, v, ascii: asciiBytes(v))
        default: return nil
        }
    }

    private static func asciiBytes(_ text: String) -> [UInt8]? {
        let bytes = Array(text.utf8)
        return bytes.allSatisfy { $0 < 0x80 } ? bytes : nil
    }
}

/// One node of a compiled filter. Nodes are classes with immutable fields
/// and a virtual `test`, so running the filter on a row copies nothing
/// (an enum tree would be copied and reference-counted case by case).
class FilterNode {
    /// Whether the record `reader` reads passes.
    func test(_ reader: inout _RecordReader, _ evaluator: QueryEvaluator) throws -> Bool { false }

    /// The test of a record that lacks `field` or holds nil in it: `test`
    /// on the field's declared default when it has one (a record from
    /// before a migration added the attribute reads as that), else `orElse`.
    @inline(never) final func absent(
        _ reader: _RecordReader, _ field: Int, orElse: Bool,
        _ test: (inout _RecordReader, _RecordReader.Slot) throws -> Bool
    ) throws -> Bool {
        guard let record = reader.entity.defaultRecords[field] else { return orElse }
        return try _RecordReader.inDefault(record, field: field, reader, test)
    }

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

/// `field op value` for a number, decoded with its own record encoding.
/// Each stored number type has its own final subclass, whose `test` is
/// the shared comparison specialized for the type (a generic class's
/// method would run unspecialized, through witness tables, on every row).
class CompareNode<V: _RecordPrimitive & Comparable>: FilterNode {
    let field: Int
    let op: QueryExpr.ComparisonOperator
    let value: V
    init(_ field: Int, _ op: QueryExpr.ComparisonOperator, _ value: V) {
        (self.field, self.op, self.value) = (field, op, value)
    }

    @inline(__always) final func compare(_ reader: inout _RecordReader) throws -> Bool {
        guard let slot = try reader.find(field), slot.wire != RecordFormat.null else {
            return try absent(reader, field, orElse: op == .notEqual) { reader, slot in
                Self.holds(op, try V._decode(slot, from: &reader, field: field), value)
            }
        }
        return Self.holds(op, try V._decode(slot, from: &reader, field: field), value)
    }
}

final class Int64Node: CompareNode<Int64> {
    override func test(_ reader: inout _RecordReader, _ evaluator: QueryEvaluator) throws -> Bool { try compare(&reader) }
}

final class UInt64Node: CompareNode<UInt64> {
    override func test(_ reader: inout _RecordReader, _ evaluator: QueryEvaluator) throws -> Bool { try compare(&reader) }
}

final class DoubleNode: CompareNode<Double> {
    override func test(_ reader: inout _RecordReader, _ evaluator: QueryEvaluator) throws -> Bool { try compare(&reader) }
}

final class FloatNode: CompareNode<Float> {
    override func test(_ reader: inout _RecordReader, _ evaluator: QueryEvaluator) throws -> Bool { try compare(&reader) }
}

final class BoolNode: FilterNode {
    let field: Int
    let value: Bool
    let ifNil: Bool
    init(_ field: Int, _ value: Bool, ifNil: Bool) { (self.field, self.value, self.ifNil) = (field, value, ifNil) }
    override func test(_ reader: inout _RecordReader, _ evaluator: QueryEvaluator) throws -> Bool {
        guard let slot = try reader.find(field), slot.wire != RecordFormat.null else {
            return try absent(reader, field, orElse: ifNil) { reader, slot in
                try Bool._decode(slot, from: &reader, field: field) == value
            }
        }
        return try Bool._decode(slot, from: &reader, field: field) == value
    }
}

final class NullNode: FilterNode {
    let field: Int
    let isNull: Bool
    init(_ field: Int, _ isNull: Bool) { (self.field, self.isNull) = (field, isNull) }
    override func test(_ reader: inout _RecordReader, _ evaluator: QueryEvaluator) throws -> Bool {
        let slot = try reader.find(field)
        // A declared default stands in for nil (see `absent`).
        let null = (slot == nil || slot?.wire == RecordFormat.null) && reader.entity.defaultRecords[field] == nil
        return null == isNull
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
        guard let slot = try reader.find(field), slot.wire != RecordFormat.null else {
            return try absent(reader, field, orElse: op == .notEqual) { reader, slot in
                Self.holds(op, try String._decode(slot, from: &reader, field: field), value)
            }
        }
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
        guard let slot = try reader.find(field), slot.wire != RecordFormat.null else {
            return try absent(reader, field, orElse: false) { reader, slot in
                try String._decode(slot, from: &reader, field: field).starts(with: prefix)
            }
        }
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
