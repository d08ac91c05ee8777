import Foundation
import Strata
import StrataEngine

// Updates that collide on a unique constraint. Inserts that collide merge
// as SwiftData's upsert does (see `ChangeApplication.insert`); an update
// that gives a model the values another model holds under a unique
// constraint merges the two the same way, so that no device stops and
// every device ends with the same model:
//
// - the model that held the values first in the zone's order keeps them,
//   with its other values; the later one's changed attributes go on top
//   (those of the pulled change, or of the local saves not pushed yet that
//   gave the holder its values: they come later in the zone's order);
//   where local saves not pushed yet changed an attribute of both models,
//   the later save's value stays, as it comes later in the zone's order;
// - the later model's to-many relationships join the survivor's, and its
//   to-ones fill the survivor's empty ones;
// - the later model's identifier names the survivor from then on, here and
//   on every device (a change that names it updates the survivor; a
//   to-many list it sends changes the members the later model brought,
//   see `SyncReplica+AheadMerges`);
// - the later model's row is deleted here, by a save authored "sync" that
//   is not pushed.
//
// A merge sends the later model's saves not pushed yet by its identifier,
// so they must be in the outbox before its row goes: when a local save is
// not prepared yet, the apply prepares the outbox and starts again.

extension SyncReplica {
    /// A change that merges a model whose local saves are not all in the
    /// outbox yet: the outbox is prepared, and the change applied again.
    struct OutboxNotPrepared: Error {}
}

extension SyncReplica.ChangeApplication {
    /// An update whose values of a unique constraint another stored model
    /// holds.
    struct Collision {
        let entity: Schema.Entity
        /// The row the change updated.
        let updated: Int64
        /// The row that holds the values.
        var holder: Int64
        /// The constraint's attribute names.
        let names: Set<String>
        /// The change's fields.
        let fields: [Field]
        /// The holder holds the values in the zone (`sync.zoneValues`), and
        /// a local save not pushed yet moved them away here.
        var inZone = false
        /// The updated model holds the values in the zone only, and the
        /// holder here, where a local save not pushed yet changed it: its
        /// saves decide which of the two came first, as for a holder the
        /// store's index finds.
        var heldLocally = false
    }

    /// Merges each collision's two models (see the top of this file).
    mutating func mergeCollisions() throws {
        for found in collisions {
            var collision = found
            let entity = collision.entity
            let updated = context.model(for: replica.identifier(entity, collision.updated))
            guard !(updated is MissingModel), !updated.isDeleted else { continue }
            var holder = context.model(for: replica.identifier(entity, collision.holder))
            func holds(_ other: any PersistentModel) -> Bool {
                entity.uniqueGroups.contains(where: { group in
                    group.key(group.values(of: updated), row: 0) == group.key(group.values(of: other), row: 0)
                })
            }
            if holder is MissingModel || holder.isDeleted || (!collision.inZone && !holds(holder)) {
                // An earlier change of this set moved the holder off, or
                // deletes it (a holder by the zone's values too); another
                // model this set changed may hold the values now (the
                // store's index has not seen it yet).
                guard
                    let other = (context.insertedModelsArray + context.changedModelsArray).first(where: { other in
                        type(of: other) == entity.type && other !== updated && !other.isDeleted && holds(other)
                    })
                else { continue }
                holder = other
                collision.holder = other._strataState.rowID
            }
            guard !(holder is MissingModel), !holder.isDeleted else { continue }
            let unprepared = try store.read { tx in
                try SyncReplica.number("prepared", tx) < HistoryLog.lastToken(tx)
            }
            if unprepared && !masks.isEmpty { throw SyncReplica.OutboxNotPrepared() }

            // Which took the values first in the zone's order: the holder,
            // unless a local save not pushed yet gave them to it.
            let holderMask = masks[entity.name]?[collision.holder]
            let updatedMask = masks[entity.name]?[collision.updated]
            let holderIsLater: Bool
            switch holderMask {
            case _ where collision.inZone && !collision.heldLocally: holderIsLater = false
            case nil: holderIsLater = false
            // A pulled model merged into the holder ahead of the zone holds
            // the values in the zone: the holder came first.
            case .some(nil): holderIsLater = try !holdsInZone(collision)
            case .some(.some(let names)):
                holderIsLater = try !names.isDisjoint(with: collision.names) && !holdsInZone(collision)
            }
            let survivor: any PersistentModel
            let loser: any PersistentModel
            let loserRow: Int64
            // The holder's unpushed attributes that go on top: those of its
            // saves from the one that gave it the values (the earlier ones
            // change, in the zone's order, a model still apart).
            var onTop = holderMask ?? nil
            var aheadFrom: Int64?
            if holderIsLater,
                let (names, from) = try store.read({ tx in
                    try SyncReplica.aheadMask(entity, row: collision.holder, tx)
                })
            {
                // Less what the updated model's unpushed saves changed
                // later: they come later in the zone's order too.
                let (holderTokens, updatedTokens) = try store.read { tx in
                    try (
                        SyncReplica.unpushedTokens(entity, row: collision.holder, from: from, tx),
                        SyncReplica.unpushedTokens(entity, row: collision.updated, tx)
                    )
                }
                onTop = (names ?? Set(holderTokens.keys)).filter { name in
                    (updatedTokens[name] ?? .min) < (holderTokens[name] ?? .max)
                }
                aheadFroms.append((entity.name, collision.holder, from))
                aheadFrom = from
            }
            // The updated model's values that the holder's go over, to give
            // back if the zone deletes the holder before its save arrives.
            var givenBack: [Field] = []
            if holderIsLater {
                // The updated model has the change's values; the holder's
                // unpushed attributes go on top.
                (survivor, loser, loserRow) = (updated, holder, collision.holder)
                let carried = try replica.storedAttributes(entity, row: collision.holder, only: onTop)
                if aheadFrom != nil {
                    givenBack = try replica.storedAttributes(entity, row: collision.updated, only: Set(carried.map(\.name)))
                    for field in collision.fields where carried.contains(where: { $0.name == field.name }) {
                        givenBack.removeAll { $0.name == field.name }
                        givenBack.append(field)
                    }
                }
                _ = try replica.assign(carried, to: survivor, entity: entity, seq: seq)
            } else {
                // The holder keeps its values; the change's go on top (not
                // over the holder's unpushed ones), then the updated
                // model's unpushed attributes.
                (survivor, loser, loserRow) = (holder, updated, collision.updated)
                let fields = unmaskedForMerge(collision.fields, entity, row: collision.holder)
                _ = try replica.assign(fields, to: survivor, entity: entity, seq: seq)
                try replica.setRelationships(
                    fields, of: survivor, entity: entity, context: context, inserted: insertedByID,
                    masks: (masks, fixedMasks), seq: seq, union: true)
                if let updatedMask {
                    // Those the holder's unpushed saves changed later stay.
                    let (holderTokens, updatedTokens) = try store.read { tx in
                        try (
                            SyncReplica.unpushedTokens(entity, row: collision.holder, tx),
                            SyncReplica.unpushedTokens(entity, row: collision.updated, tx)
                        )
                    }
                    var carried = try replica.storedAttributes(entity, row: collision.updated, only: updatedMask)
                    carried.removeAll { field in
                        (holderTokens[field.name] ?? .min) > (updatedTokens[field.name] ?? .max)
                    }
                    _ = try replica.assign(carried, to: survivor, entity: entity, seq: seq)
                }
            }
            // Lists sent later for the loser change the ones it brings.
            let loserID = try store.read { tx in try SyncReplica.id(of: entity.name, row: loserRow, tx) }
            if let loserID {
                let lists = try toManyLists(of: loser, entity)
                if !lists.isEmpty { zoneMerges.append((loserID, entity.name, lists)) }
            }
            // The holder's unpushed to-ones go on top, as its save sends
            // them to the other devices.
            let brought = joinRelationships(of: loser, into: survivor, entity, onTop: holderIsLater ? onTop : [])
            if let loserID, let from = aheadFrom {
                givenBack += try brought.map { relationship, members in
                    Field(name: relationship.name, wire: SyncChangeSet.toMany, value: try ids(of: members, relationship) ?? [])
                }
                aheadLosers.append((loserID, entity, SyncReplica.AheadLoser(from: from, row: loserRow, fields: givenBack)))
            }
            if let loserID {
                merged.append((loserID, entity, survivor._strataState.rowID))
                // Unpushed saves of either may send lists of them.
                if masks[entity.name]?[loserRow] != nil || masks[entity.name]?[survivor._strataState.rowID] != nil {
                    listRewrites.append((loserID, entity, survivor))
                }
            }
            mergedAway.append((entity, loserRow, survivor._strataState.rowID))
            context.delete(loser)
            applied.updated.append(survivor.persistentModelID)
            applied.deleted.append(loser.persistentModelID)
            applied.merged.append(SyncEngine.Merge(merged: loser.persistentModelID, into: survivor.persistentModelID))
            if masks[entity.name]?[loserRow] != nil {
                applied.lost.append(
                    SyncEngine.LostChange(
                        model: loser.persistentModelID, reason: .merged(into: survivor.persistentModelID)))
            }
        }
    }

    /// Whether the collision's holder holds, in the zone, the values the
    /// change gives the updated model.
    private func holdsInZone(_ collision: Collision) throws -> Bool {
        try store.read { tx in
            guard let theirs = try SyncReplica.zoneValues(collision.entity, row: collision.holder, tx) else {
                return false
            }
            var mine = try SyncReplica.zoneValues(collision.entity, row: collision.updated, tx) ?? [:]
            for field in collision.fields { mine[field.name] = field }
            return collision.names.allSatisfy { name in mine[name] != nil && mine[name] == theirs[name] }
        }
    }

    /// `model`'s to-many lists, as fields of a change.
    func toManyLists(of model: any PersistentModel, _ entity: Schema.Entity) throws -> [Field] {
        var fields: [Field] = []
        for property in entity.properties {
            guard let relationship = property as? Schema.Relationship, !relationship.isToOneRelationship,
                let value = try ids(of: (model[keyPath: relationship.keypath] as? [any PersistentModel]) ?? [], relationship)
            else { continue }
            fields.append(Field(name: relationship.name, wire: SyncChangeSet.toMany, value: value))
        }
        return fields
    }

    /// The identifiers of `members`, targets of `relationship`, on the
    /// wire (a member deleted, or without one, is left out); nil when the
    /// relationship's destination is not in the schema.
    func ids(of members: [any PersistentModel], _ relationship: Schema.Relationship) throws -> [UInt8]? {
        guard let type = relationship.destinationType, let destination = schema.entity(forType: type) else { return nil }
        // Models this change makes have no stored identifier yet.
        let made = Dictionary(
            inserted.map { (ObjectIdentifier($0.1), $0.0) }, uniquingKeysWith: { first, _ in first })
        var value: [UInt8] = []
        for target in members where !target.isDeleted {
            let id =
                try made[ObjectIdentifier(target)]
                ?? store.read { tx in try SyncReplica.id(of: destination.name, row: target._strataState.rowID, tx) }
            if let id { value += id.bytes }
        }
        return value
    }

    /// Moves `loser`'s to-many targets to `survivor` and gives the survivor
    /// the loser's to-ones where it has none, or where they are `onTop`
    /// (nil: all), so that the loser's delete takes nothing with it.
    /// Returns the targets each to-many gained.
    private func joinRelationships(
        of loser: any PersistentModel, into survivor: any PersistentModel, _ entity: Schema.Entity, onTop: Set<String>?
    ) -> [(Schema.Relationship, [any PersistentModel])] {
        var gained: [(Schema.Relationship, [any PersistentModel])] = []
        for property in entity.properties {
            guard let relationship = property as? Schema.Relationship else { continue }
            if relationship.isToOneRelationship {
                if let target = loser[keyPath: relationship.keypath] as? any PersistentModel,
                    onTop?.contains(relationship.name) ?? true
                        || survivor[keyPath: relationship.keypath] as? any PersistentModel == nil
                {
                    survivor._strataSetRelationship(field: relationship.field, to: target)
                }
            } else {
                let theirs = (loser[keyPath: relationship.keypath] as? [any PersistentModel]) ?? []
                guard !theirs.isEmpty else { continue }
                loser._strataSetRelationship(field: relationship.field, to: [any PersistentModel]())
                let mine = (survivor[keyPath: relationship.keypath] as? [any PersistentModel]) ?? []
                let added = theirs.filter { target in !mine.contains { $0 === target } && !target.isDeleted }
                if !added.isEmpty {
                    survivor._strataSetRelationship(field: relationship.field, to: mine + added)
                    gained.append((relationship, added))
                }
            }
        }
        return gained
    }
}

extension SyncReplica {
    /// `model`'s to-many list `relationship` on the wire: the identifiers
    /// of its members not deleted, as `id` finds them (a member it finds
    /// none for is left out).
    static func listValue(
        of model: any PersistentModel, _ relationship: Schema.Relationship, id: (any PersistentModel) throws -> SyncID?
    ) rethrows -> [UInt8] {
        var value: [UInt8] = []
        for target in (model[keyPath: relationship.keypath] as? [any PersistentModel]) ?? [] where !target.isDeleted {
            if let found = try id(target) { value += found.bytes }
        }
        return value
    }

    /// The outbox's entries, in order, that hold a change `matching`.
    private static func outboxEntries(
        _ outbox: Tree, _ tx: ReadTransaction, where matching: (SyncChangeSet.Change) -> Bool
    ) throws -> [(key: [UInt8], set: SyncChangeSet)] {
        var entries: [(key: [UInt8], set: SyncChangeSet)] = []
        var failure: (any Error)?
        try tx.forEach(outbox) { key, value in
            do {
                let set = try SyncChangeSet.decode(value)
                if set.changes.contains(where: matching) { entries.append((key, set)) }
            } catch {
                failure = SwiftDataError(.corruptRecord, "\(outboxTree): an entry: \(error)")
                return false
            }
            return true
        }
        if let failure { throw failure }
        return entries
    }

    /// Readdresses the outbox's changes of `id` to `other`, an identifier
    /// of the same model.
    static func readdressOutbox(from id: SyncID, to other: SyncID, _ tx: WriteTransaction) throws {
        guard let outbox = try tx.treeIfPresent(outboxTree) else { return }
        for (key, var set) in try outboxEntries(outbox, tx, where: { $0.id == id }) {
            for index in set.changes.indices where set.changes[index].id == id { set.changes[index].id = other }
            try tx.put(key, set.encode(), in: outbox)
        }
    }

    /// Sends the to-many lists that the outbox holds for `loser`, a model
    /// merged here into `survivor`, and for the survivor itself, as the
    /// survivor's lists as they are now. Here unpushed saves of either
    /// keep the survivor's lists as they are (their masks follow the
    /// merge, and a list is sent and kept whole), members the merge
    /// brought included. Sent as they were saved, the others would apply
    /// a list for the loser only to the members it brought, and a list for
    /// the survivor without what the merge brought, which this device
    /// keeps. Sent as the survivor's lists now, every device ends with the
    /// lists this one holds. A list the loser's saves changed goes, at the
    /// last of them, to the survivor, unless a save of the survivor sends
    /// it there or later (its insert among them: the zone has not seen the
    /// survivor before).
    func sendSurvivorLists(for loser: SyncID, _ entity: Schema.Entity, survivor: any PersistentModel, _ tx: WriteTransaction)
        throws
    {
        guard let outbox = try tx.treeIfPresent(Self.outboxTree),
            let survivorID = try Self.id(of: entity.name, row: survivor._strataState.rowID, tx)
        else { return }
        func sendsLists(_ change: SyncChangeSet.Change) -> Bool {
            (change.id == loser || change.id == survivorID) && change.fields.contains { $0.wire == SyncChangeSet.toMany }
        }
        let entries = try Self.outboxEntries(outbox, tx, where: sendsLists)
        var lists: [String: SyncChangeSet.Field] = [:]
        func list(_ name: String) throws -> SyncChangeSet.Field? {
            if let known = lists[name] { return known }
            guard let relationship = entity.properties.first(where: { $0.name == name }) as? Schema.Relationship,
                let type = relationship.destinationType, let destination = schema.entity(forType: type)
            else { return nil }
            let value = try Self.listValue(of: survivor, relationship) { target in
                try Self.id(of: destination.name, row: target._strataState.rowID, tx)
            }
            let field = SyncChangeSet.Field(name: name, wire: SyncChangeSet.toMany, value: value)
            lists[name] = field
            return field
        }
        // The loser's lists not sent for the survivor at or after the
        // last entry that sends them.
        var owed: Set<String> = []
        var owedAt: Int?
        for (index, entry) in entries.enumerated() {
            for change in entry.set.changes where sendsLists(change) {
                let names = change.fields.filter { $0.wire == SyncChangeSet.toMany }.map(\.name)
                if change.id == loser {
                    owed.formUnion(names)
                    owedAt = index
                } else {
                    owed.subtract(names)
                }
            }
        }
        for (index, (key, var set)) in entries.enumerated() {
            var changes: [SyncChangeSet.Change] = []
            for var change in set.changes {
                guard sendsLists(change) else {
                    changes.append(change)
                    continue
                }
                if change.id == survivorID {
                    for (at, field) in change.fields.enumerated() where field.wire == SyncChangeSet.toMany {
                        if let now = try list(field.name) { change.fields[at] = now }
                    }
                    changes.append(change)
                    continue
                }
                change.fields.removeAll { $0.wire == SyncChangeSet.toMany }
                if change.kind == .insert || !change.fields.isEmpty { changes.append(change) }
            }
            if index == owedAt, !owed.isEmpty {
                var update = SyncChangeSet.Change(kind: .update, entity: entity.name, id: survivorID)
                for name in owed.sorted() { if let now = try list(name) { update.fields.append(now) } }
                changes.append(update)
            }
            set.changes = changes
            try tx.put(key, set.encode(), in: outbox)
        }
    }
}
