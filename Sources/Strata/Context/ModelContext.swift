import Foundation

// The context's state (registry, pending changes, released models) and
// the operations that change it: insert, delete, rollback, autosave.
// Beside it: loading models (+Load), the identity map (+Identity),
// `delete(model:where:)` (+DeleteWhere), merging (ContextMerge), inverse
// upkeep (Inverse); the save, its delete rules and its writes are in
// Save/, fetches in Query/, undo hooks in Undo/.

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
    @exclusivity(unchecked) public var autosaveEnabled = false {
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
    @exclusivity(unchecked) public var undoManager: UndoManager? {
        didSet {
            link.undoManager = undoManager
            for part in parts { part.undoManager = undoManager }
        }
    }
    var isMainContext = false {
        didSet { for part in parts { part.isMainContext = isMainContext } }
    }
    /// The participant of the save under way (``save(with:)``).
    var participant: (any SaveParticipant)?
    /// With several configurations, one context per part of the container
    /// (``ModelContainer/parts``), to which this context routes each call;
    /// empty otherwise.
    let parts: [ModelContext]
    /// The context whose part this context is: what models' `modelContext`
    /// and the save notifications name.
    @exclusivity(unchecked) private(set) weak var owner: ModelContext? {
        didSet { isPart = owner != nil }
    }
    /// True once this context is a part (``owner`` set): every change asks,
    /// and reading the weak reference cost about 70 instructions.
    @exclusivity(unchecked) private var isPart = false
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
    @exclusivity(unchecked) var released: [[Int64: WeakModel]] = []
    @exclusivity(unchecked) var releasedCount = 0
    /// Models an upsert displaced, held weakly: a model registered for a
    /// row that an inserted model took at a save stays usable, and the
    /// deletes and updates other saves make to the row reach it too. By
    /// entity ordinal, then row (empty until such an upsert).
    @exclusivity(unchecked) var displaced: [Int: [Int64: [WeakModel]]] = [:]
    @exclusivity(unchecked) var inserted: [any PersistentModel] = []
    /// How many inserts this context has made: a save checks the rows of
    /// the inserts its checks add (the delete rules and the models
    /// relationships reach) only when this moved.
    @exclusivity(unchecked) var insertions = 0
    /// Saved models changed since the last save, in the order they were
    /// first changed (see ``ChangedModels``).
    @exclusivity(unchecked) var changed = ChangedModels()
    @exclusivity(unchecked) var deleted: [ObjectIdentifier: any PersistentModel] = [:]
    /// Stored rows that ``delete(model:where:includeSubclasses:)`` marked
    /// for deletion without building models for them, by entity ordinal
    /// (empty until the first such delete). They are pending deletes like
    /// ``deleted``'s: fetches leave them out, `hasChanges` counts them,
    /// `rollback()` forgets them and `save()` deletes them with their
    /// delete rules. A row of the set that gets loaded after all (a fetch
    /// without pending changes, a relationship, `model(for:)`) leaves the
    /// set and its model joins ``deleted``.
    @exclusivity(unchecked) var markedRows: [RowSet] = []
    /// The number of rows in ``markedRows``.
    @exclusivity(unchecked) var markedRowCount = 0
    /// The read transaction delete rules run in, while they run.
    @exclusivity(unchecked) var snapshot: Snapshot?
    /// A model inserted whose type the container does not know: reported
    /// by the next save.
    @exclusivity(unchecked) var pendingError: SwiftDataError?
    @exclusivity(unchecked) private var autosaveScheduled = false
    /// When the context saves at its next call into the store if no
    /// autosave ran before (nil without unsaved autosaved changes).
    @exclusivity(unchecked) var autosaveDue: ContinuousClock.Instant?
    /// The queue this context's autosaves run on: the main queue for a
    /// context made on the main thread, a model executor's queue for an
    /// actor's context; nil when its owner runs no queue.
    @exclusivity(unchecked) var autosaveQueue: DispatchQueue?
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
    /// Saved models changed since the last save, in the order they were
    /// first changed.
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
                if state.isChanged { changed.insert(model) }
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
                for target in state.toManyDeltas[relationship.field]?.added ?? InlineModels()
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
            changed.remove(model)
            deleted[ObjectIdentifier(model)] = model
            state.status = .deleted
            registerUndo(model) { context, model in context.insert(model) }
        case .deleted:
            // Deleted by another context's save: deleting it here too drops
            // the change that would make the next save refuse.
            if state.deletedElsewhere, changed.remove(model) != nil {
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
        changed.removeAll()
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

    /// Holds `model`, whose state is `state`, among the changed models.
    func noteChanged(_ model: some PersistentModel, state: _ModelState) {
        changed.insert(model, state: state)
    }

    func noteMutation() {
        // A part's change is saved by the context it is a part of.
        if isPart, let owner { return owner.noteMutation() }
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

    /// How many required to-one targets are being loaded inside one
    /// another (a cycle of them would never end).
    var requiredLoadDepth = 0
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
