import Foundation
import StrataEngine

// A save in two halves, so that a container with several stores can check
// every store's changes before any transaction begins and commit the
// stores one after the other (ModelContext+SeveralStores.swift): `checkSave()`
// (checks, delete rules), `writeSave(...)` (the writes, in an open
// transaction), then `commit(_:)` and `finish(_:)`, or `abandon(_:after:)`.

extension ModelContext {
    // MARK: - Save

    /// Writes every pending insert, change and delete in one write
    /// transaction. If it throws — a read-only store, a model type the
    /// container does not know, an I/O error — the store is unchanged and
    /// the context keeps every pending change.
    ///
    /// With several configurations, each store the changes reach gets its
    /// own transaction; they commit one after the other once all are
    /// written (see "Several stores" in "Differences from SwiftData").
    public func save() throws {
        guard parts.isEmpty else {
            try saveParts()
            return
        }
        if let pendingError { throw pendingError }
        autosaveDue = nil
        try mergeSavedChangesOrThrow()
        guard hasChanges else { return try participantWritesAlone() }
        try refuseIfReadOnly()
        SaveNotifications.post(ModelContext.willSave, of: self)
        // The write transaction begins before the delete rules run: they
        // then read the state the save writes over, which no other
        // process's save can change before the commit.
        let tx = try store.beginSave()
        var moved: [(model: any PersistentModel, row: Int64)] = []
        let deletedRows: [[DoomedRow]]
        do {
            moved = try moveCollidingInserts(in: tx)
            let checked = insertions
            // Merged above: a merge here could run observers that save,
            // and this thread holds the write transaction.
            guard let rows = try checkSave(merging: false) else {
                undoMoves(moved)
                store.abandonSave(tx, after: nil)
                return try participantWritesAlone()
            }
            // Models the relationships reached were inserted by the checks.
            if insertions != checked { moved += try moveCollidingInserts(in: tx) }
            deletedRows = rows
        } catch {
            undoMoves(moved)
            store.abandonSave(tx, after: error)
            throw error
        }
        let save = try writeSave(deletedRows: deletedRows, in: tx, mark: nil, moved: moved)
        do {
            try commit(save)
        } catch {
            abandon(save, after: error)
            throw error
        }
        postDidSave(finish(save))
    }

    /// Saves as ``save()`` does, with `participant` writing its own trees
    /// in the save's transaction (see ``SaveParticipant``). With nothing to
    /// save, the participant writes in a transaction of its own. Throws
    /// for a container of several stores, whose saves are several
    /// transactions.
    package func save(with participant: any SaveParticipant) throws {
        guard parts.isEmpty else {
            throw SwiftDataError(
                .loadIssueModelContainer, "a save participant joins the saves of a container with one store only")
        }
        self.participant = participant
        defer { self.participant = nil }
        try save()
    }

    /// A save that found nothing to write (none pending, or none left once
    /// other saves merged): its participant, if any, writes in a
    /// transaction of its own.
    private func participantWritesAlone() throws {
        guard let participant else { return }
        try store.write { tx in
            try participant.saveWillCommit(
                SaveParticipation(transaction: tx, inserted: [], updated: [], deleted: [], historyToken: nil))
        }
    }

    /// A save written to its open write transaction, not yet committed.
    struct PreparedSave {
        let tx: WriteTransaction
        let deletedRows: [[DoomedRow]]
        /// The ``SaveMark`` the save writes, when it writes one.
        let mark: (number: Int64, stores: [String])?
        var upserted: [(model: any PersistentModel, row: Int64)] = []
        var upsertedRows: Set<PersistentIdentifier> = []
        var savedChanges: SavedChanges.Builder?
        var sideEffects: [(entity: Schema.Entity, row: Int64, field: Int)] = []
        /// Inserts moved off a row another process saved meanwhile, with
        /// the row each had.
        var moved: [(model: any PersistentModel, row: Int64)] = []
        /// Other processes' saves this context had not merged yet, found in
        /// the history inside the save's transaction.
        var otherSaves: (changes: SavedChanges, through: Int64)?
        /// The save's own history token, when it wrote one.
        var historyToken: Int64?
    }

    /// What a save reports in its `didSave` notification.
    struct SavedIdentifiers {
        var inserted: [PersistentIdentifier] = []
        var updated: [PersistentIdentifier] = []
        var deleted: [PersistentIdentifier] = []

        mutating func append(_ other: SavedIdentifiers) {
            inserted += other.inserted
            updated += other.updated
            deleted += other.deleted
        }
    }

    /// Throws ``SwiftDataError/readOnlyStore`` when the store takes no
    /// saves.
    func refuseIfReadOnly() throws {
        guard store.allowsSave, container.allowsSave else {
            throw SwiftDataError(
                .readOnlyStore,
                "the configuration \(container.orderedConfigurations[0].name) does not allow saving (allowsSave: false)")
        }
    }

    /// The first half of a save, before any transaction: checks the
    /// pending changes, inserts what relationships now reach and runs the
    /// delete rules. Returns the rows the rules delete, or nil when there
    /// is nothing to save. On a throw the context keeps its changes.
    func checkSave(merging: Bool = true) throws -> [[DoomedRow]]? {
        if let pendingError { throw pendingError }
        if merging { try mergeSavedChangesOrThrow() }
        guard hasChanges else { return nil }
        try refuseIfReadOnly()
        // What delete rules change during the save is not the program's
        // change: it is not recorded for undo.
        link.recordsUndo = false
        defer { link.recordsUndo = true }
        // A change to a model another save deleted would re-create its row.
        // One pass over the changed models finds those too, and those
        // that may refer to a detached model.
        var reaching: [any PersistentModel] = []
        for entry in changed.entries {
            let (model, state) = (entry.model, entry.state)
            if state.deletedElsewhere {
                throw SwiftDataError(
                    .modelDeleted,
                    "\(model.persistentModelID) has unsaved changes, but another context's save deleted it; "
                        + "roll the changes back or delete the model in this context too")
            }
            if state.mayReferenceDetached { reaching.append(model) }
        }
        // Models that relationships of changed models now reach (only a
        // model that may refer to a detached one is looked at). Inserts
        // made for the inserted models may change or mark more models:
        // then the changed models are looked at again.
        let insertionsBefore = insertions
        for model in inserted { insertReached(from: model) }
        if insertions != insertionsBefore {
            reaching = changed.values.filter { $0._strataState.mayReferenceDetached }
        }
        for model in reaching { insertReached(from: model) }
        if let pendingError { throw pendingError }
        return try applyDeleteRules()
    }

    /// Inserts the detached models `model`'s relationships came to refer
    /// to since it was inserted or last saved.
    private func insertReached(from model: any PersistentModel) {
        guard model._strataState.mayReferenceDetached, let entity = container.schema.entity(forType: type(of: model))
        else { return }
        insertRelated(of: model, entity: entity)
    }

    /// The second half of a save before its commit: writes every pending
    /// change (and `mark`, when given, to the store's ``SaveMark``) to
    /// `tx`, a save transaction of the store, left open. On a throw the
    /// transaction is rolled back and the context keeps its changes.
    func writeSave(
        deletedRows: [[DoomedRow]], in tx: WriteTransaction, mark: (number: Int64, stores: [String])?,
        moved: [(model: any PersistentModel, row: Int64)]? = nil
    ) throws -> PreparedSave {
        link.recordsUndo = false
        defer { link.recordsUndo = true }
        var prepared = PreparedSave(tx: tx, deletedRows: deletedRows, mark: mark)
        var save = SaveTransaction(tx: tx, schema: container.schema, storeIdentifier: store.identifier)
        do {
            if store.recordsHistory { save.history = HistoryRecorder() }
            if container.mergeHub.hasObservers || container.mergeHub.hasOthers(than: inbox) {
                save.changes = SavedChanges.Builder(entityCount: container.schema.entities.count)
            }
            // Before the deletes: a row this save deletes is still taken.
            prepared.moved = try moved ?? moveCollidingInserts(in: tx)
            // In key order; the deletes are queued and carried out tree
            // by tree, in key order too.
            if !deleted.isEmpty || !deletedRows.isEmpty {
                let entities = container.schema.entities
                var rows = deletedRows.isEmpty ? Array(repeating: [], count: entities.count) : deletedRows
                for model in deleted.values {
                    if let entity = container.schema.entity(forType: type(of: model)) {
                        rows[entity.ordinal].append(DoomedRow(row: model._strataState.rowID))
                    }
                }
                for entity in entities where !rows[entity.ordinal].isEmpty {
                    rows[entity.ordinal].sort { $0.row < $1.row }
                    try save.deleteRows(entity, rows[entity.ordinal])
                }
            }
            try save.flushDeletes()
            // Changed models in row order: neighbouring rows share leaves,
            // so their writes find the pages the previous one used.
            let changedInOrder = changedInRowOrder()
            // A value a changed model gives up is free for the others and
            // for the inserts: an insert that takes it is no upsert into
            // the model that gave it up (as after a delete).
            if changedInOrder.count > 1 || (!changedInOrder.isEmpty && !inserted.isEmpty),
                container.schema.entities.contains(where: { !$0.uniqueGroups.isEmpty })
            {
                for changed in changedInOrder { try save.releaseUniqueKeys(of: changed.model, state: changed.state) }
            }
            var toResolve = inserted.count
            for model in inserted {
                toResolve -= 1
                try save.resolveUpsert(model, othersFollow: toResolve > 0)
            }
            prepared.upserted = save.remapped
            let moved = Set(save.remapped.map { ObjectIdentifier($0.model) })
            for model in inserted { try save.write(model, fresh: !moved.contains(ObjectIdentifier(model))) }
            for changed in changedInOrder { try save.write(changed.model, state: changed.state, fresh: false) }
            prepared.upsertedRows = save.upsertedRows
            // Read once: both the check for other processes' saves and
            // the history's next token need it.
            let lastToken = try HistoryLog.lastToken(tx)
            prepared.otherSaves = try store.changesOfOtherSaves(in: tx, last: lastToken)
            if let history = save.history, !history.isEmpty {
                let token = try HistoryLog.append(history, author: author, tx: tx, after: lastToken)
                prepared.historyToken = token
                store.wroteHistory(token)
            }
            if let mark { try SaveMark.write(mark.number, stores: mark.stores, in: tx) }
            if let participant {
                try participant.saveWillCommit(
                    SaveParticipation(
                        transaction: tx, inserted: inserted.map(\.persistentModelID),
                        updated: changed.values.map(\.persistentModelID),
                        deleted: deleted.values.map(\.persistentModelID), historyToken: prepared.historyToken))
            }
            try store.checkSave(tx)
            prepared.savedChanges = save.changes
            prepared.sideEffects = save.sideEffects
        } catch {
            prepared.upserted = save.remapped
            abandon(prepared, after: error)
            throw error
        }
        return prepared
    }

    /// The changed models with their states, in row order. Models changed
    /// in the order they were fetched are in row order already (the
    /// changed models keep the order they were changed in). Rows of one
    /// batch are usually near each other (a batch fetched or inserted
    /// together): when they span less than four times their number, they
    /// are placed by counting, in linear time. Otherwise rows and positions
    /// are sorted rather than the models themselves: moving an existential
    /// and its reference count per swap cost more than the comparisons.
    func changedInRowOrder() -> [ChangedModels.Entry] {
        let models = Array(changed.entries)
        let rows = models.map { $0.state.rowID }
        if zip(rows, rows.dropFirst()).allSatisfy({ $0 <= $1 }) { return models }
        guard models.count > 16, let low = rows.min(), let high = rows.max(), low > 0,
            high - low < 4 * Int64(models.count)
        else {
            var order = models.indices.map { (row: rows[$0], index: $0) }
            order.sort { $0.row < $1.row }
            return order.map { models[$0.index] }
        }
        // Entities number their rows apart, so one row may come twice.
        var starts = [Int](repeating: 0, count: Int(high - low) + 2)
        for row in rows { starts[Int(row - low) + 1] += 1 }
        for i in 1..<starts.count { starts[i] += starts[i - 1] }
        var order = [Int](repeating: 0, count: models.count)
        for (position, row) in rows.enumerated() {
            let slot = Int(row - low)
            order[starts[slot]] = position
            starts[slot] += 1
        }
        return order.map { models[$0] }
    }

    /// Commits a prepared save's transaction.
    func commit(_ save: PreparedSave) throws {
        try store.target.commit(save.tx)
    }

    /// Drops a prepared save that will not commit: the store is unchanged
    /// and the context keeps its changes.
    func abandon(_ save: PreparedSave, after error: any Error) {
        store.abandonSave(save.tx, after: error)
        if let token = save.historyToken { store.finishedHistory(token) }
        // Nothing was written: give upserted models their own rows back.
        for (model, row) in save.upserted { model._strataState.rowID = row }
        undoMoves(save.moved)
    }

    /// Gives models moved by ``moveCollidingInserts(in:)`` their rows back.
    func undoMoves(_ moved: [(model: any PersistentModel, row: Int64)]) {
        for (model, row) in moved.reversed() {
            guard let entity = container.schema.entity(forType: type(of: model)) else { continue }
            registry[entity.ordinal][model._strataState.rowID] = nil
            model._strataState.rowID = row
            registry[entity.ordinal][row] = model
        }
    }

    /// Gives a new row to every inserted model whose row another process's
    /// save took since the insert: each process allocates row ids from its
    /// own counter, so two of them can hand out the same one. Checked
    /// inside the save's write transaction, which no other process's save
    /// can interleave with, before the delete rules run (a row another
    /// process saved must not be taken for this context's insert of the
    /// same number); costs one lookup of the last row per entity
    /// with inserts, and one per insert only when rows were taken. As in
    /// SwiftData, an inserted model's identifier is final once it is saved.
    func moveCollidingInserts(in tx: WriteTransaction) throws -> [(model: any PersistentModel, row: Int64)] {
        var moved: [(model: any PersistentModel, row: Int64)] = []
        guard !inserted.isEmpty else { return moved }
        // Per entity ordinal; inserts of one type usually come in runs, so
        // the entity of the run is looked up once.
        var lowest = [Int64?](repeating: nil, count: container.schema.entities.count)
        var run: (type: ObjectIdentifier, ordinal: Int)?
        for model in inserted {
            let type = ObjectIdentifier(Swift.type(of: model))
            let ordinal: Int
            if let run, run.type == type {
                ordinal = run.ordinal
            } else {
                guard let entity = container.schema.entity(forType: Swift.type(of: model)) else { continue }
                ordinal = entity.ordinal
                run = (type, ordinal)
            }
            let row = model._strataState.rowID
            lowest[ordinal] = min(lowest[ordinal] ?? row, row)
        }
        for (ordinal, low) in lowest.enumerated() {
            guard let low else { continue }
            let entity = container.schema.entities[ordinal]
            guard let tree = try tx.treeIfPresent(entity.recordTree) else { continue }
            let cursor = try tx.cursor(tree)
            guard try cursor.last() else { continue }
            // A last key that is not a row id is damage, not an empty
            // tree: skipping the check would let an insert overwrite a row.
            let last = try RowKey.decode(try cursor.key())
            guard last >= low else { continue }
            store.raiseRowFloor(entity, to: last)
            for model in inserted where model._strataState.rowID <= last {
                guard container.schema.entity(forType: type(of: model))?.ordinal == ordinal else { continue }
                let old = model._strataState.rowID
                guard try tx.get(RowKey.encode(old), in: tree) != nil else { continue }
                let row = store.allocateRow(entity)
                registry[ordinal][old] = nil
                model._strataState.rowID = row
                registry[ordinal][row] = model
                moved.append((model, old))
            }
        }
        return moved
    }

    /// Updates the context after a prepared save committed: the saved
    /// models are saved and the other contexts told. Returns what the
    /// `didSave` notification reports.
    @discardableResult func finish(_ save: PreparedSave) -> SavedIdentifiers {
        link.recordsUndo = false
        defer { link.recordsUndo = true }
        let deletedRows = save.deletedRows
        // Upserted models now stand for the row they matched; an instance
        // registered for that row before is refreshed with the saved values.
        for (model, allocated) in save.upserted {
            guard let entity = container.schema.entity(forType: type(of: model)) else { continue }
            let row = model._strataState.rowID
            registry[entity.ordinal][allocated] = nil
            // The instance before stays usable (the app may hold it): the
            // merges of the row reach it too.
            if let previous = registered(entity, row: row), previous !== model {
                reload(previous)
                noteDisplaced(previous, entity: entity, row: row)
            }
            registry[entity.ordinal][row] = model
        }
        // Inserts that took a stored row are updates; inserts that took
        // another insert's row are reported once. Without upserts neither
        // can happen, and no set of identifiers is needed.
        var insertedIDs = inserted.map(\.persistentModelID)
        if !save.upserted.isEmpty {
            var reported: Set<PersistentIdentifier> = save.upsertedRows
            insertedIDs = insertedIDs.filter { reported.insert($0).inserted }
        }
        // The changed models' identifiers are taken in the pass below
        // that resets them.
        var updatedIDs: [PersistentIdentifier] = []
        updatedIDs.reserveCapacity(changed.count + save.upsertedRows.count)
        // Built in place: a cascade can name a hundred thousand rows, and
        // joining per-entity arrays copied each identifier twice more.
        var deletedIDs: [PersistentIdentifier] = []
        deletedIDs.reserveCapacity(deleted.count + deletedRows.reduce(0) { $0 + $1.count })
        for model in deleted.values { deletedIDs.append(model.persistentModelID) }
        for (entity, rows) in zip(container.schema.entities, deletedRows) {
            let name = entity.name
            for row in rows {
                deletedIDs.append(PersistentIdentifier(storeIdentifier: store.identifier, entityName: name, rowID: row.row))
            }
        }
        // What the other contexts and live observers get (published last,
        // once this context is done: an observer's handler may call it).
        var ownChanges: SavedChanges?
        if var savedChanges = save.savedChanges {
            if container.mergeHub.hasObservers {
                for model in inserted {
                    if let entity = container.schema.entity(forType: type(of: model)) { savedChanges.insert(entity) }
                }
            }
            if !savedChanges.isEmpty { ownChanges = savedChanges.build() }
        }
        for model in inserted { model._strataState.status = .saved }
        for entry in changed.entries {
            let state = entry.state
            updatedIDs.append(PersistentIdentifier(state: state, of: type(of: entry.model)))
            // Changed to-manys read their trees again: what other saves
            // did to them shows too.
            if !state.toManyBaselines.isEmpty {
                if let entity = container.schema.entity(forType: type(of: entry.model)) {
                    Self.pointToManyAtTrees(state, entity: entity, row: state.rowID, only: state.changedFields)
                }
                state.toManyBaselines = [:]
            }
            state.isChanged = false
            state.changedFields = _FieldSet()
            // Written: a list not loaded reads it all from its tree.
            if !state.toManyDeltas.isEmpty { state.toManyDeltas = [:] }
        }
        updatedIDs += save.upsertedRows
        // As in SwiftData, a model whose delete is saved leaves the
        // context: `modelContext` is nil and `isDeleted` false again.
        var gone = Array(deleted.values)
        if !displaced.isEmpty {
            // The other instances of a deleted row (an upsert displaced
            // one) leave the context with it.
            for model in deleted.values {
                guard let entity = container.schema.entity(forType: type(of: model)) else { continue }
                let row = model._strataState.rowID
                gone += forgetDisplaced(entity, row: row).filter { $0 !== model }
                if let other = registry[entity.ordinal][row], other !== model { gone.append(other) }
            }
            for (entity, rows) in zip(container.schema.entities, deletedRows) {
                for row in rows { gone += forgetDisplaced(entity, row: row.row) }
            }
        }
        for model in gone {
            unregister(model, state: model._strataState)
            model._strataState.formerStoreIdentifier = link.storeIdentifier
            model._strataState.link = nil
            model._strataState.status = .detached
            model._strataState.inverseInStep = _FieldSet()
        }
        // A context that saves batches of changes keeps the table's room
        // for the next batch (up to 16,384 slots, under a megabyte).
        changed.removeAll(keepingCapacity: changed.capacity <= 16_384)
        inserted = []
        deleted = [:]
        clearMarkedRows()
        if !save.sideEffects.isEmpty { refreshOwnModels(save.sideEffects) }
        // The other contexts merge what this save wrote; every context,
        // this one included, merges other processes' saves it found.
        if let ownChanges {
            container.mergeHub.publish(ownChanges, from: inbox)
        } else if save.savedChanges == nil, container.mergeHub.hasObservers {
            // An observer registered while the save was written: what the
            // save changed was not gathered, so every observer re-runs.
            container.mergeHub.markAllObservers()
        }
        if let other = save.otherSaves { container.mergeHub.publish(other.changes, from: nil) }
        if let token = save.historyToken ?? save.otherSaves?.through { store.sawHistory(through: token) }
        if let token = save.historyToken { store.finishedHistory(token) }
        // Nothing committed between the save's begin and its commit that
        // it did not merge: the next entry point skips the history read.
        if let stamp = save.tx.committedStamp { store.sawCommit(stamp) }
        return SavedIdentifiers(inserted: insertedIDs, updated: updatedIDs, deleted: deletedIDs)
    }

    /// Posts `didSave` for this context with what a save wrote.
    func postDidSave(_ saved: SavedIdentifiers) {
        // The keys' table is built once: a dictionary literal hashes and
        // compares its three `AnyHashable` keys on every save (about 12,000
        // instructions, 7% of a one-object save), `mapValues` copies the
        // table and fills in the values.
        let userInfo = Self.didSaveKeys.mapValues { slot -> Any in
            switch slot {
            case 0: saved.inserted
            case 1: saved.updated
            default: saved.deleted
            }
        }
        SaveNotifications.post(ModelContext.didSave, of: self, userInfo: userInfo)
    }

    /// The `didSave` notification's keys, each with the slot of its list.
    /// Never mutated (`AnyHashable` is not `Sendable`, but these wrap
    /// `String`s, and copies share the storage by atomic reference count).
    nonisolated(unsafe) private static let didSaveKeys: [AnyHashable: Int] = [
        NotificationKey.insertedIdentifiers.rawValue: 0,
        NotificationKey.updatedIdentifiers.rawValue: 1,
        NotificationKey.deletedIdentifiers.rawValue: 2,
    ]
}
