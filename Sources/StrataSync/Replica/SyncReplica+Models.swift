import Foundation
import Strata
import StrataEngine

// Pulled values onto models: a change's fields (named, in the record
// format's encoding) become a record under this schema's field numbers and
// are loaded into a model as a program's assignment would be; relationships
// are pointed at their targets once every model of the change exists.

extension SyncReplica {
    /// The row of a stored model that `model` matches on one of its
    /// entity's unique constraints.
    func existingRow(matching model: any PersistentModel, _ entity: Schema.Entity) throws -> Int64? {
        guard !entity.uniqueGroups.isEmpty else { return nil }
        return try store.read { tx in
            for group in entity.uniqueGroups {
                let key = group.key(group.values(of: model), row: 0)
                if let tree = try tx.treeIfPresent(group.treeName), let bytes = try tx.get(key, in: tree) {
                    return try KeyGroup.row(inUniqueValue: bytes)
                }
            }
            return nil
        }
    }

    /// A stored row other than `row` that holds `model`'s values of one of
    /// the entity's unique constraints (an update that collides), with
    /// the constraint's attribute names.
    func collidingRow(of model: any PersistentModel, _ entity: Schema.Entity, except row: Int64) throws
        -> (row: Int64, names: Set<String>)?
    {
        guard !entity.uniqueGroups.isEmpty else { return nil }
        return try store.read { tx in
            for group in entity.uniqueGroups {
                let key = group.key(group.values(of: model), row: 0)
                if let tree = try tx.treeIfPresent(group.treeName), let bytes = try tx.get(key, in: tree) {
                    let holder = try KeyGroup.row(inUniqueValue: bytes)
                    if holder != row { return (holder, Set(group.properties.map(\.name))) }
                }
            }
            return nil
        }
    }

    /// The attributes of the model stored at `row` (`only` those named,
    /// when given), as they are stored.
    func storedAttributes(_ entity: Schema.Entity, row: Int64, only: Set<String>?) throws -> [SyncChangeSet.Field] {
        try store.read { tx in
            guard let tree = try tx.treeIfPresent(entity.recordTree), let record = try tx.get(RowKey.encode(row), in: tree)
            else { return [] }
            return try Self.attributes(of: record, entity: entity, row: row, only: only).fields
        }
    }

    /// The stored records of `entity`, in row order.
    static func records(of entity: Schema.Entity, _ tx: ReadTransaction) throws -> [(row: Int64, record: [UInt8])] {
        guard let tree = try tx.treeIfPresent(entity.recordTree) else { return [] }
        var records: [(row: Int64, record: [UInt8])] = []
        try tx.forEach(tree) { key, value in
            records.append((try RowKey.decode(key), value))
            return true
        }
        return records
    }

    func identifier(_ entity: Schema.Entity, _ row: Int64) -> PersistentIdentifier {
        PersistentIdentifier(storeIdentifier: store.identifier, entityName: entity.name, rowID: row)
    }

    /// The record of `fields` under this entity's field numbers; names the
    /// entity does not have are left out.
    func record(_ fields: [SyncChangeSet.Field], entity: Schema.Entity) -> (bytes: [UInt8], fields: _FieldSet) {
        var numbered: [(Int, SyncChangeSet.Field)] = []
        for field in fields {
            guard let property = entity.properties.first(where: { $0.name == field.name }),
                Self.carries(property, entity) || entity.externalTrees[property.field] != nil
            else { continue }
            numbered.append((property.field, field))
        }
        numbered.sort { $0.0 < $1.0 }
        var writer = _RecordWriter()
        var previous = -1
        for (number, field) in numbered where number != previous {
            field.value.withUnsafeBytes { writer.appendCopy(field: number, wire: field.wire, value: $0) }
            previous = number
        }
        return (writer.bytes, _FieldSet(numbered.map(\.0)))
    }

    /// Sets `fields` on a registered model as a program's assignment would
    /// (observers told, the change saved); false when none applied.
    func assign(_ fields: [SyncChangeSet.Field], to model: any PersistentModel, entity: Schema.Entity, seq: Int64) throws
        -> Bool
    {
        let (bytes, numbers) = record(try inliningExternal(fields, seq: seq), entity: entity)
        guard !numbers.isEmpty else { return false }
        do {
            try _RecordReader.withReader(bytes, entity: entity, row: model._strataState.rowID, inlinesExternal: true) {
                reader in
                try model._strataLoad(from: &reader, fields: numbers)
            }
        } catch {
            throw DamagedChange(seq: seq, reason: "\(entity.name): \(error)")
        }
        for number in numbers.fields { markChanged(model, field: number) }
        return true
    }

    func markChanged<M: PersistentModel>(_ model: M, field: Int) {
        model._strataState.didChange(model, field: field)
    }

    /// Points `model`'s relationships in `fields` at their targets; a target
    /// deleted in the zone or here is left out. A `union` (a merge) keeps
    /// the model's to-many targets beside the fields', and its to-ones that
    /// the fields leave empty.
    func setRelationships(
        _ fields: [SyncChangeSet.Field], of model: any PersistentModel, entity: Schema.Entity, context: ModelContext,
        inserted: [SyncID: any PersistentModel], masks: (all: Masks, fixed: Masks), seq: Int64, union: Bool = false,
        previous: [String: [SyncID]]? = nil
    ) throws {
        func target(_ id: SyncID, of relationship: Schema.Relationship) throws -> (any PersistentModel)? {
            if let made = inserted[id] { return made }
            guard let type = relationship.destinationType, let destination = schema.entity(forType: type) else { return nil }
            switch try store.read({ tx in try Self.place(of: id, tx) }) {
            case .row(let row):
                let found = context.model(for: identifier(destination, row))
                return found is MissingModel || found.isDeleted ? nil : found
            case .deleted:
                return nil
            case nil:
                // A model this store never held: one the zone deleted before
                // a snapshot this store restored, or one the zone never held
                // (merged ahead of the zone on the device that names it).
                // Every device leaves it out alike.
                return nil
            }
        }
        for field in fields {
            guard let relationship = entity.properties.first(where: { $0.name == field.name }) as? Schema.Relationship
            else { continue }
            let ids = field.ids
            if relationship.isToOneRelationship {
                guard field.wire == SyncChangeSet.toOne else {
                    throw DamagedChange(seq: seq, reason: "\(entity.name).\(relationship.name) is a to-one, sent as a list")
                }
                // A target deleted here is nil for now; whether the model goes
                // with it is the zone's cascade (see `apply`), decided by the
                // zone's order, not by this store's unpushed deletes.
                let value = try ids.first.flatMap { try target($0, of: relationship) }
                if union && value == nil { continue }
                model._strataSetRelationship(field: relationship.field, to: value)
            } else {
                guard field.wire == SyncChangeSet.toMany else {
                    throw DamagedChange(seq: seq, reason: "\(entity.name).\(relationship.name) is a to-many, sent as one")
                }
                var targets: [any PersistentModel] = []
                for id in ids { if let found = try target(id, of: relationship) { targets.append(found) } }
                // A many-to-many is sent from both sides. A target whose own
                // side has a local change in the outbox keeps its pairing
                // with this model as it is here: that change comes later in
                // the zone's order and sets the pairs on every device. A
                // save not prepared yet sends the pairs as they are when it
                // is: its pairs stay, and pulled ones join them.
                if !masks.all.isEmpty, let type = relationship.destinationType,
                    let destination = schema.entity(forType: type),
                    let inverse = InverseGraph.inverse(of: entity.type, field: relationship.field),
                    let side = destination.properties[inverse.field] as? Schema.Relationship,
                    !side.isToOneRelationship, masks.all[destination.name] != nil
                {
                    func isHeld(_ target: any PersistentModel, _ masks: Masks) -> Bool {
                        guard case let mask? = masks[destination.name]?[target._strataState.rowID] else { return false }
                        return mask.map { $0.contains(side.name) } ?? true
                    }
                    let current = (model[keyPath: relationship.keypath] as? [any PersistentModel]) ?? []
                    let fixed = current.filter { isHeld($0, masks.fixed) }
                    let kept = current.filter { isHeld($0, masks.all) && !isHeld($0, masks.fixed) }
                    targets = targets.filter { !isHeld($0, masks.fixed) }
                    for target in fixed + kept where !targets.contains(where: { $0 === target }) { targets.append(target) }
                }
                if union {
                    let current = (model[keyPath: relationship.keypath] as? [any PersistentModel]) ?? []
                    targets = current + targets.filter { target in !current.contains { $0 === target } }
                } else if let previous = previous?[relationship.name] {
                    // The list of a model merged here ahead of the zone:
                    // what it lost since leaves, what it gained joins.
                    let current = (model[keyPath: relationship.keypath] as? [any PersistentModel]) ?? []
                    var removed: [any PersistentModel] = []
                    for id in previous {
                        guard let found = try target(id, of: relationship), !targets.contains(where: { $0 === found })
                        else { continue }
                        removed.append(found)
                    }
                    targets =
                        current.filter { kept in !removed.contains { $0 === kept } }
                        + targets.filter { target in !current.contains { $0 === target } }
                }
                model._strataSetRelationship(field: relationship.field, to: targets)
            }
        }
    }

    /// A new model of `entity` from `fields`.
    func make(_ entity: Schema.Entity, _ fields: [SyncChangeSet.Field], seq: Int64) throws -> any PersistentModel {
        let (bytes, _) = record(try inliningExternal(fields, seq: seq), entity: entity)
        do {
            return try _RecordReader.withReader(bytes, entity: entity, row: 0, inlinesExternal: true) { reader in
                try entity.type.init(_strataReader: &reader)
            }
        } catch {
            throw DamagedChange(seq: seq, reason: "\(entity.name): \(error)")
        }
    }

}
