import Foundation
import StrataEngine

/// One fetch in one read transaction: the translated predicate, the plan,
/// and the rows it finds.
///
/// Rows are found in three steps: the plan's access path yields candidate
/// rows (with their records), the filter rejects rows on their records
/// without building models, and only the rows that end up in the page are
/// materialized. With `includePendingChanges`, stored rows of models that
/// are changed or deleted in the context are skipped, and the context's
/// inserted and changed models are tested in memory and merged in.
final class QueryRun<T: PersistentModel> {
    let context: ModelContext
    let entity: Schema.Entity
    let snapshot: ModelContext.Snapshot
    let descriptor: FetchDescriptor<T>
    @exclusivity(unchecked) private(set) var plan: QueryPlan
    /// The whole predicate, when it was translated exactly.
    private let expression: QueryExpr?
    private let isExact: Bool
    let evaluator: QueryEvaluator
    /// Rows whose stored values do not count (changed or deleted models,
    /// rows `delete(model:where:)` marked).
    @exclusivity(unchecked) private(set) var excluded = RowSet()
    @exclusivity(unchecked) private(set) var hasExcluded = false
    /// For a scan in row order: start after this row (enumerate resumes
    /// each batch where the previous one ended).
    @exclusivity(unchecked) var resumeAfter: Int64?
    /// The attributes `propertiesToFetch` leaves out of the models built
    /// (they load on first access), as bits of their field numbers; 0 for
    /// whole models.
    @exclusivity(unchecked) private(set) var skipping: UInt64 = 0

    /// Takes the rows to skip from an earlier run of the same fetch.
    func exclude(_ rows: RowSet, _ any: Bool) {
        excluded = rows
        hasExcluded = any
    }

    /// True when results come in row order straight from the records, so a
    /// fetch can be resumed after a row (``resumeAfter``).
    var isResumable: Bool {
        guard case .scan = plan.access, case .none = plan.order, descriptor.limit == nil,
            (descriptor.fetchOffset ?? 0) <= 0
        else { return false }
        return true
    }

    init(_ descriptor: FetchDescriptor<T>, entity: Schema.Entity, context: ModelContext, snapshot: ModelContext.Snapshot)
        throws
    {
        self.context = context
        self.entity = entity
        self.snapshot = snapshot
        self.descriptor = descriptor
        let conversion = try descriptor.predicate.map {
            try PredicateConversion.convert($0, schema: context.container.schema, entity: entity)
        }
        self.isExact = conversion?.isExact ?? true
        self.expression = isExact ? conversion?.expression : nil
        self.evaluator = QueryEvaluator(
            context: context, snapshot: snapshot, entity: entity, variableCount: conversion?.variableCount ?? 1)
        let planner = try QueryPlanner(entity: entity, snapshot: snapshot, storeIdentifier: context.store.identifier)
        // A type check that holds for this entity's rows is no condition.
        let conjuncts = (conversion?.expression.map(QueryPlanner.conjuncts) ?? []).filter {
            if case .constant(.scalar(.bool(true))) = $0 { false } else { true }
        }
        var (access, covered, _) = conjuncts.isEmpty ? (.scan, [], planner.rowCount) : try planner.access(for: conjuncts)
        // A type check that fails for this entity's rows (`$0 is
        // BusinessTrip` read over `Trip`'s own rows) leaves none to read.
        if let never = conjuncts.firstIndex(where: { if case .constant(.scalar(.bool(false))) = $0 { true } else { false } }) {
            (access, covered) = (.rows([]), [never])
        }
        let rest = conjuncts.enumerated().filter { !covered.contains($0.offset) }.map(\.element)
        let filter = rest.isEmpty ? nil : rest.dropFirst().reduce(rest[0]) { .and($0, $1) }
        plan = QueryPlan(
            entityName: entity.name, access: access, filter: filter, needsModel: filter?.needsModel ?? false,
            foundationCheck: descriptor.predicate != nil && !isExact,
            offset: descriptor.fetchOffset, limit: descriptor.limit)
        if let (order, access) = planner.order(for: descriptor.sortBy, access: plan.access, limit: descriptor.limit) {
            (plan.order, plan.access) = (order, access)
        }
        if descriptor.includePendingChanges { noteExcludedRows() }
        if !descriptor.propertiesToFetch.isEmpty && isExact && !plan.needsModel {
            skipping = Self.leftOut(by: descriptor, entity: entity)
        }
    }

    /// The attributes a fetch of `descriptor` need not decode: those not
    /// named in `propertiesToFetch` or `sortBy` (an in-memory sort reads
    /// them), whose type has a placeholder to hold until they load (a
    /// record primitive, or an optional), and that a later read can load
    /// (not a `let`, not ephemeral, not external storage, which loads
    /// lazily anyway). Only fields below 64 are left out.
    static func leftOut(by descriptor: FetchDescriptor<T>, entity: Schema.Entity) -> UInt64 {
        var named = Set<AnyKeyPath>(descriptor.propertiesToFetch.map { $0 as AnyKeyPath })
        for sort in descriptor.sortBy {
            if let path = sort.keyPath { named.insert(path as AnyKeyPath) }
        }
        var fields: UInt64 = 0
        for attribute in entity.attributes
        where attribute.field < 64 && !named.contains(attribute.keypath)
            && (attribute.isOptional || attribute.valueType is any _RecordPrimitive.Type)
            && attribute.keypath is any _WritableKeyPathMarker
            && !attribute.options.contains(.ephemeral)
            && entity.externalTrees[attribute.field] == nil
        {
            fields |= 1 << UInt64(attribute.field)
        }
        return fields
    }

    // MARK: Pending changes

    private func noteExcludedRows() {
        if context.markedRowCount > 0, context.markedRows[entity.ordinal].count > 0 {
            excluded = context.markedRows[entity.ordinal]
            hasExcluded = true
        }
        for model in context.changed.values where model is T {
            excluded.insert(model._strataState.rowID)
            hasExcluded = true
        }
        for model in context.deleted.values where model is T {
            excluded.insert(model._strataState.rowID)
            hasExcluded = true
        }
    }

    /// The context's inserted and changed models of `T` that match.
    func pendingMatches() throws -> [T] {
        guard descriptor.includePendingChanges, context.hasChanges else { return [] }
        // Models of this run's entity only: a fetch over a hierarchy runs
        // once per entity, and a subclass's model is not the base's.
        let type = ObjectIdentifier(entity.type)
        var candidates: [T] = context.inserted.compactMap { ObjectIdentifier(Swift.type(of: $0)) == type ? $0 as? T : nil }
        for case let model as T in context.changed.values
        where model._strataState.status != .deleted && ObjectIdentifier(Swift.type(of: model)) == type {
            candidates.append(model)
        }
        return try candidates.filter(matches)
    }

    private func matches(_ model: T) throws -> Bool {
        guard let predicate = descriptor.predicate else { return true }
        if let expression { return try evaluator.test(expression, model: model) }
        if let filter = plan.filter, try !evaluator.test(filter, model: model) { return false }
        return try predicate.evaluate(model)
    }

    // MARK: Stored rows

    /// Calls `body` with each stored row that matches, with its record, in
    /// the access path's order, until `body` returns false.
    ///
    /// With `registeredWithoutRecord`, a row found through an index whose
    /// model the context has registered comes with an empty record when no
    /// filter needs it (the caller takes the registered model): its record
    /// is not looked up. The index entry itself shows the row exists in
    /// this snapshot.
    func forEachMatch(registeredWithoutRecord: Bool = false, _ body: (Int64, UnsafeRawBufferPointer) throws -> Bool)
        throws
    {
        let filter = plan.filter
        let onModels = plan.needsModel || plan.foundationCheck
        // Everything the per-row closure needs is read into locals here: a
        // property of `self` read inside it costs a retain and a release per
        // row.
        let excludedRows: RowSet? = hasExcluded ? excluded : nil
        let (entity, evaluator) = (self.entity, self.evaluator)
        guard !onModels else {
            try forEachCandidate { row, record in
                if let excludedRows, excludedRows.contains(row) { return true }
                let model = try self.model(row: row, record: record)
                if let filter, try !evaluator.test(filter, model: model) { return true }
                if plan.foundationCheck, let predicate = descriptor.predicate, try !predicate.evaluate(model) { return true }
                return try body(row, record)
            }
            return
        }
        guard let compiled = filter.map({ CompiledFilter.compile($0, entity: entity) }) else {
            try forEachCandidate(skippingRegistered: registeredWithoutRecord) { row, record in
                if let excludedRows, excludedRows.contains(row) { return true }
                return try body(row, record)
            }
            return
        }
        if case .scan = plan.access {
            // A scan's rows come straight from the cursor's walk: one
            // closure per row fewer than through `forEachCandidate`.
            try forEachStoredRecord { key, record in
                let row = try RowKey.decode(key)
                if let excludedRows, excludedRows.contains(row) { return true }
                var reader = try _RecordReader(borrowing: record, entity: entity, row: row)
                guard try compiled.test(&reader, evaluator) else { return true }
                return try body(row, record)
            }
            return
        }
        try forEachCandidate { row, record in
            if let excludedRows, excludedRows.contains(row) { return true }
            var reader = try _RecordReader(borrowing: record, entity: entity, row: row)
            guard try compiled.test(&reader, evaluator) else { return true }
            return try body(row, record)
        }
    }

    /// Calls `body` with the key and record of each stored row in row
    /// order (after ``resumeAfter`` when set), until it returns false.
    private func forEachStoredRecord(_ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool) throws {
        guard let records = try snapshot.tree(entity.recordTree) else { return }
        let cursor = try snapshot.tx.cursor(records)
        guard try resumeAfter.map({ try cursor.seek(RowKey.encode($0 &+ 1)) }) ?? cursor.first() else { return }
        try cursor.forEachEntry(body)
    }

    /// The number of stored rows that match.
    func storedCount() throws -> Int {
        if plan.filter == nil && !plan.foundationCheck && !hasExcluded {
            switch plan.access {
            case .scan:
                return try snapshot.tree(entity.recordTree).map { try snapshot.tx.count($0) } ?? 0
            case .index(let scan):
                // Ranges of one index are disjoint: their sizes add up.
                guard let tree = try snapshot.tree(scan.group.treeName) else { return 0 }
                let cursor = try snapshot.tx.cursor(tree)
                var count = 0
                for range in scan.ranges where try cursor.seek(range.lower) {
                    count += try cursor.count(upTo: range.upper)
                }
                return count
            default:
                return try rows(of: plan.access).count
            }
        }
        var count = 0
        try forEachMatch { _, _ in
            count += 1
            return true
        }
        return count
    }

    /// The registered model of `row`, or one built from its record.
    func model(row: Int64, record: UnsafeRawBufferPointer) throws -> T {
        if let existing = context.registered(entity, row: row) as? T { return existing }
        return try context.materialize(T.self, entity: entity, row: row, bytes: record, skipping: skipping)
    }

    /// The model of `row`, read from the store if it is not registered.
    func model(row: Int64) throws -> T? {
        if let existing = context.registered(entity, row: row) as? T { return existing }
        guard let tree = try snapshot.tree(entity.recordTree) else { return nil }
        return try snapshot.tx.withValue(for: RowKey.encode(row), in: tree) { bytes in
            try context.materialize(T.self, entity: entity, row: row, bytes: bytes, skipping: skipping)
        }
    }

    private func forEachCandidate(
        skippingRegistered: Bool = false, _ body: (Int64, UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        guard let records = try snapshot.tree(entity.recordTree) else { return }
        let (context, entity) = (self.context, self.entity)
        /// Looks up the record of `row`, unless its registered model is all
        /// the caller needs.
        func visit(_ row: Int64, _ lookup: RecordLookup) throws -> Bool {
            if skippingRegistered && context.registered(entity, row: row) != nil {
                return try body(row, UnsafeRawBufferPointer(start: nil, count: 0))
            }
            return try lookup.withRecord(row, body)
        }
        switch plan.access {
        case .scan:
            try forEachStoredRecord { key, value in try body(try RowKey.decode(key), value) }
        case .index(let scan) where rowOrderSuffices:
            // The rows of an index range lie all over the record tree (rows
            // of one tag, say, were inserted far apart): looked up in index
            // order, each one is a descent from the root into another leaf.
            // Sorted first, consecutive lookups mostly stay in one leaf and
            // walk the tree once from left to right, the way a multi-range
            // read does in other engines.
            var rows: [Int64] = []
            try forEachIndexRow(scan) { row in
                rows.append(row)
                return true
            }
            rows.sort()  // Adaptive: rows of one value come ascending, one run.
            let lookup = try RecordLookup(snapshot.tx.cursor(records))
            for row in rows where try !visit(row, lookup) { return }
        case .index(let scan):
            let lookup = try RecordLookup(snapshot.tx.cursor(records))
            try forEachIndexRow(scan) { row in try visit(row, lookup) }
        case .rows, .union, .intersection:
            let lookup = try RecordLookup(snapshot.tx.cursor(records))
            for row in try rows(of: plan.access) where try !visit(row, lookup) { return }
        }
    }

    /// True when whoever consumes the stored rows does not depend on the
    /// order they come in, so that an index scan may hand them over in row
    /// order: results with no sort, no limit and no offset (a fetch without
    /// sort descriptors promises no order, but pages of one fetched with an
    /// offset and a limit must agree with each other), and results sorted
    /// afterwards by stored keys, whose ties are broken by row.
    private var rowOrderSuffices: Bool {
        switch plan.order {
        case .none: return descriptor.limit == nil && (descriptor.fetchOffset ?? 0) <= 0
        case .keys: return true
        case .index, .models: return false
        }
    }

    /// The rows an access path finds, ascending and without duplicates.
    private func rows(of access: QueryPlan.Access) throws -> [Int64] {
        switch access {
        case .scan:
            var rows: [Int64] = []
            guard let records = try snapshot.tree(entity.recordTree) else { return [] }
            let cursor = try snapshot.tx.cursor(records)
            var more = try cursor.first()
            while more {
                rows.append(try cursor.withEntry { key, _ in try RowKey.decode(key) })
                more = try cursor.next()
            }
            return rows
        case .rows(let rows):
            return rows
        case .index(let scan):
            var rows: [Int64] = []
            try forEachIndexRow(scan) { row in
                rows.append(row)
                return true
            }
            return Array(Set(rows)).sorted()
        case .union(let parts):
            var all = Set<Int64>()
            for part in parts { all.formUnion(try rows(of: part)) }
            return all.sorted()
        case .intersection(let parts):
            guard let first = parts.first else { return [] }
            var common = Set(try rows(of: first))
            for part in parts.dropFirst() { common.formIntersection(try rows(of: part)) }
            return common.sorted()
        }
    }

    /// Calls `body` with the row of each entry of the scan's ranges, in key
    /// order (reversed for a reverse scan, with rows of equal values still
    /// ascending, as a sort's ties are).
    private func forEachIndexRow(_ scan: QueryPlan.IndexScan, _ body: (Int64) throws -> Bool) throws {
        guard let tree = try snapshot.tree(scan.group.treeName) else { return }
        let unique = scan.group.kind == .unique
        let treeName = scan.group.treeName
        let cursor = try snapshot.tx.cursor(tree)
        var ties: [Int64] = []
        var tiedValue: [UInt8] = []
        func row(_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Int64 {
            guard let row = unique ? KeyGroup.row(inUniqueValue: value) : KeyGroup.row(inIndexKey: key) else {
                throw SwiftDataError(.corruptRecord, "\(treeName): an entry without a row id")
            }
            return row
        }
        guard scan.reverse else {
            for range in scan.ranges where try cursor.seek(range.lower) {
                var stopped = false
                try cursor.forEachEntry { key, value in
                    if let upper = range.upper, !Self.precedes(key, upper) { return false }
                    if try !body(try row(key, value)) {
                        stopped = true
                        return false
                    }
                    return true
                }
                if stopped { return }
            }
            return
        }
        // Backwards from each range's upper bound. An index key ends with
        // its row: the rows of one value come newest first here, and are
        // handed on oldest first once the value changes.
        for range in scan.ranges.reversed() {
            var more: Bool
            if let upper = range.upper {
                more = try cursor.seek(upper) ? try cursor.previous() : try cursor.last()
            } else {
                more = try cursor.last()
            }
            while more {
                let entry: (row: Int64, value: ArraySlice<UInt8>)? = try cursor.withEntry { key, value in
                    guard !Self.precedes(key, range.lower) else { return nil }
                    return (try row(key, value), unique ? [] : ArraySlice(KeyGroup.values(inIndexKey: key)))
                }
                guard let entry else { break }
                if unique {
                    if try !body(entry.row) { return }
                } else {
                    if !ties.isEmpty && Array(entry.value) != tiedValue {
                        for row in ties.reversed() where try !body(row) { return }
                        ties.removeAll(keepingCapacity: true)
                    }
                    tiedValue = Array(entry.value)
                    ties.append(entry.row)
                }
                more = try cursor.previous()
            }
            for row in ties.reversed() where try !body(row) { return }
            ties.removeAll(keepingCapacity: true)
        }
    }

    private static func precedes(_ key: UnsafeRawBufferPointer, _ bound: [UInt8]) -> Bool {
        bound.withUnsafeBytes { b in
            let common = min(key.count, b.count)
            if common > 0, let kp = key.baseAddress, let bp = b.baseAddress {
                let c = memcmp(kp, bp, common)
                if c != 0 { return c < 0 }
            }
            return key.count < b.count
        }
    }
}
