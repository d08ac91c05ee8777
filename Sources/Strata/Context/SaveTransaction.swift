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
/// A changed model that takes values another row holds under a unique
/// constraint, and an insert that matches two different rows under two
/// constraints, throw ``SwiftDataError/uniqueConstraintViolation``; the
/// transaction is then rolled back and the caller restores the row ids it
/// changed (``remapped``).
struct SaveTransaction {
    let tx: WriteTransaction
    let schema: Schema
    /// For the identifiers of upserted rows.
    let storeIdentifier: String
    private var trees: [String: Tree] = [:]
    /// Unique keys given to inserted models during step 2, by tree.
    private var pendingUnique: [String: [[UInt8]: Int64]] = [:]
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
    private(set) var sideEffects: [(entity: Schema.Entity, row: Int64, field: Int)] = []

    init(tx: WriteTransaction, schema: Schema, storeIdentifier: String) {
        self.tx = tx
        self.storeIdentifier = storeIdentifier
        self.schema = schema
    }

    /// Each entity's record tree once looked up, by ordinal (a write
    /// per model would otherwise hash the tree's name each time).
    private var recordTrees: [Tree?] = []

    mutating func recordTree(_ entity: Schema.Entity) throws -> Tree {
        if entity.ordinal < recordTrees.count, let known = recordTrees[entity.ordinal] { return known }
        let tree = try tx.tree(entity.recordTree)
        if recordTrees.count <= entity.ordinal {
            recordTrees += Array(repeating: nil, count: entity.ordinal + 1 - recordTrees.count)
        }
        recordTrees[entity.ordinal] = tree
        return tree
    }

    mutating func tree(_ name: String) throws -> Tree {
        if let known = trees[name] { return known }
        let tree = try tx.tree(name)
        trees[name] = tree
        return tree
    }

    func entity(of model: any PersistentModel) throws -> Schema.Entity {
        guard let entity = schema.entity(forType: type(of: model)) else {
            throw SwiftDataError(.unknownModelType, "\(type(of: model)) is not in the container's schema")
        }
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
    private mutating func noteInverse(of entity: Schema.Entity, field: Int, target: Int64) {
        guard changes != nil, let side = entity.inverseSides[field], let other = schema.entity(forType: side.type) else {
            return
        }
        changes?.update(other, row: target, field: side.field)
    }

    /// Queues `keys` for deletion from tree `name` (taken as they are when
    /// the tree has none queued yet).
    private mutating func queue(_ keys: KeyBatch, in name: String) {
        if pendingDeletes[name] == nil {
            pendingDeletes[name] = keys
        } else {
            pendingDeletes[name]?.append(contentsOf: keys)
        }
    }

    /// Queues a delete for ``flushDeletes()``.
    private mutating func deferDelete(_ key: [UInt8], in tree: String) {
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

    /// Step 3 for one model: its record, its key entries and its
    /// relationship entries.
    ///
    /// An inserted model writes every field. A changed model writes only
    /// the fields its context changed (``_ModelState/changedFields``): the
    /// others keep the stored record's values, so two contexts that change
    /// different attributes of one row both keep their change. A changed
    /// model whose row is gone (another context's save deleted it) throws
    /// ``SwiftDataError/modelDeleted`` rather than write the row again.
    mutating func write(_ model: any PersistentModel, fresh: Bool) throws {
        let entity = try entity(of: model)
        let state = model._strataState
        let row = state.rowID
        // The fields this save writes: nil for all of them.
        let only: _FieldSet? = state.status == .saved && !fresh ? state.changedFields : nil
        // Only to-manys changed (a parent whose list gained or lost a
        // member): the record and its keys stay as stored, and are not
        // read, only looked for.
        let listsOnly = only.map { Self.holdsNoRecordField($0, entity) } ?? false
        let old = fresh || listsOnly ? nil : try record(entity, row: row)
        let isStored = try old != nil || listsOnly && tx.contains(RowKey.encode(row), in: recordTree(entity))
        if only != nil && !isStored {
            throw SwiftDataError(
                .modelDeleted,
                "\(model.persistentModelID) has unsaved changes, but its row was deleted by another save; "
                    + "roll the changes back or delete the model")
        }
        var bytes = old ?? []
        var changedFields: [Int]? = listsOnly ? [] : nil
        var changedOutside: [Int] = []
        if !listsOnly {
            // Attributes a partial fetch left out hold placeholders: load them
            // from the stored record first, so keys and records see real values.
            if state.mayHaveUnloaded, let old { try state.loadUnloaded(model, entity: entity, from: old) }
            var writer = _RecordWriter()
            writer.externalTrees = entity.externalTrees
            model._strataWrite(to: &writer)
            if let (field, failure) = writer.failures.min(by: { $0.key < $1.key }) {
                throw SwiftDataError(failure.code, "\(entity.name).\(entity.properties[field].name): \(failure.message)")
            }
            bytes = writer.bytes
            try Self.checkSize(bytes.count, of: "record", entity, row: row)
            // A change to none of a group's fields leaves its key as stored
            // (the fields it did not change keep their stored values): only
            // the groups it touches are compared, and a change that touches
            // none decodes no model.
            let groups =
                only.map { changed in
                    entity.keyGroups.filter { group in group.properties.contains { changed.contains($0.field) } }
                } ?? entity.keyGroups
            // Key values come from the model, unless the stored record holds
            // newer values of fields this context did not change.
            var keySource: any PersistentModel = model
            // The fields whose stored values change, for the history, when
            // the overlay finds them.
            if let only, let old {
                let (merged, changed) = try Self.overlayChanges(old, bytes, fields: only, entity, row: row)
                changedFields = changed
                if merged != bytes {
                    bytes = merged
                    if !groups.isEmpty { keySource = try decode(merged, entity, row: row) }
                }
            }
            if !groups.isEmpty {
                let stored = try old.map { try decode($0, entity, row: row) }
                for group in groups {
                    let values = group.values(of: keySource)
                    if let stored {
                        let previous = group.values(of: stored)
                        if previous == values { continue }
                        try removeKey(group, previous, row: row)
                    }
                    try addKey(group, values, row: row, entity: entity)
                }
            }
            for (name, value) in writer.externals {
                let field = entity.externalTrees.first(where: { $0.value == name })?.key
                if let only, let field, !only.contains(field) { continue }
                if history != nil, let field { changedOutside.append(field) }
                if let value {
                    let blob = ExternalBlob.encode(value)
                    try Self.checkSize(blob.count, of: "external value", entity, row: row)
                    try tx.put(RowKey.encode(row), blob, in: tree(name))
                } else {
                    try tx.delete(RowKey.encode(row), in: tree(name))
                }
            }
        }
        for (field, storage) in entity.relationshipStorage {
            switch storage {
            case .toOne(let index):
                guard !listsOnly else { continue }
                let before = try old.flatMap { try toOneRow($0, field: field, entity, row: row) }
                let after = try toOneRow(bytes, field: field, entity, row: row)
                guard before != after else { continue }
                if let before {
                    try tx.delete(PairKey.encode(before, row), in: tree(index))
                    noteInverse(of: entity, field: field, target: before)
                    try letGo(of: row, entity: entity, field: field, target: before)
                }
                if let after {
                    try tx.put(PairKey.encode(after, row), [], in: tree(index))
                    noteInverse(of: entity, field: field, target: after)
                }
            case .join(let join, let mirror):
                // Edited in place (to keep inverses in step) and not
                // assigned: the pairs added and removed, nothing else read.
                if only?.contains(field) != false, let delta = state.toManyDeltas[field],
                    state.faults[field] != nil || state.toManyBaselines[field] == nil
                {
                    var changed = false
                    for target in delta.removedRows.sorted() {
                        guard try tx.delete(PairKey.encode(row, target), in: tree(join)) else { continue }
                        try tx.delete(PairKey.encode(target, row), in: tree(mirror))
                        noteInverse(of: entity, field: field, target: target)
                        changed = true
                    }
                    for model in delta.added where !model._strataState.deletedElsewhere {
                        let target = model._strataState.rowID
                        guard target > 0, model._strataState.status != .deleted else { continue }
                        try tx.put(PairKey.encode(row, target), [], in: tree(join))
                        try tx.put(PairKey.encode(target, row), [], in: tree(mirror))
                        noteInverse(of: entity, field: field, target: target)
                        changed = true
                    }
                    if changed { changedOutside.append(field) }
                    continue
                }
                // A to-many not loaded since the model was read, or not
                // changed by this context, is left as stored.
                guard state.faults[field] == nil, only?.contains(field) != false else { continue }
                // Targets another save deleted are not written back.
                let targets = (InverseUpkeep.value(of: model, field: field) as? [any PersistentModel] ?? [])
                    .filter { !$0._strataState.deletedElsewhere }.map(\._strataState.rowID).filter { $0 > 0 }
                var wanted = Set(targets)
                let stored = Set(fresh ? [] : try pairs(join, of: row))
                if only != nil, let baseline = state.toManyBaselines[field].map(Set.init) {
                    // What this context added and removed, applied to what
                    // is stored now: other saves' changes to the rest stay.
                    wanted = stored.subtracting(baseline.subtracting(wanted)).union(wanted.subtracting(baseline))
                }
                if stored != wanted { changedOutside.append(field) }
                for target in stored.subtracting(wanted) {
                    try tx.delete(PairKey.encode(row, target), in: tree(join))
                    try tx.delete(PairKey.encode(target, row), in: tree(mirror))
                    noteInverse(of: entity, field: field, target: target)
                }
                for target in wanted.subtracting(stored) {
                    try tx.put(PairKey.encode(row, target), [], in: tree(join))
                    try tx.put(PairKey.encode(target, row), [], in: tree(mirror))
                    noteInverse(of: entity, field: field, target: target)
                }
            case .viaInverse(let index):
                // Written by the other side's to-ones, but an upsert
                // replaces the stored row's to-many: the rows it held that
                // the inserted model does not let go.
                guard only == nil, old != nil, let side = entity.inverseSides[field],
                    let other = schema.entity(forType: side.type)
                else { continue }
                let wanted = Set(
                    (InverseUpkeep.value(of: model, field: field) as? [any PersistentModel] ?? []).map(\._strataState.rowID))
                for target in try pairs(index, of: row) where !wanted.contains(target) {
                    try clearToOne(side.field, of: target, other, ifAt: row)
                }
            case .mirror:
                break  // written by the other side
            }
        }
        if !listsOnly { try tx.put(RowKey.encode(row), bytes, in: recordTree(entity)) }
        if history != nil {
            if isStored {
                // An upsert wrote every field: all of them are compared.
                var fields =
                    try changedFields
                    ?? Self.overlayChanges(old ?? [], bytes, fields: _FieldSet(all: entity.properties.count), entity, row: row)
                    .changed
                if !changedOutside.isEmpty { fields = Array(Set(fields + changedOutside)).sorted() }
                history?.update(entity, row: row, fields: fields)
            } else {
                history?.insert(entity, row: row)
            }
        }
        if isStored, changes != nil {
            // An upsert replaced every field; a change wrote its own.
            changes?.update(entity, row: row, fields: only ?? _FieldSet(all: entity.properties.count))
        }
    }

    /// True when every field of `fields` is a to-many, which the record
    /// does not hold.
    /// (Walked in field order, with no allocation: it runs for every
    /// changed model, and usually stops at the first attribute.)
    static func holdsNoRecordField(_ fields: _FieldSet, _ entity: Schema.Entity) -> Bool {
        var any = false
        for (field, property) in entity.properties.enumerated() where fields.contains(field) {
            guard let relationship = property as? Schema.Relationship, !relationship.isToOneRelationship else {
                return false
            }
            any = true
        }
        return any
    }

    /// Relationship `field` of `row` no longer points at `target`: when
    /// its inverse is a to-one (a one-to-one) that still points back at
    /// `row`, it is cleared in storage. Changes made to loaded models keep
    /// both sides as they are made, so this usually finds nothing to do;
    /// it matters for an insert upserted into a stored row (it replaces
    /// that row's to-ones, and their targets pointed back at it) and for
    /// a target changed by another save since this context loaded it.
    private mutating func letGo(of row: Int64, entity: Schema.Entity, field: Int, target: Int64) throws {
        guard let side = entity.inverseSides[field], side.isToOne, let other = schema.entity(forType: side.type) else {
            return
        }
        try clearToOne(side.field, of: target, other, ifAt: row)
    }

    /// Sets to-one `field` of `row` (of `entity`) to nil in storage when it
    /// points at `target`.
    private mutating func clearToOne(_ field: Int, of row: Int64, _ entity: Schema.Entity, ifAt target: Int64) throws {
        guard case .toOne(let index)? = entity.relationshipStorage[field],
            let bytes = try record(entity, row: row),
            try toOneRow(bytes, field: field, entity, row: row) == target
        else { return }
        var cleared = _RecordWriter()
        cleared.null(field)
        var fields = _FieldSet()
        fields.insert(field)
        let updated = try Self.overlay(bytes, cleared.bytes, fields: fields, entity, row: row)
        try tx.put(RowKey.encode(row), updated, in: recordTree(entity))
        try tx.delete(PairKey.encode(target, row), in: tree(index))
        history?.update(entity, row: row, fields: [field])
        changes?.update(entity, row: row, field: field)
        sideEffects.append((entity, row, field))
    }

    /// `stored` with the fields of `fields` taken from `fresh` (both
    /// records of `entity`, fields ascending; a field absent from the
    /// record it is taken from is absent from the result).
    static func overlay(_ stored: [UInt8], _ fresh: [UInt8], fields: _FieldSet, _ entity: Schema.Entity, row: Int64)
        throws -> [UInt8]
    {
        try overlayChanges(stored, fresh, fields: fields, entity, row: row).bytes
    }

    /// ``overlay(_:_:fields:_:row:)``, and the fields whose values it
    /// changes, ascending, for the history: found in the same walk over
    /// both records. Only fields of `fields` can differ. Nil and absent are
    /// alike; a field one record lacks and the other holds with its
    /// declared default (an attribute a migration added without rewriting
    /// records) did not change; fields past the entity's properties or of
    /// a property not held in the record (left by one a migration removed)
    /// are not listed.
    static func overlayChanges(
        _ stored: [UInt8], _ fresh: [UInt8], fields: _FieldSet, _ entity: Schema.Entity, row: Int64
    ) throws -> (bytes: [UInt8], changed: [Int]) {
        try stored.withUnsafeBytes { a in
            try fresh.withUnsafeBytes { b in
                typealias Field = (field: Int, slot: _RecordReader.Slot, valueStart: Int)
                var readerA = try _RecordReader(borrowing: a, entity: entity, row: row)
                var readerB = try _RecordReader(borrowing: b, entity: entity, row: row)
                /// Calls `body` with each field number either record holds,
                /// ascending, and the field in each.
                func walk(_ body: (Int, Field?, Field?) throws -> Void) throws {
                    var walkA = _RecordReader.FieldWalk()
                    var walkB = _RecordReader.FieldWalk()
                    var x = try walkA.next(&readerA)
                    var y = try walkB.next(&readerB)
                    while x != nil || y != nil {
                        let field = min(x?.field ?? .max, y?.field ?? .max)
                        let inA = x?.field == field ? x : nil
                        let inB = y?.field == field ? y : nil
                        try body(field, inA, inB)
                        if inA != nil { x = try walkA.next(&readerA) }
                        if inB != nil { y = try walkB.next(&readerB) }
                    }
                }
                func same(_ x: Field, _ y: Field) -> Bool {
                    x.slot.wire == y.slot.wire && a[x.valueStart..<x.slot.end].elementsEqual(b[y.valueStart..<y.slot.end])
                }
                // First the changes, and whether the result differs from
                // `fresh` at all: usually not (no other save changed the
                // fields this one keeps), and then it is `fresh`.
                var changed: [Int] = []
                var differs = false
                try walk { field, x, y in
                    guard fields.contains(field) else {
                        switch (x, y) {
                        case (nil, nil): break
                        case (let x?, let y?): if !same(x, y) { differs = true }
                        default: differs = true
                        }
                        return
                    }
                    let old = x.flatMap { $0.slot.wire == RecordFormat.null ? nil : $0 }
                    let new = y.flatMap { $0.slot.wire == RecordFormat.null ? nil : $0 }
                    guard field < entity.properties.count, entity.holdsInRecord(field) else { return }
                    switch (old, new) {
                    case (nil, nil):
                        return
                    case (let x?, let y?):
                        if !same(x, y) { changed.append(field) }
                    case (let x?, nil):
                        if try !Self.isDefault(x.slot.wire, a[x.valueStart..<x.slot.end], field: field, entity, row: row) {
                            changed.append(field)
                        }
                    case (nil, let y?):
                        if try !Self.isDefault(y.slot.wire, b[y.valueStart..<y.slot.end], field: field, entity, row: row) {
                            changed.append(field)
                        }
                    }
                }
                guard differs else { return (fresh, changed) }
                var writer = _RecordWriter()
                try walk { field, x, y in
                    guard let take = fields.contains(field) ? y : x else { return }
                    let source = fields.contains(field) ? b : a
                    writer.appendCopy(
                        field: field, wire: take.slot.wire,
                        value: UnsafeRawBufferPointer(rebasing: source[take.valueStart..<take.slot.end]))
                }
                return (writer.bytes, changed)
            }
        }
    }

    /// True when `wire` and `value` are the declared default's encoding of
    /// `field`, which a record written before the attribute existed lacks.
    private static func isDefault(
        _ wire: UInt8, _ value: Slice<UnsafeRawBufferPointer>, field: Int, _ entity: Schema.Entity, row: Int64
    ) throws -> Bool {
        guard let fill = try _RecordReader.defaultEncoding(of: field, entity: entity, row: row) else { return false }
        return fill.wire == wire && fill.value.elementsEqual(value)
    }

    /// Throws ``SwiftDataError/modelValidationFailure`` for a record or
    /// external value larger than a tree's value can be
    /// (`Database.maxValueLength`), before the save writes it.
    private static func checkSize(_ count: Int, of what: String, _ entity: Schema.Entity, row: Int64) throws {
        guard count > Database.maxValueLength else { return }
        throw SwiftDataError(
            .modelValidationFailure,
            "\(entity.name)/p\(row): its \(what) takes \(count) bytes; a store holds at most "
                + "\(Database.maxValueLength) bytes in one")
    }

    // MARK: Key entries

    /// The row of another entity of `entity`'s hierarchy that holds unique
    /// key `key` of `group` (stored, or given to a model inserted earlier
    /// in this save), with that entity's name; nil when none does.
    private mutating func siblingOwner(_ group: KeyGroup, _ key: [UInt8], entity: Schema.Entity) throws
        -> (entity: String, row: Int64)?
    {
        guard let siblings = entity.uniqueSiblings[group.treeName] else { return nil }
        for sibling in siblings {
            let owner: Int64?
            if let row = pendingUnique[sibling]?[key] {
                owner = row
            } else if let handle = try tx.treeIfPresent(sibling), let bytes = try tx.get(key, in: handle) {
                owner = try KeyGroup.row(inUniqueValue: bytes)
            } else {
                owner = nil
            }
            if let owner { return ((entity.hierarchyEntity(ofRow: owner) ?? entity).name, owner) }
        }
        return nil
    }

    private mutating func removeKey(_ group: KeyGroup, _ values: [KeyEncoding.Element], row: Int64, deferred: Bool = false)
        throws
    {
        let key = group.key(values, row: row)
        let tree = try tree(group.treeName)
        switch group.kind {
        case .index:
            if deferred { deferDelete(key, in: group.treeName) } else { try tx.delete(key, in: tree) }
        case .unique:
            // Only this row's entry: another row may hold the key now.
            guard let owner = try tx.get(key, in: tree), try KeyGroup.row(inUniqueValue: owner) == row else { return }
            if deferred { deferDelete(key, in: group.treeName) } else { try tx.delete(key, in: tree) }
        }
    }

    private mutating func addKey(_ group: KeyGroup, _ values: [KeyEncoding.Element], row: Int64, entity: Schema.Entity)
        throws
    {
        let key = group.key(values, row: row)
        try group.checkLength(ofKey: key, row: row)
        let tree = try tree(group.treeName)
        switch group.kind {
        case .index:
            try tx.put(key, [], in: tree)
        case .unique:
            if let (sibling, other) = try siblingOwner(group, key, entity: entity), other != row {
                throw SwiftDataError(
                    .uniqueConstraintViolation,
                    "\(entity.name)/p\(row): \(group) = \(KeyEncoding.Element.describe(values)) already belongs to "
                        + "\(sibling)/p\(other) (a unique value is unique across the whole hierarchy)")
            }
            if let owner = try tx.get(key, in: tree) {
                let other = try KeyGroup.row(inUniqueValue: owner)
                if other != row {
                    throw SwiftDataError(
                        .uniqueConstraintViolation,
                        "\(entity.name)/p\(row): \(group) = \(KeyEncoding.Element.describe(values)) already belongs to "
                            + "\(entity.name)/p\(other)")
                }
                return
            }
            try tx.put(key, KeyGroup.uniqueValue(row), in: tree)
        }
    }
}
