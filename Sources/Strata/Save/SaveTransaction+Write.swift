import Foundation

// Writing one inserted or changed model: its record, key entries,
// external data and relationship entries, and what the history and the
// merge are told.

extension SaveTransaction {
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
        try write(model, state: model._strataState, fresh: fresh)
    }

    /// ``write(_:fresh:)`` with the model's state at hand.
    mutating func write(_ model: any PersistentModel, state: _ModelState, fresh: Bool) throws {
        let entity = try entity(of: model)
        let row = state.rowID
        // The fields this save writes: nil for all of them.
        let only: _FieldSet? = state.status == .saved && !fresh ? state.changedFields : nil
        if let only, !only.intersects(entity.patchBlockingFields),
            !state.mayHaveUnloaded || !only.intersects(state.unloaded)
        {
            return try patchStored(model, entity, row: row, only: only)
        }
        // Only to-manys changed (a parent whose list gained or lost a
        // member): the record and its keys stay as stored, and are not
        // read, only looked for.
        let listsOnly = only.map { Self.holdsNoRecordField($0, entity) } ?? false
        // Encoded once for the lookup and the put.
        let key = rowKey(row)
        let old = fresh || listsOnly ? nil : try storedRecord(key, in: recordTree(entity))
        let isStored = try old != nil || listsOnly && tx.contains(key, in: recordTree(entity))
        if only != nil && !isStored {
            throw Self.rowDeleted(model)
        }
        var written = WrittenRecord(bytes: old ?? [], changedFields: listsOnly ? _FieldSet() : nil)
        if !listsOnly { written = try writeRecord(of: model, entity, row: row, old: old, only: only) }
        for (field, storage) in entity.relationshipStorage {
            let target = RelationshipWrite(
                model: model, entity: entity, row: row, old: old, bytes: written.bytes, only: only, listsOnly: listsOnly,
                fresh: fresh)
            if try writeRelationship(field, storage, target) { written.changedOutside.append(field) }
        }
        if !listsOnly { try tx.put(key, written.bytes, in: recordTree(entity)) }
        if history != nil {
            if isStored {
                // An upsert wrote every field: all of them are compared.
                var fields =
                    try written.changedFields
                    ?? Self.overlayChanges(
                        old ?? [], written.bytes, fields: _FieldSet(all: entity.properties.count), entity, row: row
                    )
                    .changed
                for field in written.changedOutside { fields.insert(field) }
                history?.update(entity, row: row, fields: fields)
            } else {
                history?.insert(entity, row: row)
            }
        }
        if isStored, changes != nil {
            // An upsert replaced every field; a change wrote its own.
            changes?.update(entity, row: row, fields: only ?? _FieldSet(all: entity.properties.count))
        }
        // The buffers go back for the next model (see `partialRecord`).
        if let old { storedRecordBuffer = old }
        if written.patched { patchedRecord = written.bytes }
    }

    /// ``write(_:fresh:)`` for a change to attributes alone, none of them
    /// keyed or in external storage: the changed fields are encoded and
    /// patched into the stored record as the engine finds it, with one
    /// search for the read and the write (``WriteTransaction/update(_:in:_:)``),
    /// and nothing else is written. What the general path would do with the
    /// other fields is nothing: their keys, external values and
    /// relationship entries stay as stored.
    private mutating func patchStored(
        _ model: any PersistentModel, _ entity: Schema.Entity, row: Int64, only: _FieldSet
    ) throws {
        // The buffers are reused from model to model (see `partialRecord`).
        var merged: [UInt8] = []
        swap(&merged, &patchedRecord)
        var changed = _FieldSet()
        let key = rowKey(row)
        let tree = try recordTree(entity)
        let found = try tx.update(key, in: tree) { stored in
            var writer = _RecordWriter(reusing: &partialRecord)
            defer { partialRecord = writer.bytes }
            // No `externalTrees`: fields in external storage block this
            // path, so none is written (a copy of the table and its release
            // cost about 110 instructions a model).
            writer.only = only
            model._strataWrite(to: &writer)
            if let failure = Self.firstFailure(writer.failures, entity) { throw failure }
            changed = try Self.patch(stored, with: writer.bytes, fields: only, entity, row: row, into: &merged)
            try Self.checkSize(merged.count, of: "record", entity, row: row)
            return merged
        }
        patchedRecord = merged
        guard found else {
            throw Self.rowDeleted(model)
        }
        history?.update(entity, row: row, fields: changed)
        changes?.update(entity, row: row, fields: only)
    }

    /// The error of a save that changed `model` after another save deleted
    /// its row.
    static func rowDeleted(_ model: any PersistentModel) -> SwiftDataError {
        SwiftDataError(
            .modelDeleted,
            "\(model.persistentModelID) has unsaved changes, but its row was deleted by another save; "
                + "roll the changes back or delete the model")
    }

    /// The failure of the lowest field a record writer could not encode
    /// (its `failures`), as the save's error; nil when every field encoded.
    static func firstFailure(_ failures: [Int: SwiftDataError], _ entity: Schema.Entity) -> SwiftDataError? {
        failures.min(by: { $0.key < $1.key }).map { field, failure in
            SwiftDataError(failure.code, "\(entity.name).\(entity.properties[field].name): \(failure.message)")
        }
    }

    /// The stored record of `key` in `tree`, or nil, read into the buffer
    /// the last model's write handed back.
    private mutating func storedRecord(_ key: [UInt8], in tree: Tree) throws -> [UInt8]? {
        var buffer = takeStorage(of: &storedRecordBuffer)
        return try tx.get(key, in: tree, into: &buffer) ? buffer : nil
    }

    /// Releases the stored keys of the unique constraints whose fields
    /// `model`'s context changed, before any model is written (see
    /// ``SaveTransaction``): its write adds them again.
    mutating func releaseUniqueKeys(of model: any PersistentModel, state: _ModelState) throws {
        let entity = try entity(of: model)
        guard state.status == .saved, !entity.uniqueGroups.isEmpty else { return }
        let only = state.changedFields
        guard entity.uniqueGroups.contains(where: { only.intersects($0.fields) }) else { return }
        let groups = entity.uniqueGroups.filter { only.intersects($0.fields) }
        guard let old = try record(entity, row: state.rowID) else { return }
        let stored = try decode(old, entity, row: state.rowID)
        for group in groups {
            try removeKey(group, group.values(of: stored), row: state.rowID)
            releasedUnique[group.treeName, default: []].insert(state.rowID)
        }
    }

    /// What ``writeRecord(of:_:row:old:only:)`` made of a model.
    struct WrittenRecord {
        /// The record to store.
        var bytes: [UInt8]
        /// The fields whose stored values change, when the overlay found
        /// them (nil: compare the whole record).
        var changedFields: _FieldSet?
        /// Changed fields the record does not hold (external data, join
        /// pairs), for the history.
        var changedOutside: [Int] = []
        /// True when `bytes` is ``SaveTransaction/patchedRecord``'s buffer,
        /// to be handed back once written.
        var patched = false
    }

    /// Encodes `model`'s record (overlaid on `old` for a change of the
    /// fields in `only`), updates the key entries whose values change and
    /// writes its `.externalStorage` values.
    mutating func writeRecord(
        of model: any PersistentModel, _ entity: Schema.Entity, row: Int64, old: [UInt8]?, only: _FieldSet?
    ) throws -> WrittenRecord {
        let state = model._strataState
        var changedFields: _FieldSet?
        var changedOutside: [Int] = []
        var patched = false
        // A change to none of a group's fields leaves its key as stored
        // (the fields it did not change keep their stored values): only
        // the groups it touches are compared, and a change that touches
        // none decodes no model.
        let groups =
            only.map { changed in
                // Asked first: most changes touch no group, and a `filter`
                // that keeps nothing still cost 87 instructions a changed
                // ticket more (callgrind, `--profile-updates`).
                entity.keyGroups.contains { changed.intersects($0.fields) }
                    ? entity.keyGroups.filter { changed.intersects($0.fields) } : []
            } ?? entity.keyGroups
        // A change that touches no key writes only its own fields, laid
        // over the stored record: the others are neither encoded nor
        // compared. One that touches a key encodes the whole model, whose
        // values give the key unless another save changed the row.
        let partial = only != nil && old != nil && groups.isEmpty
        // Attributes a partial fetch left out hold placeholders. A record
        // or a key encoded whole needs their real values: they are loaded
        // from the stored record first. A patch leaves them as stored and
        // the model as it is (they load when read), unless it changes one
        // of them (a setter loads them all first, so it does not).
        if state.mayHaveUnloaded, let old, !partial || only.map(state.unloaded.intersects) == true {
            try state.loadUnloaded(model, entity: entity, from: old)
        }
        var writer = partial ? _RecordWriter(reusing: &partialRecord) : _RecordWriter()
        writer.externalTrees = entity.externalTrees
        if partial { writer.only = only }
        model._strataWrite(to: &writer)
        if let failure = Self.firstFailure(writer.failures, entity) { throw failure }
        var bytes = writer.bytes
        // Key values come from the model, unless the stored record holds
        // newer values of fields this context did not change.
        var keySource: any PersistentModel = model
        // The fields whose stored values change, for the history, when
        // the overlay finds them.
        if let only, let old {
            if partial {
                var merged = takeStorage(of: &patchedRecord)
                changedFields = try Self.patch(old, with: bytes, fields: only, entity, row: row, into: &merged)
                bytes = merged
                partialRecord = writer.bytes
                patched = true
            } else {
                let (merged, changed) = try Self.overlayChanges(old, bytes, fields: only, entity, row: row)
                changedFields = changed
                if merged != bytes {
                    bytes = merged
                    if !groups.isEmpty { keySource = try decode(merged, entity, row: row) }
                }
            }
        }
        try Self.checkSize(bytes.count, of: "record", entity, row: row)
        if !groups.isEmpty {
            let stored = try old.map { try decode($0, entity, row: row) }
            for group in groups {
                let values = group.values(of: keySource)
                if let stored {
                    let previous = group.values(of: stored)
                    if previous == values && releasedUnique[group.treeName]?.contains(row) != true { continue }
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
        return WrittenRecord(bytes: bytes, changedFields: changedFields, changedOutside: changedOutside, patched: patched)
    }

    /// A model whose relationships ``writeRelationship(_:_:_:)`` writes.
    struct RelationshipWrite {
        let model: any PersistentModel
        let entity: Schema.Entity
        let row: Int64
        /// The stored record, when it was read.
        let old: [UInt8]?
        /// The record as written.
        let bytes: [UInt8]
        let only: _FieldSet?
        let listsOnly: Bool
        let fresh: Bool
    }

    /// Writes the index, join and mirror entries of relationship `field`;
    /// true when join pairs changed (a change the record does not show).
    mutating func writeRelationship(
        _ field: Int, _ storage: RelationshipStorage, _ write: RelationshipWrite
    ) throws -> Bool {
        let (model, entity, row, old, bytes) = (write.model, write.entity, write.row, write.old, write.bytes)
        let (only, listsOnly, fresh) = (write.only, write.listsOnly, write.fresh)
        let state = model._strataState
        switch storage {
        case .toOne(let index):
            guard !listsOnly else { return false }
            let before = try old.flatMap { try toOneRow($0, field: field, entity, row: row) }
            let after = try toOneRow(bytes, field: field, entity, row: row)
            guard before != after else { return false }
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
                return changed
            }
            // A to-many not loaded since the model was read, or not
            // changed by this context, is left as stored.
            guard state.faults[field] == nil, only?.contains(field) != false else { return false }
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
            return stored != wanted
        case .viaInverse(let index):
            // Written by the other side's to-ones, but an upsert
            // replaces the stored row's to-many: the rows it held that
            // the inserted model does not let go.
            guard only == nil, old != nil, let side = entity.inverseSides[field],
                let other = schema.entity(forType: side.type)
            else { return false }
            let wanted = Set(
                (InverseUpkeep.value(of: model, field: field) as? [any PersistentModel] ?? []).map(\._strataState.rowID))
            for target in try pairs(index, of: row) where !wanted.contains(target) {
                try clearToOne(side.field, of: target, other, ifAt: row)
            }
        case .mirror:
            break  // written by the other side
        }
        return false
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
    mutating func letGo(of row: Int64, entity: Schema.Entity, field: Int, target: Int64) throws {
        guard let side = entity.inverseSides[field], side.isToOne, let other = schema.entity(forType: side.type) else {
            return
        }
        try clearToOne(side.field, of: target, other, ifAt: row)
    }

    /// Sets to-one `field` of `row` (of `entity`) to nil in storage when it
    /// points at `target`.
    mutating func clearToOne(_ field: Int, of row: Int64, _ entity: Schema.Entity, ifAt target: Int64) throws {
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
        history?.update(entity, row: row, fields: _FieldSet([field]))
        changes?.update(entity, row: row, field: field)
        sideEffects.append((entity, row, field))
    }

    // MARK: Key entries

    /// The row of another entity of `entity`'s hierarchy that holds unique
    /// key `key` of `group` (stored, or given to a model inserted earlier
    /// in this save), with that entity's name; nil when none does.
    mutating func siblingOwner(_ group: KeyGroup, _ key: [UInt8], entity: Schema.Entity) throws
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

    mutating func removeKey(_ group: KeyGroup, _ values: [KeyEncoding.Element], row: Int64, deferred: Bool = false)
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

    mutating func addKey(_ group: KeyGroup, _ values: [KeyEncoding.Element], row: Int64, entity: Schema.Entity)
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
