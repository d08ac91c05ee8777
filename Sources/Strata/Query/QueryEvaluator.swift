import Foundation
import StrataEngine

/// Runs a ``QueryExpr`` for one row: on its stored record, or on its model
/// when it has unsaved changes (or the expression reads a property only a
/// model has).
///
/// Related rows reached through to-one chains are read from their records
/// in the same read transaction, or from their models when those are
/// inserted or changed in the context. To-many relationships are read from
/// their trees. Nothing here builds a model for a stored row, except for an
/// expression that reads a computed property.
///
/// Operations that trap in Swift (integer overflow, division by zero, a
/// forced unwrap of nil, a range whose bounds are out of order) throw
/// ``SwiftDataError/unsupportedPredicate`` naming the expression instead.
final class QueryEvaluator {
    let context: ModelContext
    let snapshot: ModelContext.Snapshot
    /// Whether the context has unsaved changes (then related rows are
    /// looked up among its models first).
    private let hasPending: Bool
    @exclusivity(unchecked) private var variables: [QueryValue]
    @exclusivity(unchecked) private var rootEntity: Schema.Entity
    @exclusivity(unchecked) private var rootRow: Int64 = 0
    @exclusivity(unchecked) private var rootBytes: UnsafeRawBufferPointer?
    @exclusivity(unchecked) private var rootModel: (any PersistentModel)?

    init(context: ModelContext, snapshot: ModelContext.Snapshot, entity: Schema.Entity, variableCount: Int) {
        self.context = context
        self.snapshot = snapshot
        self.hasPending = context.hasChanges
        self.rootEntity = entity
        self.variables = Array(repeating: .null, count: max(variableCount, 1))
    }

    /// Evaluates `expression` as a condition on the stored record of `row`.
    func test(_ expression: QueryExpr, row: Int64, record: UnsafeRawBufferPointer) throws -> Bool {
        rootRow = row
        rootBytes = record
        rootModel = nil
        defer { rootBytes = nil }
        variables[0] = .row(row)
        return try condition(expression)
    }

    /// Evaluates `expression` as a condition on `model`.
    func test(_ expression: QueryExpr, model: any PersistentModel) throws -> Bool {
        rootRow = model._strataState.rowID
        rootBytes = nil
        rootModel = model
        defer { rootModel = nil }
        variables[0] = .row(rootRow)
        return try condition(expression)
    }

    /// Reads attribute `property` of the root row (for sort keys).
    func rootValue(_ property: Schema.Property, row: Int64, record: UnsafeRawBufferPointer) throws -> QueryValue {
        rootRow = row
        rootBytes = record
        rootModel = nil
        defer { rootBytes = nil }
        return try read(property, of: rootEntity, row: row)
    }

    /// Reads attribute `property` of `model` (for sort keys).
    func rootValue(_ property: Schema.Property, model: any PersistentModel) throws -> QueryValue {
        rootRow = model._strataState.rowID
        rootModel = model
        defer { rootModel = nil }
        return try read(property, of: rootEntity, row: rootRow)
    }

    // MARK: Evaluation

    private func condition(_ expression: QueryExpr) throws -> Bool {
        switch try evaluate(expression) {
        case .scalar(.bool(let value)): return value
        case .scalar(.null): return false
        case let other: throw failure(expression, "gives \(other), not a Bool")
        }
    }

    private func failure(_ expression: QueryExpr, _ reason: String) -> SwiftDataError {
        SwiftDataError(.unsupportedPredicate, "\(rootEntity.name): \(expression) \(reason)")
    }

    private func evaluate(_ expression: QueryExpr) throws -> QueryValue {
        switch expression {
        case .constant(let value):
            return value
        case .variable(let id):
            return variables[id]
        case .property(let base, let entity, let property):
            switch try evaluate(base) {
            case .row(let row): return try read(property, of: entity, row: row)
            case .scalar(.null): return .null
            case let other: throw failure(expression, "reads \(property.name) of \(other)")
            }
        case .identifier(let base, let entity):
            guard case .row(let row) = try evaluate(base) else { return .null }
            return .opaque(
                PersistentIdentifier(
                    storeIdentifier: context.store.identifier, entityName: entity.concreteOrSelf(row).name, rowID: row))
        case .collection(let base, let member):
            return try collectionMember(member, of: evaluate(base), expression)
        case .member(let base, let path):
            switch try evaluate(base) {
            case .opaque(let value): return .make((value as Any)[keyPath: path] as Any)
            case .scalar(.null): return .null
            case let other: throw failure(expression, "reads a member of \(other)")
            }
        case .modelMember(let base, let path):
            guard case .row(let row) = try evaluate(base) else { return .null }
            guard let model = try model(row: row, for: path) else { return .null }
            return .make(model[keyPath: path] as Any)
        case .not(let a):
            return .scalar(.bool(!(try condition(a))))
        case .and(let a, let b):
            return .scalar(.bool(try condition(a) && condition(b)))
        case .or(let a, let b):
            return .scalar(.bool(try condition(a) || condition(b)))
        case .compare(let op, let a, let b):
            return .scalar(.bool(Self.compare(op, try evaluate(a), try evaluate(b))))
        case .between(let a, let lower, let upper, let closed):
            return .scalar(.bool(try between(a, lower, upper, closed: closed, expression)))
        case .contains(let sequence, let element):
            let items = try evaluate(sequence)
            let item = try evaluate(element)
            if case .rows(let rows) = items, case .row(let row) = item { return .scalar(.bool(rows.contains(row))) }
            return .scalar(.bool(try elements(of: items, expression).contains { QueryValue.equal($0, item) }))
        case .any(let sequence, let variable, let test):
            for item in try elements(of: evaluate(sequence), expression) {
                variables[variable] = item
                if try condition(test) { return .scalar(.bool(true)) }
            }
            return .scalar(.bool(false))
        case .all(let sequence, let variable, let test):
            for item in try elements(of: evaluate(sequence), expression) {
                variables[variable] = item
                if try !condition(test) { return .scalar(.bool(false)) }
            }
            return .scalar(.bool(true))
        case .filter(let sequence, let variable, let test):
            return try filter(sequence, variable, test, expression)
        case .substring(let a, let b):
            return .scalar(.bool(try texts(a, b) { collectionContains($0, $1) }))
        case .localizedSubstring(let a, let b):
            return .scalar(.bool(try texts(a, b) { _strataLocalizedStandardContains($0, $1) }))
        case .prefix(let a, let b):
            return .scalar(.bool(try texts(a, b) { $0.starts(with: $1) }))
        case .arithmetic(let op, let a, let b):
            return try arithmetic(op, evaluate(a), evaluate(b), expression)
        case .negate(let a):
            switch try evaluate(a) {
            case .scalar(.int(let x)):
                guard x != .min else { throw failure(expression, "overflows") }
                return .scalar(.int(-x))
            case .scalar(.double(let x)): return .scalar(.double(-x))
            case let other: throw failure(expression, "negates \(other)")
            }
        case .conditional(let test, let a, let b):
            return try condition(test) ? evaluate(a) : evaluate(b)
        case .coalesce(let a, let b):
            let first = try evaluate(a)
            return first.isNull ? try evaluate(b) : first
        case .unwrap(let a):
            let value = try evaluate(a)
            if value.isNull { throw failure(expression, "found nil while unwrapping") }
            return value
        case .flatMap(let a, let variable, let body):
            let value = try evaluate(a)
            if value.isNull { return .null }
            variables[variable] = value
            return try evaluate(body)
        case .extreme(let a, let maximum):
            let items = try elements(of: evaluate(a), expression)
            guard var best = items.first else { return .null }
            for item in items.dropFirst() {
                let order = QueryValue.order(item, best)
                if order == (maximum ? .orderedDescending : .orderedAscending) { best = item }
            }
            return best
        }
    }

    /// `test` of the strings `a` and `b`; false when either is not one
    /// (nil).
    private func texts(_ a: QueryExpr, _ b: QueryExpr, _ test: (String, String) -> Bool) throws -> Bool {
        guard case .scalar(.string(let text)) = try evaluate(a), case .scalar(.string(let part)) = try evaluate(b)
        else { return false }
        return test(text, part)
    }

    private static func compare(_ op: QueryExpr.ComparisonOperator, _ x: QueryValue, _ y: QueryValue) -> Bool {
        switch op {
        case .equal: return QueryValue.equal(x, y)
        case .notEqual: return !QueryValue.equal(x, y)
        case .less: return QueryValue.order(x, y) == .orderedAscending
        case .lessOrEqual: return QueryValue.order(x, y).map { $0 != .orderedDescending } ?? false
        case .greater: return QueryValue.order(x, y) == .orderedDescending
        case .greaterOrEqual: return QueryValue.order(x, y).map { $0 != .orderedAscending } ?? false
        }
    }

    /// True when `a` lies in the range from `lower` to `upper` (`closed`:
    /// `upper` included).
    private func between(_ a: QueryExpr, _ lower: QueryExpr, _ upper: QueryExpr, closed: Bool, _ expression: QueryExpr)
        throws -> Bool
    {
        let low = try evaluate(lower)
        let high = try evaluate(upper)
        guard let bounds = QueryValue.order(low, high), bounds != .orderedDescending else {
            throw failure(expression, "has a range whose lower bound is above its upper bound")
        }
        let value = try evaluate(a)
        guard let fromLow = QueryValue.order(low, value), fromLow != .orderedDescending,
            let toHigh = QueryValue.order(value, high)
        else { return false }
        return closed ? toHigh != .orderedDescending : toHigh == .orderedAscending
    }

    /// The members of `sequence` that pass `test` (rows stay rows).
    private func filter(_ sequence: QueryExpr, _ variable: Int, _ test: QueryExpr, _ expression: QueryExpr) throws
        -> QueryValue
    {
        let source = try evaluate(sequence)
        var kept: [QueryValue] = []
        for item in try elements(of: source, expression) {
            variables[variable] = item
            if try condition(test) { kept.append(item) }
        }
        if case .rows = source {
            return .rows(kept.compactMap { if case .row(let row) = $0 { return row } else { return nil } })
        }
        return .list(kept)
    }

    private func collectionMember(_ member: QueryExpr.CollectionMember, of value: QueryValue, _ expression: QueryExpr)
        throws -> QueryValue
    {
        if value.isNull { return .null }
        switch member {
        case .count:
            switch value {
            case .rows(let rows): return .scalar(.int(Int64(rows.count)))
            case .scalar(.string(let text)): return .scalar(.int(Int64(text.count)))
            default: return .scalar(.int(Int64(try elements(of: value, expression).count)))
            }
        case .isEmpty:
            switch value {
            case .rows(let rows): return .scalar(.bool(rows.isEmpty))
            case .scalar(.string(let text)): return .scalar(.bool(text.isEmpty))
            default: return .scalar(.bool(try elements(of: value, expression).isEmpty))
            }
        case .first: return try elements(of: value, expression).first ?? .null
        case .last: return try elements(of: value, expression).last ?? .null
        }
    }

    /// The elements of a sequence value.
    private func elements(of value: QueryValue, _ expression: QueryExpr) throws -> [QueryValue] {
        switch value {
        case .rows(let rows): return rows.map { .row($0) }
        case .list(let items): return items
        case .scalar(.string(let text)): return text.map { .opaque($0) }
        case .scalar(.bytes(let bytes)): return bytes.map { .scalar(.uint(UInt64($0))) }
        case .scalar(.null): return []
        case .opaque(let value as any Sequence): return QueryValue.make(value).listItems ?? []
        default: throw failure(expression, "uses \(value) as a sequence")
        }
    }

    private func arithmetic(_ op: QueryExpr.ArithmeticOperator, _ x: QueryValue, _ y: QueryValue, _ expression: QueryExpr)
        throws -> QueryValue
    {
        switch (x, y) {
        case (.scalar(.int(let a)), .scalar(.int(let b))):
            let (result, overflow): (Int64, Bool)
            switch op {
            case .add: (result, overflow) = a.addingReportingOverflow(b)
            case .subtract: (result, overflow) = a.subtractingReportingOverflow(b)
            case .multiply: (result, overflow) = a.multipliedReportingOverflow(by: b)
            case .divide, .remainder:
                guard b != 0 else { throw failure(expression, "divides by zero") }
                (result, overflow) =
                    op == .divide ? a.dividedReportingOverflow(by: b) : a.remainderReportingOverflow(dividingBy: b)
            }
            if overflow { throw failure(expression, "overflows") }
            return .scalar(.int(result))
        case (.scalar(.uint(let a)), .scalar(.uint(let b))):
            let (result, overflow): (UInt64, Bool)
            switch op {
            case .add: (result, overflow) = a.addingReportingOverflow(b)
            case .subtract: (result, overflow) = a.subtractingReportingOverflow(b)
            case .multiply: (result, overflow) = a.multipliedReportingOverflow(by: b)
            case .divide, .remainder:
                guard b != 0 else { throw failure(expression, "divides by zero") }
                (result, overflow) = (op == .divide ? a / b : a % b, false)
            }
            if overflow { throw failure(expression, "overflows") }
            return .scalar(.uint(result))
        case (.scalar(.double(let a)), .scalar(.double(let b))):
            switch op {
            case .add: return .scalar(.double(a + b))
            case .subtract: return .scalar(.double(a - b))
            case .multiply: return .scalar(.double(a * b))
            case .divide: return .scalar(.double(a / b))
            case .remainder: return .scalar(.double(a.truncatingRemainder(dividingBy: b)))
            }
        default:
            throw failure(expression, "computes with \(x) and \(y)")
        }
    }

    // MARK: Reading rows

    /// Property `property` of row `row` of `entity`: from the root's record
    /// or model, from a changed or inserted model, or from the record.
    private func read(_ property: Schema.Property, of declared: Schema.Entity, row: Int64) throws -> QueryValue {
        // A row of a subentity (a `BusinessTrip` a `Trip` relationship
        // holds) is read from its own entity's tree; inherited
        // properties keep their field numbers there.
        let entity = declared.concreteOrSelf(row)
        if row == rootRow && entity === rootEntity {
            if let rootModel { return modelValue(property, of: rootModel) }
            if let rootBytes { return try recordValue(property, of: entity, row: row, bytes: rootBytes) }
        }
        if hasPending, let model = context.registered(entity, row: row) {
            let state = model._strataState
            if state.status == .inserted || state.isChanged { return modelValue(property, of: model) }
        }
        guard let tree = try snapshot.tree(entity.recordTree) else { return .null }
        return try snapshot.tx.withValue(for: RowKey.encode(row), in: tree) { bytes in
            try recordValue(property, of: entity, row: row, bytes: bytes)
        } ?? .null
    }

    private func modelValue(_ property: Schema.Property, of model: any PersistentModel) -> QueryValue {
        .make(model[keyPath: property.keypath] as Any)
    }

    private func recordValue(_ property: Schema.Property, of entity: Schema.Entity, row: Int64, bytes: UnsafeRawBufferPointer)
        throws -> QueryValue
    {
        if property is Schema.Relationship {
            switch entity.relationshipStorage[property.field] {
            case .toOne:
                var reader = try _RecordReader(borrowing: bytes, entity: entity, row: row)
                return try reader.toOneRow(field: property.field).map { .row($0) } ?? .null
            case .some(let storage):
                guard let tree = storage.readTree else { return .rows([]) }
                return .rows(try snapshot.pairs(tree, of: row))
            case nil:
                return .null
            }
        }
        if let tree = entity.externalTrees[property.field] {
            return context.externalData(tree: tree, row: row).map { .scalar(.bytes(Array($0))) } ?? .null
        }
        var reader = try _RecordReader(borrowing: bytes, entity: entity, row: row)
        return try reader.queryValue(field: property.field, kind: property.storedKind)
    }

    /// The model of `row` for reading a computed property.
    private func model(row: Int64, for path: AnyKeyPath) throws -> (any PersistentModel)? {
        if let rootModel, row == rootRow { return rootModel }
        let root = ObjectIdentifier(type(of: path).rootType)
        for entity in context.container.schema.entities where ObjectIdentifier(entity.type) == root {
            if let registered = context.registered(entity, row: row) { return registered }
            return try context.loadExistential(entity.type, row: row)
        }
        return nil
    }
}

/// Foundation's `contains` on collections (element by element), as
/// `CollectionContainsCollection` evaluates it.
private func collectionContains<C: Collection>(_ base: C, _ other: C) -> Bool where C.Element: Equatable {
    base.contains(other)
}

extension QueryValue {
    var listItems: [QueryValue]? {
        if case .list(let items) = self { return items }
        return nil
    }

    /// Swift's `==` on the values these stand for.
    static func equal(_ a: QueryValue, _ b: QueryValue) -> Bool {
        switch (a, b) {
        case (.scalar(let x), .scalar(let y)):
            if case .double(let p) = x, case .double(let q) = y { return p == q }
            return x == y
        case (.row(let x), .row(let y)): return x == y
        case (.rows(let x), .rows(let y)): return x == y
        case (.list(let x), .list(let y)): return x.count == y.count && zip(x, y).allSatisfy { equal($0, $1) }
        case (.opaque(let x), .opaque(let y)): return opaqueEqual(x, y)
        default: return false
        }
    }

    /// The order of a sort (`SortDescriptor`) on two non-nil values:
    /// ``order(_:_:)``, except that doubles (Double, Float, Date) compare
    /// in IEEE 754 totalOrder, the order of their index keys
    /// (``KeyEncoding``): negative NaN, -infinity, the negatives, -0.0,
    /// 0.0, the positives, infinity, NaN. Swift's `<` leaves NaN
    /// unordered and calls -0.0 and 0.0 equal; a sort needs a total order,
    /// and one that an index scan gives too.
    static func sortOrder(_ a: QueryValue, _ b: QueryValue) -> ComparisonResult? {
        if case .scalar(.double(let p)) = a, case .scalar(.double(let q)) = b {
            let (x, y) = (KeyEncoding.totalOrderBits(p), KeyEncoding.totalOrderBits(q))
            return x < y ? .orderedAscending : x == y ? .orderedSame : .orderedDescending
        }
        return order(a, b)
    }

    /// Swift's `<` on the values these stand for; nil when they are not
    /// ordered (NaN, nil, values of different kinds).
    static func order(_ a: QueryValue, _ b: QueryValue) -> ComparisonResult? {
        switch (a, b) {
        case (.scalar(let x), .scalar(let y)):
            switch (x, y) {
            case (.int(let p), .int(let q)): return p < q ? .orderedAscending : p == q ? .orderedSame : .orderedDescending
            case (.uint(let p), .uint(let q)): return p < q ? .orderedAscending : p == q ? .orderedSame : .orderedDescending
            case (.double(let p), .double(let q)):
                if p < q { return .orderedAscending }
                if p > q { return .orderedDescending }
                return p == q ? .orderedSame : nil
            case (.string(let p), .string(let q)): return p < q ? .orderedAscending : p == q ? .orderedSame : .orderedDescending
            case (.bool(let p), .bool(let q)): return p == q ? .orderedSame : (!p ? .orderedAscending : .orderedDescending)
            case (.uuid(let p), .uuid(let q)):
                return order(
                    .scalar(.bytes(withUnsafeBytes(of: p.uuid) { Array($0) })),
                    .scalar(.bytes(withUnsafeBytes(of: q.uuid) { Array($0) })))
            case (.bytes(let p), .bytes(let q)):
                if p == q { return .orderedSame }
                return p.lexicographicallyPrecedes(q) ? .orderedAscending : .orderedDescending
            default: return nil
            }
        case (.opaque(let x), .opaque(let y)): return opaqueOrder(x, y)
        default: return nil
        }
    }
}

private func opaqueEqual(_ a: Any, _ b: Any) -> Bool {
    guard let a = a as? any Equatable else { return false }
    return isEqual(a, b)
}

private func isEqual<T: Equatable>(_ a: T, _ b: Any) -> Bool {
    guard let b = b as? T else { return false }
    return a == b
}

private func opaqueOrder(_ a: Any, _ b: Any) -> ComparisonResult? {
    guard let a = a as? any Comparable else { return nil }
    return compare(a, b)
}

private func compare<T: Comparable>(_ a: T, _ b: Any) -> ComparisonResult? {
    guard let b = b as? T else { return nil }
    return a < b ? .orderedAscending : a == b ? .orderedSame : .orderedDescending
}
