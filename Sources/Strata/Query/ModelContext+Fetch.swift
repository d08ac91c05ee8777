import Foundation
import StrataEngine

extension ModelContext {
    /// Runs `body` with a planned fetch of `descriptor` in one read
    /// transaction.
    func withQuery<T: PersistentModel, R>(_ descriptor: FetchDescriptor<T>, _ body: (QueryRun<T>) throws -> R)
        throws -> R
    {
        let entity = try entity(for: T.self)
        try descriptor.checkKeyPaths(of: entity)
        try mergeSavedChangesOrThrow()
        return try store.read { tx in
            try body(try QueryRun(descriptor, entity: entity, context: self, snapshot: Snapshot(tx)))
        }
    }

    /// Runs `body` with a planned fetch of `descriptor` for each entity
    /// whose rows a fetch of `T` returns — `T`'s own and each subentity's,
    /// every one stored in its own tree — in one read transaction. Each
    /// run returns the rows its entity contributes to the first
    /// `offset + limit` of the whole; the caller merges them.
    func withHierarchyQueries<T: PersistentModel, R>(
        _ descriptor: FetchDescriptor<T>, _ body: ([QueryRun<T>]) throws -> R
    ) throws -> R {
        let entity = try entity(for: T.self)
        try descriptor.checkKeyPaths(of: entity)
        try mergeSavedChangesOrThrow()
        var each = descriptor
        each.fetchOffset = nil
        if let limit = descriptor.fetchLimit {
            let offset = max(descriptor.fetchOffset ?? 0, 0)
            each.fetchLimit = limit > Int.max - offset ? nil : max(limit, 0) + offset
        }
        return try store.read { tx in
            let snapshot = Snapshot(tx)
            return try body(entity.family.map { try QueryRun(each, entity: $0.entity, context: self, snapshot: snapshot) })
        }
    }

    /// Merges the runs of a fetch over a hierarchy, each in the order
    /// `descriptor` sorts by (entity by entity when it does not sort),
    /// then pages the whole.
    ///
    /// Each run is sorted already, so the runs are merged, not sorted
    /// again: a top-k fetch compares about k × runs models.
    func mergeHierarchy<T: PersistentModel>(_ parts: [[T]], _ descriptor: FetchDescriptor<T>, entity: Schema.Entity)
        -> [T]
    {
        let offset = max(descriptor.fetchOffset ?? 0, 0)
        let total = parts.reduce(0) { $0 + $1.count }
        let wanted = descriptor.fetchLimit.map { min(total, offset + max($0, 0)) } ?? total
        guard offset < wanted else { return [] }
        if descriptor.sortBy.isEmpty {
            if offset == 0 && wanted == total { return parts.count == 1 ? parts[0] : Array(parts.joined()) }
            var merged: [T] = []
            merged.reserveCapacity(wanted - offset)
            var position = 0
            for part in parts {
                for model in part {
                    if position >= wanted { return merged }
                    if position >= offset { merged.append(model) }
                    position += 1
                }
            }
            return merged
        }
        let order = QueryRun<T>.order(descriptor.sortBy, entity: entity)
        var heads = Array(repeating: 0, count: parts.count)
        var merged: [T] = []
        merged.reserveCapacity(wanted - offset)
        var taken = 0
        while taken < wanted {
            var best = -1
            for index in parts.indices where heads[index] < parts[index].count {
                if best < 0 || order(parts[index][heads[index]], parts[best][heads[best]]) { best = index }
            }
            guard best >= 0 else { break }
            if taken >= offset { merged.append(parts[best][heads[best]]) }
            heads[best] += 1
            taken += 1
        }
        return merged
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
        guard parts.isEmpty else { return try partOrThrow(for: T.self).fetch(descriptor) }
        let entity = try entity(for: T.self)
        guard entity.hasSubentities else { return try withQuery(descriptor) { try $0.results(materialize: true).models } }
        let runs = try withHierarchyQueries(descriptor) { runs in
            try runs.map { try $0.results(materialize: true).models }
        }
        return mergeHierarchy(runs, descriptor, entity: entity)
    }

    /// The number of models matching `descriptor`, without building any:
    /// from the entity's row count or the index ranges alone when the plan
    /// needs no filter, otherwise from the records.
    public func fetchCount<T: PersistentModel>(_ descriptor: FetchDescriptor<T>) throws -> Int {
        guard parts.isEmpty else { return try partOrThrow(for: T.self).fetchCount(descriptor) }
        let entity = try entity(for: T.self)
        let count = { (query: QueryRun<T>) in try query.storedCount() + query.pendingMatches().count }
        if entity.hasSubentities {
            var total = try withHierarchyQueries(descriptor) { runs in try runs.reduce(0) { try $0 + count($1) } }
            total -= min(max(descriptor.fetchOffset ?? 0, 0), total)
            return descriptor.limit.map { min(total, max($0, 0)) } ?? total
        }
        return try withQuery(descriptor) { query in
            var count = try count(query)
            let start = min(max(descriptor.fetchOffset ?? 0, 0), count)
            count -= start
            return descriptor.limit.map { min(count, max($0, 0)) } ?? count
        }
    }

    /// The identifiers of the models matching `descriptor`, in result
    /// order, without building models (unless a sort needs them).
    public func fetchIdentifiers<T: PersistentModel>(_ descriptor: FetchDescriptor<T>) throws -> [PersistentIdentifier] {
        guard parts.isEmpty else { return try partOrThrow(for: T.self).fetchIdentifiers(descriptor) }
        let entity = try entity(for: T.self)
        let store = store.identifier
        if entity.hasSubentities {
            // The rows' order across entities may need their models.
            return try fetch(descriptor).map(\.persistentModelID)
        }
        return try withQuery(descriptor) { query in
            try query.results(materialize: false).rows.map {
                PersistentIdentifier(storeIdentifier: store, entityName: entity.name, rowID: $0)
            }
        }
    }

    /// The identifiers of the models matching `descriptor`, in result
    /// order, as SwiftData's batched form returns them. Identifiers are
    /// small and need no models, so the collection holds them all at once
    /// whatever `batchSize` is (which must be positive).
    public func fetchIdentifiers<T: PersistentModel>(_ descriptor: FetchDescriptor<T>, batchSize: Int) throws
        -> FetchResultsCollection<PersistentIdentifier>
    {
        if descriptor.includePendingChanges && hasChanges {
            throw SwiftDataError(
                .includePendingChangesWithBatchSize,
                "fetchIdentifiers(_:batchSize:) of \(T.self) with includePendingChanges while the context has unsaved "
                    + "changes")
        }
        return FetchResultsCollection(models: try fetchIdentifiers(descriptor))
    }

    /// The plan a fetch of `descriptor` would run, as text: the access
    /// path (a scan, index ranges, a union or intersection), the filter
    /// evaluated on records, what is left to `Predicate.evaluate`, the
    /// order and the paging. A Strata addition, for tuning and for tests.
    public func explain<T: PersistentModel>(_ descriptor: FetchDescriptor<T>) throws -> String {
        guard parts.isEmpty else { return try partOrThrow(for: T.self).explain(descriptor) }
        guard try entity(for: T.self).hasSubentities else { return try withQuery(descriptor) { $0.plan.description } }
        return try withHierarchyQueries(descriptor) { runs in
            runs.map { "\($0.entity.name): \($0.plan.description)" }.joined(separator: "\n")
                + "\nthen merged\(descriptor.sortBy.isEmpty ? "" : ", sorted") and paged"
        }
    }

    /// The models matching `descriptor`, built `batchSize` at a time as
    /// the collection is read, so memory stays bounded by the batch size
    /// however many models match.
    ///
    /// The fetch finds the matching rows and checks that every one of their
    /// records decodes (a damaged record fails the fetch, not a later
    /// read). The collection then reads one snapshot of the store, the
    /// fetch's: its count is fixed, and a model another save deleted since
    /// still comes back with its values (and reads `isDeleted` once the
    /// context merges the deletion). Models of a batch are registered in
    /// the context while the batch is current; moving to another batch
    /// releases the previous batch's models that are unchanged and not
    /// held elsewhere, as SwiftData does.
    ///
    /// While the collection lives it holds its snapshot, and the store's
    /// log cannot be checkpointed past it: let go of it when done.
    ///
    /// - Throws: ``SwiftDataError/includePendingChangesWithBatchSize`` when
    ///   `includePendingChanges` is true and the context has unsaved
    ///   changes (set it to false, or save first), as SwiftData does; what
    ///   ``fetch(_:)`` throws, such as ``SwiftDataError/corruptRecord`` for
    ///   a record that does not decode.
    public func fetch<T: PersistentModel>(_ descriptor: FetchDescriptor<T>, batchSize: Int) throws
        -> FetchResultsCollection<T>
    {
        guard parts.isEmpty else { return try partOrThrow(for: T.self).fetch(descriptor, batchSize: batchSize) }
        if descriptor.includePendingChanges && hasChanges {
            throw SwiftDataError(
                .includePendingChangesWithBatchSize,
                "fetch(_:batchSize:) of \(T.self) with includePendingChanges while the context has unsaved changes")
        }
        var stored = descriptor
        stored.includePendingChanges = false
        // A migration stage reads through its open write transaction: no
        // snapshot to hold, so its batched fetch is a plain one. So is a
        // fetch over a hierarchy (several entities' trees, merged).
        guard store.target.ownsFile, try !entity(for: T.self).hasSubentities else {
            return FetchResultsCollection(models: try fetch(stored))
        }
        let entity = try entity(for: T.self)
        try descriptor.checkKeyPaths(of: entity)
        try mergeSavedChangesOrThrow()
        let snapshot = Snapshot(try store.database.beginRead())
        do {
            let rows = try QueryRun(stored, entity: entity, context: self, snapshot: snapshot)
                .results(materialize: false).rows
            try checkRecordsDecode(rows, entity: entity, snapshot: snapshot)
            let standIn = try rows.first.map { try standInModel(entity, row: $0, snapshot: snapshot) as? T }
            return FetchResultsCollection(
                context: self, entity: entity, rows: rows, snapshot: snapshot, batchSize: max(batchSize, 1),
                standIn: standIn ?? nil)
        } catch {
            snapshot.tx.end()
            throw error
        }
    }

    /// Decodes the record of every row in `rows` not registered here
    /// (without keeping the models): throws what a damaged record throws.
    private func checkRecordsDecode(_ rows: [Int64], entity: Schema.Entity, snapshot: Snapshot) throws {
        guard let tree = try snapshot.tree(entity.recordTree) else { return }
        let tx = snapshot.tx
        let loader =
            entity.hasRequiredToOne
            ? RecordModelLoader(schema: container.schema) { entity, row in
                try tx.treeIfPresent(entity.recordTree).flatMap { try tx.get(RowKey.encode(row), in: $0) }
            } : nil
        for row in rows where registered(entity, row: row) == nil {
            let found: Void? = try tx.withValue(for: RowKey.encode(row), in: tree) { bytes in
                var reader = try _RecordReader(borrowing: bytes, entity: entity, row: row)
                reader.loader = loader
                _ = try entity.type.init(_strataReader: &reader)
            }
            if found == nil { throw SwiftDataError(.corruptRecord, "\(entity.name) row \(row): matched, but has no record") }
        }
    }

    /// What a batched collection returns for a row it cannot read again (a
    /// disk error after the fetch read it fine): a model built from the
    /// record of `row` (the first match) as the fetch found it, deleted and
    /// in no context's registry.
    private func standInModel(_ entity: Schema.Entity, row: Int64, snapshot: Snapshot) throws -> any PersistentModel {
        guard let tree = try snapshot.tree(entity.recordTree),
            let model = try snapshot.tx.withValue(
                for: RowKey.encode(row), in: tree,
                { try Self.deletedModel(entity, row: row, bytes: $0, snapshot: snapshot, link: link, schema: container.schema) })
        else { throw SwiftDataError(.corruptRecord, "\(entity.name) row \(row): matched, but has no record") }
        return model
    }

    /// The models of `rows`, a batch of a batched fetch: the registered
    /// ones, or built from the store as it is now (so they carry the saves
    /// made since the fetch) and registered. A row deleted since the fetch
    /// is built from the fetch's snapshot, not registered, and reads
    /// `isDeleted`, as a model whose deletion the context merged does. A
    /// record that no longer decodes is built from the snapshot too.
    func batchModels(_ entity: Schema.Entity, rows: ArraySlice<Int64>, snapshot: Snapshot) throws -> [any PersistentModel] {
        mergeSavedChanges()
        return try store.read { tx in
            let current = try tx.treeIfPresent(entity.recordTree)
            let old = try snapshot.tree(entity.recordTree)
            return try rows.map { row in
                if let registered = registered(entity, row: row) { return registered }
                let key = RowKey.encode(row)
                if let current,
                    let model = try? tx.withValue(for: key, in: current, { try materialize(entity: entity, row: row, bytes: $0) })
                {
                    return model
                }
                let stillStored = try current.map { try tx.contains(key, in: $0) } ?? false
                guard let old,
                    let model = try snapshot.tx.withValue(
                        for: key, in: old,
                        { bytes in
                            stillStored
                                ? try materialize(entity: entity, row: row, bytes: bytes)
                                : try Self.deletedModel(
                                    entity, row: row, bytes: bytes, snapshot: snapshot, link: link, schema: container.schema)
                        })
                else { throw SwiftDataError(.corruptRecord, "\(entity.name) row \(row): matched, but has no record") }
                return model
            }
        }
    }

    /// A model of a row deleted since `snapshot`, built from it: deleted,
    /// and in no context's registry.
    private static func deletedModel(
        _ entity: Schema.Entity, row: Int64, bytes: UnsafeRawBufferPointer, snapshot: Snapshot, link: _ContextLink,
        schema: Schema
    ) throws -> any PersistentModel {
        let tx = snapshot.tx
        var reader = try _RecordReader(borrowing: bytes, entity: entity, row: row)
        if entity.hasRequiredToOne {
            reader.loader = RecordModelLoader(schema: schema) { entity, row in
                try tx.treeIfPresent(entity.recordTree).flatMap { try tx.get(RowKey.encode(row), in: $0) }
            }
        }
        let model = try entity.type.init(_strataReader: &reader)
        let state = model._strataState
        state.rowID = row
        state.status = .deleted
        state.deletedElsewhere = true
        state.formerStoreIdentifier = link.storeIdentifier
        return model
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
        guard parts.isEmpty else {
            return try partOrThrow(for: T.self).enumerate(
                descriptor, batchSize: batchSize, allowEscapingMutations: allowEscapingMutations, block: block)
        }
        let entity = try entity(for: T.self)
        try descriptor.checkKeyPaths(of: entity)
        let size = max(batchSize, 1)
        let hadChanges = hasChanges
        if entity.hasSubentities {
            // Several entities' rows, merged: fetched whole, then handed
            // out in batches.
            let models = try fetch(descriptor)
            for start in stride(from: 0, to: models.count, by: size) {
                for model in models[start..<min(start + size, models.count)] { try block(model) }
                if !allowEscapingMutations && !hadChanges && hasChanges {
                    throw SwiftDataError(
                        .modelValidationFailure,
                        "enumerate(\(T.self)): the block left unsaved changes; save in the block or pass "
                            + "allowEscapingMutations: true")
                }
            }
            return
        }
        var previousRows: [Int64] = []
        // Each batch ends with the mutation check and the release of its
        // models (and of the previous batch's weak entries that are gone).
        func finish(_ loaded: [T]) throws {
            pruneReleased(entity, rows: previousRows)
            previousRows = loaded.map(\._strataState.rowID)
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
