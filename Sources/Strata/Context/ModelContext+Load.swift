import Foundation

// Loading models: from a record a fetch or a relationship read, from a
// row a required to-one names, and the reads of records and derived
// trees that load them.

extension ModelContext {
    // MARK: - Fetch

    func entity<T: PersistentModel>(for type: T.Type) throws -> Schema.Entity {
        guard let entity = container.schema.entity(forType: type) else {
            throw SwiftDataError(.unknownModelType, "\(T.self) is not in the container's schema (\(schemaNames))")
        }
        return entity
    }

    /// ``materialize(entity:row:bytes:)`` as the entity's model type `T`.
    ///
    /// - Precondition: `entity` is the entity of `T`.
    func materialize<T: PersistentModel>(
        _ type: T.Type, entity: Schema.Entity, row: Int64, bytes: UnsafeRawBufferPointer, skipping: UInt64 = 0
    ) throws -> T {
        unsafeDowncast(try materialize(entity: entity, row: row, bytes: bytes, skipping: skipping), to: T.self)
    }

    /// Builds the model of `row` from its record and registers it. `bytes`
    /// is borrowed (typically a page of the engine) and not kept.
    ///
    /// The model is made through the entity's model type, without a generic
    /// parameter: hot loops in generic code from another module (a fetch
    /// of the caller's model type) then avoid a runtime metadata lookup per
    /// row.
    ///
    /// The attributes whose bits are set in `skipping` (a fetch's
    /// `propertiesToFetch` left them out) are not decoded when their type
    /// has a placeholder: they load on first access.
    func materialize(
        entity: Schema.Entity, row: Int64, bytes: UnsafeRawBufferPointer, skipping: UInt64 = 0
    ) throws -> any PersistentModel {
        var reader = try _RecordReader(borrowing: bytes, entity: entity, row: row)
        if entity.hasRequiredToOne { reader.loader = self }
        reader.skipping = skipping
        let model = try entity.type.init(_strataReader: &reader)
        let state = model._strataState
        Self.pointToManyAtTrees(state, entity: entity, row: row)
        state.rowID = row
        state.status = .saved
        state.link = link
        registry[entity.ordinal][row] = model
        if markedRowCount > 0, markedRows[entity.ordinal].remove(row) {
            // Marked by delete(model:where:): the model stands for the
            // pending delete from now on.
            markedRowCount -= 1
            state.status = .deleted
            deleted[ObjectIdentifier(model)] = model
        }
        return model
    }

    /// Makes each to-many relationship of a loaded model a fault that reads
    /// its targets from the tree holding them.
    static func pointToManyAtTrees(_ state: _ModelState, entity: Schema.Entity, row: Int64, only: _FieldSet? = nil) {
        // Most entities have no relationship: skip the loop's setup.
        if entity.relationshipStorage.isEmpty { return }
        for (field, storage) in entity.relationshipStorage where only?.contains(field) != false {
            if let tree = storage.readTree { state.setDerivedFault(field: field, tree: tree, row: row) }
        }
    }

    /// The record of `row` of `entity` as this context reads the store
    /// now (through its pinned snapshot while a migration stage runs).
    func storedRecord(_ entity: Schema.Entity, row: Int64) throws -> [UInt8]? {
        if let snapshot { return try snapshot.record(entity, row: row) }
        return try store.read { tx in
            try tx.treeIfPresent(entity.recordTree).flatMap { try tx.get(RowKey.encode(row), in: $0) }
        }
    }

    /// The `.externalStorage` data of `row` in `tree`; nil when there is
    /// none or it is damaged (the integrity check reports that).
    func externalData(tree: String, row: Int64) -> Data? {
        let bytes = try? store.read { tx in
            try tx.treeIfPresent(tree).flatMap { try tx.get(RowKey.encode(row), in: $0) }
        }
        return bytes.flatMap { $0 }.flatMap(ExternalBlob.decode)
    }

    /// The target rows stored for `row` in a reverse index or join tree.
    /// A damaged entry is skipped (the integrity check reports it).
    func derivedRows(tree: String, row: Int64) -> [Int64] {
        (try? derivedRowsOrThrow(tree: tree, row: row)) ?? []
    }

    /// ``derivedRows(tree:row:)``, throwing what reading the tree throws.
    func derivedRowsOrThrow(tree: String, row: Int64) throws -> [Int64] {
        if let snapshot { return try snapshot.pairs(tree, of: row) }
        return try store.read { tx in try Snapshot(tx).pairs(tree, of: row) }
    }

    /// Reads many rows in one read transaction, with tree handles looked up
    /// once (delete rules read a relationship tree per deleted row).
    final class Snapshot {
        let tx: ReadTransaction
        /// Trees looked up so far. A fetch looks up a handful, by names the
        /// schema holds (the same strings each time, so `==` is a pointer
        /// comparison): a short list searched in order beats hashing them.
        @exclusivity(unchecked) private var trees: [(name: String, tree: Tree?)] = []

        init(_ tx: ReadTransaction) { self.tx = tx }

        func tree(_ name: String) throws -> Tree? {
            for known in trees where known.name == name { return known.tree }
            let found = try tx.treeIfPresent(name)
            trees.append((name, found))
            return found
        }

        /// The second rows of the pairs in tree `name` whose first row is `row`.
        func pairs(_ name: String, of row: Int64) throws -> [Int64] {
            guard let handle = try tree(name) else { return [] }
            return try PairKey.rows(in: handle, of: row, tx: tx)
        }

        func record(_ entity: Schema.Entity, row: Int64) throws -> [UInt8]? {
            try tree(Store.treeName(entity)).flatMap { try tx.get(RowKey.encode(row), in: $0) }
        }
    }

    /// The registered or stored model of `type` in `row`: the target of a
    /// non-optional to-one relationship, loaded with the model that
    /// requires it.
    package func loadRequired(_ type: any PersistentModel.Type, row: Int64) throws -> (any PersistentModel)? {
        guard let declared = container.schema.entity(forType: type) else {
            throw SwiftDataError(.unknownModelType, "\(type) is not in the container's schema (\(schemaNames))")
        }
        // The row's own class, which may be a subclass of `type`'s.
        guard let entity = declared.concrete(row) else { return nil }
        if let existing = registered(entity, row: row) { return existing }
        guard requiredLoadDepth < Self.requiredLoadLimit else {
            throw SwiftDataError(
                .corruptRecord,
                "\(entity.name) row \(row): more than \(Self.requiredLoadLimit) non-optional to-one relationships "
                    + "lead from one model to the next (a cycle of them cannot be loaded)")
        }
        requiredLoadDepth += 1
        defer { requiredLoadDepth -= 1 }
        let bytes = try store.read { tx in
            try tx.treeIfPresent(Store.treeName(entity)).flatMap { try tx.get(RowKey.encode(row), in: $0) }
        }
        guard let bytes else { return nil }
        return try bytes.withUnsafeBytes { try materialize(entity: entity, row: row, bytes: $0) }
    }

    static let requiredLoadLimit = 64

    /// The registered or stored model of `type` with row `row`; nil when
    /// the row does not exist; throws when its record cannot be read.
    func loadRelated<T: PersistentModel>(_ type: T.Type, row: Int64) throws -> T? {
        try load(T.self, row: row)
    }

    func load<T: PersistentModel>(_ type: T.Type, row: Int64) throws -> T? {
        // The row's own class, which may be a subclass of `T`.
        guard let entity = try entity(for: T.self).concrete(row) else { return nil }
        if let existing = registered(entity, row: row) as? T { return existing }
        let bytes = try store.read { tx in
            try tx.treeIfPresent(Store.treeName(entity)).flatMap { try tx.get(RowKey.encode(row), in: $0) }
        }
        guard let bytes else { return nil }
        return try bytes.withUnsafeBytes { try materialize(entity: entity, row: row, bytes: $0) } as? T
    }
}
