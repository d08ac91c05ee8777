import Foundation

// The identity map: one model per row, looked up by row and by
// identifier, and what `model(for:)` returns for a row that has none.

extension ModelContext {
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

    // MARK: - Models an upsert displaced

    /// Keeps `model`, registered for `row` until an inserted model took the
    /// row at a save, within reach of the merges of the row.
    func noteDisplaced(_ model: any PersistentModel, entity: Schema.Entity, row: Int64) {
        var list = (displaced[entity.ordinal]?[row] ?? []).filter { $0.model != nil }
        list.append(WeakModel(model))
        displaced[entity.ordinal, default: [:]][row] = list
    }

    /// The models an upsert displaced from `row` that the app still holds.
    func displacedModels(_ entity: Schema.Entity, row: Int64) -> [any PersistentModel] {
        guard !displaced.isEmpty, let entity = entity.concrete(row), let list = displaced[entity.ordinal]?[row] else {
            return []
        }
        return list.compactMap(\.model)
    }

    /// Forgets the displaced models of `row` (its row is gone), returning
    /// those still held.
    func forgetDisplaced(_ entity: Schema.Entity, row: Int64) -> [any PersistentModel] {
        guard !displaced.isEmpty, let entity = entity.concrete(row) else { return [] }
        let list = displaced[entity.ordinal]?.removeValue(forKey: row) ?? []
        if displaced[entity.ordinal]?.isEmpty == true { displaced[entity.ordinal] = nil }
        return list.compactMap(\.model)
    }

    // MARK: - Released models

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
    func revive(_ entity: Schema.Entity, row: Int64) -> (any PersistentModel)? {
        guard let entry = released[entity.ordinal].removeValue(forKey: row) else { return nil }
        releasedCount -= 1
        guard let model = entry.model else { return nil }
        registry[entity.ordinal][row] = model
        return model
    }

    func forgetReleased(_ entity: Schema.Entity, row: Int64) {
        guard releasedCount > 0, released[entity.ordinal].removeValue(forKey: row) != nil else { return }
        releasedCount -= 1
    }

    func unregister(_ model: any PersistentModel, state: _ModelState) {
        if let entity = container.schema.entity(forType: type(of: model)) {
            registry[entity.ordinal][state.rowID] = nil
            forgetReleased(entity, row: state.rowID)
        }
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
