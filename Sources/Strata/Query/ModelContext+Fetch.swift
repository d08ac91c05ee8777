import Foundation
import StrataEngine

extension ModelContext {
    /// Runs `body` with a planned fetch of `descriptor` in one read
    /// transaction.
    func withQuery<T: PersistentModel, R>(_ descriptor: FetchDescriptor<T>, _ body: (QueryRun<T>) throws -> R)
        throws -> R
    {
        let entity = try entity(for: T.self)
        try mergeSavedChangesOrThrow()
        return try store.read { tx in
            try body(try QueryRun(descriptor, entity: entity, context: self, snapshot: Snapshot(tx)))
        }
    }

    /// The models matching `descriptor`, sorted and paged as it says.
    ///
    /// The predicate is planned (see ``explain(_:)``): conditions on
    /// indexed attributes read only the matching index ranges, the rest is
    /// evaluated on stored records, and models are built only for the rows
    /// returned. Rows already registered in this context come back as the
    /// same instances, with their unsaved changes. Without `sortBy` the
    /// order is the plan's (row order for a scan, index order for an index
    /// range); ties of a sort keep row (insertion) order.
    ///
    /// - Throws: ``SwiftDataError/unsupportedPredicate`` for a predicate
    ///   that cannot be evaluated safely (naming the expression), or when
    ///   evaluation would trap (an overflow, a forced unwrap of nil).
    public func fetch<T: PersistentModel>(_ descriptor: FetchDescriptor<T>) throws -> [T] {
        try withQuery(descriptor) { try $0.results(materialize: true).models }
    }

    /// The number of models matching `descriptor`, without building any:
    /// from the entity's row count or the index ranges alone when the plan
    /// needs no filter, otherwise from the records.
    public func fetchCount<T: PersistentModel>(_ descriptor: FetchDescriptor<T>) throws -> Int {
        try withQuery(descriptor) { query in
            var count = try query.storedCount() + query.pendingMatches().count
            let start = min(max(descriptor.fetchOffset ?? 0, 0), count)
            count -= start
            return descriptor.fetchLimit.map { min(count, max($0, 0)) } ?? count
        }
    }

    /// The identifiers of the models matching `descriptor`, in result
    /// order, without building models (unless a sort needs them).
    public func fetchIdentifiers<T: PersistentModel>(_ descriptor: FetchDescriptor<T>) throws -> [PersistentIdentifier] {
        let entity = try entity(for: T.self)
        return try withQuery(descriptor) { query in
            try query.results(materialize: false).rows.map { PersistentIdentifier(entityName: entity.name, rowID: $0) }
        }
    }

    /// The plan a fetch of `descriptor` would run, as text: the access
    /// path (a scan, index ranges, a union or intersection), the filter
    /// evaluated on records, what is left to `Predicate.evaluate`, the
    /// order and the paging. A Strata addition, for tuning and for tests.
    public func explain<T: PersistentModel>(_ descriptor: FetchDescriptor<T>) throws -> String {
        try withQuery(descriptor) { $0.plan.description }
    }

    /// The models matching `descriptor`, as a ``FetchResultsCollection``.
    ///
    /// Strata builds every model when this returns, in the fetch's read
    /// transaction, so the collection is one consistent result and reading
    /// it cannot fail: see ``FetchResultsCollection`` for why, and
    /// ``enumerate(_:batchSize:allowEscapingMutations:block:)`` to walk a
    /// large result with bounded memory. `batchSize` is accepted for
    /// SwiftData compatibility.
    ///
    /// - Throws: ``SwiftDataError/includePendingChangesWithBatchSize`` when
    ///   `includePendingChanges` is true and the context has unsaved
    ///   changes (set it to false, or save first), as SwiftData does; what
    ///   ``fetch(_:)`` throws, such as ``SwiftDataError/corruptRecord`` for
    ///   a record that does not decode.
    public func fetch<T: PersistentModel>(_ descriptor: FetchDescriptor<T>, batchSize: Int) throws
        -> FetchResultsCollection<T>
    {
        if descriptor.includePendingChanges && hasChanges {
            throw SwiftDataError(
                .includePendingChangesWithBatchSize,
                "fetch(_:batchSize:) of \(T.self) with includePendingChanges while the context has unsaved changes")
        }
        var stored = descriptor
        stored.includePendingChanges = false
        return FetchResultsCollection(models: try withQuery(stored) { try $0.results(materialize: true).models })
    }

    /// Calls `block` with each model matching `descriptor`, loading them
    /// `batchSize` at a time. Models loaded for a batch that the block left
    /// unchanged are released from the context after the batch, so memory
    /// stays bounded by the batch size however many models match.
    ///
    /// With `allowEscapingMutations` false (the default), changes the block
    /// makes must not outlive the enumeration unsaved: at the end of a
    /// batch with unsaved changes made by the block, enumeration stops with
    /// ``SwiftDataError/modelValidationFailure``; the changes stay in the
    /// context. Save inside the block, or pass true.
    public func enumerate<T: PersistentModel>(
        _ descriptor: FetchDescriptor<T>, batchSize: Int = 5000, allowEscapingMutations: Bool = false,
        block: (T) throws -> Void
    ) throws {
        let entity = try entity(for: T.self)
        let size = max(batchSize, 1)
        let hadChanges = hasChanges
        // Each batch ends with the mutation check and the release of its
        // models.
        func finish(_ loaded: [T]) throws {
            for model in loaded { try block(model) }
            if !allowEscapingMutations && !hadChanges && hasChanges {
                throw SwiftDataError(
                    .modelValidationFailure,
                    "enumerate(\(T.self)): the block left unsaved changes; save in the block or pass allowEscapingMutations: true"
                )
            }
            for model in loaded { release(model, entity: entity) }
            // The store's mapped pages this batch read leave the process's
            // resident memory too (they are the OS's page cache, but count
            // in the RSS): one madvise per batch.
            store.database.discardMappedPages()
        }
        // A fetch in row order is read a batch at a time, each batch in its
        // own read transaction resuming after the last row of the previous
        // one: no list of every matching row is built. Rows to skip and
        // pending models are taken once, before the block runs.
        var stored = descriptor
        stored.includePendingChanges = false
        var (excluded, anyExcluded, pending, resumable): (RowSet, Bool, [T], Bool) = (RowSet(), false, [], false)
        var rows: [Int64] = []
        try withQuery(descriptor) { query in
            resumable = query.isResumable
            (excluded, anyExcluded) = (query.excluded, query.hasExcluded)
            if resumable {
                pending = try query.pendingMatches()
            } else {
                rows = try query.results(materialize: false).rows
            }
        }
        if resumable {
            var after: Int64?
            while true {
                var loaded: [T] = []
                loaded.reserveCapacity(size)
                try withQuery(stored) { query in
                    query.exclude(excluded, anyExcluded)
                    query.resumeAfter = after
                    try query.forEachMatch { row, record in
                        loaded.append(try query.model(row: row, record: record))
                        after = row
                        return loaded.count < size
                    }
                }
                if loaded.isEmpty { break }
                try finish(loaded)
                if loaded.count < size { break }
            }
            var start = 0
            while start < pending.count {
                try finish(Array(pending[start..<min(start + size, pending.count)]))
                start += size
            }
            return
        }
        var start = 0
        while start < rows.count {
            let batch = rows[start..<min(start + size, rows.count)]
            start += batch.count
            try finish(downcast(try models(of: entity, rows: batch), to: T.self))
        }
    }

    /// The models of `rows` (registered ones, or built from their records)
    /// in one read transaction; nil for a row the store no longer holds.
    func models(of entity: Schema.Entity, rows: some Collection<Int64>) throws -> [(any PersistentModel)?] {
        try store.read { tx in
            guard let tree = try tx.treeIfPresent(entity.recordTree) else { return rows.map { _ in nil } }
            let lookup = try RecordLookup(tx.cursor(tree))
            var result: [(any PersistentModel)?] = []
            result.reserveCapacity(rows.count)
            for row in rows {
                if let model = registered(entity, row: row) {
                    result.append(model)
                    continue
                }
                var found: (any PersistentModel)?
                _ = try lookup.withRecord(row) { row, bytes in
                    found = try materialize(entity: entity, row: row, bytes: bytes)
                    return true
                }
                result.append(found)
            }
            return result
        }
    }
}

/// The result of ``ModelContext/fetch(_:batchSize:)``: the models a fetch
/// found, by position.
///
/// SwiftData builds these models a batch at a time as they are read. A
/// subscript cannot throw, so that design leaves nothing to return for a
/// row deleted (by another context's save) after the fetch, or for a
/// record that no longer decodes: SwiftData traps when such a model is
/// read. Strata builds every model when the fetch runs instead, in its
/// read transaction, and throws from the fetch if one cannot be built.
/// The collection is then one consistent snapshot with a fixed count:
/// a model deleted since keeps its place and its values, and reads
/// `isDeleted` once the context merges the deletion, as any fetched
/// model does. The models are registered in the context, as
/// ``ModelContext/fetch(_:)``'s are; to walk a large result with bounded
/// memory, use ``ModelContext/enumerate(_:batchSize:allowEscapingMutations:block:)``.
public final class FetchResultsCollection<Element: PersistentModel>: RandomAccessCollection {
    private let models: [Element]

    init(models: [Element]) {
        self.models = models
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { models.count }

    /// The model at `position`; a position out of range traps, as an
    /// array's does.
    public subscript(position: Int) -> Element { models[position] }
}
