import Foundation
import Observation
import Synchronization

// What every model holds for the object layer: its state (row, status,
// faults, changed fields) and its link to its context.

/// The source of temporary identifiers: a model without a row yet is named
/// by a negative number in its `persistentModelID` until it has one.
private let temporaryRows = Atomic<Int64>(0)

/// A context's handle that models keep: one weak reference per context
/// instead of one per model.
public final class _ContextLink {
    weak var context: ModelContext?
    /// The container, so that relationships of a model whose context is
    /// gone can still load while the container lives. Weak: models do not
    /// keep a store open.
    weak var container: ModelContainer?
    /// The context that loads them then (made on first need).
    private var successor: ModelContext?

    /// The store's identifier, for the identifiers of the models.
    let storeIdentifier: String
    /// The context's undo manager, read by the models' setters. Weak: the
    /// undo actions hold models, and models hold this link.
    @usableFromInline weak var undoManager: UndoManager? {
        didSet { mayHaveUndoManager = undoManager != nil }
    }
    /// False while no undo manager is set: the one check of a setter that
    /// records no undo (reading the weak reference cost a load, a release
    /// and the runtime's exclusivity check). Still true once a set manager
    /// is freed, where ``undoManager`` reads nil.
    @usableFromInline @exclusivity(unchecked) var mayHaveUndoManager = false
    /// False while the context makes changes that are not the program's
    /// (a save's delete rules).
    var recordsUndo = true

    init(container: ModelContainer) {
        self.container = container
        self.storeIdentifier = container.store.identifier
    }

    /// The context to load related models through: the model's own, or,
    /// once that is gone, a context of the same container that takes over
    /// the loading (SwiftData traps there; a store should not). Models it
    /// loads are its own: they are not registered with the lost context's
    /// models. Nil once the container is gone too.
    var loadingContext: ModelContext? {
        if let context { return context }
        if let successor {
            successor.mergeSavedChanges()
            return successor
        }
        guard let container else { return nil }
        let made = ModelContext(container)
        made.noteMayHoldModels()
        successor = made
        return made
    }
}

/// Holds a model's observation registrar (see ``_ModelState``).
public final class _RegistrarBox {
    @usableFromInline let registrar = ObservationRegistrar()
    @usableFromInline init() {}
}

/// A model's bookkeeping: its row, its context, whether it is inserted,
/// changed or deleted, and the relationships not loaded yet. Generated
/// accessors call it; it is not for direct use.
public final class _ModelState {
    enum Status: UInt8 {
        case detached, inserted, saved, deleted
    }

    @exclusivity(unchecked) var status = Status.detached
    /// The row number once inserted or loaded; 0 before.
    @exclusivity(unchecked) @usableFromInline package var rowID: Int64 = 0
    @exclusivity(unchecked) var temporaryRow: Int64 = 0
    @usableFromInline @exclusivity(unchecked) var link: _ContextLink?
    /// The store of a deleted model's row, kept when the model leaves its
    /// context so that its identifier does not change.
    @exclusivity(unchecked) var formerStoreIdentifier: String?
    @exclusivity(unchecked) var isChanged = false
    /// Where the model is in its context's ``ChangedModels`` (-1: nowhere);
    /// trusted only where that list holds this model.
    @exclusivity(unchecked) var changedSlot = -1
    /// The fields changed since the last save, while ``status`` is
    /// `.saved`: a save writes these and keeps the stored values of the
    /// others, and merging another context's save leaves these alone.
    @exclusivity(unchecked) var changedFields = _FieldSet()
    /// Set when another context's save deleted the model's row (``status``
    /// is then `.deleted`): a change to it makes the next save throw
    /// ``SwiftDataError/modelDeleted`` instead of re-creating the row.
    @exclusivity(unchecked) var deletedElsewhere = false
    /// Each to-many changed since the last save, as it was before its
    /// first change (its targets' rows): a save adds and removes what the
    /// context changed, and keeps what other saves did to the rest.
    @exclusivity(unchecked) var toManyBaselines: [Int: [Int64]] = [:]
    /// Each to-many edited in place since the last save to keep an inverse
    /// in step, while it is not loaded (the edits are applied when it is)
    /// or, for a stored many-to-many without a baseline, what the save
    /// writes: one pair per member added or removed.
    @exclusivity(unchecked) var toManyDeltas: FieldMap<ToManyDelta> = [:]
    /// The relationships whose other side is known to be in step: set
    /// when the setter ran (it keeps the inverse in step); those set only
    /// by the class's initializer are put in step on insert.
    @exclusivity(unchecked) var inverseInStep = _FieldSet()
    /// True when a relationship may refer to a model not inserted anywhere
    /// (a to-one set to a detached model, a list assigned, a detached model
    /// filed into a list): the next save reads the relationships to insert
    /// it.
    @exclusivity(unchecked) var mayReferenceDetached = false
    /// True while another model's relationship change is being mirrored
    /// into this one (its setter then does not mirror it back).
    @exclusivity(unchecked) var isApplyingInverse = false
    /// A relationship not loaded yet: the row ids its record holds (to-one),
    /// or the tree and prefix to read its targets from (to-many; see
    /// ``RelationshipStorage``).
    enum Fault {
        case rows([Int64])
        case derived(tree: String, row: Int64)
        /// `.externalStorage` data, in `tree` under the row id.
        case external(tree: String, row: Int64)
    }

    /// Relationships not loaded yet, by field number.
    @exclusivity(unchecked) var faults: [Int: Fault] = [:]
    /// True while ``faults`` is not empty (checked by every getter).
    ///
    /// Read through this accessor, compiled here: a model's accessors are
    /// compiled in the app's module, which reads a stored property of this
    /// class with the runtime's exclusivity check (about 76 instructions)
    /// whatever the property's `@exclusivity(unchecked)` says, while this
    /// accessor's body keeps the attribute when inlined.
    @inlinable public var hasFaults: Bool { faultsFlag }
    /// What ``hasFaults`` reads.
    @exclusivity(unchecked) @usableFromInline var faultsFlag = false

    /// The model's observation registrar, created on the first read inside
    /// an Observation tracking (see ``_ObservationProbe``): a fetched model
    /// that is read but never observed costs no registrar (creating one
    /// allocates several objects). Until one exists nothing can be
    /// observing the model, so a mutation has nobody to notify.
    ///
    /// It is kept in a box of its own: `ObservationRegistrar` is a
    /// resilient type, so an optional of it stored here was copied,
    /// tested and destroyed through value witnesses on every getter call,
    /// which cost more than making the registrar; a box reference is
    /// tested with one comparison and borrowed without a copy.
    @exclusivity(unchecked) @usableFromInline var registrarBox: _RegistrarBox?

    /// The state of a new model: detached, with no row and no context. Called
    /// by code the `@Model` macro generates; not meant to be called directly.
    public init() {}

    /// Records a read of `keyPath` for Observation (called by generated getters).
    ///
    /// The key path is an autoclosure: a getter's `\.name` literal costs a
    /// runtime call and a retain and release each time it is evaluated, and
    /// most reads have no observer to give it to.
    @inlinable public func access<M: Observable, Value>(_ model: M, keyPath: @autoclosure () -> KeyPath<M, Value>) {
        if let box = registrarBox {
            box.registrar.access(model, keyPath: keyPath())
        } else if _ObservationProbe.trackingMayBeActive() {
            registrar.registrar.access(model, keyPath: keyPath())
        }
    }

    /// Runs a generated setter's mutation, notifying observers of `keyPath`
    /// (made only when there are observers, as in ``access(_:keyPath:)``).
    @inlinable public func withMutation<M: Observable, Value, R>(
        of model: M, keyPath: @autoclosure () -> KeyPath<M, Value>, _ mutation: () throws -> R
    ) rethrows -> R {
        guard let box = registrarBox else { return try mutation() }
        return try box.registrar.withMutation(of: model, keyPath: keyPath(), mutation)
    }

    @usableFromInline var registrar: _RegistrarBox {
        if let registrarBox { return registrarBox }
        let created = _RegistrarBox()
        registrarBox = created
        return created
    }

    var identifierRow: Int64 {
        if rowID > 0 { return rowID }
        if temporaryRow == 0 { temporaryRow = -temporaryRows.add(1, ordering: .relaxed).newValue }
        return temporaryRow
    }

    func setFault(field: Int, rows: [Int64]) {
        faults[field] = .rows(rows)
        faultsFlag = true
    }

    func setDerivedFault(field: Int, tree: String, row: Int64) {
        faults[field] = .derived(tree: tree, row: row)
        faultsFlag = true
    }

    func setExternalFault(field: Int, tree: String, row: Int64) {
        faults[field] = .external(tree: tree, row: row)
        faultsFlag = true
    }

    func hasExternalFault(field: Int) -> Bool {
        if case .external? = faults[field] { return true }
        return false
    }

    /// Loads `.externalStorage` data.
    public func resolve(_ value: inout Data, field: Int) {
        var optional: Data? = value
        resolve(&optional, field: field)
        value = optional ?? Data()
    }

    /// Loads `.externalStorage` data.
    public func resolve(_ value: inout Data?, field: Int) {
        guard case .external(let tree, let row)? = takeFault(field: field), let context = link?.loadingContext else {
            return
        }
        value = context.externalData(tree: tree, row: row)
    }

    /// The row ids a to-one fault holds.
    func faultRows(field: Int) -> [Int64]? {
        if case .rows(let rows)? = faults[field] { return rows }
        return nil
    }

    /// Takes the faults and left-out attributes a subclass's initializer
    /// recorded in `staged` while it read its own fields (before
    /// `super.init`, it cannot reach the model's state). Called by code
    /// the `@Model` macro generates; not meant to be called directly.
    public func _absorb(_ staged: _ModelState) {
        guard staged.hasFaults else { return }
        faults.merge(staged.faults) { _, new in new }
        unloaded.formUnion(staged.unloaded)
        noteFaultsChanged()
    }

    func clearFaults() {
        faults = [:]
        toManyDeltas = [:]
        unloaded = _FieldSet()
        faultsFlag = false
        mayHaveUnloaded = false
    }

    /// Attributes a fetch's `propertiesToFetch` left out: each holds its
    /// type's placeholder until the record is read again. A bit set, not
    /// entries of ``faults``: a partial fetch marks several per model, and
    /// a dictionary would cost each model an allocation.
    @exclusivity(unchecked) var unloaded = _FieldSet()
    /// True while ``unloaded`` holds a field (checked, inlined, by getters
    /// and setters of a model with faults); kept by ``noteFaultsChanged()``.
    @exclusivity(unchecked) @usableFromInline var mayHaveUnloaded = false

    /// Brings ``hasFaults`` and ``mayHaveUnloaded`` in line with ``faults``
    /// and ``unloaded`` after either changed.
    private func noteFaultsChanged() {
        mayHaveUnloaded = !unloaded.isEmpty
        faultsFlag = mayHaveUnloaded || !faults.isEmpty
    }

    /// Marks attribute `field` as left out by a partial fetch: it holds a
    /// placeholder until first read or written.
    @usableFromInline func setUnloaded(field: Int) {
        unloaded.insert(field)
        faultsFlag = true
        mayHaveUnloaded = true
    }

    /// Called by generated getters of a model with faults: when
    /// attribute `field` was left out by a fetch's `propertiesToFetch`,
    /// reads the model's record and loads every attribute left out. Not
    /// meant to be called directly.
    @inlinable public func loadIfUnloaded<M: PersistentModel>(_ model: M, field: Int) {
        if mayHaveUnloaded { loadUnloaded(model, field: field) }
    }

    /// Called by generated setters of a model with faults, before attribute
    /// `field` takes a new value. A value left out by `propertiesToFetch`
    /// is replaced unread (``didChange(_:field:)`` then counts it as
    /// loaded; the others stay left out, to load when read), unless an
    /// undo manager will record the old value: then every attribute left
    /// out is loaded first, as a getter loads them. Not meant to be called
    /// directly.
    @inlinable public func loadBeforeSet<M: PersistentModel>(_ model: M, field: Int) {
        // The flag first: the weak reference's load paid the runtime's
        // exclusivity check in the app's module.
        if mayHaveUnloaded, let link, link.mayHaveUndoManager, link.undoManager != nil {
            loadUnloaded(model, field: field)
        }
    }

    /// Loads the attributes left out of `model`, when `field` is one of
    /// them, from the record as the model's context reads it now. When the
    /// record cannot be read (deleted since, damaged, no context) the
    /// attributes keep their placeholders and stay unloaded, so the next
    /// read tries again.
    @usableFromInline func loadUnloaded(_ model: any PersistentModel, field: Int) {
        guard unloaded.contains(field) else { return }
        guard let context = link?.loadingContext,
            let entity = context.container.schema.entity(forType: type(of: model)),
            let bytes = try? context.storedRecord(entity, row: rowID)
        else { return }
        try? loadUnloaded(model, entity: entity, from: bytes)
    }

    /// Loads the attributes left out of `model` from `bytes`, its record.
    func loadUnloaded(_ model: any PersistentModel, entity: Schema.Entity, from bytes: [UInt8]) throws {
        let fields = unloaded
        guard !fields.isEmpty else { return }
        dropFaults(fields)
        do {
            try _RecordReader.withReader(bytes, entity: entity, row: rowID) { reader in
                try model._strataLoad(from: &reader, fields: fields)
            }
        } catch {
            unloaded = fields
            noteFaultsChanged()
            throw error
        }
    }

    /// Puts back faults saved before a load that failed.
    func restoreFaults(_ saved: [Int: Fault]) {
        faults = saved
        noteFaultsChanged()
    }

    /// Forgets the faults of `fields` (about to be loaded again).
    func dropFaults(_ fields: _FieldSet) {
        guard hasFaults else { return }
        for field in faults.keys where fields.contains(field) { faults[field] = nil }
        if mayHaveUnloaded { unloaded = unloaded.subtracting(fields) }
        noteFaultsChanged()
    }

    func takeFault(field: Int) -> Fault? {
        if mayHaveUnloaded, unloaded.contains(field) {
            unloaded.remove(field)
            noteFaultsChanged()
        }
        // A model with attributes left out and no relationship fault (a
        // partial fetch's): removing from the empty table cost about 160
        // instructions a setter.
        guard !faults.isEmpty, let fault = faults.removeValue(forKey: field) else { return nil }
        noteFaultsChanged()
        return fault
    }

    /// Called by a generated setter before it stores a new value: with an
    /// undo manager on the model's context, records setting `old` back as
    /// the undo. Changes made to keep an inverse in step are not recorded
    /// (undoing the change that caused them brings them back).
    @inlinable public func registerUndo<M: PersistentModel, Value>(
        _ model: M, keyPath: @autoclosure () -> ReferenceWritableKeyPath<M, Value>, old: @autoclosure () -> Value
    ) {
        // Inlined into every setter: without an undo manager, one check
        // (the key path too is made only when needed: about 80
        // instructions).
        if link?.mayHaveUndoManager == true { recordUndo(model, keyPath: keyPath(), old: old()) }
    }

    @usableFromInline func recordUndo<M: PersistentModel, Value>(
        _ model: M, keyPath: ReferenceWritableKeyPath<M, Value>, old value: Value
    ) {
        guard let link, let undoManager = link.undoManager, link.recordsUndo, !isApplyingInverse else { return }
        undoManager.registerUndo(withTarget: model) { model in model[keyPath: keyPath] = value }
    }

    /// Called by a generated setter after field `field` of `model` changed:
    /// the field is no longer an unloaded fault, and on a saved model (or
    /// one another context's save deleted) the change is recorded for the
    /// next save. Not meant to be called directly.
    public func didChange<M: PersistentModel>(_ model: M, field: Int) {
        if hasFaults { _ = takeFault(field: field) }
        recordChange(model, field: field)
    }

    /// Records a change to field `field` of `model` for the next save: on
    /// a saved model the field joins ``changedFields``; on one another
    /// context's save deleted, the change makes the next save refuse.
    func recordChange<M: PersistentModel>(_ model: M, field: Int) {
        guard let context = link?.context else { return }
        switch status {
        case .saved:
            changedFields.insert(field)
            if !isChanged {
                isChanged = true
                context.noteChanged(model, state: self)
            }
        case .deleted where deletedElsewhere:
            if !isChanged {
                isChanged = true
                context.noteChanged(model, state: self)
            }
        case .detached, .inserted, .deleted:
            break
        }
        context.noteMutation()
    }

    /// Attributes are always loaded: nothing to do.
    @inlinable public func resolve<T>(_ value: inout T, field: Int) {}

    /// Loads a to-one relationship read from the record.
    ///
    /// A target that cannot be read (a damaged record, an I/O error) reads
    /// as nil but stays unloaded: the model keeps the stored row id (a save
    /// writes it back, never nil in its place), and the next read tries
    /// again. A target row that does not exist reads as nil (the integrity
    /// check reports the dangling reference).
    public func resolve<T: PersistentModel>(_ value: inout T?, field: Int) {
        guard case .rows(let rows)? = faults[field], let context = link?.loadingContext else { return }
        do {
            if let row = rows.first { value = try context.loadRelated(T.self, row: row) }
            _ = takeFault(field: field)
        } catch {
            value = nil
        }
    }

    /// Loads an optional to-many relationship (`[T]?`, the form
    /// CloudKit-compatible schemas use): a stored model's is never nil.
    public func resolve<T: PersistentModel>(_ value: inout [T]?, field: Int) {
        guard faults[field] != nil else { return }
        var list = value ?? []
        resolve(&list, field: field)
        value = list
    }

    /// Loads a to-many relationship from the tree that holds it.
    ///
    /// When the tree or a target's record cannot be read, the targets that
    /// could be read are returned and the relationship stays unloaded, so
    /// the next read tries again (until the program assigns the
    /// relationship itself, nothing of it is written back).
    public func resolve<T: PersistentModel>(_ value: inout [T], field: Int) {
        guard let fault = faults[field], let context = link?.loadingContext else { return }
        let rows: [Int64]
        switch fault {
        case .rows(let listed):
            rows = listed
        case .derived(let tree, let row):
            guard let stored = try? context.derivedRowsOrThrow(tree: tree, row: row) else {
                value = []
                return
            }
            rows = stored
        case .external:
            return  // only Data attributes are stored outside their record
        }
        var loaded: [T] = []
        var complete = true
        let delta = toManyDeltas[field]
        loaded.reserveCapacity(rows.count + (delta?.added.count ?? 0))
        for row in rows where delta?.removes(row: row) != true {
            do {
                if let model = try context.loadRelated(T.self, row: row), delta?.removes(model) != true {
                    loaded.append(model)
                }
            } catch {
                complete = false
            }
        }
        if let delta, !delta.added.isEmpty {
            delta.addMissing(to: &loaded)
            // Members filed while detached are in the list now.
            if delta.added.contains(where: { $0._strataState.status == .detached }) { mayReferenceDetached = true }
        }
        value = loaded
        // The edits stay until the save: a stored many-to-many writes
        // them, as pairs, whether or not the list was read since.
        if complete { _ = takeFault(field: field) }
    }
}
