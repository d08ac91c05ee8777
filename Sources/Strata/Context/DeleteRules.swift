/// Delete rules and relationship counts, applied by `save()` before it
/// writes anything.
///
/// For each deleted model, each of its relationships' rules applies to the
/// models that relationship refers to:
/// - `.cascade` deletes them too, transitively; a cycle ends at models
///   already being deleted;
/// - `.deny` refuses the save while the relationship still refers to a
///   model that is not itself being deleted: the save throws
///   ``SwiftDataError/modelValidationFailure`` naming the model and the
///   relationship, and neither the store nor the context changes;
/// - `.nullify` (the default) takes the deleted model out of the inverse
///   relationship of each model it referred to;
/// - `.noAction` leaves the other side as it is (its references then
///   dangle, as in Core Data; the integrity check reports them).
/// References to a deleted model through relationships that have no
/// inverse are cleared too (found through the reverse indexes and join
/// mirrors), so a save never leaves a reference to a row it deleted unless
/// `.noAction` asked for it.
///
/// Rows reached by a cascade that no model of this context stands for are
/// deleted without building models for them: their relationships are read
/// from their records, reverse indexes and join trees (a cascade over a
/// large graph costs no more memory than its row ids).
///
/// Rules are applied to the context (as SwiftData's `processPendingChanges`
/// does): if the write itself then fails, the cascaded deletes and the
/// cleared references stay pending with the rest, and the next save writes
/// them. A `.deny` or count failure changes nothing.
///
/// `minimumModelCount` and `maximumModelCount` (0 means no limit) are
/// checked on every inserted or changed model's loaded to-many
/// relationships; a violation throws `modelValidationFailure`.
extension ModelContext {
    /// A row being deleted: a model of this context, or a stored row that
    /// no model stands for.
    struct Victim {
        let entity: Schema.Entity
        let row: Int64
        let model: (any PersistentModel)?
        /// A to-one of this row known without reading its record: the
        /// row was found in that to-one's reverse index under `target`.
        var knownToOne: (field: Int, target: Int64)? = nil
    }

    /// A row to delete that no model stands for, with what is known of it.
    struct DoomedRow {
        let entity: Schema.Entity
        let row: Int64
        let knownToOne: (field: Int, target: Int64)?
    }

    struct RowKeyPair: Hashable {
        let entity: Int
        let row: Int64
    }

    /// Works out every delete the pending deletes imply, checks `.deny`
    /// and counts, then applies the other sides' changes. Returns the rows
    /// to delete that no model stands for.
    func applyDeleteRules() throws -> [DoomedRow] {
        guard !deleted.isEmpty else {
            try validateCounts()
            return []
        }
        // Steps 1 and 2 only read: one snapshot serves every lookup.
        let (victims, doomed, doomedModels) = try store.database.read { tx in
            snapshot = Snapshot(tx)
            defer { snapshot = nil }
            return try closure()
        }
        try validateCounts(excluding: doomedModels)
        // 3. Apply: doomed models join the deletes; the other sides let go.
        for model in doomedModels.values where deleted[ObjectIdentifier(model)] == nil { deleteExistential(model) }
        func isDoomed(_ victim: Victim) -> Bool {
            if let model = victim.model, doomedModels[ObjectIdentifier(model)] != nil { return true }
            return victim.row > 0 && doomed[RowKeyPair(entity: victim.entity.ordinal, row: victim.row)] != nil
        }
        for victim in victims {
            for relationship in victim.entity.relationships where relationship.deleteRule != .noAction {
                guard let side = victim.entity.inverseSides[relationship.field] else { continue }
                // A stored row is held by a to-many on the other side only in
                // storage, which its delete clears: nothing to load.
                if victim.model == nil && !side.isToOne { continue }
                // Cascaded targets are all doomed: nothing to let go of.
                if relationship.deleteRule == .cascade { continue }
                for target in try targets(of: victim, relationship) where !isDoomed(target) {
                    // A target no model stands for holds this victim only in
                    // storage, which the delete itself clears — unless its
                    // side is a stored to-one pointing back.
                    let model: (any PersistentModel)?
                    if let loaded = target.model {
                        model = loaded
                    } else if side.isToOne {
                        model = try loadExistential(target.entity.type, row: target.row)
                    } else {
                        model = nil
                    }
                    guard let model else { continue }
                    if let own = victim.model {
                        InverseSync.remove(own, from: model, side: side)
                    } else if side.isToOne,
                        let back = InverseSync.value(of: model, field: side.field) as? any PersistentModel,
                        back._strataState.rowID == victim.row
                    {
                        InverseSync.set(model, field: side.field, to: nil)
                    }
                }
            }
            try clearReferencesWithoutInverse(to: victim)
        }
        return doomed.values.filter { $0.model == nil }.map {
            DoomedRow(entity: $0.entity, row: $0.row, knownToOne: $0.knownToOne)
        }
    }

    /// Steps 1 and 2: every row the deletes reach under `.cascade`, and the
    /// `.deny` check; nothing changes yet.
    private func closure() throws -> (
        victims: [Victim], doomed: [RowKeyPair: Victim], doomedModels: [ObjectIdentifier: any PersistentModel]
    ) {
        // 1. The closure under cascade, without changing anything yet.
        var doomed: [RowKeyPair: Victim] = [:]
        var doomedModels: [ObjectIdentifier: any PersistentModel] = [:]
        var queue: [Victim] = []
        func doom(_ victim: Victim) {
            let key = RowKeyPair(entity: victim.entity.ordinal, row: victim.row)
            if let model = victim.model {
                guard doomedModels.updateValue(model, forKey: ObjectIdentifier(model)) == nil else { return }
                if victim.row > 0 { doomed[key] = victim }
            } else {
                guard doomed[key] == nil else { return }
                doomed[key] = victim
            }
            queue.append(victim)
        }
        for model in deleted.values {
            guard let entity = container.schema.entity(forType: type(of: model)) else { continue }
            doom(Victim(entity: entity, row: model._strataState.rowID, model: model))
        }
        while let victim = queue.popLast() {
            for relationship in victim.entity.relationships where relationship.deleteRule == .cascade {
                for target in try targets(of: victim, relationship) { doom(target) }
            }
        }
        func isDoomed(_ victim: Victim) -> Bool {
            if let model = victim.model, doomedModels[ObjectIdentifier(model)] != nil { return true }
            return victim.row > 0 && doomed[RowKeyPair(entity: victim.entity.ordinal, row: victim.row)] != nil
        }
        let victims =
            Array(doomed.values)
            + doomedModels.values.filter { $0._strataState.rowID <= 0 }.compactMap { model in
                container.schema.entity(forType: type(of: model)).map { Victim(entity: $0, row: 0, model: model) }
            }
        // 2. Deny (counts are checked by the caller).
        for victim in victims {
            for relationship in victim.entity.relationships where relationship.deleteRule == .deny {
                let blocking = try targets(of: victim, relationship).filter { !isDoomed($0) }
                if let first = blocking.first {
                    let name = PersistentIdentifier(entityName: victim.entity.name, rowID: victim.row)
                    let other = PersistentIdentifier(entityName: first.entity.name, rowID: first.row)
                    throw SwiftDataError(
                        .modelValidationFailure,
                        "\(victim.model?.persistentModelID ?? name) cannot be deleted: "
                            + "\(victim.entity.name).\(relationship.name) (deleteRule: .deny) still refers to "
                            + "\(blocking.count) model(s), such as \(first.model?.persistentModelID ?? other)")
                }
            }
        }
        return (victims, doomed, doomedModels)
    }

    func deleteExistential(_ model: any PersistentModel) { delete(model) }

    /// The loaded models relationship `relationship` of `model` refers to.
    static func targets(of model: any PersistentModel, _ relationship: Schema.Relationship) -> [any PersistentModel] {
        let value = InverseSync.value(of: model, field: relationship.field)
        if let many = value as? [any PersistentModel] { return many }
        if let one = value as? any PersistentModel { return [one] }
        return []
    }

    /// What relationship `relationship` of `victim` refers to: loaded
    /// models when the victim is a model with that relationship loaded,
    /// otherwise rows read from storage (as the registered model when this
    /// context holds one).
    func targets(of victim: Victim, _ relationship: Schema.Relationship) throws -> [Victim] {
        guard let destinationType = relationship.destinationType,
            let destination = container.schema.entity(forType: destinationType)
        else { return [] }
        if let model = victim.model, victim.row <= 0 || model._strataState.faults[relationship.field] == nil {
            return Self.targets(of: model, relationship).map {
                Victim(entity: destination, row: $0._strataState.rowID, model: $0)
            }
        }
        let rows: [Int64]
        switch victim.entity.relationshipStorage[relationship.field] {
        case .toOne?:
            if let faulted = victim.model?._strataState.faultRows(field: relationship.field) {
                rows = faulted
            } else {
                rows = try storedToOne(victim, field: relationship.field)
            }
        case .viaInverse(let tree)?:
            // Each row found here refers to the victim through the inverse.
            let field = victim.entity.inverseSides[relationship.field]?.field
            return derivedRows(tree: tree, row: victim.row).map { row in
                Victim(
                    entity: destination, row: row, model: registered(destination, row: row),
                    knownToOne: field.map { ($0, victim.row) })
            }
        case .join(let tree, _)?, .mirror(_, let tree)?:
            rows = derivedRows(tree: tree, row: victim.row)
        case nil:
            rows = []
        }
        return rows.map { Victim(entity: destination, row: $0, model: registered(destination, row: $0)) }
    }

    /// The to-one row id stored in a row's record.
    private func storedToOne(_ victim: Victim, field: Int) throws -> [Int64] {
        let bytes =
            try snapshot?.record(victim.entity, row: victim.row)
            ?? store.database.read { tx in try Snapshot(tx).record(victim.entity, row: victim.row) }
        guard let bytes else { return [] }
        let target = try _RecordReader.withReader(bytes, entity: victim.entity, row: victim.row) {
            try $0.toOneRow(field: field)
        }
        return target.map { [$0] } ?? []
    }

    /// Clears references to `victim` held through relationships of other
    /// models that have no inverse (so in-memory sync could not see them):
    /// stored ones through the reverse index or join mirror, unsaved ones
    /// by looking at the pending models.
    func clearReferencesWithoutInverse(to victim: Victim) throws {
        for (source, relationship) in victim.entity.incomingWithoutInverse {
            var holders: [any PersistentModel] = victim.model == nil ? [] : inserted + Array(changed.values)
            if victim.row > 0, let storage = source.relationshipStorage[relationship.field] {
                let tree: String?
                switch storage {
                case .toOne(let index): tree = index
                case .join(_, let mirror): tree = mirror
                case .viaInverse, .mirror: tree = nil
                }
                if let tree {
                    for row in derivedRows(tree: tree, row: victim.row) {
                        if let holder = try loadExistential(source.type, row: row) { holders.append(holder) }
                    }
                }
            }
            for holder in holders where !holder.isDeleted && type(of: holder) == source.type {
                let current = Self.targets(of: holder, relationship)
                let keep = current.filter { target in
                    if let model = victim.model { return target !== model }
                    return target._strataState.rowID != victim.row
                }
                guard keep.count != current.count else { continue }
                holder._strataSetRelationship(
                    field: relationship.field, to: relationship.isToOneRelationship ? nil : keep)
            }
        }
    }

    /// Checks `minimumModelCount` / `maximumModelCount` on the loaded
    /// to-many relationships of inserted and changed models.
    func validateCounts(excluding doomed: [ObjectIdentifier: any PersistentModel] = [:]) throws {
        for model in inserted + Array(changed.values) where doomed[ObjectIdentifier(model)] == nil {
            guard let entity = container.schema.entity(forType: type(of: model)) else { continue }
            for relationship in entity.relationships where !relationship.isToOneRelationship {
                let minimum = relationship.minimumModelCount ?? 0
                let maximum = relationship.maximumModelCount ?? 0
                guard minimum > 0 || maximum > 0, model._strataState.faults[relationship.field] == nil else { continue }
                let count = Self.targets(of: model, relationship).count
                if minimum > 0 && count < minimum || maximum > 0 && count > maximum {
                    let bounds = [minimum > 0 ? "at least \(minimum)" : nil, maximum > 0 ? "at most \(maximum)" : nil]
                    throw SwiftDataError(
                        .modelValidationFailure,
                        "\(model.persistentModelID).\(relationship.name) holds \(count) model(s); it must hold "
                            + bounds.compactMap { $0 }.joined(separator: " and "))
                }
            }
        }
    }
}
