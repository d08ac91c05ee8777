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
/// Rules are applied to the context (as SwiftData's `processPendingChanges`
/// does): if the write itself then fails, the cascaded deletes and the
/// cleared references stay pending with the rest, and the next save writes
/// them. A `.deny` or count failure changes nothing.
///
/// `minimumModelCount` and `maximumModelCount` (0 means no limit) are
/// checked on every inserted or changed model's loaded to-many
/// relationships; a violation throws `modelValidationFailure`.
extension ModelContext {
    func applyDeleteRules() throws {
        guard !deleted.isEmpty else {
            try validateCounts()
            return
        }
        // 1. The closure under cascade, without changing anything yet.
        var doomed = deleted
        var queue = Array(deleted.values)
        while let model = queue.popLast() {
            guard let entity = container.schema.entity(forType: type(of: model)) else { continue }
            for relationship in entity.relationships where relationship.deleteRule == .cascade {
                for target in Self.targets(of: model, relationship)
                where doomed.updateValue(target, forKey: ObjectIdentifier(target)) == nil {
                    queue.append(target)
                }
            }
        }
        // 2. Deny.
        for model in doomed.values {
            guard let entity = container.schema.entity(forType: type(of: model)) else { continue }
            for relationship in entity.relationships where relationship.deleteRule == .deny {
                let blocking = Self.targets(of: model, relationship).filter { doomed[ObjectIdentifier($0)] == nil }
                if let first = blocking.first {
                    throw SwiftDataError(
                        .modelValidationFailure,
                        "\(model.persistentModelID) cannot be deleted: \(entity.name).\(relationship.name) "
                            + "(deleteRule: .deny) still refers to \(blocking.count) model(s), "
                            + "such as \(first.persistentModelID)")
                }
            }
        }
        try validateCounts(excluding: doomed)
        // 3. Apply: cascade victims join the deletes; the other sides let go.
        for model in doomed.values where deleted[ObjectIdentifier(model)] == nil { deleteExistential(model) }
        for model in doomed.values {
            guard let entity = container.schema.entity(forType: type(of: model)) else { continue }
            for relationship in entity.relationships where relationship.deleteRule != .noAction {
                guard let side = InverseGraph.inverse(of: entity.type, field: relationship.field) else { continue }
                for target in Self.targets(of: model, relationship) where doomed[ObjectIdentifier(target)] == nil {
                    InverseSync.remove(model, from: target, side: side)
                }
            }
            try clearReferencesWithoutInverse(to: model, entity: entity, doomed: doomed)
        }
    }

    private func deleteExistential(_ model: any PersistentModel) { delete(model) }

    /// The models relationship `relationship` of `model` refers to, loaded.
    static func targets(of model: any PersistentModel, _ relationship: Schema.Relationship) -> [any PersistentModel] {
        let value = InverseSync.value(of: model, field: relationship.field)
        if let many = value as? [any PersistentModel] { return many }
        if let one = value as? any PersistentModel { return [one] }
        return []
    }

    /// Clears references to `model` held through relationships of other
    /// models that have no inverse (so in-memory sync could not see them):
    /// stored ones through the reverse index or join mirror, unsaved ones
    /// by looking at the pending models.
    private func clearReferencesWithoutInverse(
        to model: any PersistentModel, entity: Schema.Entity, doomed: [ObjectIdentifier: any PersistentModel]
    ) throws {
        for source in container.schema.entities {
            for relationship in source.relationships where relationship.destinationType == entity.type {
                guard InverseGraph.inverse(of: source.type, field: relationship.field) == nil else { continue }
                var holders: [any PersistentModel] = inserted + Array(changed.values)
                if model._strataState.rowID > 0, let storage = source.relationshipStorage[relationship.field] {
                    let tree: String?
                    switch storage {
                    case .toOne(let index): tree = index
                    case .join(_, let mirror): tree = mirror
                    case .viaInverse, .mirror: tree = nil
                    }
                    if let tree {
                        for row in derivedRows(tree: tree, row: model._strataState.rowID) {
                            if let holder = try loadExistential(source.type, row: row) { holders.append(holder) }
                        }
                    }
                }
                for holder in holders where doomed[ObjectIdentifier(holder)] == nil && type(of: holder) == source.type {
                    let current = Self.targets(of: holder, relationship)
                    guard current.contains(where: { $0 === model }) else { continue }
                    if relationship.isToOneRelationship {
                        holder._strataSetRelationship(field: relationship.field, to: nil)
                    } else {
                        holder._strataSetRelationship(field: relationship.field, to: current.filter { $0 !== model })
                    }
                }
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
