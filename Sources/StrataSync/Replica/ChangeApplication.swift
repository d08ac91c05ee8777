import Foundation
import Strata
import StrataEngine

extension SyncReplica {
    /// One server change on its way into the store: its changes are taken
    /// one by one into a context (models made, merged, updated, doomed),
    /// then linked, then the zone's cascades run, and one save writes it
    /// all with the sync state (``writeState(_:)``).
    struct ChangeApplication {
        typealias Field = SyncChangeSet.Field

        let replica: SyncReplica
        /// The change's server sequence number.
        let seq: Int64
        /// This device's save token when the change is its own.
        let ownToken: Int64?
        /// The kept part of a change applied before: the position stays,
        /// and what is still unknown stays kept.
        let replay: Bool
        let context: ModelContext
        /// What local saves not acknowledged yet changed (none for an own
        /// change), and what of it is in the outbox already.
        let masks: Masks
        let fixedMasks: Masks
        /// No local save waited when the change began: the history its save
        /// writes is the zone's, so the pushed and prepared marks move past
        /// it, and the next apply does not read it again.
        let nothingPending: Bool
        /// The last history token when the change began.
        let startToken: Int64
        /// Rows of entities with unique constraints that a local delete not
        /// pushed yet removed, by entity name.
        let deletedHere: [String: [Int64]]
        /// The models this change set made or changed, by their values of
        /// each unique constraint (entity name, 0, constraint index, key):
        /// the store's unique index has not seen them yet.
        var setHolders: [[UInt8]: any PersistentModel] = [:]
        /// The values of unique constraints that the set gives models this
        /// store holds, by entity name and row (``noteUniqueValues(of:)``):
        /// the store's index and `sync.zoneValues` have not seen them yet.
        var setValues: [String: [Int64: [String: Field]]] = [:]
        /// The rows ``noteUniqueValues(of:)`` found, for ``take(_:)``.
        var notedRows: [SyncID: Int64] = [:]

        /// The parts of the change this schema lacks, kept for a later one.
        var kept = SyncChangeSet()
        var applied = Applied()
        /// The models the change made, in its order, and by identifier
        /// (with the stored models identifiers merged into).
        var inserted: [(SyncID, any PersistentModel)] = []
        var insertedByID: [SyncID: any PersistentModel] = [:]
        /// The models the change deletes, directly or by the zone's cascades.
        var doomed: [SyncID: (entity: Schema.Entity, row: Int64?)] = [:]
        /// Identifiers merged into a stored model on a unique constraint.
        var merged: [(SyncID, Schema.Entity, Int64)] = []
        var mergedRows: [SyncID: Int64] = [:]
        /// Identifiers merged into a model this change set made (a
        /// snapshot sends each identifier merged into a model as an insert
        /// of its values).
        var mergedIntoMade: [(SyncID, any PersistentModel)] = []
        var links = Links()
        /// The identifiers the change set deletes.
        var deletes: Set<SyncID> = []
        /// Updates whose values collide on a unique constraint with another
        /// stored model: merged once the change is linked.
        var collisions: [Collision] = []
        /// The fields of the set's inserts and updates of entities with
        /// unique constraints, for `sync.zoneValues`.
        var zoneFields: [(id: SyncID, entity: Schema.Entity, fields: [Field])] = []
        /// Rows whose models merged into another row: their identifier
        /// points at the other row, and the row is theirs no more.
        var mergedAway: [(entity: Schema.Entity, row: Int64, survivor: Int64)] = []
        /// Relationships are set once every model of the change exists.
        /// `union`: a model merged into (a unique constraint's upsert): its
        /// to-manys keep their targets and gain the change's, and a to-one
        /// the change leaves empty keeps its target.
        var pendingLinks:
            [(model: any PersistentModel, entity: Schema.Entity, fields: [Field], union: Bool, previous: [String: [SyncID]]?)] =
                []
        /// Pulled models merged ahead of the zone (`SyncReplica+AheadMerges`),
        /// with the zone's to-many lists of them to record.
        var aheadMerges: [(id: SyncID, entity: String, fields: [Field])] = []
        /// Models merged in the zone's order, with the to-many lists they
        /// brought to their survivor (`SyncReplica+AheadMerges`).
        var zoneMerges: [(id: SyncID, entity: String, fields: [Field])] = []
        /// Rows merged ahead of the zone, with the token of the local save
        /// from which their masks count (`SyncReplica.aheadFromTree`).
        var aheadFroms: [(entity: String, row: Int64, token: Int64)] = []
        /// This device's own changes of unique values, now in the zone: the
        /// merges ahead of the zone into their models end. With the lists
        /// each sends.
        var aheadEnds: [(entity: Schema.Entity, id: SyncID, lists: [Field])] = []

        /// Models merged here whose local saves not pushed yet send to-many
        /// lists: those lists are sent as the survivor's instead
        /// (``SyncReplica/sendSurvivorLists(for:_:survivor:_:)``).
        var listRewrites: [(loser: SyncID, entity: Schema.Entity, survivor: any PersistentModel)] = []

        /// Rows whose own model the zone deleted while a pulled model was
        /// merged into them ahead of the zone: the row becomes that model's.
        var unmerged: [(id: SyncID, entity: Schema.Entity, row: Int64)] = []
        /// Local models merged ahead of the zone into a pulled one
        /// (`SyncReplica.aheadLosersTree`).
        var aheadLosers: [(id: SyncID, entity: Schema.Entity, loser: SyncReplica.AheadLoser)] = []
        /// Those the zone deleted before the save that merged them (the
        /// pulled one stays apart), with their rows before the merge.
        var aheadLosersGone: [(id: SyncID, entity: Schema.Entity, row: Int64)] = []
        /// Pulled models merged ahead of the zone that the zone moved off
        /// the values they merged on, or deleted, before the local save
        /// that merged them arrived: in the zone's order they never merge.
        /// With the row they merged into.
        var parted: [(id: SyncID, entity: Schema.Entity, row: Int64)] = []
        /// Local models merged ahead of the zone into a pulled one that the
        /// zone moved off the values before their saves arrived: they get
        /// rows of their own again. With the rows their saves name.
        var partedLosers: [(id: SyncID, entity: Schema.Entity, savedRow: Int64, model: any PersistentModel)] = []

        /// The device and save token of the change (nil for a snapshot).
        var origin: (device: SyncID, token: Int64)?

        var own: Bool { ownToken != nil }
        var schema: Schema { replica.schema }
        var store: Store { replica.store }

        init(replica: SyncReplica, seq: Int64, own ownToken: Int64?, replay: Bool) throws {
            self.replica = replica
            self.seq = seq
            self.ownToken = ownToken
            self.replay = replay
            context = ModelContext(replica.container)
            context.author = SyncReplica.author
            (masks, fixedMasks) = ownToken != nil ? ([:], [:]) : try replica.pendingMasks()
            var deleted: [String: [Int64]] = [:]
            for (name, rows) in masks where replica.schema.entity(named: name)?.uniqueGroups.isEmpty == false {
                guard let entity = replica.schema.entity(named: name) else { continue }
                for (row, mask) in rows where mask == nil {
                    let stored = try replica.store.read { tx in
                        try tx.treeIfPresent(entity.recordTree).flatMap { try tx.get(RowKey.encode(row), in: $0) }
                    }
                    if stored == nil { deleted[name, default: []].append(row) }
                }
            }
            deletedHere = deleted
            (nothingPending, startToken) = try replica.store.read { tx in
                let pushed = try SyncReplica.number("pushed", tx)
                let last = try HistoryLog.lastToken(tx)
                let prepared = try SyncReplica.number("prepared", tx)
                return (!replay && pushed == last && prepared == last, last)
            }
        }

        /// What the applied change did; models it made and then deleted
        /// are not among the inserted.
        var result: Applied {
            var result = applied
            result.inserted = inserted.filter { !$0.1.isDeleted }.map { $0.1.persistentModelID }
            return result
        }

        /// Records the values of unique constraints that the set's changes
        /// give models this store holds, before any is taken: an insert
        /// taken before a change that moves a stored model off its values
        /// must not merge into it.
        mutating func noteUniqueValues(of set: SyncChangeSet) throws {
            guard !own else { return }
            for change in set.changes where change.kind != .delete {
                guard let entity = schema.entity(named: change.entity), !entity.uniqueGroups.isEmpty else { continue }
                let unique = SyncReplica.uniqueNames(entity)
                let fields = change.fields.filter { unique.contains($0.name) }
                guard !fields.isEmpty,
                    case .row(let row)? = try store.read({ tx in try SyncReplica.place(of: change.id, tx) })
                else { continue }
                notedRows[change.id] = row
                for field in fields { setValues[entity.name, default: [:]][row, default: [:]][field.name] = field }
            }
        }

        /// Whether the set gives the model at `row` other values, under
        /// every unique constraint, than those `fields` hold: once the set
        /// is applied it holds none of them, so nothing merges into it.
        func movedBySet(_ entity: Schema.Entity, row: Int64, from fields: [Field]) -> Bool {
            guard let values = setValues[entity.name]?[row] else { return false }
            let given = Dictionary(fields.map { ($0.name, $0) }, uniquingKeysWith: { _, last in last })
            return entity.uniqueGroups.allSatisfy { group in
                group.properties.contains { property in
                    guard let value = values[property.name], let mine = given[property.name] else { return false }
                    return value != mine
                }
            }
        }

        /// A stored model that the set gives, under some unique constraint,
        /// the values `fields` hold: in the zone it holds them, whatever a
        /// local save not pushed yet made of it here. (A snapshot sends a
        /// model merged on a unique value once per identifier, each an
        /// insert of its values.) Not the row `id` names here: a model
        /// parted from the one it merged into ahead of the zone.
        func setValueHolder(of fields: [Field], _ entity: Schema.Entity, except id: SyncID) throws -> Int64? {
            guard let rows = setValues[entity.name] else { return nil }
            let given = Dictionary(fields.map { ($0.name, $0) }, uniquingKeysWith: { _, last in last })
            let own = try store.read { tx in try SyncReplica.place(of: id, tx) }
            for (row, values) in rows.sorted(by: { $0.key < $1.key }) where own != .row(row) {
                let holds = entity.uniqueGroups.contains { group in
                    group.properties.allSatisfy { property in
                        values[property.name].map { $0 == given[property.name] } ?? false
                    }
                }
                if holds { return row }
            }
            return nil
        }

        /// Takes one change of the set: a delete dooms its model; an insert
        /// or update records its cascading to-ones and, unless the change is
        /// this device's own, updates, merges or makes its model.
        mutating func take(_ change: SyncChangeSet.Change) throws {
            var change = change
            guard let entity = schema.entity(named: change.entity) else {
                // A kept part was checked when it was kept.
                guard replay || replica.zoneSchemas.contains(where: { $0.entities[change.entity] != nil }) else {
                    throw DamagedChange(seq: seq, reason: "entity \(change.entity) is in no schema of the zone")
                }
                kept.changes.append(change)
                return
            }
            if change.kind != .delete {
                let (known, unknown) = try replica.split(change, entity, seq: seq, checked: replay)
                change.fields = known
                if !unknown.isEmpty {
                    kept.changes.append(
                        SyncChangeSet.Change(kind: .update, entity: change.entity, id: change.id, fields: unknown))
                }
            }
            let place =
                try notedRows.removeValue(forKey: change.id).map { SyncReplica.Place.row($0) }
                ?? store.read { tx in try SyncReplica.place(of: change.id, tx) }
            // An update of a model this store never held changes one the
            // zone never held either (a model a device merged ahead of the
            // zone, named by its saves since), or one the zone deleted
            // before a snapshot this store restored.
            if change.kind == .update && place == nil { return }
            switch change.kind {
            case .delete:
                // Only a model with unique values merges, and only into a
                // row that is still its own.
                if case .row(let row) = place, !entity.uniqueGroups.isEmpty,
                    try store.read({ tx in try SyncReplica.id(of: entity.name, row: row, tx) }) == change.id,
                    let (kept, lists) = try store.read({ tx in try SyncReplica.mergedAhead(into: entity, row: row, tx) })
                {
                    // A model another one merged into ahead of the zone:
                    // in the zone's order that one never merged, and the
                    // unpushed save that would have merged them changes a
                    // deleted model. The row stays, as the other model,
                    // with the zone's lists of it.
                    doom(change.id, entity, nil)
                    unmerged.append((kept, entity, row))
                    let model = context.model(for: replica.identifier(entity, row))
                    if !(model is MissingModel), !model.isDeleted {
                        link(model, entity, Array(lists.values))
                        applied.updated.append(model.persistentModelID)
                    }
                } else if case .row(let row) = place, !entity.uniqueGroups.isEmpty,
                    let loser = try store.read({ tx in try SyncReplica.aheadLoser(change.id, tx) })
                {
                    // A model of this device merged ahead of the zone into
                    // a pulled one: in the zone's order the delete comes
                    // before the save that would merge them, so the pulled
                    // model stays apart, with its own values and members.
                    doom(change.id, entity, nil)
                    aheadLosersGone.append((change.id, entity, loser.row))
                    try giveBack(loser.fields, to: row, entity)
                } else if case .row(let row) = place, !entity.uniqueGroups.isEmpty,
                    let merge = try store.read({ tx in try SyncReplica.aheadEntry(change.id, tx) }), !merge.inZone,
                    try store.read({ tx in try SyncReplica.id(of: entity.name, row: row, tx) }) != change.id
                {
                    // A pulled model merged ahead of the zone into a local
                    // one: in the zone's order the delete comes before the
                    // save that would merge them, and takes only the pulled
                    // model, with the members it brought.
                    doom(change.id, entity, nil)
                    parted.append((change.id, entity, row))
                    try dropMembers(merge.fields, of: row, entity)
                } else if case .row(let row) = place, !entity.uniqueGroups.isEmpty,
                    try store.read({ tx in try SyncReplica.id(of: entity.name, row: row, tx) }) == change.id,
                    case let losers = try store.read({ tx in try SyncReplica.aheadLosers(into: entity, row: row, tx) }),
                    !losers.isEmpty, case let stored = try replica.storedAttributes(entity, row: row, only: nil),
                    try valuesFree(stored, of: row, entity)
                {
                    // Local models merged ahead of the zone into the deleted
                    // one: their saves come after the delete in the zone's
                    // order, and find it gone. They stay, apart.
                    try remake(losers, from: stored, of: row, entity)
                    doom(change.id, entity, row)
                } else if case .row(let row) = place {
                    doom(change.id, entity, row)
                } else if place == nil || own {
                    doom(change.id, entity, nil)
                }
            case .insert, .update:
                if place == .deleted { return }  // a delete wins over every change after it
                // The zone's value of each cascading to-one, masked or not.
                for field in change.fields where field.wire == SyncChangeSet.toOne {
                    guard let property = entity.properties.first(where: { $0.name == field.name }),
                        SyncReplica.cascades(property, entity, schema)
                    else { continue }
                    links.set(change.id, field.name, to: field.value.count == 16 ? SyncID(bytes: field.value) : nil)
                }
                if !entity.uniqueGroups.isEmpty { zoneFields.append((change.id, entity, change.fields)) }
                if own {
                    let unique = SyncReplica.uniqueNames(entity)
                    if change.fields.contains(where: { unique.contains($0.name) }) {
                        aheadEnds.append((entity, change.id, change.fields.filter { $0.wire == SyncChangeSet.toMany }))
                    }
                    // Its lists are the zone's last of a merged model.
                    if change.fields.contains(where: { $0.wire == SyncChangeSet.toMany }),
                        try store.read({ tx in try SyncReplica.aheadMerge(change.id, tx) }) != nil
                    {
                        aheadMerges.append((change.id, entity.name, change.fields))
                    }
                    return
                }
                switch place {
                case .deleted: return
                case .row(let row): try update(row: row, change, entity)
                case nil: try insert(change, entity)
                }
            }
        }

        /// `fields` without the attributes that local saves not pushed yet
        /// changed on `row`: those keep their values (every attribute, when
        /// such a save inserted the model).
        func unmasked(_ fields: [Field], _ entity: Schema.Entity, row: Int64?) -> [Field] {
            guard let row, let mask = masks[entity.name]?[row] else { return fields }
            return mask.map { names in fields.filter { !names.contains($0.name) } } ?? []
        }

        /// `fields` for a merge into the model at `row`: as ``unmasked(_:_:row:)``,
        /// but every to-many stays, since a merge joins its targets to the
        /// model's (which keeps those of its local saves).
        func unmaskedForMerge(_ fields: [Field], _ entity: Schema.Entity, row: Int64?) -> [Field] {
            let kept = unmasked(fields, entity, row: row)
            return kept
                + fields.filter { field in
                    field.wire == SyncChangeSet.toMany && !kept.contains { $0.name == field.name }
                }
        }

        /// A change to the model this store holds at `row`.
        private mutating func update(row: Int64, _ change: SyncChangeSet.Change, _ entity: Schema.Entity) throws {
            if try partAheadMerge(row: row, change, entity) { return }
            if try partAheadLosers(row: row, change, entity) { return }
            let model = context.model(for: replica.identifier(entity, row))
            // In the zone's order the model merges with the one holding its
            // new values, and a delete here not pushed yet of either takes
            // the merged model: both go here now.
            if model is MissingModel || model.isDeleted {
                // A row merged away here is no delete: the identifier's
                // model lives on in the row it merged into.
                if try store.read({ tx in try SyncReplica.survivingRow(entity.name, row, tx) }) != row { return }
                for holder in try zoneHolders(of: change.fields, entity, row: row, deletedHere: false) {
                    if let id = try store.read({ tx in try SyncReplica.id(of: entity.name, row: holder, tx) }) {
                        doom(id, entity, holder)
                    }
                }
                return
            }
            if try !zoneHolders(of: change.fields, entity, row: row, deletedHere: true).isEmpty {
                doom(change.id, entity, row)
                return
            }
            let fields = unmasked(change.fields, entity, row: row)
            if try replica.assign(fields, to: model, entity: entity, seq: seq) { applied.updated.append(model.persistentModelID) }
            if let lists = try store.read({ tx in try SyncReplica.aheadMerge(change.id, tx) }) {
                // Merged here ahead of the zone: its lists change the
                // merged model's.
                var previous: [String: [SyncID]] = [:]
                for field in fields where field.wire == SyncChangeSet.toMany {
                    previous[field.name] = lists[field.name]?.ids ?? []
                }
                // The entry keeps the zone's other fields whole.
                let lists = Set(fields.filter { $0.wire == SyncChangeSet.toMany }.map(\.name))
                aheadMerges.append(
                    (
                        change.id, entity.name,
                        fields.filter { lists.contains($0.name) } + change.fields.filter { $0.wire != SyncChangeSet.toMany }
                    ))
                link(model, entity, fields, previous: previous)
            } else {
                link(model, entity, fields)
            }
            if let (holder, names) = try replica.collidingRow(of: model, entity, except: row) {
                collisions.append(Collision(entity: entity, updated: row, holder: holder, names: names, fields: change.fields))
            } else if let (holder, names) = try zoneHolder(of: change.fields, entity, row: row),
                !movedBySet(entity, row: holder, from: change.fields)
            {
                collisions.append(
                    Collision(
                        entity: entity, updated: row, holder: holder, names: names, fields: change.fields, inZone: true))
            } else if let (holder, names, masked) = try localHolder(ofMasked: change.fields, entity, row: row),
                !movedBySet(entity, row: holder, from: change.fields)
            {
                collisions.append(
                    Collision(
                        entity: entity, updated: row, holder: holder, names: names, fields: change.fields, inZone: true,
                        heldLocally: masked))
            } else if let made = setHolder(matching: model, entity) {
                // A model this set made or changed holds the values (the
                // store's index has not seen it yet): it came first.
                collisions.append(
                    Collision(
                        entity: entity, updated: row, holder: made._strataState.rowID,
                        names: SyncReplica.uniqueNames(entity), fields: change.fields, inZone: true))
            }
            holdInSet(model, entity)
        }

        /// A change to a model this store does not hold: one this change
        /// made or merged already, one that merges into a stored model on a
        /// unique constraint, or a new one.
        private mutating func insert(_ change: SyncChangeSet.Change, _ entity: Schema.Entity) throws {
            if let model = insertedByID[change.id] {
                // A merged model's unpushed attributes keep their values.
                let merging = mergedRows[change.id] != nil
                let fields =
                    merging
                    ? unmaskedForMerge(change.fields, entity, row: mergedRows[change.id])
                    : unmasked(change.fields, entity, row: mergedRows[change.id])
                _ = try replica.assign(fields, to: model, entity: entity, seq: seq)
                link(model, entity, fields, union: merging)
                return
            }
            // A model deleted here, not pushed yet, holds its values in
            // the zone: in the zone's order it merges into that one, which
            // the delete then takes.
            if try !zoneHolders(of: change.fields, entity, row: -1, deletedHere: true).isEmpty {
                doom(change.id, entity, nil)
                return
            }
            let model = try replica.make(entity, change.fields, seq: seq)
            // A model that matches one here on a unique constraint merges
            // into it (SwiftData's upsert), as an update: the zone's first
            // identifier keeps the row, this one points at it too, and
            // attributes of local saves not pushed yet keep their values, as
            // for any update. The model that holds the values in the zone
            // comes first: a local save not pushed yet may have moved them
            // away from it here, and given them to another model.
            var zoneRow = try zoneHolder(of: change.fields, entity, row: -1)?.row
            if let row = zoneRow, movedBySet(entity, row: row, from: change.fields) { zoneRow = nil }
            if zoneRow == nil { zoneRow = try setValueHolder(of: change.fields, entity, except: change.id) }
            var indexRow = try zoneRow == nil ? replica.existingRow(matching: model, entity) : nil
            if let row = indexRow, movedBySet(entity, row: row, from: change.fields) { indexRow = nil }
            if let row = zoneRow ?? indexRow,
                try !deletedBySet(entity, row),
                case let existing = context.model(for: replica.identifier(entity, row)),
                !(existing is MissingModel), !existing.isDeleted
            {
                merged.append((change.id, entity, row))
                // A model whose value here comes from a local save not
                // pushed yet: merged ahead of the zone. In the zone's
                // order the local model is the one merged away, with the
                // lists it has now.
                let ahead: Bool
                if zoneRow != nil {
                    ahead = false
                } else if case let mask?? = masks[entity.name]?[row] {
                    ahead = !mask.isDisjoint(with: SyncReplica.uniqueNames(entity))
                } else {
                    ahead = masks[entity.name]?[row] != nil
                }
                var fields = unmaskedForMerge(change.fields, entity, row: row)
                if ahead {
                    // The local saves before the one that gave the model
                    // its values change, in the zone's order, a model
                    // still apart: the pulled values go over theirs.
                    if let (names, from) = try store.read({ tx in try SyncReplica.aheadMask(entity, row: row, tx) }) {
                        aheadFroms.append((entity.name, row, from))
                        let kept = names.map { names in change.fields.filter { !names.contains($0.name) } } ?? []
                        fields =
                            kept
                            + change.fields.filter { field in
                                field.wire == SyncChangeSet.toMany && !kept.contains { $0.name == field.name }
                            }
                    }
                    aheadMerges.append((change.id, entity.name, change.fields))
                    if let id = try store.read({ tx in try SyncReplica.id(of: entity.name, row: row, tx) }) {
                        let lists = try toManyLists(of: existing, entity)
                        if !lists.isEmpty { zoneMerges.append((id, entity.name, lists)) }
                    }
                } else {
                    zoneMerges.append((change.id, entity.name, change.fields))
                }
                // Later references in this change set find it.
                insertedByID[change.id] = existing
                mergedRows[change.id] = row
                if try replica.assign(fields, to: existing, entity: entity, seq: seq) {
                    applied.updated.append(existing.persistentModelID)
                }
                link(existing, entity, fields, union: true)
                return
            }
            if let made = setHolder(matching: model, entity) {
                insertedByID[change.id] = made
                mergedIntoMade.append((change.id, made))
                // A local model parted here keeps its values: its save
                // comes later in the zone's order.
                let parted = partedLosers.contains { $0.model === made }
                let fields = parted ? change.fields.filter { $0.wire == SyncChangeSet.toMany } : change.fields
                _ = try replica.assign(fields, to: made, entity: entity, seq: seq)
                link(made, entity, fields, union: true)
                return
            }
            context.insert(model)
            inserted.append((change.id, model))
            insertedByID[change.id] = model
            link(model, entity, change.fields)
            holdInSet(model, entity)
        }

        /// Parts a pulled model merged ahead of the zone into the local
        /// model at `row` when `change` moves it, in the zone, off the
        /// values it merged on under every unique constraint: the local save
        /// that would merge the two comes later in the zone's order, and
        /// finds it apart. The pulled model gets a row of its own again,
        /// with the zone's fields of it (it may merge into another model
        /// there), and the local model loses the members it brought. False
        /// when the change is no such move.
        private mutating func partAheadMerge(row: Int64, _ change: SyncChangeSet.Change, _ entity: Schema.Entity) throws
            -> Bool
        {
            guard !entity.uniqueGroups.isEmpty, change.kind == .update,
                change.fields.contains(where: { SyncReplica.uniqueNames(entity).contains($0.name) }),
                let merge = try store.read({ tx in try SyncReplica.aheadEntry(change.id, tx) }), !merge.inZone,
                try store.read({ tx in try SyncReplica.id(of: entity.name, row: row, tx) }) != change.id
            else { return false }
            let local = context.model(for: replica.identifier(entity, row))
            guard !(local is MissingModel), !local.isDeleted else { return false }
            var state = merge.fields
            for field in change.fields { state[field.name] = field }
            let fields = state.sorted { $0.key < $1.key }.map(\.value)
            let pulled: any PersistentModel
            do {
                pulled = try replica.make(entity, fields, seq: seq)
            } catch is MissingExternal {
                return false
            }
            guard Set(setKeys(of: pulled, entity)).isDisjoint(with: setKeys(of: local, entity)) else { return false }
            parted.append((change.id, entity, row))
            try dropMembers(merge.fields, of: row, entity)
            zoneFields.append((change.id, entity, fields))
            try insert(SyncChangeSet.Change(kind: .insert, entity: entity.name, id: change.id, fields: fields), entity)
            return true
        }

        /// Parts the local models merged ahead of the zone into the pulled
        /// model at `row` (their saves come later in the zone's order) when
        /// `change` moves that model, in the zone, off the values they
        /// merged on under every unique constraint: their saves find it
        /// gone from them. They get a row of their own again, with the values
        /// the merged model has here (its own, which went on top) and the
        /// members it brought; the pulled model gets back the values they
        /// went over, and the change. False when the change is no such
        /// move.
        private mutating func partAheadLosers(row: Int64, _ change: SyncChangeSet.Change, _ entity: Schema.Entity) throws
            -> Bool
        {
            guard !entity.uniqueGroups.isEmpty, change.kind == .update,
                change.fields.contains(where: { SyncReplica.uniqueNames(entity).contains($0.name) })
            else { return false }
            // A change of one of the local models is no move of the pulled
            // one.
            let losers = try store.read { tx in try SyncReplica.aheadLosers(into: entity, row: row, tx) }
            guard !losers.isEmpty, !losers.contains(where: { $0.id == change.id }) else { return false }
            let merged = context.model(for: replica.identifier(entity, row))
            guard !(merged is MissingModel), !merged.isDeleted else { return false }
            let stored = try replica.storedAttributes(entity, row: row, only: nil)
            var state = Dictionary(stored.map { ($0.name, $0) }, uniquingKeysWith: { _, last in last })
            for field in change.fields where field.wire != SyncChangeSet.toMany { state[field.name] = field }
            let moved: any PersistentModel
            do {
                moved = try replica.make(entity, Array(state.values), seq: seq)
            } catch is MissingExternal {
                return false
            }
            // Only where both sets of values are free: a collision of the
            // moved model with a third is left to the merge as before.
            guard Set(setKeys(of: moved, entity)).isDisjoint(with: setKeys(of: merged, entity)),
                try valuesFree(stored, of: row, entity), try valuesFree(Array(state.values), of: row, entity)
            else { return false }
            try remake(losers, from: stored, of: row, entity)
            _ = try replica.assign(change.fields, to: merged, entity: entity, seq: seq)
            link(merged, entity, change.fields)
            applied.updated.append(merged.persistentModelID)
            holdInSet(merged, entity)
            return true
        }

        /// Whether no model but the one at `row` holds, here or in this
        /// change set, the values of a unique constraint that `fields` give
        /// (so that a model parted from it can take them).
        func valuesFree(_ fields: [Field], of row: Int64, _ entity: Schema.Entity) throws -> Bool {
            let model = try replica.make(entity, fields, seq: seq)
            if let holder = try replica.existingRow(matching: model, entity), holder != row { return false }
            if let made = setHolder(matching: model, entity), made._strataState.rowID != row { return false }
            return true
        }

        /// Makes `losers` (local models merged ahead of the zone into the
        /// model at `row`) one model again, in a row of its own, with the
        /// attributes `stored` and the members they brought; the model at
        /// `row` gets back what they took.
        private mutating func remake(
            _ losers: [(id: SyncID, loser: SyncReplica.AheadLoser)], from stored: [Field], of row: Int64,
            _ entity: Schema.Entity
        ) throws {
            var made: (any PersistentModel)?
            for (id, loser) in losers {
                if let made {
                    // Merged into the first before.
                    insertedByID[id] = made
                    mergedIntoMade.append((id, made))
                    partedLosers.append((id, entity, loser.row, made))
                } else {
                    let model = try replica.make(entity, stored, seq: seq)
                    context.insert(model)
                    inserted.append((id, model))
                    insertedByID[id] = model
                    link(model, entity, loser.fields.filter { $0.wire == SyncChangeSet.toMany })
                    // Later changes of the set find it holding its values.
                    holdInSet(model, entity)
                    partedLosers.append((id, entity, loser.row, model))
                    made = model
                }
                try giveBack(loser.fields, to: row, entity)
            }
        }

        /// Takes from the model at `row` the members of the to-many lists
        /// among `fields` (a pulled model's, parted from it).
        private mutating func dropMembers(_ fields: [String: Field], of row: Int64, _ entity: Schema.Entity) throws {
            let lists = fields.values.filter { $0.wire == SyncChangeSet.toMany }
            if !lists.isEmpty { try giveBack(lists, to: row, entity) }
        }

        /// Gives the model at `row` back what another model merged into it
        /// ahead of the zone took, now that the two part: the attributes
        /// among `fields`, and its to-manys without the members in the
        /// to-many lists among them (those the other model brought).
        private mutating func giveBack(_ fields: [Field], to row: Int64, _ entity: Schema.Entity) throws {
            let model = context.model(for: replica.identifier(entity, row))
            guard !(model is MissingModel), !model.isDeleted else { return }
            let attributes = fields.filter { $0.wire != SyncChangeSet.toMany }
            _ = try replica.assign(attributes, to: model, entity: entity, seq: seq)
            for field in fields where field.wire == SyncChangeSet.toMany {
                guard let relationship = entity.properties.first(where: { $0.name == field.name }) as? Schema.Relationship
                else { continue }
                let brought = try field.ids.compactMap { id -> (any PersistentModel)? in
                    guard case .row(let member)? = try store.read({ tx in try SyncReplica.place(of: id, tx) }),
                        let type = relationship.destinationType, let destination = schema.entity(forType: type)
                    else { return nil }
                    return context.model(for: replica.identifier(destination, member))
                }
                let members = (model[keyPath: relationship.keypath] as? [any PersistentModel]) ?? []
                let kept = members.filter { member in !brought.contains { $0 === member } }
                if kept.count != members.count { model._strataSetRelationship(field: relationship.field, to: kept) }
            }
            applied.updated.append(model.persistentModelID)
        }

        /// The keys of `setHolders` for `model`'s values.
        private func setKeys(of model: any PersistentModel, _ entity: Schema.Entity) -> [[UInt8]] {
            entity.uniqueGroups.enumerated().map { index, group in
                Array(entity.name.utf8) + [0, UInt8(truncatingIfNeeded: index)] + group.key(group.values(of: model), row: 0)
            }
        }

        /// Records that `model`, made or changed by this set, holds its
        /// values of the entity's unique constraints, where no model of the
        /// set holds them already: the first holds them, and the others
        /// merge into it.
        mutating func holdInSet(_ model: any PersistentModel, _ entity: Schema.Entity) {
            guard !entity.uniqueGroups.isEmpty else { return }
            for key in setKeys(of: model, entity) {
                if let holder = setHolders[key], holder !== model, !holder.isDeleted,
                    setKeys(of: holder, entity).contains(key)
                {
                    continue
                }
                setHolders[key] = model
            }
        }

        /// A model this change set made or changed that holds `model`'s
        /// values of a unique constraint (the store's index does not hold
        /// them yet).
        func setHolder(matching model: any PersistentModel, _ entity: Schema.Entity) -> (any PersistentModel)? {
            guard !entity.uniqueGroups.isEmpty else { return nil }
            let keys = setKeys(of: model, entity)
            for key in keys {
                // A later change of the set may have moved it off since.
                if let holder = setHolders[key], holder !== model, !holder.isDeleted,
                    setKeys(of: holder, entity).contains(key)
                {
                    return holder
                }
            }
            return nil
        }

        /// The rows that hold, in the zone, the values of a unique
        /// constraint that `fields` give the model at `row` (its zone values
        /// with the fields on top): those a local delete not pushed yet
        /// removed here (`deletedHere`, found among the masks), or those
        /// still here (a scan, for a model deleted here); none when the
        /// fields set no such value.
        func zoneHolders(of fields: [Field], _ entity: Schema.Entity, row: Int64, deletedHere: Bool) throws -> [Int64] {
            let unique = SyncReplica.uniqueNames(entity)
            guard fields.contains(where: { unique.contains($0.name) }) else { return [] }
            let deleted = (self.deletedHere[entity.name] ?? []).filter { $0 != row }
            if deletedHere && deleted.isEmpty { return [] }
            return try store.read { tx in
                var values = try SyncReplica.zoneValues(entity, row: row, tx) ?? [:]
                for field in fields where unique.contains(field.name) { values[field.name] = field }
                var rows: [Int64] = []
                for group in entity.uniqueGroups {
                    let names = Set(group.properties.map(\.name))
                    guard names.allSatisfy({ values[$0] != nil }) else { continue }
                    if deletedHere {
                        for other in deleted where !rows.contains(other) {
                            let theirs = try SyncReplica.zoneValues(entity, row: other, tx) ?? [:]
                            if names.allSatisfy({ theirs[$0] == values[$0] }) { rows.append(other) }
                        }
                    } else {
                        for other in try SyncReplica.zoneRows(entity, holding: values, of: names, except: row, tx)
                        where !rows.contains(other) {
                            let here = try tx.treeIfPresent(entity.recordTree).flatMap {
                                try tx.get(RowKey.encode(other), in: $0)
                            }
                            if here != nil { rows.append(other) }
                        }
                    }
                }
                return rows
            }
        }

        /// Whether this change set deletes the model at `row` (so nothing
        /// merges into it: it goes, and the set's model takes its values).
        func deletedBySet(_ entity: Schema.Entity, _ row: Int64) throws -> Bool {
            guard !deletes.isEmpty, let id = try store.read({ tx in try SyncReplica.id(of: entity.name, row: row, tx) })
            else { return false }
            return deletes.contains(id)
        }

        private mutating func link(
            _ model: any PersistentModel, _ entity: Schema.Entity, _ fields: [Field], union: Bool = false,
            previous: [String: [SyncID]]? = nil
        ) {
            let references = fields.filter { $0.wire == SyncChangeSet.toOne || $0.wire == SyncChangeSet.toMany }
            if !references.isEmpty { pendingLinks.append((model, entity, references, union, previous)) }
        }

        private mutating func doom(_ id: SyncID, _ entity: Schema.Entity, _ row: Int64?) {
            if doomed[id] == nil { doomed[id] = (entity, row) }
        }

        /// Points the relationships of every model the change touched.
        func linkAll() throws {
            for (model, entity, fields, union, previous) in pendingLinks where !model.isDeleted {
                try replica.setRelationships(
                    fields, of: model, entity: entity, context: context, inserted: insertedByID,
                    masks: (masks, fixedMasks), seq: seq, union: union, previous: previous)
            }
        }

        /// The zone's cascades, from what this change deletes and from the
        /// to-ones it points at models deleted before; then every doomed
        /// model is deleted in the context.
        mutating func cascade() throws {
            var work = Array(doomed.keys)
            for (source, fields) in links.changed {
                for case let target? in fields.values {
                    // A target this store never held is deleted too: the
                    // zone deleted it before a snapshot this store restored,
                    // or never held it.
                    switch try store.read({ tx in try SyncReplica.place(of: target, tx) }) {
                    case .deleted?: break
                    case nil where insertedByID[target] == nil: break
                    default: continue
                    }
                    if try doomSource(source) { work.append(source) }
                }
            }
            var seen = Set<SyncID>()
            while let target = work.popLast() {
                guard seen.insert(target).inserted else { continue }
                for source in try links.sources(of: target, in: store) where try doomSource(source) { work.append(source) }
            }
            for (id, (entity, row)) in doomed {
                let model: (any PersistentModel)? =
                    row.map { context.model(for: replica.identifier(entity, $0)) } ?? insertedByID[id]
                guard let model, !(model is MissingModel), !model.isDeleted else { continue }
                context.delete(model)
                if row != nil { applied.deleted.append(model.persistentModelID) }
            }
        }

        /// Dooms the model `source` names, a model this store holds or this
        /// change made; false when it is doomed already, deleted or unknown.
        private mutating func doomSource(_ source: SyncID) throws -> Bool {
            guard doomed[source] == nil else { return false }
            switch try store.read({ tx in try SyncReplica.place(of: source, tx) }) {
            case .row(let row)?:
                guard let (name, _) = try store.read({ tx in try SyncReplica.entry(of: source, tx) }),
                    let entity = schema.entity(named: name)
                else { return false }
                doom(source, entity, row)
            case nil:
                guard let model = insertedByID[source], let entity = schema.entity(forType: type(of: model)) else {
                    return false
                }
                doom(source, entity, nil)
            case .deleted?:
                return false
            }
            return true
        }

        /// The stored models that local saves not pushed yet inserted or
        /// changed (but for to-manys, which follow their other side), when
        /// the change deletes some model: the delete and its cascades, the
        /// zone's and the store's delete rules, may take them (see
        /// ``lostModels(of:in:)``). This device's own change carries no
        /// masks (nothing of it is applied); its saves still pending are
        /// read here.
        func modelsAtRisk() throws -> [(entity: Schema.Entity, row: Int64)] {
            guard !doomed.isEmpty else { return [] }
            let saved = own ? try replica.pendingMasks().all : masks
            var rows: [(entity: Schema.Entity, row: Int64)] = []
            for (name, masked) in saved {
                guard let entity = schema.entity(named: name) else { continue }
                for (row, mask) in masked {
                    if let names = mask {
                        let changed = names.contains { name in
                            guard let property = entity.properties.first(where: { $0.name == name }) else { return false }
                            return !((property as? Schema.Relationship).map { !$0.isToOneRelationship } ?? false)
                        }
                        guard changed else { continue }
                    }
                    rows.append((entity, row))
                }
            }
            guard !rows.isEmpty else { return [] }
            return try store.read { tx in
                try rows.filter { entity, row in
                    try tx.treeIfPresent(entity.recordTree).map { try tx.get(RowKey.encode(row), in: $0) != nil } ?? false
                }
            }
        }

        /// Which of `rows` (from ``modelsAtRisk()``) the save in `tx` deleted,
        /// but those merged into another model (told as merges): this
        /// device's changes that the zone removed.
        func lostModels(of rows: [(entity: Schema.Entity, row: Int64)], in tx: WriteTransaction) throws
            -> [SyncEngine.LostChange]
        {
            var lost: [SyncEngine.LostChange] = []
            for (entity, row) in rows where !mergedAway.contains(where: { $0.entity === entity && $0.row == row }) {
                guard try tx.treeIfPresent(entity.recordTree).flatMap({ try tx.get(RowKey.encode(row), in: $0) }) == nil
                else { continue }
                lost.append(SyncEngine.LostChange(model: replica.identifier(entity, row), reason: .deleted))
            }
            return lost
        }

        /// The sync state of the change, written in the transaction of the
        /// save that applies it: identifiers of the models made and merged,
        /// deletes, links, the outbox entry an own change acknowledges, the
        /// kept parts and the position.
        func writeState(_ tx: WriteTransaction) throws {
            for (id, model) in inserted where !model.isDeleted && doomed[id] == nil {
                guard let entity = schema.entity(forType: type(of: model)) else { continue }
                try SyncReplica.map(id, entity: entity.name, row: model._strataState.rowID, tx)
            }
            for (id, entity, row) in merged where doomed[id] == nil {
                let ahead = aheadMerges.contains { $0.id == id }
                try SyncReplica.map(id, entity: entity.name, row: row, claim: !ahead, tx)
            }
            for (id, made) in mergedIntoMade where !made.isDeleted && doomed[id] == nil {
                guard let entity = schema.entity(forType: type(of: made)) else { continue }
                try SyncReplica.map(id, entity: entity.name, row: made._strataState.rowID, tx)
            }
            for (entity, row, survivor) in mergedAway {
                try SyncReplica.unmap(entity: entity.name, row: row, tx)
                try SyncReplica.recordMergedRow(entity.name, row, into: survivor, tx)
                try SyncReplica.forgetZoneValues(entity, row: row, tx)
            }
            for (id, (entity, row)) in doomed {
                if let row { try SyncReplica.endAheadMerges(into: entity, row: row, all: true, tx) }
                try SyncReplica.markDeleted(id, entity: entity.name, row: row, tx)
                try links.forget(id, tx)
                if let row { try SyncReplica.forgetZoneValues(entity, row: row, tx) }
            }
            for (id, entity, row) in unmerged {
                // The row is the kept model's from now on; the local saves
                // so far changed the deleted one and mask nothing.
                try SyncReplica.unmap(entity: entity.name, row: row, tx)
                try SyncReplica.map(id, entity: entity.name, row: row, tx)
                if let tree = try tx.treeIfPresent(SyncReplica.aheadMergesTree) { try tx.delete(id.bytes, in: tree) }
                try SyncReplica.recordAheadFrom(entity.name, row: row, token: try HistoryLog.lastToken(tx) + 1, tx)
            }
            for (id, entity, loser) in aheadLosers where doomed[id] == nil {
                try SyncReplica.recordAheadLoser(id, entity: entity.name, loser, tx)
            }
            for (id, entity, row) in aheadLosersGone {
                // Its saves so far changed a deleted model, and mask nothing.
                try SyncReplica.forgetAheadLosers(id, tx)
                if let tree = try tx.treeIfPresent(SyncReplica.aheadMergesTree) { try tx.delete(id.bytes, in: tree) }
                try SyncReplica.recordAheadFrom(entity.name, row: row, token: try HistoryLog.lastToken(tx) + 1, tx)
            }
            for (id, entity, row) in parted {
                // The row is the local model's alone again; the zone's
                // values it held were the pulled model's. (A parted model
                // that merged ahead elsewhere at once records its entry
                // below.)
                if let tree = try tx.treeIfPresent(SyncReplica.aheadMergesTree) { try tx.delete(id.bytes, in: tree) }
                if try SyncReplica.mergedAheadIDs(into: entity, row: row, tx).isEmpty {
                    try SyncReplica.forgetAheadFrom(entity.name, row: row, tx)
                }
                try SyncReplica.forgetZoneValues(entity, row: row, tx)
            }
            for (id, entity, fields) in aheadMerges where doomed[id] == nil {
                try SyncReplica.recordAheadMerge(id, entity: entity, fields, tx)
            }
            for (entity, row, token) in aheadFroms {
                try SyncReplica.recordAheadFrom(entity, row: row, token: token, tx)
            }
            for (id, entity, savedRow, model) in partedLosers where !model.isDeleted {
                // Its saves not pushed yet name its row before the merge,
                // and all of them change it now.
                try SyncReplica.forgetAheadLosers(id, tx)
                try SyncReplica.recordMergedRow(entity.name, savedRow, into: model._strataState.rowID, tx)
                try SyncReplica.forgetAheadFrom(entity.name, row: savedRow, tx)
            }
            for (id, entity, fields) in zoneMerges where doomed[id] == nil {
                try SyncReplica.recordAheadMerge(id, entity: entity, fields, inZone: true, tx)
            }
            for (entity, id, lists) in aheadEnds {
                guard case .row(let row)? = try SyncReplica.place(of: id, tx) else { continue }
                let ended = try SyncReplica.endAheadMerges(into: entity, row: row, tx)
                // In the zone's order this model merges into the pulled
                // one, which held the values first: on every other device
                // the row is that one's, and lists sent for this one change
                // only what it brought. The row is the pulled one's here
                // too, and the saves not pushed yet, made knowing the
                // merge, send their lists whole for it.
                if let kept = ended.first, try SyncReplica.id(of: entity.name, row: row, tx) == id {
                    try SyncReplica.unmap(entity: entity.name, row: row, tx)
                    try SyncReplica.map(kept, entity: entity.name, row: row, tx)
                    if !lists.isEmpty {
                        try SyncReplica.recordAheadMerge(id, entity: entity.name, lists, inZone: true, tx)
                    }
                    try SyncReplica.readdressOutbox(from: id, to: kept, tx)
                }
            }
            // The zone's values of unique constraints, by where each
            // identifier points now (a merged one at its survivor).
            for (id, entity, fields) in zoneFields where doomed[id] == nil {
                guard case .row(let row)? = try SyncReplica.place(of: id, tx) else { continue }
                try SyncReplica.recordZoneValues(entity, row: row, fields, tx)
            }
            try links.write(tx)
            for (loser, entity, survivor) in listRewrites where !survivor.isDeleted {
                try replica.sendSurvivorLists(for: loser, entity, survivor: survivor, tx)
            }
            if let token = ownToken {
                if let outbox = try tx.treeIfPresent(SyncReplica.outboxTree) { try tx.delete(RowKey.encode(token), in: outbox) }
                try SyncReplica.setPushed(max(token, try SyncReplica.number("pushed", tx)), tx)
                try SyncReplica.forgetAheadLosers(nil, tx)
            }
            // A model the set made and its cascade deleted, that the save
            // wrote all the same (another model the set made lists it): it
            // has no identifier, and the zone holds no such model.
            var stray = false
            for (id, model) in inserted where doomed[id] != nil && !model.isDeleted {
                guard let entity = schema.entity(forType: type(of: model)),
                    let tree = try tx.treeIfPresent(entity.recordTree),
                    try tx.get(RowKey.encode(model._strataState.rowID), in: tree) != nil
                else { continue }
                stray = true
            }
            if !nothingPending || stray {
                // Applied ahead of local saves (or leaving a stray model):
                // the round ends by comparing the models with the zone's
                // copy. The local saves after the pushed mark are those
                // whose models the alignment may remove (reported lost).
                if try SyncReplica.number("unaligned", tx) == 0 {
                    try SyncReplica.setNumber("unalignedFrom", try SyncReplica.number("pushed", tx), tx)
                }
                try SyncReplica.setNumber("unaligned", 1, tx)
            }
            // A local save another context made since the change began
            // waits to be pushed: the marks stay.
            if nothingPending, !own,
                try HistoryLog.readRaw(tx, after: startToken, through: try HistoryLog.lastToken(tx)).allSatisfy({
                    $0.author == SyncReplica.author
                })
            {
                let last = try HistoryLog.lastToken(tx)
                try SyncReplica.setPushed(last, tx)
                try SyncReplica.setNumber("prepared", last, tx)
            }
            if !kept.changes.isEmpty {
                let tree = try tx.treeIfPresent(SyncReplica.keptTree) ?? tx.createTree(SyncReplica.keptTree)
                try tx.put(RowKey.encode(seq), kept.encode(), in: tree)
            } else if replay, let tree = try tx.treeIfPresent(SyncReplica.keptTree) {
                try tx.delete(RowKey.encode(seq), in: tree)
            }
            if !replay { try SyncReplica.setPosition(seq, change: origin, tx) }
        }
    }
}
