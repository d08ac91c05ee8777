import Foundation

/// One `save()` inside the engine's write transaction: records, unique
/// entries and index entries, written together or not at all.
///
/// Order of work:
/// 1. deletes, in key order: each deleted row's record, key entries,
///    relationship entries and external data go;
/// 2. upserts: each inserted model whose values of a unique constraint
///    match a stored row — or a model inserted earlier in the same save —
///    takes that row (SwiftData's upsert); its own new row id is dropped;
/// 3. writes: inserted models, then changed ones. Each write reads the
///    row's current record (when there is one) to find the key entries to
///    replace, so later writes to a row see earlier ones.
///
/// Before the writes of changed models, each releases the stored key of
/// every unique constraint it changed a field of, so that one save can
/// move a unique value from one model to another (a swap, a rename into a
/// name another change gives up). A changed model that takes values another
/// row holds under a unique constraint after all that, and an insert that
/// matches two different rows under two constraints, throw
/// ``SwiftDataError/uniqueConstraintViolation``; the
/// transaction is then rolled back and the caller restores the row ids it
/// changed (``remapped``).
struct SaveTransaction {
    let tx: WriteTransaction
    let schema: Schema
    /// For the identifiers of upserted rows.
    let storeIdentifier: String
    /// Unique keys given to inserted models during step 2, by tree.
    var pendingUnique: [String: [[UInt8]: Int64]] = [:]
    /// Rows whose stored unique keys step 3 released before any write,
    /// by tree: each write adds its row's key again.
    var releasedUnique: [String: Set<Int64>] = [:]
    /// Models whose row id step 2 changed, with the id they had.
    private(set) var remapped: [(model: any PersistentModel, row: Int64)] = []
    /// Rows that existed before the save and took an inserted model.
    private(set) var upsertedRows: Set<PersistentIdentifier> = []
    /// Step 1's deletes, by tree, carried out together by ``flushDeletes()``.
    private var pendingDeletes: [String: KeyBatch] = [:]
    /// What the save changed, for the history; nil when the store keeps
    /// no history.
    var history: HistoryRecorder?
    /// What the save changed in stored rows, for the container's other
    /// contexts to merge; nil when there are none.
    var changes: SavedChanges.Builder?
    /// Rows this save changed beyond the models it was given (a one-to-one
    /// whose other side let go of a row in storage): the saving context
    /// refreshes its own models of them.
    var sideEffects: [(entity: Schema.Entity, row: Int64, field: Int)] = []
    /// Buffers reused from one model to the next: an array costs about
    /// 700 instructions to allocate and free on Linux, and a changed model
    /// made five of these. The bytes of a record written with only its
    /// changed fields, the stored record it is laid over, the result, and
    /// a row's key (``rowKey(_:)``). Each is handed back once its model is
    /// written; one still held elsewhere (a spilled transaction's buffered
    /// put) is copied on its next use, as any array is.
    var partialRecord: [UInt8] = []
    var storedRecordBuffer: [UInt8] = []
    var patchedRecord: [UInt8] = []
    private var rowKeyBuffer: [UInt8] = []

    init(tx: WriteTransaction, schema: Schema, storeIdentifier: String) {
        self.tx = tx
        self.storeIdentifier = storeIdentifier
        self.schema = schema
    }

    /// Each entity's record tree once looked up, by ordinal (a write
    /// per model would otherwise hash the tree's name each time).
    private var recordTrees: [Tree?] = []

    /// The key of `row` (``RowKey/encode(_:)``), in the buffer the last
    /// call returned when nothing holds it any more.
    mutating func rowKey(_ row: Int64) -> [UInt8] {
        guard rowKeyBuffer.count == 8 else {
            rowKeyBuffer = RowKey.encode(row)
            return rowKeyBuffer
        }
        rowKeyBuffer.withUnsafeMutableBytes { $0.storeBytes(of: UInt64(bitPattern: row).bigEndian, as: UInt64.self) }
        return rowKeyBuffer
    }

    mutating func recordTree(_ entity: Schema.Entity) throws -> Tree {
        if entity.ordinal < recordTrees.count, let known = recordTrees[entity.ordinal] { return known }
        let tree = try tx.tree(entity.recordTree)
        // Records get longer as they change (a longer string, an optional
        // set): leaves filled by inserts, in row order, keep room for that.
        try tx.leaveRoomToGrow(in: tree)
        if recordTrees.count <= entity.ordinal {
            recordTrees += Array(repeating: nil, count: entity.ordinal + 1 - recordTrees.count)
        }
        recordTrees[entity.ordinal] = tree
        return tree
    }

    /// The tree `name` (the transaction keeps the last few it found).
    func tree(_ name: String) throws -> Tree {
        try tx.tree(name)
    }

    /// The entity of the model type looked up last: a save writes its
    /// models in runs of one type, and each asks once per step.
    private var lastEntity: (type: ObjectIdentifier, entity: Schema.Entity)?

    mutating func entity(of model: any PersistentModel) throws -> Schema.Entity {
        let type = ObjectIdentifier(Swift.type(of: model))
        if let lastEntity, lastEntity.type == type { return lastEntity.entity }
        guard let entity = schema.entity(forType: Swift.type(of: model)) else {
            throw SwiftDataError(.unknownModelType, "\(Swift.type(of: model)) is not in the container's schema")
        }
        lastEntity = (type, entity)
        return entity
    }

    /// The record of `row`, if stored.
    mutating func record(_ entity: Schema.Entity, row: Int64) throws -> [UInt8]? {
        try tx.get(RowKey.encode(row), in: recordTree(entity))
    }

    /// `bytes` decoded into a new, unregistered instance.
    func decode(_ bytes: [UInt8], _ entity: Schema.Entity, row: Int64) throws -> any PersistentModel {
        let tx = tx
        let loader =
            entity.hasRequiredToOne
            ? RecordModelLoader(schema: schema) { entity, row in
                try tx.treeIfPresent(entity.recordTree).flatMap { try tx.get(RowKey.encode(row), in: $0) }
            } : nil
        return try _RecordReader.withReader(bytes, entity: entity, row: row, loader: loader) {
            try entity.type.init(_strataReader: &$0)
        }
    }

    /// The to-one row id in field `field` of a record, if any.
    func toOneRow(_ bytes: [UInt8], field: Int, _ entity: Schema.Entity, row: Int64) throws -> Int64? {
        try _RecordReader.withReader(bytes, entity: entity, row: row) { try $0.toOneRow(field: field) }
    }

    /// The second rows of the pairs in `name` whose first row is `row`.
    mutating func pairs(_ name: String, of row: Int64) throws -> [Int64] {
        try PairKey.rows(in: tree(name), of: row, tx: tx)
    }

    // MARK: Steps

    /// Deletes stored rows of `entity` (ascending) with their key and
    /// relationship entries, from their records alone (no model needed).
    /// A row's known to-one (`hintField`, found in that to-one's reverse
    /// index) spares reading its record when it is the entity's only
    /// to-one and the entity has no unique constraint or index.
    mutating func deleteRows(_ entity: Schema.Entity, _ rows: [ModelContext.DoomedRow]) throws {
        let records = try tree(entity.recordTree)
        var toOnes: [(field: Int, index: String, keys: KeyBatch)] = []
        for (field, storage) in entity.relationshipStorage {
            if case .toOne(let index) = storage { toOnes.append((field, index, KeyBatch(capacity: rows.count, bytes: 18))) }
        }
        var rowKeys = KeyBatch(capacity: rows.count, bytes: 8)
        for doomed in rows {
            let row = doomed.row
            let needsRecord =
                !entity.keyGroups.isEmpty || toOnes.contains { $0.field != doomed.hintField }
                || (history != nil && !entity.preservedFields.isEmpty)
            let old = needsRecord ? try tx.get(RowKey.encode(row), in: records) : nil
            try history?.delete(entity, row: row, record: old)
            if !entity.keyGroups.isEmpty, let old {
                let stored = try decode(old, entity, row: row)
                for group in entity.keyGroups {
                    try removeKey(group, group.values(of: stored), row: row, deferred: true)
                }
            }
            for index in toOnes.indices {
                if toOnes[index].field == doomed.hintField {
                    PairKey.append(doomed.hintTarget, row, to: &toOnes[index].keys)
                } else if let old, let target = try toOneRow(old, field: toOnes[index].field, entity, row: row) {
                    PairKey.append(target, row, to: &toOnes[index].keys)
                }
            }
            for (field, storage) in entity.relationshipStorage {
                switch storage {
                case .join(let join, let mirror):
                    for target in try pairs(join, of: row) {
                        deferDelete(PairKey.encode(row, target), in: join)
                        deferDelete(PairKey.encode(target, row), in: mirror)
                        noteInverse(of: entity, field: field, target: target)
                    }
                case .mirror(let join, let mirror):
                    for owner in try pairs(mirror, of: row) {
                        deferDelete(PairKey.encode(row, owner), in: mirror)
                        deferDelete(PairKey.encode(owner, row), in: join)
                        noteInverse(of: entity, field: field, target: owner)
                    }
                case .toOne, .viaInverse:
                    break  // to-ones above; the others' entries belong to the other side's records
                }
            }
            RowKey.append(row, to: &rowKeys)
        }
        for toOne in toOnes { queue(toOne.keys, in: toOne.index) }
        for name in entity.externalTrees.values { queue(rowKeys, in: name) }
        queue(rowKeys, in: entity.recordTree)
        if changes != nil {
            changes?.delete(entity, rows: rows.lazy.map(\.row))
            // The rows the deleted ones pointed at lose them from a to-many
            // stored on their side.
            for toOne in toOnes {
                guard let side = entity.inverseSides[toOne.field], !side.isToOne,
                    let target = schema.entity(forType: side.type)
                else { continue }
                for index in 0..<toOne.keys.count {
                    if let pair = toOne.keys.withKey(index, { PairKey.decode($0) }) {
                        changes?.update(target, row: pair.0, field: side.field)
                    }
                }
            }
        }
    }

    /// Notes, for other contexts, that relationship `field` of a row of
    /// `entity` gained or lost `target`: the inverse field of `target`
    /// changed too.
    mutating func noteInverse(of entity: Schema.Entity, field: Int, target: Int64) {
        guard changes != nil, let side = entity.inverseSides[field], let other = schema.entity(forType: side.type) else {
            return
        }
        changes?.update(other, row: target, field: side.field)
    }

    /// Queues `keys` for deletion from tree `name` (taken as they are when
    /// the tree has none queued yet).
    mutating func queue(_ keys: KeyBatch, in name: String) {
        if pendingDeletes[name] == nil {
            pendingDeletes[name] = keys
        } else {
            pendingDeletes[name]?.append(contentsOf: keys)
        }
    }

    /// Queues a delete for ``flushDeletes()``.
    mutating func deferDelete(_ key: [UInt8], in tree: String) {
        pendingDeletes[tree, default: KeyBatch()].append(key)
    }

    /// Carries out the queued deletes, each tree's keys in order (see
    /// `WriteTransaction.delete(sortedKeys:in:)`: neighbours cost one
    /// descent per leaf). Called once step 1 is done.
    mutating func flushDeletes() throws {
        for (name, keys) in pendingDeletes.sorted(by: { $0.key < $1.key }) {
            // Rows are deleted in order, so most lists arrive sorted; a
            // repeated key (a join pair reached from both ends) is harmless.
            try tx.delete(sortedKeys: keys.isSorted ? keys : keys.sorted(), in: tree(name))
        }
        pendingDeletes = [:]
    }

    /// Step 2 for one inserted model; `othersFollow`: inserted models of
    /// this save are resolved after it (they must see the unique keys it
    /// takes).
    mutating func resolveUpsert(_ model: any PersistentModel, othersFollow: Bool) throws {
        let entity = try entity(of: model)
        let groups = entity.uniqueGroups
        guard !groups.isEmpty else { return }
        let own = model._strataState.rowID
        var target: (row: Int64, existed: Bool)?
        var keys: [(tree: String, key: [UInt8])] = []
        for group in groups {
            let values = group.values(of: model)
            let key = group.key(values, row: own)
            keys.append((group.treeName, key))
            var match: (row: Int64, existed: Bool)?
            if let row = pendingUnique[group.treeName]?[key] {
                match = (row, false)
            } else if let bytes = try tx.get(key, in: tree(group.treeName)) {
                match = (try KeyGroup.row(inUniqueValue: bytes), true)
            }
            if match == nil, let (sibling, other) = try siblingOwner(group, key, entity: entity) {
                // A value unique across a hierarchy is held by a row of
                // another class, which an insert cannot take over.
                throw SwiftDataError(
                    .uniqueConstraintViolation,
                    "\(entity.name): an inserted model has \(group) = \(KeyEncoding.Element.describe(values)), which "
                        + "\(sibling)/p\(other) holds (a unique value is unique across the whole hierarchy)")
            }
            guard let match, match.row != own else { continue }
            if let target, target.row != match.row {
                throw SwiftDataError(
                    .uniqueConstraintViolation,
                    "\(entity.name): an inserted model matches \(entity.name)/p\(target.row) and "
                        + "\(entity.name)/p\(match.row) under different unique constraints (\(group))")
            }
            target = match
        }
        let row = target?.row ?? own
        // Only inserts resolved after this one look the keys up (a save of
        // one model skips building the table: two dictionaries and a hash
        // of the key, about a third of this function).
        if othersFollow {
            for (tree, key) in keys { pendingUnique[tree, default: [:]][key] = row }
        }
        guard let target else { return }
        remapped.append((model, own))
        model._strataState.rowID = target.row
        if target.existed {
            upsertedRows.insert(
                PersistentIdentifier(storeIdentifier: storeIdentifier, entityName: entity.name, rowID: target.row))
        }
    }
}
