import Foundation
import Strata
import StrataEngine

// The zone copy. A store that syncs a schema with unique constraints keeps,
// in a second store beside it (its path with "-zone" added; in memory for
// a store in memory), the zone's models as the zone's changes alone make
// them: every change applied there in the zone's order, this device's own
// as it reaches the zone, and no save of this device before then. That
// store never has a save waiting, so what a change does there depends on
// the zone's changes only, and is the same on every device.
//
// Here, a change pulled while saves of this device wait to be pushed is
// applied ahead of them, and a unique constraint decides what it does by
// the models as those saves left them: two models that never hold one
// value at once in the zone's order may meet here, and merge, and the
// merges ahead of the zone (`SyncReplica+AheadMerges`) undo most of what
// such a meeting does once the saves arrive, not all. So once this store
// has nothing to push and holds the zone's last change, a round ends by
// making its models those of the copy (``alignWithZone()``): the models
// the copy has and this store lacks are made, those it lacks go, each
// model's attributes and relationships become the copy's, and identifiers
// merged there point at one model here too. A store that had nothing
// waiting whenever it applied a change holds the copy's models already,
// and the round ends without comparing them (`sync.meta` "unaligned" is
// set by a change applied while saves waited, cleared by an alignment).
//
// `.externalStorage` values are not in the copy (they do not decide
// merges): the copy's changes go without them, and an alignment leaves
// them as they are here.
//
// The copy's `sync.meta` position moves with this store's. A copy whose
// position is not this store's (a copy made after the store synced, an
// apply that failed there, a crash between an apply here and there,
// `deleteAllData()`) is brought up at the end of a round: from this
// store's models when they are the zone's state (no change was applied
// while saves waited), and otherwise from the zone's own changes, pulled
// again (`Worker.catchUpCopy`): made from models that are not the zone's,
// the copy would take them for it, and the difference would stay.

extension SyncReplica {
    /// Opens the zone copy of `container`'s store, making it when there is
    /// none; nil for a schema without unique constraints, where the order
    /// of changes decides no merge.
    static func openZoneCopy(of container: ModelContainer, zone: String) throws -> SyncReplica? {
        let schema = container.schema
        guard schema.entities.contains(where: { !$0.uniqueGroups.isEmpty }),
            let configuration = container.orderedConfigurations.first
        else { return nil }
        let path = configuration.url.path + "-zone"
        var copyConfiguration =
            configuration.isStoredInMemoryOnly
            ? ModelConfiguration(schema: schema, isStoredInMemoryOnly: true)
            : ModelConfiguration(schema: schema, url: URL(fileURLWithPath: path))
        copyConfiguration.recordsHistory = false
        func open() throws -> SyncReplica {
            let copy = try SyncReplica(
                container: ModelContainer(for: schema, configurations: copyConfiguration), isZoneCopy: true)
            _ = try copy.join(zone: zone)
            return copy
        }
        do {
            return try open()
        } catch  where !configuration.isStoredInMemoryOnly {
            // A copy that does not open (damaged, or of a schema it cannot
            // migrate from) is made anew: out of step, it is made again
            // from this store's models once they are the zone's state.
            for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
                try FileManager.default.removeItem(atPath: path + suffix)
            }
            return try open()
        }
    }

    /// The zone copy, when it holds the zone's state at this store's
    /// position: the same position, reached by the same change (read
    /// before this store applies a change). A copy that cannot be read is
    /// out of step: the copy never stops a round.
    func copyInStep() -> SyncReplica? {
        guard let copy = zoneCopy else { return nil }
        do {
            let here = try store.read { tx in (try Self.number("position", tx), try Self.changeAt(tx)) }
            let there = try copy.store.read { tx in (try Self.number("position", tx), try Self.changeAt(tx)) }
            return here == there ? copy : nil
        } catch {
            return nil
        }
    }

    /// `sync.meta` "at": the change at the position, as stored.
    static func changeAt(_ tx: ReadTransaction) throws -> [UInt8]? {
        try tx.treeIfPresent(metaTree).flatMap { try tx.get(Array("at".utf8), in: $0) }
    }

    /// Applies server change `seq` to the copy too; a copy that cannot
    /// apply it is out of step, and is made again later.
    func copyFollows(_ copy: SyncReplica?, seq: Int64, set: SyncChangeSet, origin: (device: SyncID, token: Int64)?) {
        guard let copy else { return }
        do {
            try copy.apply(seq: seq, set: Self.withoutExternal(set), own: nil, replay: false, origin: origin)
        } catch {
            copy.putOutOfStep()
        }
    }

    /// Moves the copy past a change set aside here; false when it could
    /// not (it is out of step then).
    @discardableResult
    func copySetsAside(_ copy: SyncReplica?, seq: Int64, device: SyncID, token: Int64) -> Bool {
        guard let copy else { return false }
        do {
            try copy.store.write { tx in try Self.setPosition(seq, change: (device, token), tx) }
            return true
        } catch {
            copy.putOutOfStep()
            return false
        }
    }

    /// Restores the snapshot whose parts this store downloaded into the
    /// copy too (before this store's restore drops them).
    func copyRestores(through: Int64) {
        guard let copy = zoneCopy else { return }
        do {
            let parts = try store.read { tx in try Self.snapshotParts(through: through, tx) }
            try copy.restart(zone: try zoneName(), snapshot: (through, parts))
        } catch {
            copy.putOutOfStep()
        }
    }

    /// Empties the copy: this store joined its zone again, from position 0.
    func copyRestarts() {
        guard let copy = zoneCopy else { return }
        do {
            try copy.restart(zone: try zoneName())
        } catch {
            copy.putOutOfStep()
        }
    }

    /// Where a zone copy out of step stands, when it must catch up by the
    /// zone's own changes: this store applied changes while local saves
    /// waited (`sync.meta` "unaligned"), so its models are not the zone's
    /// state, and a copy made from them would take them for it. The
    /// copy's position, this store's, and the change at the copy's
    /// position; nil when there is no copy, it is in step, or this store
    /// is aligned (the copy is made from its models then). A copy marked
    /// out of step, past this store, or at its position by another change
    /// starts again from no change.
    package func copyLag() throws -> (copy: Int64, store: Int64, at: (device: SyncID, token: Int64)?)? {
        guard let copy = zoneCopy, copyInStep() == nil else { return nil }
        let (here, unaligned) = try store.read { tx in (try Self.number("position", tx), try Self.number("unaligned", tx)) }
        guard unaligned != 0 else { return nil }
        var there = try copy.store.read { tx in try Self.number("position", tx) }
        if there < 0 || there >= here {
            try copy.restart(zone: try zoneName())
            there = 0
        }
        return (there, here, there > 0 ? try copy.changeAtPosition() : nil)
    }

    /// Starts the copy again from the zone's snapshot at `through` (its
    /// parts as the zone sends them). A snapshot at this store's position
    /// stands for the change this store applied there (trimmed changes
    /// keep their device and save): the copy records it, and is in step.
    package func copyStarts(from snapshot: (through: Int64, parts: [[UInt8]])) throws {
        guard let copy = zoneCopy else { return }
        try copy.restart(zone: try zoneName(), snapshot: snapshot)
        guard try store.read({ tx in try Self.number("position", tx) }) == snapshot.through,
            let at = try changeAtPosition()
        else { return }
        try copy.store.write { tx in try Self.setPosition(snapshot.through, change: at, tx) }
    }

    /// Marks the copy out of step: it starts again from no change.
    package func copyOutOfStep() {
        zoneCopy?.putOutOfStep()
    }

    /// Applies server change `seq` to the copy alone, as every device's
    /// copy applies it: set aside when the zone set it aside (`payload`
    /// nil) or it cannot be read. False when the copy could not take it;
    /// it is out of step then.
    package func copyTakes(seq: Int64, device: SyncID, token: Int64, payload: [UInt8]?) -> Bool {
        guard let copy = zoneCopy else { return false }
        do {
            var set: SyncChangeSet?
            if let payload {
                do {
                    set = try SyncChangeSet.decode(payload)
                } catch is SyncPayloadError {
                    set = nil
                }
            }
            if let set {
                do {
                    try copy.apply(seq: seq, set: Self.withoutExternal(set), own: nil, replay: false, origin: (device, token))
                    return true
                } catch is DamagedChange {
                    // Set aside below, as this store set it aside.
                }
            }
        } catch {
            copy.putOutOfStep()
            return false
        }
        return copySetsAside(copy, seq: seq, device: device, token: token)
    }

    private func zoneName() throws -> String {
        guard let zone = try state().zone else { throw Refusal("the store syncs with no zone") }
        return zone
    }

    /// The copy's models, sync state and position go; it joins `zone` again,
    /// and restores `snapshot` (its parts as the zone sends them) if given.
    private func restart(zone: String, snapshot: (through: Int64, parts: [[UInt8]])? = nil) throws {
        try container.erase()
        try leave()
        _ = try join(zone: zone)
        guard let snapshot else { return }
        for (index, part) in snapshot.parts.enumerated() {
            try keepPart(
                through: snapshot.through, part: index, payload: Self.withoutExternal(SyncChangeSet.decode(part)).encode())
        }
        try restore(through: snapshot.through)
    }

    /// Marks the copy out of step (its position can be no store's). A
    /// failed apply moved neither position already; this also covers a
    /// copy whose restore stopped half way. Should even this write fail,
    /// the copy's position still differs from the store's.
    private func putOutOfStep() {
        do {
            try store.write { tx in try Self.setNumber("position", -1, tx) }
        } catch {
            return
        }
    }

    /// `set` for the copy, which holds no `.externalStorage` values: each
    /// goes as empty data (nil when the zone's is), as a non-optional
    /// attribute needs one.
    static func withoutExternal(_ set: SyncChangeSet) -> SyncChangeSet {
        var set = set
        for index in set.changes.indices {
            set.changes[index].fields = set.changes[index].fields.map { field in
                guard field.wire == SyncChangeSet.external else { return field }
                let isNil: Bool
                do {
                    isNil = try ExternalReference.decode(field.value) == nil
                } catch {
                    isNil = false
                }
                return isNil ? SyncChangeSet.Field(name: field.name, wire: RecordFormat.null, value: []) : emptyData(field.name)
            }
        }
        return set
    }

    /// Empty data for attribute `name`, as a record holds data.
    static func emptyData(_ name: String) -> SyncChangeSet.Field {
        SyncChangeSet.Field(name: name, wire: RecordFormat.lengthDelimited, value: [0])
    }

    /// Makes this store's models the copy's, once it has nothing to push
    /// and holds the zone's last change (see the top of this file); makes
    /// a copy out of step again from this store's models first.
    package func alignWithZone() throws -> Applied {
        guard let copy = zoneCopy else { return Applied() }
        guard copyInStep() != nil else {
            // From this store's models only when they are the zone's
            // state; otherwise the round brought the copy up by the zone's
            // changes (``copyLag()``), or could not, and the next tries.
            if try store.read({ tx in try Self.number("unaligned", tx) }) == 0 { try remakeCopy(copy) }
            return Applied()
        }
        guard try store.read({ tx in try Self.number("unaligned", tx) }) != 0, let quiet = try quietToken() else {
            return Applied()
        }
        var plan = AlignmentPlan(zone: try copy.view(), here: try view(strays: true))
        plan.assign()
        do {
            return try carryOut(plan, quiet: quiet, copy: copy, savedHere: try rowsSavedHere())
        } catch is LocalSaveCameIn {
            return Applied()
        }
    }

    /// The rows ("entity/row") that local saves inserted or changed since
    /// a change was first applied ahead of them (`sync.meta`
    /// "unalignedFrom"): an alignment that removes one reports it lost. The
    /// history of saves pushed since may have been deleted by the app; the
    /// report then names fewer.
    ///
    /// A row deleted since counts only if a local save changed it again
    /// after (a row number can be taken again by another model). A store
    /// made unaligned before the mark was kept reports nothing.
    func rowsSavedHere() throws -> Set<String> {
        try store.read { tx in
            var rows = Set<String>()
            guard let meta = try tx.treeIfPresent(Self.metaTree), try tx.get(Array("unalignedFrom".utf8), in: meta) != nil
            else { return rows }
            let from = try Self.number("unalignedFrom", tx)
            for transaction in try HistoryLog.readRaw(tx, after: from, through: try HistoryLog.lastToken(tx)) {
                for change in transaction.changes {
                    let row = "\(change.entity)/\(change.row)"
                    if change.kind == .delete {
                        rows.remove(row)
                    } else if transaction.author != Self.author {
                        rows.insert(row)
                    }
                }
            }
            return rows
        }
    }

    /// The last history token when no local save waits to be pushed or
    /// prepared; nil otherwise.
    func quietToken() throws -> Int64? {
        try store.read { tx in
            try Self.nothingToPush(after: try Self.number("prepared", tx), tx) ? try HistoryLog.lastToken(tx) : nil
        }
    }

    /// Whether the outbox is empty and every save after `token` applied
    /// the zone's changes.
    static func nothingToPush(after token: Int64, _ tx: ReadTransaction) throws -> Bool {
        if let outbox = try tx.treeIfPresent(outboxTree) {
            var any = false
            try tx.forEach(outbox) { _, _ in
                any = true
                return false
            }
            if any { return false }
        }
        let last = try HistoryLog.lastToken(tx)
        return try HistoryLog.readRaw(tx, after: token, through: last).allSatisfy { $0.author == author }
    }

    /// Makes the copy again from this store's models, when they are the
    /// zone's state (nothing to push).
    private func remakeCopy(_ copy: SyncReplica) throws {
        let snapshot: (through: Int64, parts: [[UInt8]])
        do {
            snapshot = try self.snapshot()
        } catch is SnapshotRefusal {
            return
        }
        try copy.restart(zone: try zoneName(), snapshot: snapshot)
    }

    /// A store's models in the zone's terms: each by the identifier its
    /// row has, with every identifier that points at it, and its fields as
    /// a change set sends them.
    struct ZoneView {
        struct Model {
            let entity: Schema.Entity
            let row: Int64
            var fields: [SyncChangeSet.Field]
        }
        /// By the identifier of the model's row.
        var models: [SyncID: Model] = [:]
        /// Every live identifier → the identifier of its model's row.
        var primary: [SyncID: SyncID] = [:]
        /// The identifiers pointing at each model, by the model's.
        var members: [SyncID: [SyncID]] = [:]
        /// Identifiers of deleted models, with their entity names.
        var deleted: [SyncID: String] = [:]
        /// Entity name → row → the model's identifier.
        var rows: [String: [Int64: SyncID]] = [:]
    }

    /// This store's models as a ``ZoneView``. A model no identifier names
    /// (a stray a change's cascade left, see `ChangeApplication.writeState`)
    /// is left out, or, with `strays`, stands under an identifier made for
    /// it, which no other store knows.
    func view(strays: Bool = false) throws -> ZoneView {
        let schema = schema
        // The builder reads through a write transaction; nothing is written.
        return try store.write { tx -> ZoneView in
            var view = ZoneView()
            var pointing: [String: [Int64: [SyncID]]] = [:]
            if let ids = try tx.treeIfPresent(Self.idsTree) {
                try tx.forEach(ids) { key, value in
                    guard key.count == 16 else { return true }
                    if value.first == 1, value.count >= 9 {
                        let entity = String(decoding: value[9...], as: UTF8.self)
                        pointing[entity, default: [:]][try RowKey.decode(Array(value[1..<9])), default: []].append(
                            SyncID(bytes: key))
                    } else if value.first == 2 {
                        view.deleted[SyncID(bytes: key)] = String(decoding: value[1...], as: UTF8.self)
                    }
                    return true
                }
            }
            var builder = ChangeSetBuilder(schema: schema, tx: tx)
            // `.externalStorage` values are left out: the copy holds none,
            // and reading them would copy each into `sync.blobsOut`.
            var carried: [String: Set<String>] = [:]
            for entity in schema.entities {
                carried[entity.name] = Set(entity.properties.filter { entity.externalTrees[$0.field] == nil }.map(\.name))
            }
            for entity in schema.entities {
                for (row, record) in try Self.records(of: entity, tx) {
                    let members = pointing[entity.name]?[row] ?? []
                    guard let id = try Self.id(of: entity.name, row: row, tx) ?? members.min(by: Self.precedes) else {
                        // No identifier names it: with nothing to push, a
                        // model the zone never held.
                        guard strays else { continue }
                        let stand = SyncID.make()
                        view.models[stand] = ZoneView.Model(entity: entity, row: row, fields: [])
                        view.rows[entity.name, default: [:]][row] = stand
                        view.members[stand] = []
                        continue
                    }
                    let fields = try builder.fields(of: record, entity: entity, row: row, only: carried[entity.name])
                    view.models[id] = ZoneView.Model(entity: entity, row: row, fields: fields)
                    view.rows[entity.name, default: [:]][row] = id
                    view.members[id] = members.contains(id) ? members : [id] + members
                    for member in view.members[id] ?? [] { view.primary[member] = id }
                }
            }
            return view
        }
    }

    static func precedes(_ a: SyncID, _ b: SyncID) -> Bool { a.bytes.lexicographicallyPrecedes(b.bytes) }

    /// What an alignment changes here: which row each of the copy's models
    /// takes (one here that an identifier of it names), the rows no model
    /// of the copy takes, and the models to make.
    struct AlignmentPlan {
        let zone: ZoneView
        let here: ZoneView
        /// The copy's model → the row it takes here.
        var rowOf: [SyncID: Int64] = [:]
        /// The copy's models this store makes.
        var made: [SyncID] = []
        /// Rows here no model of the copy takes.
        var gone: [(entity: Schema.Entity, row: Int64, id: SyncID)] = []
        /// Entity name → row here → the copy's model that takes it.
        var owner: [String: [Int64: SyncID]] = [:]

        mutating func assign() {
            var taken: [String: Set<Int64>] = [:]
            let order = zone.models.keys.sorted(by: SyncReplica.precedes)
            // A row whose own identifier is the model's first, then a row
            // another of its identifiers names.
            for id in order {
                guard let model = zone.models[id], let mine = here.models[id], mine.entity.name == model.entity.name else {
                    continue
                }
                rowOf[id] = mine.row
                taken[model.entity.name, default: []].insert(mine.row)
            }
            for id in order where rowOf[id] == nil {
                guard let model = zone.models[id] else { continue }
                for member in (zone.members[id] ?? []).sorted(by: SyncReplica.precedes) {
                    guard let own = here.primary[member], let mine = here.models[own],
                        mine.entity.name == model.entity.name, taken[model.entity.name]?.contains(mine.row) != true
                    else { continue }
                    rowOf[id] = mine.row
                    taken[model.entity.name, default: []].insert(mine.row)
                    break
                }
                if rowOf[id] == nil { made.append(id) }
            }
            for (id, mine) in here.models where taken[mine.entity.name]?.contains(mine.row) != true {
                gone.append((mine.entity, mine.row, id))
            }
            for (id, row) in rowOf {
                guard let entity = zone.models[id]?.entity.name else { continue }
                owner[entity, default: [:]][row] = id
            }
        }

        /// `fields` with each identifier as the copy names its model, and
        /// to-many lists in one order. `here`: fields of this store, whose
        /// identifiers name rows here: each becomes the copy's model that
        /// takes the row (a row that goes keeps the identifier, which the
        /// copy's fields do not hold).
        func canonical(_ fields: [SyncChangeSet.Field], here mine: Bool = false) -> [String: SyncChangeSet.Field] {
            var result: [String: SyncChangeSet.Field] = [:]
            for field in fields {
                guard field.wire == SyncChangeSet.toOne || field.wire == SyncChangeSet.toMany else {
                    result[field.name] = field
                    continue
                }
                var ids = field.ids.map { id -> SyncID in
                    guard mine else { return zone.primary[id] ?? id }
                    guard let own = here.primary[id], let model = here.models[own] else { return id }
                    return owner[model.entity.name]?[model.row] ?? own
                }
                if field.wire == SyncChangeSet.toMany { ids.sort(by: SyncReplica.precedes) }
                result[field.name] = SyncChangeSet.Field(name: field.name, wire: field.wire, value: ids.flatMap(\.bytes))
            }
            return result
        }

        /// The copy's fields of `id` that differ here, attributes and
        /// relationships apart.
        func differences(_ id: SyncID) -> (attributes: [SyncChangeSet.Field], relationships: [SyncChangeSet.Field]) {
            guard let model = zone.models[id] else { return ([], []) }
            let theirs = canonical(model.fields)
            let mine = rowOf[id].flatMap { here.rows[model.entity.name]?[$0] }.flatMap { here.models[$0] }.map {
                canonical($0.fields, here: true)
            }
            var attributes: [SyncChangeSet.Field] = []
            var relationships: [SyncChangeSet.Field] = []
            for field in model.fields where mine?[field.name] != theirs[field.name] {
                if field.wire == SyncChangeSet.toOne || field.wire == SyncChangeSet.toMany {
                    relationships.append(field)
                } else {
                    attributes.append(field)
                }
            }
            return (attributes, relationships)
        }
    }

    /// Carries out `plan` in one save authored ``author``, or two: a model
    /// to make whose unique values a model that stays holds here now is
    /// made by a second save (made in the first, it would take that
    /// model's row, SwiftData's upsert, before the model gives the values
    /// up). Each save checks that no local save came in since `quiet`.
    ///
    /// A model that local saves inserted or changed (`savedHere`) and the
    /// alignment removes is reported lost: merged into the model of the
    /// copy that one of its identifiers names, or deleted.
    private func carryOut(_ plan: AlignmentPlan, quiet: Int64, copy: SyncReplica, savedHere: Set<String>) throws
        -> Applied
    {
        var applied = Applied()
        var lostRows: [(model: PersistentIdentifier, id: SyncID)] = []
        let position = try store.read { tx in try Self.number("position", tx) }
        let zone = plan.zone
        let goneRows = Set(plan.gone.map { "\($0.entity.name)/\($0.row)" })
        var relinked: [(id: SyncID, entity: Schema.Entity, fields: [SyncChangeSet.Field])] = []
        func model(_ id: SyncID, in context: ModelContext, made: [SyncID: any PersistentModel]) -> (any PersistentModel)? {
            if let new = made[id] { return new }
            guard let entity = zone.models[id]?.entity, let row = plan.rowOf[id] else { return nil }
            let found = context.model(for: identifier(entity, row))
            return found is MissingModel || found.isDeleted ? nil : found
        }
        func link(
            _ target: any PersistentModel, _ entity: Schema.Entity, _ fields: [SyncChangeSet.Field], in context: ModelContext,
            made: [SyncID: any PersistentModel]
        ) {
            for field in fields {
                guard let relationship = entity.properties.first(where: { $0.name == field.name }) as? Schema.Relationship
                else { continue }
                let targets = field.ids.compactMap { model(zone.primary[$0] ?? $0, in: context, made: made) }
                if relationship.isToOneRelationship {
                    target._strataSetRelationship(field: relationship.field, to: targets.first)
                } else {
                    target._strataSetRelationship(field: relationship.field, to: targets)
                }
            }
        }
        /// A new model of the copy's model `id`; its `.externalStorage`
        /// attributes, which the copy does not hold, empty (nil when
        /// optional) until a change brings their values.
        func make(_ id: SyncID) throws -> (any PersistentModel)? {
            guard let model = zone.models[id] else { return nil }
            var attributes = model.fields.filter { $0.wire != SyncChangeSet.toOne && $0.wire != SyncChangeSet.toMany }
            for field in model.entity.externalTrees.keys.sorted() {
                let property = model.entity.properties[field]
                attributes.append(
                    (property as? Schema.Attribute)?.isOptional == true
                        ? SyncChangeSet.Field(name: property.name, wire: RecordFormat.null, value: [])
                        : Self.emptyData(property.name))
            }
            return try self.make(model.entity, attributes, seq: position)
        }

        let first = ModelContext(container)
        first.author = Self.author
        // Models to make: in the first save unless a model that stays holds
        // their unique values here now.
        var news: [SyncID: any PersistentModel] = [:]
        var later: [SyncID] = []
        for id in plan.made {
            guard let new = try make(id), let entity = zone.models[id]?.entity else { continue }
            if let holder = try existingRow(matching: new, entity), !goneRows.contains("\(entity.name)/\(holder)") {
                later.append(id)
                continue
            }
            first.insert(new)
            news[id] = new
        }
        for (id, new) in news {
            guard let model = zone.models[id] else { continue }
            link(new, model.entity, model.fields, in: first, made: news)
        }
        for (id, row) in plan.rowOf.sorted(by: { Self.precedes($0.key, $1.key) }) {
            guard let entity = zone.models[id]?.entity else { continue }
            let (attributes, relationships) = plan.differences(id)
            guard !attributes.isEmpty || !relationships.isEmpty else { continue }
            let stored = first.model(for: identifier(entity, row))
            guard !(stored is MissingModel) else { continue }
            if !attributes.isEmpty { _ = try assign(attributes, to: stored, entity: entity, seq: position) }
            if !relationships.isEmpty {
                // Targets a second save makes are pointed at there.
                link(stored, entity, relationships, in: first, made: news)
                relinked.append((id, entity, relationships))
            }
            applied.updated.append(stored.persistentModelID)
        }
        for (entity, row, id) in plan.gone {
            let stored = first.model(for: identifier(entity, row))
            guard !(stored is MissingModel), !stored.isDeleted else { continue }
            first.delete(stored)
            applied.deleted.append(stored.persistentModelID)
            if savedHere.contains("\(entity.name)/\(row)") { lostRows.append((stored.persistentModelID, id)) }
        }
        /// The lost changes of `lostRows`, once every model is made.
        func lost(_ made: [SyncID: any PersistentModel]) -> [SyncEngine.LostChange] {
            lostRows.map { row in
                for member in (plan.here.members[row.id] ?? [row.id]).sorted(by: Self.precedes) {
                    guard let kept = zone.primary[member], let model = zone.models[kept] else { continue }
                    if let at = plan.rowOf[kept] {
                        return SyncEngine.LostChange(model: row.model, reason: .merged(into: identifier(model.entity, at)))
                    }
                    if let new = made[kept], !new.isDeleted {
                        return SyncEngine.LostChange(model: row.model, reason: .merged(into: new.persistentModelID))
                    }
                }
                return SyncEngine.LostChange(model: row.model, reason: .deleted)
            }
        }
        // The identifiers of each model that stays at its row, the
        // model's own as the row's.
        var remaps: [(SyncID, Schema.Entity, Int64)] = []
        for (id, row) in plan.rowOf {
            guard let entity = zone.models[id]?.entity else { continue }
            let members = zone.members[id] ?? [id]
            let inStep =
                plan.here.rows[entity.name]?[row] == id
                && members.allSatisfy { plan.here.primary[$0] == id }
            if !inStep { remaps.append((id, entity, row)) }
        }
        // Identifiers deleted in the zone, or never in it (a model a
        // local save merged ahead of the zone, named by its saves since).
        var deletedThere = zone.deleted.filter { plan.here.deleted[$0.key] == nil }
        for (id, own) in plan.here.primary where zone.primary[id] == nil {
            if let entity = plan.here.models[own]?.entity.name { deletedThere[id] = entity }
        }
        let zoneTrees = try copy.store.read { tx -> [String: [([UInt8], [UInt8])]] in
            var trees: [String: [([UInt8], [UInt8])]] = [:]
            for name in [Self.aheadMergesTree, Links.byTarget, Links.bySource] {
                guard let tree = try tx.treeIfPresent(name) else { continue }
                try tx.forEach(tree) { key, value in
                    trees[name, default: []].append((key, value))
                    return true
                }
            }
            return trees
        }
        // The copy's zone values of unique constraints, by the model each
        // row holds (a store's rows are its own).
        var zoneValues: [(id: SyncID, entity: String, value: [UInt8])] = []
        try copy.store.read { tx in
            guard let tree = try tx.treeIfPresent(Self.zoneValuesTree) else { return }
            try tx.forEach(tree) { key, value in
                guard key.count > 9, let zero = key.firstIndex(of: 0), key.count == zero + 9 else { return true }
                let entity = String(decoding: key[..<zero], as: UTF8.self)
                let row = try RowKey.decode(Array(key[(zero + 1)...]))
                if let id = zone.rows[entity]?[row] { zoneValues.append((id, entity, value)) }
                return true
            }
        }
        /// Maps the models `made` made, and records their zone values.
        func mapMade(_ made: [SyncID: any PersistentModel], _ tx: WriteTransaction) throws {
            for (id, new) in made where !new.isDeleted {
                guard let entity = zone.models[id]?.entity else { continue }
                for member in zone.members[id] ?? [id] {
                    try Self.map(member, entity: entity.name, row: new._strataState.rowID, claim: member == id, tx)
                }
            }
            let values = try tx.treeIfPresent(Self.zoneValuesTree) ?? tx.createTree(Self.zoneValuesTree)
            for (id, entity, value) in zoneValues {
                guard let new = made[id], !new.isDeleted else { continue }
                try tx.put(Self.rowKey(entity, new._strataState.rowID), value, in: values)
            }
        }
        func ended(_ tx: WriteTransaction, aligned: Bool) throws {
            guard try Self.nothingToPush(after: quiet, tx) else { throw LocalSaveCameIn() }
            let last = try HistoryLog.lastToken(tx)
            try Self.setPushed(last, tx)
            try Self.setNumber("prepared", last, tx)
            if aligned { try Self.setNumber("unaligned", 0, tx) }
        }
        let firstNews = news
        try first.save(
            with: StateWrite { tx in
                for (entity, row, _) in plan.gone { try Self.unmap(entity: entity.name, row: row, tx) }
                for (id, entity, row) in remaps {
                    try Self.unmap(entity: entity.name, row: row, tx)
                    try Self.map(id, entity: entity.name, row: row, tx)
                    for member in zone.members[id] ?? [] where member != id {
                        try Self.map(member, entity: entity.name, row: row, claim: false, tx)
                    }
                }
                for (id, entity) in deletedThere { try Self.markDeleted(id, entity: entity, row: nil, tx) }
                // The zone's merges and cascades as the copy holds them; the
                // merges ahead of the zone and the zone's values of rows are
                // past (nothing waits to be pushed).
                for name in [
                    Self.aheadMergesTree, Links.byTarget, Links.bySource, Self.aheadLosersTree, Self.aheadFromTree,
                    Self.mergedRowsTree, Self.zoneValuesTree,
                ] where try tx.treeIfPresent(name) != nil {
                    try tx.dropTree(name)
                }
                for (name, entries) in zoneTrees {
                    let tree = try tx.createTree(name)
                    for (key, value) in entries { try tx.put(key, value, in: tree) }
                }
                let values = try tx.createTree(Self.zoneValuesTree)
                for (id, entity, value) in zoneValues {
                    guard let row = plan.rowOf[id] else { continue }
                    try tx.put(Self.rowKey(entity, row), value, in: values)
                }
                try mapMade(firstNews, tx)
                try ended(tx, aligned: later.isEmpty)
            })
        applied.inserted += news.values.filter { !$0.isDeleted }.map(\.persistentModelID)
        guard !later.isEmpty else {
            applied.lost += lost(news)
            return applied
        }
        let second = ModelContext(container)
        second.author = Self.author
        var laterNews: [SyncID: any PersistentModel] = [:]
        for id in later {
            guard let new = try make(id) else { continue }
            second.insert(new)
            laterNews[id] = new
        }
        var all = laterNews
        for (id, new) in news { all[id] = second.model(for: new.persistentModelID) }
        for (id, new) in laterNews {
            guard let model = zone.models[id] else { continue }
            link(new, model.entity, model.fields, in: second, made: all)
        }
        for (id, entity, relationships) in relinked {
            guard let stored = model(id, in: second, made: all) else { continue }
            link(stored, entity, relationships, in: second, made: all)
        }
        for (id, _) in news {
            guard let model = zone.models[id], let new = all[id] else { continue }
            link(new, model.entity, model.fields, in: second, made: all)
        }
        let secondNews = laterNews
        do {
            try second.save(
                with: StateWrite { tx in
                    try mapMade(secondNews, tx)
                    try ended(tx, aligned: true)
                })
        } catch is LocalSaveCameIn {
            // The first save stands, and the app hears of it; the store
            // stays unaligned, and the next round makes the rest.
            applied.lost += lost(news)
            return applied
        }
        applied.inserted += laterNews.values.filter { !$0.isDeleted }.map(\.persistentModelID)
        applied.lost += lost(all)
        return applied
    }

    /// A local save came in while an alignment was being made: the next
    /// round aligns.
    struct LocalSaveCameIn: Error {}
}
