// Over 500 lines: every delete rule and relationship-count check, over
// models and over rows not loaded; they share the walk over a deletion's
// reach.

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
    }

    /// A stored row to delete that no model stands for, with the to-one
    /// known without its record (`hintField` < 0 when none).
    struct DoomedRow {
        let row: Int64
        var hintField = -1
        var hintTarget: Int64 = 0
    }

    /// The cascade's closure: the doomed models, and the doomed rows that no
    /// model stands for, by entity ordinal.
    struct Doomed {
        var models: [ObjectIdentifier: any PersistentModel] = [:]
        /// Every doomed stored row, models' included, by entity ordinal.
        var rowSets: [RowSet]
        /// The doomed rows that no model stands for, in the order found.
        var rows: [[DoomedRow]]

        init(entityCount: Int) {
            rowSets = Array(repeating: RowSet(), count: entityCount)
            rows = Array(repeating: [], count: entityCount)
        }

        func contains(_ victim: Victim) -> Bool {
            if let model = victim.model, models[ObjectIdentifier(model)] != nil { return true }
            return victim.row > 0 && rowSets[victim.entity.ordinal].contains(victim.row)
        }
    }

    /// The state of the cascade's closure while it grows.
    struct CascadeWalk {
        let context: ModelContext
        var doomed: Doomed
        /// Whether the context holds any model of each entity (when not, a
        /// stored row needs no identity-map lookup).
        let holdsModels: [Bool]
        /// Doomed models whose relationships are still to follow.
        var modelQueue: [Victim] = []
        /// Rows whose stored relationship still has to be followed, by
        /// entity ordinal and relationship field.
        var frontier: [[Int: [DoomedRow]]]
        /// Each entity's `.cascade` relationships, by ordinal.
        let cascading: [[Schema.Relationship]]

        init(context: ModelContext) {
            let entities = context.container.schema.entities
            self.context = context
            holdsModels = context.registry.map { $0.count > 0 || context.holdsReleasedModels }
            doomed = Doomed(entityCount: entities.count)
            frontier = Array(repeating: [:], count: entities.count)
            cascading = entities.map { entity in entity.relationships.filter { $0.deleteRule == .cascade } }
        }

        mutating func doom(model: any PersistentModel, entity declared: Schema.Entity) {
            // A subclass's model is doomed under its own entity.
            let entity =
                declared.hasSubentities
                ? context.container.schema.entity(forType: type(of: model)) ?? declared : declared
            guard doomed.models.updateValue(model, forKey: ObjectIdentifier(model)) == nil else { return }
            let row = model._strataState.rowID
            if row > 0 { doomed.rowSets[entity.ordinal].insert(row) }
            modelQueue.append(Victim(entity: entity, row: row, model: model))
        }

        /// Makes room for `count` more rows of `entity` (a batch about to be
        /// doomed), so the sets and lists grow once, not by doubling.
        mutating func reserve(_ count: Int, entity: Schema.Entity) {
            doomed.rowSets[entity.ordinal].reserve(doomed.rowSets[entity.ordinal].count + count)
            doomed.rows[entity.ordinal].reserveCapacity(doomed.rows[entity.ordinal].count + count)
        }

        /// Dooms a stored row: as its model when this context holds one.
        mutating func doom(row: DoomedRow, entity declared: Schema.Entity) {
            // A relationship to a base class may hold a subclass's row,
            // which its own entity deletes.
            let entity = declared.concreteOrSelf(row.row)
            if holdsModels[entity.ordinal], let model = context.registered(entity, row: row.row) {
                return doom(model: model, entity: entity)
            }
            guard doomed.rowSets[entity.ordinal].insert(row.row) else { return }
            doomed.rows[entity.ordinal].append(row)
            for relationship in cascading[entity.ordinal] {
                frontier[entity.ordinal][relationship.field, default: []].append(row)
            }
        }
    }

    /// Works out every delete the pending deletes imply, checks `.deny`
    /// and counts, then applies the other sides' changes. Returns, by
    /// entity ordinal, the rows to delete that no model stands for.
    func applyDeleteRules() throws -> [[DoomedRow]] {
        guard !deleted.isEmpty || markedRowCount > 0 else {
            try validateCounts()
            return []
        }
        // Steps 1 and 2 only read: one snapshot serves every lookup.
        let doomed = try store.read { tx in
            snapshot = Snapshot(tx)
            defer { snapshot = nil }
            return try closure()
        }
        try validateCounts(excluding: doomed.models)
        // 3. Apply: doomed models join the deletes; the other sides let go.
        for model in doomed.models.values where deleted[ObjectIdentifier(model)] == nil { deleteExistential(model) }
        for model in doomed.models.values {
            guard let entity = container.schema.entity(forType: type(of: model)) else { continue }
            try letGo(of: Victim(entity: entity, row: model._strataState.rowID, model: model), doomed: doomed)
        }
        for entity in container.schema.entities where needsLetGo(entity, modelless: true) {
            for row in doomed.rows[entity.ordinal] {
                try letGo(of: Victim(entity: entity, row: row.row, model: nil), doomed: doomed)
            }
        }
        return doomed.rows
    }

    /// Whether deleting a row of `entity` changes anything on the other
    /// sides of its relationships (for a row without a model, only stored
    /// to-ones pointing back and references without an inverse do).
    private func needsLetGo(_ entity: Schema.Entity, modelless: Bool) -> Bool {
        if !entity.incomingWithoutInverse.isEmpty { return true }
        return entity.relationships.contains { relationship in
            guard relationship.deleteRule != .noAction, relationship.deleteRule != .cascade,
                let side = entity.inverseSides[relationship.field]
            else { return false }
            return !modelless || side.isToOne
        }
    }

    /// Step 3 for one victim: the models its relationships refer to (but
    /// cascaded ones, which are doomed) let go of it.
    private func letGo(of victim: Victim, doomed: Doomed) throws {
        for relationship in victim.entity.relationships where relationship.deleteRule != .noAction {
            guard let side = victim.entity.inverseSides[relationship.field] else { continue }
            // A stored row is held by a to-many on the other side only in
            // storage, which its delete clears: nothing to load.
            if victim.model == nil && !side.isToOne { continue }
            // Cascaded targets are all doomed: nothing to let go of.
            if relationship.deleteRule == .cascade { continue }
            for target in try targets(of: victim, relationship) where !doomed.contains(target) {
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
                    InverseUpkeep.remove(own, from: model, side: side)
                } else if side.isToOne,
                    let back = InverseUpkeep.value(of: model, field: side.field) as? any PersistentModel,
                    back._strataState.rowID == victim.row
                {
                    InverseUpkeep.set(model, field: side.field, to: nil)
                }
            }
        }
        try clearReferencesWithoutInverse(to: victim)
    }

    /// Steps 1 and 2: every row the deletes reach under `.cascade`, and the
    /// `.deny` check; nothing changes yet.
    ///
    /// Models are followed one by one through their loaded relationships.
    /// Stored relationships — of rows without a model, and relationships a
    /// doomed model never loaded — are followed in batches, one entity and
    /// relationship at a time: the batch's rows are sorted and the
    /// relationship's tree is read with one cursor moving forward (a merge
    /// join), so a cascade over many rows costs a scan, not a search per row.
    private func closure() throws -> Doomed {
        let entities = container.schema.entities
        var walk = CascadeWalk(context: self)
        for model in deleted.values {
            guard let entity = container.schema.entity(forType: type(of: model)) else { continue }
            walk.doom(model: model, entity: entity)
        }
        // Rows delete(model:where:) marked start the walk as rows: none
        // has a model here (loading one moves it to `deleted`).
        if markedRowCount > 0 {
            for entity in entities where markedRows[entity.ordinal].count > 0 {
                walk.reserve(markedRows[entity.ordinal].count, entity: entity)
                for row in markedRows[entity.ordinal] { walk.doom(row: DoomedRow(row: row), entity: entity) }
            }
        }
        while true {
            while let victim = walk.modelQueue.popLast() {
                for relationship in walk.cascading[victim.entity.ordinal] {
                    let model = victim.model.unsafelyUnwrapped
                    if victim.row <= 0 || !model._strataState.isStoredAsIs(relationship.field) {
                        for target in try targets(of: victim, relationship) {
                            if let model = target.model {
                                walk.doom(model: model, entity: target.entity)
                            } else {
                                walk.doom(row: DoomedRow(row: target.row), entity: target.entity)
                            }
                        }
                    } else if case .toOne? = victim.entity.relationshipStorage[relationship.field],
                        let faulted = model._strataState.faultRows(field: relationship.field)
                    {
                        guard let destination = destination(of: relationship) else { continue }
                        for row in faulted { walk.doom(row: DoomedRow(row: row), entity: destination) }
                    } else {
                        walk.frontier[victim.entity.ordinal][relationship.field, default: []].append(
                            DoomedRow(row: victim.row))
                    }
                }
            }
            guard let ordinal = walk.frontier.firstIndex(where: { !$0.isEmpty }) else { break }
            let entity = entities[ordinal]
            let (field, rows) = walk.frontier[ordinal].first.unsafelyUnwrapped
            walk.frontier[ordinal][field] = nil
            guard let relationship = entity.relationships.first(where: { $0.field == field }),
                let destination = destination(of: relationship)
            else { continue }
            walk.reserve(try expectedTargets(of: rows, entity: entity, relationship), entity: destination)
            try storedTargets(of: rows, entity: entity, relationship) { found in
                for row in found { walk.doom(row: row, entity: destination) }
            }
        }
        let doomed = walk.doomed

        // 2. Deny (counts are checked by the caller), and nullify that
        // would leave a non-optional to-one without a target.
        for entity in entities {
            let denying = entity.relationships.filter { relationship in
                relationship.deleteRule == .deny
                    || (relationship.deleteRule == .nullify && requiresTarget(inverseOf: relationship, in: entity))
            }
            guard !denying.isEmpty else { continue }
            var victims = doomed.rows[entity.ordinal].map { Victim(entity: entity, row: $0.row, model: nil) }
            for model in doomed.models.values where type(of: model) == entity.type {
                victims.append(Victim(entity: entity, row: model._strataState.rowID, model: model))
            }
            for victim in victims {
                try checkRequiredReferencesWithoutInverse(to: victim, doomed: doomed)
                for relationship in denying {
                    let blocking = try targets(of: victim, relationship).filter { !doomed.contains($0) }
                    if let first = blocking.first {
                        let name = PersistentIdentifier(entityName: victim.entity.name, rowID: victim.row)
                        let other = PersistentIdentifier(entityName: first.entity.name, rowID: first.row)
                        if relationship.deleteRule == .nullify, let side = entity.inverseSides[relationship.field] {
                            let required = first.entity.properties[side.field].name
                            throw SwiftDataError(
                                .modelValidationFailure,
                                "\(victim.model?.persistentModelID ?? name) cannot be deleted: "
                                    + "\(first.entity.name).\(required) is non-optional and \(blocking.count) model(s) "
                                    + "still refer to it, such as \(first.model?.persistentModelID ?? other); "
                                    + "delete them too (deleteRule: .cascade on \(entity.name).\(relationship.name)) "
                                    + "or point them at another \(entity.name) first")
                        }
                        throw SwiftDataError(
                            .modelValidationFailure,
                            "\(victim.model?.persistentModelID ?? name) cannot be deleted: "
                                + "\(victim.entity.name).\(relationship.name) (deleteRule: .deny) still refers to "
                                + "\(blocking.count) model(s), such as \(first.model?.persistentModelID ?? other)")
                    }
                }
            }
        }
        return doomed
    }

    /// Refuses the delete of `victim` while a non-optional to-one without
    /// an inverse still refers to it from a model that stays.
    private func checkRequiredReferencesWithoutInverse(to victim: Victim, doomed: Doomed) throws {
        for (source, relationship) in victim.entity.incomingWithoutInverse
        where relationship.isToOneRelationship && !relationship.isOptional {
            var holders: [Int64] = []
            if victim.row > 0, case .toOne(let index)? = source.relationshipStorage[relationship.field] {
                holders = derivedRows(tree: index, row: victim.row)
            }
            let stays = holders.first { row in
                guard !doomed.contains(Victim(entity: source, row: row, model: nil)) else { return false }
                // A holder this context pointed elsewhere no longer counts.
                if let model = registered(source, row: row), model._strataState.faultRows(field: relationship.field) == nil {
                    let target = InverseUpkeep.value(of: model, field: relationship.field) as? any PersistentModel
                    return target?._strataState.rowID == victim.row
                }
                return true
            }
            let pending = (inserted + Array(changed.values)).first { model in
                guard type(of: model) == source.type, doomed.models[ObjectIdentifier(model)] == nil,
                    let target = InverseUpkeep.value(of: model, field: relationship.field) as? any PersistentModel
                else { return false }
                if let own = victim.model { return target === own }
                return target._strataState.rowID == victim.row
            }
            if stays != nil || pending != nil {
                let name = PersistentIdentifier(entityName: victim.entity.name, rowID: victim.row)
                throw SwiftDataError(
                    .modelValidationFailure,
                    "\(victim.model?.persistentModelID ?? name) cannot be deleted: \(source.name).\(relationship.name) "
                        + "is non-optional and still refers to it; delete those models too or point them elsewhere first")
            }
        }
    }

    /// Whether the inverse of `relationship` is a non-optional to-one,
    /// which `.nullify` cannot set to nil.
    private func requiresTarget(inverseOf relationship: Schema.Relationship, in entity: Schema.Entity) -> Bool {
        guard let side = entity.inverseSides[relationship.field], side.isToOne,
            let other = container.schema.entity(forType: side.type),
            let inverse = other.properties[side.field] as? Schema.Relationship
        else { return false }
        return !inverse.isOptional
    }

    private func destination(of relationship: Schema.Relationship) -> Schema.Entity? {
        relationship.destinationType.flatMap { container.schema.entity(forType: $0) }
    }

    /// The stored rows relationship `relationship` of each of `rows` (of
    /// `entity`) refers to, appended to `found` with what is known of them.
    /// Rows reached through a one-to-many's reverse index carry their
    /// to-one (the row they were found under), so deleting them needs no
    /// record read.
    /// About how many rows ``storedTargets(of:entity:_:_:)`` will find: one
    /// per row for a to-one, at most the tree's entries for the others.
    private func expectedTargets(of rows: [DoomedRow], entity: Schema.Entity, _ relationship: Schema.Relationship)
        throws -> Int
    {
        let tree: String
        switch entity.relationshipStorage[relationship.field] {
        case .toOne?: return rows.count
        case .viaInverse(let name)?, .join(let name, _)?, .mirror(_, let name)?: tree = name
        case nil: return 0
        }
        guard let snapshot, let handle = try snapshot.tree(tree) else { return 0 }
        return min(try snapshot.tx.count(handle), rows.count * 64)
    }

    /// Targets go to `body` in chunks of at most 4,096, so a batch of any
    /// size needs only a small buffer.
    private func storedTargets(
        of rows: [DoomedRow], entity: Schema.Entity, _ relationship: Schema.Relationship,
        _ body: ([DoomedRow]) -> Void
    ) throws {
        var found: [DoomedRow] = []
        defer { body(found) }
        let field = relationship.field
        switch entity.relationshipStorage[field] {
        case .toOne?:
            for row in rows {
                if row.hintField == field {
                    found.append(DoomedRow(row: row.hintTarget))
                } else {
                    let victim = Victim(entity: entity, row: row.row, model: nil)
                    for target in try storedToOne(victim, field: field) { found.append(DoomedRow(row: target)) }
                }
            }
        case .viaInverse(let tree)?:
            try mergeJoin(tree: tree, rows: rows, hintField: entity.inverseSides[field]?.field ?? -1, body)
        case .join(let tree, _)?, .mirror(_, let tree)?:
            try mergeJoin(tree: tree, rows: rows, hintField: -1, body)
        case nil:
            break
        }
    }

    /// For each of `rows` (in any order, repeats allowed), the second rows
    /// of the pairs of pair tree `tree` under it, read with one cursor in
    /// key order: after one row's run the cursor already stands at or
    /// before the next row's, so it seeks only across gaps. With a
    /// `hintField`, each found row carries the row it was found under as
    /// that field's value.
    private func mergeJoin(tree: String, rows: [DoomedRow], hintField: Int, _ body: ([DoomedRow]) -> Void) throws {
        guard let snapshot, let handle = try snapshot.tree(tree) else { return }
        let sorted = rows.map(\.row).sorted()
        var found: [DoomedRow] = []
        found.reserveCapacity(4_096)
        defer { body(found) }
        let cursor = try snapshot.tx.cursor(handle)
        var current: (Int64, Int64)? = nil
        var valid = false
        var previous: Int64? = nil
        for row in sorted where row != previous {
            previous = row
            if !valid || current.map({ $0.0 < row }) ?? true {
                valid = try cursor.seek(PairKey.prefix(row))
                current = valid ? try cursor.withEntry { key, _ in PairKey.decode(key) } : nil
            }
            guard let pair = current, pair.0 == row else { continue }
            // The run, walked in the leaves' cells (not `next()` and a
            // generic `withEntry` per pair); the cursor stops on the first
            // pair past it, or goes invalid at the end of the tree.
            current = nil
            try cursor.forEachEntry { key, _ in
                guard let pair = PairKey.decode(key), pair.0 == row else {
                    current = PairKey.decode(key)
                    return false
                }
                found.append(DoomedRow(row: pair.1, hintField: hintField, hintTarget: row))
                if found.count == 4_096 {
                    body(found)
                    found.removeAll(keepingCapacity: true)
                }
                return true
            }
            valid = current != nil
        }
    }

    func deleteExistential(_ model: any PersistentModel) { delete(model) }

    /// The loaded models relationship `relationship` of `model` refers to.
    static func targets(of model: any PersistentModel, _ relationship: Schema.Relationship) -> [any PersistentModel] {
        let value = InverseUpkeep.value(of: model, field: relationship.field)
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
        if let model = victim.model, victim.row <= 0 || !model._strataState.isStoredAsIs(relationship.field) {
            return Self.targets(of: model, relationship).map {
                Victim(
                    entity: destination.hasSubentities
                        ? container.schema.entity(forType: type(of: $0)) ?? destination : destination,
                    row: $0._strataState.rowID, model: $0)
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
        case .viaInverse(let tree)?, .join(let tree, _)?, .mirror(_, let tree)?:
            rows = derivedRows(tree: tree, row: victim.row)
        case nil:
            rows = []
        }
        return rows.map { row in
            // A row of a subclass of the destination is its own entity's.
            let entity = destination.concreteOrSelf(row)
            return Victim(entity: entity, row: row, model: registered(entity, row: row))
        }
    }

    /// The to-one row id stored in a row's record.
    private func storedToOne(_ victim: Victim, field: Int) throws -> [Int64] {
        let bytes =
            try snapshot?.record(victim.entity, row: victim.row)
            ?? store.read { tx in try Snapshot(tx).record(victim.entity, row: victim.row) }
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
        guard container.schema.declaresModelCounts else { return }
        for model in inserted + Array(changed.values) where doomed[ObjectIdentifier(model)] == nil {
            guard let entity = container.schema.entity(forType: type(of: model)) else { continue }
            for relationship in entity.relationships where !relationship.isToOneRelationship {
                let minimum = relationship.minimumModelCount ?? 0
                let maximum = relationship.maximumModelCount ?? 0
                guard minimum > 0 || maximum > 0, !model._strataState.isStoredAsIs(relationship.field) else { continue }
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
