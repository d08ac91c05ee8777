import Foundation

// Over 500 lines: the context's state (registry, pending changes, released
// models) and every operation that changes it (insert, delete, rollback,
// identity lookups) share private invariants; saving, fetching, merging
// and delete rules are in files of their own.

/// Tracks models in memory — inserted, changed, deleted — and writes them
/// to the store in one transaction at ``save()``.
///
/// A context holds one instance per stored row (its identity map): every
/// fetch that meets a row already registered returns that same instance,
/// with its unsaved changes. A context is not thread-safe; make one per
/// thread or task, or use a `@ModelActor`.
///
/// `save()` is all-or-nothing: if it throws, nothing reached the store and
/// the context still holds every pending change.
public final class ModelContext: _RelatedModelLoader {
    /// The container whose store this context reads and writes.
    public let container: ModelContainer
    /// Saves pending changes automatically after a change, as SwiftData's
    /// autosave does. Off by default; on for the container's `mainContext`.
    ///
    /// Any context autosaves when it is on: the save runs on the
    /// context's own executor once the work that made the change is done
    /// (the main queue for `mainContext` and contexts made on the main
    /// thread, the actor's queue for a `@ModelActor`'s context). Where that
    /// executor does not run (a server or tool whose main thread never
    /// returns to its queue, or a context made on another thread), the
    /// context saves at its next fetch, save or other call into the store
    /// once half a second has passed since the first unsaved change. An
    /// autosave that fails keeps the changes and writes the error to
    /// standard error; ``save()`` reports it. A program that exits right
    /// after a change should call ``save()`` itself.
    public var autosaveEnabled = false {
        didSet { for part in parts { part.autosaveEnabled = autosaveEnabled } }
    }
    /// Identifies the context in its ``editingState``.
    let editingStateID = UUID()
    /// Recorded with each save's history (SwiftData's transaction author).
    public var author: String? {
        didSet { for part in parts { part.author = author } }
    }
    /// Records the context's inserts, deletes (with the models their
    /// `.cascade` rules reach) and property changes, so that
    /// `undoManager.undo()` reverts them and `redo()` applies them again,
    /// before or after a save. Undoing after a save changes the models
    /// again: the context has changes to save. Nil (the default) records
    /// nothing. See the "Undo and redo" section of "Differences from
    /// SwiftData".
    public var undoManager: UndoManager? {
        didSet {
            link.undoManager = undoManager
            for part in parts { part.undoManager = undoManager }
        }
    }
    var isMainContext = false {
        didSet { for part in parts { part.isMainContext = isMainContext } }
    }
    /// Writes of sync's own trees that commit with this context's next
    /// save, in its transaction, after every model is written.
    package var beforeCommit: ((WriteTransaction) throws -> Void)?
    /// With several configurations, one context per part of the container
    /// (``ModelContainer/parts``), to which this context routes each call;
    /// empty otherwise.
    let parts: [ModelContext]
    /// The context whose part this context is: what models' `modelContext`
    /// and the save notifications name.
    private(set) weak var owner: ModelContext?
    /// The mark of a save over several stores that committed elsewhere but
    /// failed here: written with this part's next save.
    var owedMark: (number: Int64, stores: [String])?

    let link: _ContextLink
    /// Other contexts' saves, waiting to be merged (``mergeSavedChanges()``).
    let inbox = ContextInbox()
    var store: Store { container.store }
    /// Registered models: one map per entity, by the entity's ordinal.
    @exclusivity(unchecked) var registry: [RowMap]
    /// Models a batched fetch or an enumeration let go of, held weakly: one
    /// the app still holds is found (and registered again) by its row, so a
    /// row keeps one model; the others are freed. Per entity ordinal.
    @exclusivity(unchecked) private var released: [[Int64: WeakModel]] = []
    @exclusivity(unchecked) private var releasedCount = 0
    @exclusivity(unchecked) var inserted: [any PersistentModel] = []
    /// How many inserts this context has made: a save checks the rows of
    /// the inserts its checks add (the delete rules and the models
    /// relationships reach) only when this moved.
    @exclusivity(unchecked) var insertions = 0
    @exclusivity(unchecked) var changed: [ObjectIdentifier: any PersistentModel] = [:]
    @exclusivity(unchecked) var deleted: [ObjectIdentifier: any PersistentModel] = [:]
    /// Stored rows that ``delete(model:where:includeSubclasses:)`` marked
    /// for deletion without building models for them, by entity ordinal
    /// (empty until the first such delete). They are pending deletes like
    /// ``deleted``'s: fetches leave them out, `hasChanges` counts them,
    /// `rollback()` forgets them and `save()` deletes them with their
    /// delete rules. A row of the set that gets loaded after all (a fetch
    /// without pending changes, a relationship, `model(for:)`) leaves the
    /// set and its model joins ``deleted``.
    @exclusivity(unchecked) private(set) var markedRows: [RowSet] = []
    /// The number of rows in ``markedRows``.
    @exclusivity(unchecked) private(set) var markedRowCount = 0
    /// The read transaction delete rules run in, while they run.
    @exclusivity(unchecked) var snapshot: Snapshot?
    /// A model inserted whose type the container does not know: reported
    /// by the next save.
    var pendingError: SwiftDataError?
    private var autosaveScheduled = false
    /// When the context saves at its next call into the store if no
    /// autosave ran before (nil without unsaved autosaved changes).
    var autosaveDue: ContinuousClock.Instant?
    /// The queue this context's autosaves run on: the main queue for a
    /// context made on the main thread, a model executor's queue for an
    /// actor's context; nil when its owner runs no queue.
    var autosaveQueue: DispatchQueue?
    /// How long after the first unsaved change a context without a
    /// running queue saves at its next call into the store.
    static let autosaveFallbackDelay = Duration.milliseconds(500)

    /// A new context on `container`, with an empty identity map. Autosave
    /// is off (only the container's `mainContext` autosaves).
    public init(_ container: ModelContainer) {
        self.container = container
        self.link = _ContextLink(container: container)
        self.registry = Array(repeating: RowMap(), count: container.schema.entities.count)
        self.parts = container.parts.map(ModelContext.init)
        link.context = self
        inbox.context = self
        if Thread.isMainThread { autosaveQueue = .main }
        guard parts.isEmpty else {
            for part in parts { part.owner = self }
            return
        }
        container.mergeHub.register(inbox)
    }

    // MARK: - Pending changes

    /// True when there are inserts, changes or deletes not yet saved.
    public var hasChanges: Bool {
        guard parts.isEmpty else { return parts.contains(where: \.hasChanges) }
        return !inserted.isEmpty || !changed.isEmpty || !deleted.isEmpty || markedRowCount > 0
    }
    /// Models inserted since the last save, in insertion order.
    public var insertedModelsArray: [any PersistentModel] {
        parts.isEmpty ? inserted : parts.flatMap(\.insertedModelsArray)
    }
    /// Saved models changed since the last save.
    public var changedModelsArray: [any PersistentModel] {
        parts.isEmpty ? Array(changed.values) : parts.flatMap(\.changedModelsArray)
    }
    /// Saved models deleted since the last save (delete rules add to them
    /// at save).
    ///
    /// Rows that ``delete(model:where:includeSubclasses:)`` marked without
    /// building models are loaded here (once), so the array lists them
    /// too; a row whose record cannot be read is left out of it (it is
    /// still deleted at the next save).
    public var deletedModelsArray: [any PersistentModel] {
        guard parts.isEmpty else { return parts.flatMap(\.deletedModelsArray) }
        if markedRowCount > 0 { loadMarkedRows() }
        return Array(deleted.values)
    }

    /// Builds the models of ``markedRows``; each joins ``deleted`` as it
    /// is materialized.
    private func loadMarkedRows() {
        for entity in container.schema.entities where markedRows[entity.ordinal].count > 0 {
            for row in markedRows[entity.ordinal].sorted() { _ = try? loadExistential(entity.type, row: row) }
        }
    }

    /// Registers `model` and every model reachable from it through
    /// relationships; they are written at the next save.
    ///
    /// Inserting a model that another live context holds (SwiftData traps
    /// there) inserts nothing: the next ``save()`` throws
    /// ``SwiftDataError/modelValidationFailure`` naming the model, and
    /// writes nothing.
    public func insert<T: PersistentModel>(_ model: T) {
        guard parts.isEmpty else { return (part(for: type(of: model)) ?? parts[0]).insert(model) }
        // The models it inserts with it are undone with it.
        let grouped = beginUndoGroup()
        defer { if grouped { undoManager?.endUndoGrouping() } }
        let state = model._strataState
        if let owner = state.link, owner !== link, owner.context != nil {
            pendingError = SwiftDataError(
                .modelValidationFailure,
                "\(T.self) \(model.persistentModelID) already belongs to another ModelContext; "
                    + "fetch it in this one by its identifier instead")
            return
        }
        switch state.status {
        case .inserted, .saved:
            if state.link === link { return }
        case .deleted:
            if state.link === link {
                deleted[ObjectIdentifier(model)] = nil
                state.status = .saved
                // Changes made before the delete are pending again.
                if state.isChanged { changed[ObjectIdentifier(model)] = model }
                registerUndo(model) { context, model in context.delete(model) }
                return
            }
        case .detached:
            break
        }
        // The model's own class: a `BusinessTrip` inserted as a `Trip` is
        // a row of `BusinessTrip`.
        guard let entity = container.schema.entity(forType: type(of: model)) else {
            pendingError = SwiftDataError(
                .unknownModelType,
                "\(type(of: model)) is not in the container's schema (\(schemaNames)); add it to ModelContainer(for:)")
            return
        }
        noteMayHoldModels()
        state.rowID = store.allocateRow(entity)
        state.status = .inserted
        state.link = link
        registry[entity.ordinal][state.rowID] = model
        inserted.append(model)
        insertions &+= 1
        registerUndo(model) { context, model in context.delete(model) }
        Self.updateInverses(of: model, entity: entity)
        insertRelated(of: model, entity: entity, everyList: true)
        noteMutation()
    }

    /// Opens an undo group when changes are recorded; true when it did.
    private func beginUndoGroup() -> Bool {
        guard let undoManager, link.recordsUndo, undoManager.isUndoRegistrationEnabled else { return false }
        undoManager.beginUndoGrouping()
        return true
    }

    /// Records `action` as the undo of a change to `model`.
    private func registerUndo<T: PersistentModel>(_ model: T, _ action: @escaping (ModelContext, T) -> Void) {
        guard let undoManager, link.recordsUndo else { return }
        undoManager.registerUndo(withTarget: self) { context in action(context, model) }
    }

    /// Before a saved model is deleted with undo on: its relationships are
    /// loaded (so that a re-insert writes them), and the models its
    /// `.cascade` rules reach are deleted now, as models, so that undo
    /// brings them back too.
    private func prepareUndoableDelete(_ model: some PersistentModel) {
        guard undoManager != nil, link.recordsUndo, let entity = container.schema.entity(forType: type(of: model)) else {
            return
        }
        for relationship in entity.relationships {
            let targets = Self.targets(of: model, relationship)
            if relationship.deleteRule == .cascade {
                for target in targets where target._strataState.status == .saved { deleteExistential(target) }
            }
        }
    }

    /// Relationships set before the model had a context (in its
    /// initializer, where setters do not run) get their other side now.
    /// (A relationship whose setter ran is in step already.)
    static func updateInverses(of model: any PersistentModel, entity: Schema.Entity) {
        let type = entity.type
        let inStep = model._strataState.inverseInStep
        for (field, side) in entity.inverseSides where !inStep.contains(field) {
            if isNil(model, field: field) { continue }
            let value = InverseUpkeep.value(of: model, field: field)
            if let targets = value as? [any PersistentModel] {
                let forward = InverseGraph.Side(type: type, field: field, isToOne: false)
                for target in targets { InverseUpkeep.add(model, to: target, side: side, forward: forward) }
            } else if let target = value as? any PersistentModel {
                let forward = InverseGraph.Side(type: type, field: field, isToOne: true)
                InverseUpkeep.add(model, to: target, side: side, forward: forward)
            }
        }
    }

    /// True when to-one `field` of `model` holds nil and no unloaded
    /// target: read from its storage, without the key path's boxing and
    /// casts, which cost more than the rest of an insert.
    static func isNil(_ model: any PersistentModel, field: Int) -> Bool {
        guard case .null? = model._strataKeyElement(field: field) else { return false }
        return !model._strataState.hasFaults || model._strataState.faults[field] == nil
    }

    var schemaNames: String { container.schema.entities.map(\.name).joined(separator: ", ") }

    /// Inserts the detached models that `model`'s relationships refer to.
    ///
    /// On insert (`everyList`) every relationship is read: the class's
    /// initializer may have set it. After that the relationships are read
    /// again only when one may have come to refer to a detached model (see
    /// ``_ModelState/mayReferenceDetached``): a save does not walk a list
    /// of a million members, or cast every new model's to-ones, when they
    /// only gained models of the context.
    func insertRelated(of model: some PersistentModel, entity: Schema.Entity, everyList: Bool = false) {
        let state = model._strataState
        guard everyList || state.mayReferenceDetached else { return }
        state.mayReferenceDetached = false
        for relationship in entity.relationships {
            if state.hasFaults, state.faults[relationship.field] != nil {
                // Not loaded: only the members added since can be new.
                for target in state.toManyDeltas[relationship.field]?.added ?? []
                where target._strataState.status == .detached {
                    insertExistential(target)
                }
                continue
            }
            if relationship.isToOneRelationship, Self.isNil(model, field: relationship.field) { continue }
            guard let value = model[keyPath: relationship.keypath] else { continue }
            // Only the cast that can succeed: a failed one costs a
            // conformance lookup.
            if relationship.isToOneRelationship {
                if let one = value as? any PersistentModel, one._strataState.status == .detached { insertExistential(one) }
            } else if let many = value as? [any PersistentModel] {
                for target in many where target._strataState.status == .detached { insertExistential(target) }
            }
        }
    }

    private func insertExistential(_ model: any PersistentModel) { insert(model) }

    /// Deletes `model` at the next save. An inserted model that was never
    /// saved is simply discarded.
    public func delete<T: PersistentModel>(_ model: T) {
        guard parts.isEmpty else { return (part(for: type(of: model)) ?? parts[0]).delete(model) }
        // Its cascade is undone with it.
        let grouped = beginUndoGroup()
        defer { if grouped { undoManager?.endUndoGrouping() } }
        let state = model._strataState
        guard state.link === link else { return }
        switch state.status {
        case .inserted:
            inserted.removeAll { $0 === model }
            unregister(model, state: state)
            state.status = .detached
            state.inverseInStep = _FieldSet()
            state.formerStoreIdentifier = link.storeIdentifier
            state.link = nil
            registerUndo(model) { context, model in context.insert(model) }
            discardFromGraph(model)
        case .saved:
            prepareUndoableDelete(model)
            changed[ObjectIdentifier(model)] = nil
            deleted[ObjectIdentifier(model)] = model
            state.status = .deleted
            registerUndo(model) { context, model in context.insert(model) }
        case .deleted:
            // Deleted by another context's save: deleting it here too drops
            // the change that would make the next save refuse.
            if state.deletedElsewhere, changed.removeValue(forKey: ObjectIdentifier(model)) != nil {
                state.isChanged = false
                state.changedFields = _FieldSet()
                state.toManyBaselines = [:]
                state.toManyDeltas = [:]
            }
            return
        case .detached:
            return
        }
        noteMutation()
    }

    /// A model inserted and deleted before any save leaves the graph at
    /// once, so that no save brings it back through a relationship: its
    /// `.cascade` relationships delete what they refer to, the others (but
    /// `.noAction`) take it out of their inverse, and pending models that
    /// refer to it without an inverse let go. (`.deny` cannot refuse here:
    /// nothing was stored.)
    private func discardFromGraph(_ model: some PersistentModel) {
        guard let entity = container.schema.entity(forType: type(of: model)) else { return }
        for relationship in entity.relationships where relationship.deleteRule != .noAction {
            for target in Self.targets(of: model, relationship) {
                if relationship.deleteRule == .cascade {
                    deleteExistential(target)
                } else if let side = entity.inverseSides[relationship.field] {
                    InverseUpkeep.remove(model, from: target, side: side)
                }
            }
        }
        try? clearReferencesWithoutInverse(to: Victim(entity: entity, row: 0, model: model))
    }

    /// Deletes every model of `model` matching `predicate` (all of them when
    /// nil) at the next save, with their delete rules.
    ///
    /// Matches are found as a fetch with pending changes finds them. Those
    /// this context holds a model for (inserted, changed or loaded) are
    /// deleted as ``delete(_:)`` does; the other stored rows are marked by
    /// row id alone, without building models, so
    /// deleting a million rows costs their ids, not a million objects.
    /// Until the save, fetches leave them out, as they leave out deleted
    /// models. With `includeSubclasses` (the default) the models of
    /// `model`'s subclasses that match are deleted too; without it, only
    /// those whose class is `model` itself.
    ///
    /// - Throws: what a fetch of the same predicate throws (an unknown
    ///   model type, an unsupported predicate); nothing is marked then.
    public func delete<T: PersistentModel>(model: T.Type, where predicate: Predicate<T>? = nil, includeSubclasses: Bool = true)
        throws
    {
        guard parts.isEmpty else {
            return try partOrThrow(for: T.self).delete(model: model, where: predicate, includeSubclasses: includeSubclasses)
        }
        let entity = try entity(for: T.self)
        let descriptor = FetchDescriptor<T>(predicate: predicate)
        try descriptor.checkKeyPaths(of: entity)
        try mergeSavedChangesOrThrow()
        // The rows of `T`'s entity, and of its subentities unless told
        // not to, each stored in its own tree.
        let members = includeSubclasses ? entity.family.map(\.entity) : [entity]
        var models: [any PersistentModel] = []
        var rows: [(Schema.Entity, [Int64])] = []
        try store.read { tx in
            let snapshot = Snapshot(tx)
            for member in members {
                let query = try QueryRun(descriptor, entity: member, context: self, snapshot: snapshot)
                for model in try query.pendingMatches() { models.append(model) }
                var found: [Int64] = []
                try query.forEachMatch(registeredWithoutRecord: true) { row, _ in
                    if let model = registered(member, row: row) { models.append(model) } else { found.append(row) }
                    return true
                }
                if !found.isEmpty { rows.append((member, found)) }
            }
        }
        for model in models { deleteExistential(model) }
        guard !rows.isEmpty else { return }
        if markedRows.isEmpty { markedRows = Array(repeating: RowSet(), count: container.schema.entities.count) }
        for (member, found) in rows {
            markedRows[member.ordinal].reserve(markedRows[member.ordinal].count + found.count)
            for row in found where markedRows[member.ordinal].insert(row) { markedRowCount += 1 }
        }
        noteMutation()
    }

    /// Forgets ``markedRows`` (a save wrote them, or a rollback).
    func clearMarkedRows() {
        guard markedRowCount > 0 else { return }
        markedRows = []
        markedRowCount = 0
    }

    /// Discards every pending change: inserted models are dropped, deleted
    /// ones restored, changed ones reloaded with their stored values.
    public func rollback() {
        guard parts.isEmpty else {
            for part in parts { part.rollback() }
            return
        }
        mergeSavedChanges()
        for model in inserted {
            let state = model._strataState
            unregister(model, state: state)
            state.status = .detached
            state.inverseInStep = _FieldSet()
            state.formerStoreIdentifier = link.storeIdentifier
            state.link = nil
        }
        for model in deleted.values {
            model._strataState.status = .saved
            // Changed before it was deleted: its values go back too.
            if model._strataState.isChanged { reload(model) }
        }
        for model in changed.values { reload(model) }
        inserted = []
        changed = [:]
        deleted = [:]
        clearMarkedRows()
        pendingError = nil
    }

    func reload<T: PersistentModel>(_ model: T) {
        let state = model._strataState
        state.isChanged = false
        state.changedFields = _FieldSet()
        state.toManyBaselines = [:]
        state.toManyDeltas = [:]
        guard state.status == .saved, let entity = container.schema.entity(forType: type(of: model)),
            let bytes = try? store.read({ tx in
                try tx.treeIfPresent(Store.treeName(entity)).flatMap { try tx.get(RowKey.encode(state.rowID), in: $0) }
            })
        else { return }
        state.clearFaults()
        try? _RecordReader.withReader(bytes, entity: entity, row: state.rowID, loader: self) {
            try model._strataLoad(from: &$0, fields: nil)
        }
        Self.pointToManyAtTrees(state, entity: entity, row: state.rowID)
    }

    /// Runs `block`, then saves.
    public func transaction(block: () throws -> Void) throws {
        try block()
        try save()
    }

    /// Merges other contexts' saves into this context's models now (see
    /// the "Contexts and concurrency" article). Relationship and
    /// bookkeeping changes of this context are applied as they are made.
    ///
    /// Fetches, `save()`, `rollback()` and `model(for:)` merge first on
    /// their own, and `mainContext` merges on the main queue as saves
    /// arrive; call this to see another context's save in models this
    /// context already holds before any of those.
    public func processPendingChanges() {
        guard parts.isEmpty else {
            for part in parts { part.processPendingChanges() }
            return
        }
        mergeSavedChanges()
    }

    func noteChanged(_ model: some PersistentModel) {
        changed[ObjectIdentifier(model)] = model
    }

    func noteMutation() {
        // A part's change is saved by the context it is a part of.
        if let owner { return owner.noteMutation() }
        guard autosaveEnabled else { return }
        if autosaveDue == nil { autosaveDue = .now + Self.autosaveFallbackDelay }
        guard !autosaveScheduled, let queue = autosaveQueue else { return }
        autosaveScheduled = true
        nonisolated(unsafe) weak let context = self
        queue.async {
            context?.autosaveScheduled = false
            context?.autosave()
        }
    }

    /// Saves for autosave: the changes stay and the error goes to standard
    /// error when the save fails.
    func autosave() {
        autosaveDue = nil
        guard autosaveEnabled, hasChanges else { return }
        do {
            try save()
        } catch {
            FileHandle.standardError.write(Data("Strata: autosave failed, the changes are kept: \(error)\n".utf8))
        }
    }

    /// Autosaves when an autosave is overdue: its queue did not run it.
    /// Called where the context enters the store.
    func autosaveIfOverdue() {
        guard let due = autosaveDue, owner == nil, ContinuousClock.now >= due else { return }
        autosave()
    }

    /// Drops `model` from the identity map when it has no unsaved change
    /// (enumerate releases each batch's models this way).
    func release(_ model: any PersistentModel, entity: Schema.Entity) {
        let state = model._strataState
        guard state.status == .saved, !state.isChanged, registry[entity.ordinal][state.rowID] === model else { return }
        registry[entity.ordinal][state.rowID] = nil
        if released.isEmpty { released = Array(repeating: [:], count: registry.count) }
        if released[entity.ordinal].updateValue(WeakModel(model), forKey: state.rowID) == nil { releasedCount += 1 }
    }

    /// Whether models a batched fetch or an enumeration released may still
    /// be held by the app (they are found by their row again).
    var holdsReleasedModels: Bool { releasedCount > 0 }

    /// Forgets the released models of `rows` that are gone (nothing held
    /// them), so the weak table stays as small as what the app holds.
    func pruneReleased(_ entity: Schema.Entity, rows: some Sequence<Int64>) {
        guard releasedCount > 0 else { return }
        for row in rows where released[entity.ordinal][row]?.model == nil {
            if released[entity.ordinal].removeValue(forKey: row) != nil { releasedCount -= 1 }
        }
    }

    /// The released model of `row`, if the app still holds it: registered
    /// again.
    private func revive(_ entity: Schema.Entity, row: Int64) -> (any PersistentModel)? {
        guard let entry = released[entity.ordinal].removeValue(forKey: row) else { return nil }
        releasedCount -= 1
        guard let model = entry.model else { return nil }
        registry[entity.ordinal][row] = model
        return model
    }

    private func forgetReleased(_ entity: Schema.Entity, row: Int64) {
        guard releasedCount > 0, released[entity.ordinal].removeValue(forKey: row) != nil else { return }
        releasedCount -= 1
    }

    func unregister(_ model: any PersistentModel, state: _ModelState) {
        if let entity = container.schema.entity(forType: type(of: model)) {
            registry[entity.ordinal][state.rowID] = nil
            forgetReleased(entity, row: state.rowID)
        }
    }

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

    /// How many required to-one targets are being loaded inside one
    /// another (a cycle of them would never end).
    private var requiredLoadDepth = 0

    /// The registered or stored model of `type` in `row`: the target of a
    /// non-optional to-one relationship, loaded with the model that
    /// requires it.
    func loadRequired(_ type: any PersistentModel.Type, row: Int64) throws -> (any PersistentModel)? {
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

    private func load<T: PersistentModel>(_ type: T.Type, row: Int64) throws -> T? {
        // The row's own class, which may be a subclass of `T`.
        guard let entity = try entity(for: T.self).concrete(row) else { return nil }
        if let existing = registered(entity, row: row) as? T { return existing }
        let bytes = try store.read { tx in
            try tx.treeIfPresent(Store.treeName(entity)).flatMap { try tx.get(RowKey.encode(row), in: $0) }
        }
        guard let bytes else { return nil }
        return try bytes.withUnsafeBytes { try materialize(entity: entity, row: row, bytes: $0) } as? T
    }

    // MARK: - Identity

    /// Drops `row` of `entity` from the identity map (another save deleted it).
    func unregisterRow(_ entity: Schema.Entity, row: Int64) {
        registry[entity.ordinal][row] = nil
        forgetReleased(entity, row: row)
    }

    /// Forgets `row` of `entity` among the rows ``delete(model:where:includeSubclasses:)``
    /// marked (another save deleted it).
    func forgetMarkedRow(_ entity: Schema.Entity, row: Int64) {
        guard markedRowCount > 0, markedRows[entity.ordinal].remove(row) else { return }
        markedRowCount -= 1
    }

    /// Forgets the pending delete of `model` (another save deleted its row).
    func forgetPendingDelete(_ model: any PersistentModel) {
        deleted[ObjectIdentifier(model)] = nil
    }

    /// The model of `entity` registered for `row`, if any.
    func registered(_ entity: Schema.Entity, row: Int64) -> (any PersistentModel)? {
        // A row of a subentity is registered under its own entity.
        guard let entity = entity.concrete(row) else { return nil }
        if let model = registry[entity.ordinal][row] { return model }
        return releasedCount > 0 ? revive(entity, row: row) : nil
    }

    /// The model registered in this context under `id`, if any.
    public func registeredModel<T: PersistentModel>(for id: PersistentIdentifier) -> T? {
        guard parts.isEmpty else { return part(for: id)?.registeredModel(for: id) }
        guard let entity = container.schema.entity(named: id.entityName), id.belongs(to: store.identifier) else {
            return nil
        }
        mergeSavedChanges()
        return registered(entity, row: id.rowID) as? T
    }

    /// The model with identifier `id`: the registered instance, or one
    /// loaded from the store. Throws when the store has no such model or
    /// its record is damaged (a Strata addition, like Core Data's
    /// `existingObject(with:)`).
    public func existingModel<T: PersistentModel>(for id: PersistentIdentifier) throws -> T? {
        try existingAny(for: id) as? T
    }

    /// ``existingModel(for:)``, of whatever type the identifier names.
    func existingAny(for id: PersistentIdentifier) throws -> (any PersistentModel)? {
        if !parts.isEmpty, container.part(ofEntityNamed: id.entityName) != nil {
            return try part(for: id)?.existingAny(for: id)
        }
        guard let entity = container.schema.entity(named: id.entityName) else {
            throw SwiftDataError(.unknownModelType, "\(id.entityName) is not in the container's schema (\(schemaNames))")
        }
        guard id.belongs(to: store.identifier) else { return nil }
        try mergeSavedChangesOrThrow()
        if let registered = registered(entity, row: id.rowID) { return registered }
        return try loadExistential(entity.type, row: id.rowID)
    }

    func loadExistential(_ type: any PersistentModel.Type, row: Int64) throws -> (any PersistentModel)? {
        try load(type, row: row)
    }

    /// The model with identifier `id`, as SwiftData's `model(for:)`: the
    /// instance registered here, or one loaded from the store.
    ///
    /// When there is no such model — an identifier of a row that was never
    /// saved or is deleted, of an entity the container does not know, or
    /// of a record that does not decode — SwiftData returns a model that
    /// traps when it is read. Strata returns a ``MissingModel`` instead
    /// (its `isDeleted` is true, it has no properties), so the usual
    /// `context.model(for: id) as? Trip` is nil there rather than a crash
    /// later. ``existingModel(for:)`` throws the reason instead.
    public func model(for id: PersistentIdentifier) -> any PersistentModel {
        guard parts.isEmpty else { return part(for: id)?.model(for: id) ?? MissingModel(id) }
        mergeSavedChanges()
        guard let entity = container.schema.entity(named: id.entityName), id.belongs(to: store.identifier) else {
            return MissingModel(id)
        }
        if let registered = registered(entity, row: id.rowID) { return registered }
        guard id.rowID > 0, let model = try? loadExistential(entity.type, row: id.rowID) else { return MissingModel(id) }
        return model
    }
}

/// What ``ModelContext/model(for:)`` returns for an identifier that names
/// no stored model: deleted (`isDeleted` is true), without a context or
/// properties. ``identifier`` is the identifier that was asked for.
@Model public final class MissingModel {
    /// The identifier `model(for:)` was given.
    @Transient public var identifier = PersistentIdentifier(entityName: "", rowID: 0)

    init(_ identifier: PersistentIdentifier) {
        self.identifier = identifier
        _strataState.status = .deleted
    }
}

extension ModelContext {
    /// Posted before a save writes anything; the object is the context.
    public static let willSave = Notification.Name("ModelContext.willSave")
    /// Posted after a save; `userInfo` holds the identifiers under
    /// ``NotificationKey`` raw values.
    public static let didSave = Notification.Name("ModelContext.didSave")

    /// Keys of the `didSave` notification's `userInfo`.
    public enum NotificationKey: String, Sendable {
        /// The identifiers of the models the save inserted, as
        /// `[PersistentIdentifier]`.
        case insertedIdentifiers
        /// The identifiers of the models the save updated, as
        /// `[PersistentIdentifier]`.
        case updatedIdentifiers
        /// The identifiers of the models the save deleted, as
        /// `[PersistentIdentifier]`.
        case deletedIdentifiers
        /// SwiftData's key for a query generation; Strata does not post it.
        case queryGeneration
        /// SwiftData's key for invalidating every identifier; Strata does not
        /// post it.
        case invalidatedAllIdentifiers
    }
}

/// A model held weakly (``ModelContext``'s released models).
struct WeakModel {
    weak var model: (any PersistentModel)?

    init(_ model: any PersistentModel) { self.model = model }
}
