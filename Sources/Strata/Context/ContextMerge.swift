import Foundation
import StrataEngine
import Synchronization

/// What one save changed in stored rows that other contexts may hold
/// models for: the rows it updated (with the fields it wrote) and the rows
/// it deleted, by entity ordinal. Immutable once published; every other
/// context of the container gets the same instance.
///
/// Inserts are not listed: a new row has no model in another context, and
/// fetches there find it in the store. Upserts (an insert that took a
/// stored row) are updates of every field. A to-many relationship stored
/// on the other side (a one-to-many's reverse index, a many-to-many's join
/// trees) is listed as an update of that field of each row whose set of
/// targets the save changed.
final class SavedChanges: Sendable {
    struct Update: Sendable {
        let row: Int64
        let fields: _FieldSet
    }

    /// Updated rows, by entity ordinal, in the order written.
    let updates: [[Update]]
    /// Deleted rows, by entity ordinal.
    let deletes: [[Int64]]
    /// Fields to refresh on every registered model, by entity ordinal:
    /// to-many relationships whose other side another process's save
    /// changed (see ``Store/catchUpWithOtherProcesses()``). Empty when none.
    let everywhere: [_FieldSet]
    /// Rows another process's saves inserted, by entity ordinal: an insert
    /// of this process given one of those numbers moves to a new row (see
    /// ``Store/catchUpWithOtherProcesses()``). Empty for this process's
    /// saves.
    let inserts: [[Int64]]
    /// Entities this process's save inserted rows of, by ordinal: for
    /// live observers only (contexts hold no model of a new row).
    let insertedEntities: Set<Int>

    init(
        updates: [[Update]], deletes: [[Int64]], everywhere: [_FieldSet] = [], inserts: [[Int64]] = [],
        insertedEntities: Set<Int> = []
    ) {
        self.updates = updates
        self.deletes = deletes
        self.everywhere = everywhere
        self.inserts = inserts
        self.insertedEntities = insertedEntities
    }

    /// True when contexts have something to merge: rows updated or
    /// deleted, or inserted by another process.
    var concernsContexts: Bool {
        updates.contains { !$0.isEmpty } || deletes.contains { !$0.isEmpty } || everywhere.contains { !$0.isEmpty }
            || inserts.contains { !$0.isEmpty }
    }

    /// Gathers a save's changes inside its write transaction.
    struct Builder {
        private(set) var updates: [[Update]]
        private(set) var deletes: [[Int64]]
        private(set) var isEmpty = true
        private(set) var insertedEntities: Set<Int> = []

        init(entityCount: Int) {
            updates = Array(repeating: [], count: entityCount)
            deletes = Array(repeating: [], count: entityCount)
        }

        mutating func update(_ declared: Schema.Entity, row: Int64, fields: _FieldSet) {
            guard row > 0, !fields.isEmpty else { return }
            // A row reached through a relationship to a base class may be
            // a subclass's, registered under its own entity.
            let entity = declared.concreteOrSelf(row)
            updates[entity.ordinal].append(Update(row: row, fields: fields))
            isEmpty = false
        }

        mutating func update(_ entity: Schema.Entity, row: Int64, field: Int) {
            var fields = _FieldSet()
            fields.insert(field)
            update(entity, row: row, fields: fields)
        }

        mutating func delete(_ declared: Schema.Entity, rows: some Sequence<Int64>) {
            guard declared.hasSubentities else {
                deletes[declared.ordinal].append(contentsOf: rows)
                if !deletes[declared.ordinal].isEmpty { isEmpty = false }
                return
            }
            for row in rows {
                deletes[declared.concreteOrSelf(row).ordinal].append(row)
                isEmpty = false
            }
        }

        /// The save inserted a row of `entity` (the model's own entity).
        mutating func insert(_ entity: Schema.Entity) {
            insertedEntities.insert(entity.ordinal)
            isEmpty = false
        }

        func build(everywhere: [_FieldSet] = [], inserts: [[Int64]] = []) -> SavedChanges {
            SavedChanges(
                updates: updates, deletes: deletes, everywhere: everywhere, inserts: inserts,
                insertedEntities: insertedEntities)
        }
    }
}

/// A context's mailbox for other contexts' saves: filled by the saving
/// thread, emptied by the context's own thread (``ModelContext``'s
/// entry points and `processPendingChanges()`), so a context is only ever
/// touched from its own thread.
final class ContextInbox: Sendable {
    /// Saves not merged yet, oldest first. Guarded by its mutex.
    private let pending = Locked<[SavedChanges]>([])
    /// True while ``pending`` is not empty: the context's entry points test
    /// it without taking the lock.
    private let hasPending = Atomic<Bool>(false)
    /// False until the context may hold a model (it sets this before its
    /// first fetch, load or insert): a save's changes, published after its
    /// commit, skip contexts that hold none. It is set before the context's
    /// read transaction starts, and both that start and a commit take the
    /// engine's state lock, so a save that committed after the snapshot
    /// began sees it set when it publishes.
    let holdsModels = Atomic<Bool>(false)
    /// Set for the container's `mainContext`: an arriving save also
    /// schedules a merge on the main queue, so observers of its models see
    /// other contexts' saves without another call into the context.
    let mergesOnMainQueue = Atomic<Bool>(false)
    /// The context, for the main-queue merge. Weak, so the inbox (held by
    /// the hub) does not keep a context alive; written once, before the
    /// inbox is registered with the hub.
    nonisolated(unsafe) weak var context: ModelContext?

    var isEmpty: Bool { !hasPending.load(ordering: .acquiring) }

    func deliver(_ changes: SavedChanges) {
        let first = pending.withLock { list in
            list.append(changes)
            hasPending.store(true, ordering: .releasing)
            return list.count == 1
        }
        if first { scheduleMainQueueMerge() }
    }

    /// For `mainContext`: merges on the main queue soon.
    private func scheduleMainQueueMerge() {
        guard mergesOnMainQueue.load(ordering: .relaxed) else { return }
        nonisolated(unsafe) weak let context = self.context
        DispatchQueue.main.async { context?.mergeSavedChanges() }
    }

    /// Takes every pending save, oldest first.
    func take() -> [SavedChanges] {
        pending.withLock { list in
            let taken = list
            list = []
            hasPending.store(false, ordering: .releasing)
            return taken
        }
    }

    /// Puts back saves that could not be merged (a read failed), ahead of
    /// any that arrived since.
    func putBack(_ changes: [SavedChanges]) {
        guard !changes.isEmpty else { return }
        pending.withLock { list in
            list = changes + list
            hasPending.store(true, ordering: .releasing)
        }
        scheduleMainQueueMerge()
    }
}

/// The container's contexts, so that each save reaches the others, and
/// its live observers (see LiveObserver.swift).
final class MergeHub: Sendable {
    private struct Entry {
        weak var inbox: ContextInbox?
    }

    private struct ObserverEntry {
        weak var observer: LiveObserver?
    }

    /// Every live context's inbox. Guarded by its mutex.
    private let inboxes = Locked<[Entry]>([])
    /// Live observers by the entity ordinals they read. Guarded by its
    /// mutex.
    private let observers = Locked<[Int: [ObserverEntry]]>([:])
    /// How many live observers exist: a save gathers its changes for
    /// them, and other processes are watched, only while this is above 0.
    let observerCount = Atomic<Int>(0)
    /// Called when the first observer registers: starts the watcher of
    /// other processes' commits. Set once by the store.
    nonisolated(unsafe) var firstObserverRegistered: (@Sendable () -> Void)?

    var hasObservers: Bool { observerCount.load(ordering: .acquiring) > 0 }

    func register(_ observer: LiveObserver) {
        observers.withLock { lists in
            for ordinal in observer.dependencies.entities {
                lists[ordinal, default: []].removeAll { $0.observer == nil }
                lists[ordinal, default: []].append(ObserverEntry(observer: observer))
            }
        }
        if observerCount.wrappingAdd(1, ordering: .acquiringAndReleasing).oldValue == 0 { firstObserverRegistered?() }
    }

    /// An observer went away (its weak entries are dropped lazily).
    func unregisterObserver() {
        observerCount.subtract(1, ordering: .acquiringAndReleasing)
    }

    /// Ends the observers made through `container` (every observer when
    /// nil): it closed.
    func endObservers(of container: ObjectIdentifier?) {
        let ended = observers.withLock { lists in
            var found: [ObjectIdentifier: LiveObserver] = [:]
            for list in lists.values {
                for entry in list {
                    guard let observer = entry.observer, container == nil || observer.container == container else {
                        continue
                    }
                    found[ObjectIdentifier(observer)] = observer
                }
            }
            return Array(found.values)
        }
        for observer in ended { observer.end() }
    }

    /// Marks every observer changed: a commit whose changes are unknown.
    func markAllObservers() {
        let all = observers.withLock { lists in
            Dictionary(
                lists.values.joined().compactMap { $0.observer.map { (ObjectIdentifier($0), $0) } },
                uniquingKeysWith: { first, _ in first }
            ).values
        }
        for observer in all { observer.markChanged() }
    }

    /// Marks the observers `changes` touch. Costs nothing per observer of
    /// an entity the changes do not touch.
    private func notifyObservers(_ changes: SavedChanges) {
        guard hasObservers else { return }
        let touched = changes.touchedEntities
        let affected = observers.withLock { lists -> [LiveObserver] in
            var found: [ObjectIdentifier: LiveObserver] = [:]
            for ordinal in touched {
                guard let list = lists[ordinal] else { continue }
                for entry in list {
                    guard let observer = entry.observer, found[ObjectIdentifier(observer)] == nil,
                        observer.dependencies.isAffected(by: changes, ordinal: ordinal)
                    else { continue }
                    found[ObjectIdentifier(observer)] = observer
                }
            }
            return Array(found.values)
        }
        for observer in affected { observer.markChanged() }
    }

    func register(_ inbox: ContextInbox) {
        inboxes.withLock { list in
            list.removeAll { $0.inbox == nil }
            list.append(Entry(inbox: inbox))
        }
    }

    /// True when a context other than `inbox`'s is alive (a save then
    /// gathers its changes; whether one holds models is decided when they
    /// are published, after the commit).
    func hasOthers(than inbox: ContextInbox) -> Bool {
        inboxes.withLock { list in list.contains { $0.inbox != nil && $0.inbox !== inbox } }
    }

    /// Hands `changes` to every context but the one that saved them (every
    /// context when `inbox` is nil: a change made by the container).
    func publish(_ changes: SavedChanges, from inbox: ContextInbox?) {
        // Contexts first: an observer woken next merges them as it re-runs.
        defer { notifyObservers(changes) }
        guard changes.concernsContexts else { return }
        let targets = inboxes.withLock { list in
            list.removeAll { $0.inbox == nil }
            return list.compactMap { entry -> ContextInbox? in
                guard let target = entry.inbox, target !== inbox,
                    target.holdsModels.load(ordering: .sequentiallyConsistent)
                else { return nil }
                return target
            }
        }
        for target in targets { target.deliver(changes) }
    }
}

extension ModelContext {
    /// Merges the saves other contexts made since the last merge into this
    /// context's registered models (see the "Contexts and concurrency"
    /// article):
    /// - a model whose row another save deleted leaves the identity map
    ///   and is marked deleted (`isDeleted`); a pending change to it makes
    ///   the next save throw ``SwiftDataError/modelDeleted``;
    /// - a model whose row another save updated takes the saved values of
    ///   the fields that save wrote, except the fields this context changed
    ///   and has not saved, which keep the context's values; observers see
    ///   each field that changes.
    ///
    /// Called on the context's own thread at its entry points (fetches,
    /// `save()`, `rollback()`, `model(for:)`, `registeredModel(for:)`,
    /// `existingModel(for:)`, `processPendingChanges()`, and a lost
    /// context's successor before it loads), and on the main queue for
    /// `mainContext`. A read that fails leaves the saves not merged
    /// pending, for the next entry point.
    func mergeSavedChanges() {
        try? mergeSavedChangesOrThrow()
    }

    /// ``mergeSavedChanges()``, throwing what reading the store throws
    /// (the saves not merged stay pending).
    func mergeSavedChangesOrThrow() throws {
        try container.checkOpen()
        autosaveIfOverdue()
        noteMayHoldModels()
        if parts.isEmpty { try store.catchUpWithOtherProcesses() }
        guard !inbox.isEmpty else { return }
        let saves = inbox.take()
        var done = 0
        do {
            try store.read { tx in
                let snapshot = Snapshot(tx)
                for changes in saves {
                    try merge(changes, snapshot: snapshot)
                    done += 1
                }
            }
        } catch {
            inbox.putBack(Array(saves[done...]))
            throw error
        }
    }

    /// Tells saves from now on to reach this context (see
    /// ``ContextInbox/holdsModels``); called before anything that may
    /// register a model reads the store.
    func noteMayHoldModels() {
        guard !inbox.holdsModels.load(ordering: .relaxed) else { return }
        inbox.holdsModels.store(true, ordering: .sequentiallyConsistent)
    }

    private func merge(_ changes: SavedChanges, snapshot: Snapshot) throws {
        let entities = container.schema.entities
        for (ordinal, rows) in changes.inserts.enumerated() where !rows.isEmpty {
            moveInserts(of: entities[ordinal], offRowsIn: rows)
        }
        for entity in entities where !changes.deletes[entity.ordinal].isEmpty {
            for row in changes.deletes[entity.ordinal] { forgetDeletedRow(entity, row: row) }
        }
        for entity in entities
        where !changes.updates[entity.ordinal].isEmpty
            && (registry[entity.ordinal].count > 0 || holdsReleasedModels || !displaced.isEmpty)
        {
            for update in changes.updates[entity.ordinal] {
                for model in displacedModels(entity, row: update.row) {
                    try refresh(model, entity: entity, fields: update.fields, snapshot: snapshot)
                }
                guard let model = registered(entity, row: update.row) else { continue }
                try refresh(model, entity: entity, fields: update.fields, snapshot: snapshot)
            }
        }
        for (ordinal, fields) in changes.everywhere.enumerated() where !fields.isEmpty && registry[ordinal].count > 0 {
            let entity = entities[ordinal]
            for model in registry[ordinal].models {
                try refresh(model, entity: entity, fields: fields, snapshot: snapshot)
            }
        }
    }

    /// Refreshes this context's models of rows its own save changed in
    /// storage beyond the models it wrote (see `SaveTransaction.letGo`).
    /// The save has committed: a read that fails leaves those models as
    /// they were, and the integrity of the store does not depend on them.
    func refreshOwnModels(_ rows: [(entity: Schema.Entity, row: Int64, field: Int)]) {
        _ = try? store.read { tx in
            let snapshot = Snapshot(tx)
            for (entity, row, field) in rows {
                guard let model = registered(entity, row: row) else { continue }
                var fields = _FieldSet()
                fields.insert(field)
                try refresh(model, entity: entity, fields: fields, snapshot: snapshot)
            }
        }
    }

    /// Another process inserted `rows` of `entity`: this context's unsaved
    /// inserts given one of those numbers by this process's own counter
    /// get new rows (their identifiers were not final: SwiftData's change
    /// at the save), and the counter moves past them.
    private func moveInserts(of entity: Schema.Entity, offRowsIn rows: [Int64]) {
        guard let highest = rows.max() else { return }
        store.raiseRowFloor(entity, to: highest)
        let taken = Set(rows)
        for model in inserted where taken.contains(model._strataState.rowID) {
            guard container.schema.entity(forType: type(of: model))?.ordinal == entity.ordinal else { continue }
            let state = model._strataState
            registry[entity.ordinal][state.rowID] = nil
            state.rowID = store.allocateRow(entity)
            registry[entity.ordinal][state.rowID] = model
        }
    }

    /// Another save deleted `row`: its model (if any) leaves the context.
    private func forgetDeletedRow(_ entity: Schema.Entity, row: Int64) {
        forgetMarkedRow(entity, row: row)
        for model in forgetDisplaced(entity, row: row) { markDeletedElsewhere(model) }
        guard let model = registered(entity, row: row) else { return }
        // An insert of this context that another process's row number
        // collides with is not that row (it moves at its save).
        if model._strataState.status == .inserted { return }
        unregisterRow(entity, row: row)
        markDeletedElsewhere(model)
    }

    /// `model`'s row was deleted by another save: it is deleted here too.
    private func markDeletedElsewhere(_ model: any PersistentModel) {
        let state = model._strataState
        switch state.status {
        case .saved:
            state.status = .deleted
            state.deletedElsewhere = true
        // A pending change stays listed: the next save refuses it.
        case .deleted:
            // Deleted here too: nothing left for this context to delete.
            forgetPendingDelete(model)
            state.deletedElsewhere = true
        case .inserted, .detached:
            break
        }
    }

    /// Loads `fields` of `model` from its stored record, but the fields
    /// this context changed and has not saved.
    private func refresh(_ model: any PersistentModel, entity: Schema.Entity, fields: _FieldSet, snapshot: Snapshot)
        throws
    {
        let state = model._strataState
        // A model this context deleted and has not saved is refreshed too:
        // a rollback brings it back with the store's values.
        guard state.status == .saved || (state.status == .deleted && !state.deletedElsewhere) else { return }
        let wanted = fields.subtracting(state.changedFields)
        guard !wanted.isEmpty, let bytes = try snapshot.record(entity, row: state.rowID) else { return }
        let faults = state.faults
        state.dropFaults(wanted)
        do {
            try _RecordReader.withReader(bytes, entity: entity, row: state.rowID, loader: self) {
                try model._strataLoad(from: &$0, fields: wanted)
            }
        } catch {
            // The record does not decode: the model keeps what it had (a
            // fetch of the row reports the damage), and the merge goes on.
            state.restoreFaults(faults)
            return
        }
        Self.pointToManyAtTrees(state, entity: entity, row: state.rowID, only: wanted)
    }
}
