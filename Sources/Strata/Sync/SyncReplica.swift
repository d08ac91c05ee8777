import Foundation
import StrataEngine

/// The local half of sync: what a store keeps to take part in a zone, and
/// the two conversions between saves and ``SyncChangeSet``s. `StrataSync`
/// moves change sets to and from the server; everything here runs on this
/// machine, in the store's own transactions.
///
/// The store keeps, beside its models:
/// - `sync.meta`: `zone` (the zone's name), `device` (this store's 16-byte
///   identifier in the zone), `position` (the server sequence number of the
///   last server change applied here), `pushed` (the history token of the
///   last local save the server acknowledged), `prepared` (the history
///   token through which local saves have been turned into outbox entries).
/// - `sync.ids`: global identifier → 1, row (8 bytes), entity name for a
///   model of this store; 2, entity name for a deleted one (a delete wins:
///   a later change to it is ignored).
/// - `sync.rows`: entity name, 0, row (8 bytes) → global identifier.
/// - `sync.outbox`: history token → the change set to push for that save.
/// - `sync.restore`: the parts of a zone snapshot downloaded so far
///   (through, part) → change set, while a device catches up on a trimmed
///   zone.
/// - `sync.kept`: server sequence number → the parts of that server change
///   this schema does not know (entities and attributes of a newer schema
///   version of the zone), applied once a migration brings them.
///
/// The outbox is the local history: a save is in it from its commit until
/// the server acknowledges it, across restarts. Saves authored
/// ``SyncReplica/author`` (applied from the server) are never pushed back.
///
/// Not thread-safe: one caller (StrataSync's worker) uses a replica.
package final class SyncReplica {
    /// The author of every save that applies server changes.
    package static let author = "sync"

    package let container: ModelContainer
    var store: Store { container.store }
    var schema: Schema { container.schema }

    static let metaTree = "sync.meta"
    static let idsTree = "sync.ids"
    static let rowsTree = "sync.rows"
    static let outboxTree = "sync.outbox"
    static let keptTree = "sync.kept"
    static let restoreTree = "sync.restore"

    /// The descriptions of the other schemas that sync with the zone (set by
    /// StrataSync after it checked them): a pulled change may name the
    /// entities and attributes they declare and this schema lacks, and those
    /// parts are kept (`sync.kept`) for a later version of this schema.
    package var zoneSchemas: [SyncSchema] = []

    package init(container: ModelContainer) throws(Refusal) {
        guard container.parts.isEmpty else {
            throw Refusal("a container with several stores cannot sync yet: give sync a container of one store")
        }
        guard container.store.recordsHistory else {
            throw Refusal("sync needs the store's history, and the configuration does not record it")
        }
        guard container.store.allowsSave, container.allowsSave else {
            throw Refusal("sync needs a store that allows saving (allowsSave is false)")
        }
        self.container = container
    }

    /// Why a container cannot sync as asked.
    package struct Refusal: Error, CustomStringConvertible {
        package let description: String
        init(_ description: String) { self.description = description }
    }

    /// What the store knows of its place in a zone.
    package struct State: Sendable, Equatable {
        package var zone: String?
        package var device: SyncID?
        /// The server sequence number of the last server change applied.
        package var position: Int64 = 0
        /// The last local save the server acknowledged.
        package var pushedThrough: Int64 = 0
        /// Local saves not acknowledged yet (those with nothing to push
        /// included until they are prepared).
        package var pendingSaves = 0
    }

    /// The store's sync state; a store that never synced has no zone.
    package func state() throws -> State {
        try store.read { tx in try Self.state(in: tx) }
    }

    /// The sync state of the store `tx` reads (`strata sync-status` reads
    /// it without the app's models).
    package static func state(in tx: ReadTransaction) throws -> State {
        var state = try readMeta(tx)
        let prepared = try number("prepared", tx)
        var pending = 0
        if let outbox = try tx.treeIfPresent(outboxTree) {
            try tx.forEach(outbox) { _, _ in
                pending += 1
                return true
            }
        }
        let last = try HistoryLog.lastToken(tx)
        if state.zone != nil, last > prepared {
            pending += try HistoryLog.readRaw(tx, after: prepared, through: last).filter { $0.author != author }.count
        }
        state.pendingSaves = pending
        return state
    }

    /// Joins `zone`: the first time, records the zone and makes the device's
    /// identifier; later, checks the store belongs to that zone.
    package func join(zone: String) throws -> State {
        try store.write { tx in
            let meta = try tx.treeIfPresent(Self.metaTree) ?? tx.createTree(Self.metaTree)
            if let stored = try tx.get(Array("zone".utf8), in: meta) {
                let name = String(decoding: stored, as: UTF8.self)
                guard name == zone else {
                    throw Refusal("the store syncs with zone \"\(name)\", not \"\(zone)\"")
                }
                // A store that joined before history had holds.
                if try HistoryLog.heldAfter(Self.author, in: tx) == nil {
                    try HistoryLog.hold(Self.author, after: try Self.number("pushed", tx), in: tx)
                }
            } else {
                try tx.put(Array("zone".utf8), Array(zone.utf8), in: meta)
                try tx.put(Array("device".utf8), SyncID.make().bytes, in: meta)
                // Saves made before the store joined are not pushed as
                // saves (an initial upload of existing models is separate).
                let last = try HistoryLog.lastToken(tx)
                try Self.setPushed(last, tx)
                try tx.put(Array("prepared".utf8), RowKey.encode(last), in: meta)
                try tx.put(Array("schema".utf8), Array(SyncSchema(schema).hash.utf8), in: meta)
                try Self.prepareUpload(tx, schema: schema)
            }
        }
        try adoptKept()
        return try state()
    }

    /// After a migration (the schema's description changed since the last
    /// sync): applies the kept parts of server changes that the schema now
    /// knows, in the zone's order, as saves authored ``author``.
    func adoptKept() throws {
        let hash = SyncSchema(schema).hash
        let (stored, kept) = try store.read { tx -> (String?, [(Int64, [UInt8])]) in
            let stored = try tx.treeIfPresent(Self.metaTree).flatMap { try tx.get(Array("schema".utf8), in: $0) }
            var kept: [(Int64, [UInt8])] = []
            if let tree = try tx.treeIfPresent(Self.keptTree) {
                try tx.forEach(tree) { key, value in
                    kept.append((try RowKey.decode(key), value))
                    return true
                }
            }
            return (stored.map { String(decoding: $0, as: UTF8.self) }, kept)
        }
        guard stored != hash else { return }
        for (seq, payload) in kept {
            let set: SyncChangeSet
            do {
                set = try SyncChangeSet.decode(payload)
            } catch {
                throw DamagedChange(seq: seq, reason: "the kept part: \(error)")
            }
            try apply(seq: seq, set: set, own: nil, replay: true)
        }
        try store.write { tx in
            let meta = try tx.treeIfPresent(Self.metaTree) ?? tx.createTree(Self.metaTree)
            try tx.put(Array("schema".utf8), Array(hash.utf8), in: meta)
        }
    }

    private static func readMeta(_ tx: ReadTransaction) throws -> State {
        var state = State()
        guard let meta = try tx.treeIfPresent(metaTree) else { return state }
        state.zone = try tx.get(Array("zone".utf8), in: meta).map { String(decoding: $0, as: UTF8.self) }
        if let device = try tx.get(Array("device".utf8), in: meta) {
            guard device.count == 16 else { throw SwiftDataError(.corruptRecord, "sync.meta: a device of \(device.count) bytes") }
            state.device = SyncID(bytes: device)
        }
        state.position = try number("position", tx)
        state.pushedThrough = try number("pushed", tx)
        return state
    }

    private static func number(_ key: String, _ tx: ReadTransaction) throws -> Int64 {
        guard let meta = try tx.treeIfPresent(metaTree), let bytes = try tx.get(Array(key.utf8), in: meta) else { return 0 }
        return try RowKey.decode(bytes)
    }

    /// Records that every save through `token` is pushed, and holds the
    /// history after it (the saves still to push) from `deleteHistory`.
    private static func setPushed(_ token: Int64, _ tx: WriteTransaction) throws {
        try setNumber("pushed", token, tx)
        try HistoryLog.hold(author, after: token, in: tx)
    }

    private static func setNumber(_ key: String, _ value: Int64, _ tx: WriteTransaction) throws {
        let meta = try tx.treeIfPresent(metaTree) ?? tx.createTree(metaTree)
        try tx.put(Array(key.utf8), RowKey.encode(value), in: meta)
    }

    // MARK: - Identifiers

    static func rowKey(_ entity: String, _ row: Int64) -> [UInt8] { Array(entity.utf8) + [0] + RowKey.encode(row) }

    /// Where a global identifier lives here.
    enum Place: Equatable {
        case row(Int64)
        case deleted
    }

    /// The entity and row of a live identifier.
    static func entry(of id: SyncID, _ tx: ReadTransaction) throws -> (entity: String, row: Int64)? {
        guard let tree = try tx.treeIfPresent(idsTree), let value = try tx.get(id.bytes, in: tree), value.first == 1,
            value.count >= 9
        else { return nil }
        return (String(decoding: value[9...], as: UTF8.self), try RowKey.decode(Array(value[1..<9])))
    }

    static func place(of id: SyncID, _ tx: ReadTransaction) throws -> Place? {
        guard let tree = try tx.treeIfPresent(idsTree), let value = try tx.get(id.bytes, in: tree) else { return nil }
        switch value.first {
        case 1 where value.count >= 9: return .row(try RowKey.decode(Array(value[1..<9])))
        case 2: return .deleted
        default: throw SwiftDataError(.corruptRecord, "sync.ids: a damaged entry for \(id)")
        }
    }

    static func id(of entity: String, row: Int64, _ tx: ReadTransaction) throws -> SyncID? {
        guard let tree = try tx.treeIfPresent(rowsTree), let value = try tx.get(rowKey(entity, row), in: tree) else {
            return nil
        }
        guard value.count == 16 else {
            throw SwiftDataError(.corruptRecord, "sync.rows: a damaged entry for \(entity) row \(row)")
        }
        return SyncID(bytes: value)
    }

    static func map(_ id: SyncID, entity: String, row: Int64, _ tx: WriteTransaction) throws {
        let ids = try tx.treeIfPresent(idsTree) ?? tx.createTree(idsTree)
        let rows = try tx.treeIfPresent(rowsTree) ?? tx.createTree(rowsTree)
        try tx.put(id.bytes, [1] + RowKey.encode(row) + Array(entity.utf8), in: ids)
        // The first identifier a row had stays its own: an identifier
        // merged into it (a unique constraint's upsert) points at it too.
        if try tx.get(rowKey(entity, row), in: rows) == nil { try tx.put(rowKey(entity, row), id.bytes, in: rows) }
    }

    static func markDeleted(_ id: SyncID, entity: String, row: Int64?, _ tx: WriteTransaction) throws {
        let ids = try tx.treeIfPresent(idsTree) ?? tx.createTree(idsTree)
        try tx.put(id.bytes, [2] + Array(entity.utf8), in: ids)
        if let row, let rows = try tx.treeIfPresent(rowsTree) { try tx.delete(rowKey(entity, row), in: rows) }
    }

    // MARK: - Push

    /// Turns the local saves not prepared yet into outbox entries (one per
    /// save that changed something sync carries) and returns the whole
    /// outbox in save order. A model gets its global identifier here, in
    /// the same transaction as the entry that first names it, so a retry
    /// after a crash sends the same identifiers.
    package func prepareOutbox() throws -> [(token: Int64, payload: [UInt8])] {
        let schema = schema
        try store.write { tx in
            let prepared = try Self.number("prepared", tx)
            let last = try HistoryLog.lastToken(tx)
            guard last > prepared else { return }
            let outbox = try tx.treeIfPresent(Self.outboxTree) ?? tx.createTree(Self.outboxTree)
            for raw in try HistoryLog.readRaw(tx, after: prepared, through: last) where raw.author != Self.author {
                var builder = ChangeSetBuilder(schema: schema, tx: tx)
                builder.insertedHere = Set(raw.changes.filter { $0.kind == .insert }.map { "\($0.entity)/\($0.row)" })
                for change in raw.changes {
                    guard let entity = schema.entity(named: change.entity) else { continue }
                    switch change.kind {
                    case .delete: try builder.delete(entity, row: change.row)
                    case .insert: try builder.upsert(entity, row: change.row, only: nil)
                    case .update: try builder.upsert(entity, row: change.row, only: Set(change.attributes))
                    }
                }
                if !builder.set.changes.isEmpty { try tx.put(RowKey.encode(raw.token), builder.set.encode(), in: outbox) }
            }
            try Self.setNumber("prepared", last, tx)
        }
        return try store.read { tx in
            guard let outbox = try tx.treeIfPresent(Self.outboxTree) else { return [] }
            var entries: [(token: Int64, payload: [UInt8])] = []
            try tx.forEach(outbox) { key, value in
                entries.append((try RowKey.decode(key), value))
                return true
            }
            // The upload at joining (negative tokens) goes first.
            return entries.sorted { $0.token < $1.token }
        }
    }

    /// The models a store holds when it joins a zone, as outbox entries of
    /// at most ``uploadChunk`` inserts each, pushed before every later save:
    /// their tokens are negative (-n through -1), below every save's.
    static func prepareUpload(_ tx: WriteTransaction, schema: Schema) throws {
        var chunks: [[UInt8]] = []
        var builder = ChangeSetBuilder(schema: schema, tx: tx)
        builder.uploadAll = true
        for entity in schema.entities.sorted(by: { $0.name < $1.name }) {
            guard let tree = try tx.treeIfPresent(entity.recordTree) else { continue }
            var rows: [Int64] = []
            try tx.forEach(tree) { key, _ in
                rows.append(try RowKey.decode(key))
                return true
            }
            for row in rows where try id(of: entity.name, row: row, tx) == nil {
                // A model a reference already brought in has its identifier.
                try builder.upsert(entity, row: row, only: nil)
                if builder.set.changes.count >= uploadChunk {
                    chunks.append(builder.set.encode())
                    builder.set = SyncChangeSet()
                }
            }
        }
        if !builder.set.changes.isEmpty { chunks.append(builder.set.encode()) }
        guard !chunks.isEmpty else { return }
        let outbox = try tx.treeIfPresent(outboxTree) ?? tx.createTree(outboxTree)
        for (index, chunk) in chunks.enumerated() {
            try tx.put(RowKey.encode(Int64(index - chunks.count)), chunk, in: outbox)
        }
    }

    /// How many models one outbox entry of the upload at joining holds.
    package static let uploadChunk = 1000

    /// Builds one save's change set from the store's current records.
    struct ChangeSetBuilder {
        let schema: Schema
        let tx: WriteTransaction
        var set = SyncChangeSet()
        /// The models the save being built inserted, as "Entity/row".
        var insertedHere: Set<String> = []
        /// Every model is new to the zone (the upload at joining).
        var uploadAll = false

        /// A delete of a model the zone knows (one it never knew is left out).
        mutating func delete(_ entity: Schema.Entity, row: Int64) throws {
            guard let id = try SyncReplica.id(of: entity.name, row: row, tx) else { return }
            set.changes.append(SyncChangeSet.Change(kind: .delete, entity: entity.name, id: id))
            try SyncReplica.markDeleted(id, entity: entity.name, row: row, tx)
        }

        /// The model's attributes and relationships (`only` those named,
        /// when given) as they are stored now. A model new to the zone gets
        /// its identifier and is sent whole; one deleted since is left out
        /// (its delete follows).
        mutating func upsert(_ entity: Schema.Entity, row: Int64, only: Set<String>?) throws {
            guard let tree = try tx.treeIfPresent(entity.recordTree), let record = try tx.get(RowKey.encode(row), in: tree)
            else {
                // Gone since. A delete of this device's saves comes later
                // and is sent then; a model that a delete rule took while
                // this device applied the zone's changes (because of this
                // save, not pushed yet) is deleted nowhere else: send the
                // delete now.
                try delete(entity, row: row)
                return
            }
            var only = only
            var kind = SyncChangeSet.Kind.update
            let id: SyncID
            if let known = try SyncReplica.id(of: entity.name, row: row, tx) {
                id = known
            } else {
                id = SyncID.make()
                try SyncReplica.map(id, entity: entity.name, row: row, tx)
                kind = .insert
                only = nil
            }
            let index = set.changes.count
            set.changes.append(SyncChangeSet.Change(kind: kind, entity: entity.name, id: id))
            let fields = try self.fields(of: record, entity: entity, row: row, only: only)
            if kind == .update && fields.isEmpty {
                set.changes.remove(at: index)
                return
            }
            set.changes[index].fields = fields
        }

        /// The attributes and relationships sync carries, `only` those named
        /// when given, as the record and the relationship trees hold them;
        /// an attribute the record lacks is sent as its default.
        mutating func fields(of record: [UInt8], entity: Schema.Entity, row: Int64, only: Set<String>?) throws
            -> [SyncChangeSet.Field]
        {
            var result: [SyncChangeSet.Field] = []
            var present = Set<Int>()
            var toOnes: [(Schema.Property, Int64?)] = []
            try record.withUnsafeBytes { raw in
                var reader = try _RecordReader(borrowing: raw, entity: entity, row: row)
                for field in try reader.fields() {
                    guard field.field < entity.properties.count else { continue }
                    let property = entity.properties[field.field]
                    guard SyncReplica.carries(property, entity), only?.contains(property.name) ?? true else { continue }
                    present.insert(field.field)
                    result.append(
                        SyncChangeSet.Field(
                            name: property.name, wire: field.slot.wire,
                            value: Array(raw[field.valueStart..<field.slot.end])))
                }
                for property in entity.properties
                where property is Schema.Relationship && (only?.contains(property.name) ?? true) {
                    if case .toOne? = entity.relationshipStorage[property.field] {
                        toOnes.append((property, try reader.toOneRow(field: property.field)))
                    }
                }
            }
            for property in entity.properties
            where !present.contains(property.field) && SyncReplica.carries(property, entity)
                && (only?.contains(property.name) ?? true)
            {
                if let (wire, value) = try _RecordReader.defaultEncoding(of: property.field, entity: entity, row: row) {
                    result.append(SyncChangeSet.Field(name: property.name, wire: wire, value: value))
                } else {
                    result.append(SyncChangeSet.Field(name: property.name, wire: RecordFormat.null, value: []))
                }
            }
            for (property, target) in toOnes {
                guard let relationship = property as? Schema.Relationship else { continue }
                var value: [UInt8] = []
                if let target {
                    // A target of a later save: that save sends this field.
                    guard let id = try reference(relationship, row: target) else { continue }
                    value = id.bytes
                }
                result.append(SyncChangeSet.Field(name: property.name, wire: SyncChangeSet.toOne, value: value))
            }
            for property in entity.properties where only?.contains(property.name) ?? true {
                guard let relationship = property as? Schema.Relationship else { continue }
                let tree: String
                switch entity.relationshipStorage[property.field] {
                case .join(let join, _)?: tree = join
                case .mirror(_, let mirror)?: tree = mirror
                default: continue  // a to-one, or a to-many its inverse to-one holds
                }
                let rows = try tx.treeIfPresent(tree).map { try PairKey.rows(in: $0, of: row, tx: tx) } ?? []
                var value: [UInt8] = []
                for target in rows { value += try reference(relationship, row: target)?.bytes ?? [] }
                result.append(SyncChangeSet.Field(name: property.name, wire: SyncChangeSet.toMany, value: value))
            }
            return result
        }

        /// The identifier of `relationship`'s target `row`. A target this
        /// save inserted gets its identifier now (its insert is in this
        /// change set). A target the zone does not know that a later save
        /// inserted is nil: the relationship changed after this save, and
        /// the save that changed it sends it (sending it here would put the
        /// target's insert before this device's saves between the two).
        mutating func reference(_ relationship: Schema.Relationship, row: Int64) throws -> SyncID? {
            guard let type = relationship.destinationType, let target = schema.entity(forType: type) else {
                throw SwiftDataError(.unknownModelType, "relationship \(relationship.name): no entity for its target")
            }
            if let known = try SyncReplica.id(of: target.name, row: row, tx) { return known }
            guard uploadAll || insertedHere.contains("\(target.name)/\(row)") else { return nil }
            try upsert(target, row: row, only: nil)
            return try SyncReplica.id(of: target.name, row: row, tx)
        }
    }

    /// Whether sync carries `property` as an attribute: stored attributes
    /// in the record (`.externalStorage` data is not carried yet).
    static func carries(_ property: Schema.Property, _ entity: Schema.Entity) -> Bool {
        property is Schema.Attribute && entity.externalTrees[property.field] == nil
    }

    // MARK: - Snapshots

    /// Why the store cannot give a snapshot of the zone now.
    package enum SnapshotRefusal: Error, CustomStringConvertible {
        /// Local saves wait to be pushed: the store is not the zone's state.
        case pending
        /// The store lacks parts of the zone a newer schema wrote.
        case olderSchema
        package var description: String {
            switch self {
            case .pending: "local saves wait to be pushed"
            case .olderSchema: "this store's schema lacks entities or attributes that other devices of the zone sync"
            }
        }
    }

    /// The zone's models as this store holds them at its position, as
    /// change sets of at most ``uploadChunk`` inserts each: the snapshot
    /// that stands for the zone's changes through the position when the
    /// server trims them. Only a store with nothing to push, that keeps no
    /// parts of a newer schema, holds the zone's state.
    package func snapshot() throws -> (through: Int64, parts: [[UInt8]]) {
        let schema = schema
        return try store.write { tx in
            let prepared = try Self.number("prepared", tx)
            let last = try HistoryLog.lastToken(tx)
            var waiting = false
            if let outbox = try tx.treeIfPresent(Self.outboxTree) {
                try tx.forEach(outbox) { _, _ in
                    waiting = true
                    return false
                }
            }
            guard !waiting,
                try HistoryLog.readRaw(tx, after: prepared, through: last).allSatisfy({ $0.author == Self.author })
            else { throw SnapshotRefusal.pending }
            if let kept = try tx.treeIfPresent(Self.keptTree) {
                var any = false
                try tx.forEach(kept) { _, _ in
                    any = true
                    return false
                }
                if any { throw SnapshotRefusal.olderSchema }
            }
            var parts: [[UInt8]] = []
            var builder = ChangeSetBuilder(schema: schema, tx: tx)
            for entity in schema.entities.sorted(by: { $0.name < $1.name }) {
                guard let tree = try tx.treeIfPresent(entity.recordTree) else { continue }
                var records: [(Int64, [UInt8])] = []
                try tx.forEach(tree) { key, value in
                    records.append((try RowKey.decode(key), value))
                    return true
                }
                for (row, record) in records {
                    guard let id = try Self.id(of: entity.name, row: row, tx) else { throw SnapshotRefusal.pending }
                    let fields = try builder.fields(of: record, entity: entity, row: row, only: nil)
                    builder.set.changes.append(SyncChangeSet.Change(kind: .insert, entity: entity.name, id: id, fields: fields))
                    if builder.set.changes.count >= Self.uploadChunk {
                        parts.append(builder.set.encode())
                        builder.set = SyncChangeSet()
                    }
                }
            }
            if !builder.set.changes.isEmpty || parts.isEmpty { parts.append(builder.set.encode()) }
            return (try Self.number("position", tx), parts)
        }
    }

    /// How many parts of the snapshot at `through` are downloaded; the
    /// parts of other snapshots are dropped.
    package func downloadedParts(through: Int64) throws -> Int {
        try store.write { tx in
            guard let tree = try tx.treeIfPresent(Self.restoreTree) else { return 0 }
            var count = 0
            var stale: [[UInt8]] = []
            try tx.forEach(tree) { key, _ in
                if Array(key.prefix(8)) == RowKey.encode(through) { count += 1 } else { stale.append(key) }
                return true
            }
            for key in stale { try tx.delete(key, in: tree) }
            return count
        }
    }

    /// Keeps part `part` of the snapshot at `through` until the whole
    /// snapshot is here.
    package func keepPart(through: Int64, part: Int, payload: [UInt8]) throws {
        do {
            _ = try SyncChangeSet.decode(payload)
        } catch {
            throw DamagedChange(seq: through, reason: "snapshot part \(part): \(error)")
        }
        try store.write { tx in
            let tree = try tx.treeIfPresent(Self.restoreTree) ?? tx.createTree(Self.restoreTree)
            try tx.put(RowKey.encode(through) + RowKey.encode(Int64(part)), payload, in: tree)
        }
    }

    /// Makes the store the zone's state at `through` from the downloaded
    /// snapshot, as one save authored ``author`` that moves the position to
    /// `through`: every model of the snapshot inserted or updated (local
    /// saves not pushed yet keep their values, as for any pulled change),
    /// and every model the zone knew that the snapshot lacks deleted.
    @discardableResult
    package func restore(through: Int64) throws -> Applied {
        var set = SyncChangeSet()
        var present = Set<SyncID>()
        var live: [(id: SyncID, entity: String, row: Int64)] = []
        try store.read { tx in
            if let tree = try tx.treeIfPresent(Self.restoreTree) {
                var failure: (any Error)?
                try tx.forEach(tree, from: RowKey.encode(through)) { key, value in
                    guard Array(key.prefix(8)) == RowKey.encode(through) else { return false }
                    do {
                        set.changes += try SyncChangeSet.decode(value).changes
                    } catch {
                        failure = DamagedChange(seq: through, reason: "snapshot: \(error)")
                        return false
                    }
                    return true
                }
                if let failure { throw failure }
            }
            if let ids = try tx.treeIfPresent(Self.idsTree) {
                try tx.forEach(ids) { key, value in
                    if value.first == 1, value.count >= 9, key.count == 16 {
                        live.append(
                            (
                                SyncID(bytes: key), String(decoding: value[9...], as: UTF8.self),
                                try RowKey.decode(Array(value[1..<9]))
                            ))
                    }
                    return true
                }
            }
        }
        for change in set.changes {
            guard change.kind == .insert else {
                throw DamagedChange(seq: through, reason: "a snapshot holds inserts only")
            }
            present.insert(change.id)
        }
        // The models the zone still holds: those of the snapshot's
        // identifiers (a model merged on a unique value has several), and
        // those of local inserts not pushed yet. Every other model the zone
        // knew is deleted, a local change not pushed yet or not (a delete
        // wins over every change after it).
        let (reached, unpushed) = try store.read { tx -> (Set<String>, Set<SyncID>) in
            var reached = Set<String>()
            for id in present {
                if let (entity, row) = try Self.entry(of: id, tx) { reached.insert("\(entity)/\(row)") }
            }
            var unpushed = Set<SyncID>()
            if let outbox = try tx.treeIfPresent(Self.outboxTree) {
                try tx.forEach(outbox) { _, value in
                    for change in try SyncChangeSet.decode(value).changes where change.kind == .insert {
                        unpushed.insert(change.id)
                    }
                    return true
                }
            }
            return (reached, unpushed)
        }
        for (id, entity, row) in live where !reached.contains("\(entity)/\(row)") && !unpushed.contains(id) {
            set.changes.append(SyncChangeSet.Change(kind: .delete, entity: entity, id: id))
        }
        let applied = try apply(seq: through, set: set, own: nil, replay: false)
        try store.write { tx in if try tx.treeIfPresent(Self.restoreTree) != nil { try tx.dropTree(Self.restoreTree) } }
        return applied
    }

    /// Records that the server holds local save `token` as a change this
    /// store is past already (a retried push of a save whose change was
    /// trimmed into a snapshot this store restored).
    package func forgetPushed(token: Int64) throws {
        try store.write { tx in
            if let outbox = try tx.treeIfPresent(Self.outboxTree) { try tx.delete(RowKey.encode(token), in: outbox) }
            try Self.setPushed(max(token, try Self.number("pushed", tx)), tx)
        }
    }

    /// Records that the server took local save `token` as change `seq`,
    /// the zone's next change after everything applied here.
    package func acknowledge(token: Int64, seq: Int64) throws {
        guard let device = try state().device, let payload = try outboxEntry(token) else {
            try store.write { tx in
                try Self.setPushed(max(token, try Self.number("pushed", tx)), tx)
                try Self.setNumber("position", seq, tx)
            }
            return
        }
        try apply(seq: seq, device: device, token: token, payload: payload)
    }

    // MARK: - Pull

    /// A server change that this store cannot apply: its payload does not
    /// decode, or names what the schema does not hold, or holds a value of
    /// the wrong type. The store is unchanged.
    package struct DamagedChange: Error, CustomStringConvertible {
        package let seq: Int64
        package let reason: String
        package var description: String { "server change \(seq): \(reason)" }
    }

    /// What applying a server change did here.
    package struct Applied: Sendable {
        package var inserted: [PersistentIdentifier] = []
        package var updated: [PersistentIdentifier] = []
        package var deleted: [PersistentIdentifier] = []
        package var isEmpty: Bool { inserted.isEmpty && updated.isEmpty && deleted.isEmpty }
        package init() {}
    }

    /// Applies server change `seq` (pushed by `device` as its save `token`)
    /// as one save authored ``author``, and moves the position to `seq` in
    /// the same transaction. This device's own change is an acknowledgment:
    /// its models and values are here already, and only what the zone's
    /// order makes of it (the cascades below) is applied.
    ///
    /// Attributes that local saves not yet pushed changed keep their local
    /// values: those saves come later in the zone's order, so every device
    /// ends with them.
    ///
    /// Deletes cascade in the zone's order, not by what this store holds
    /// now: a to-one whose inverse deletes by `.cascade` is remembered as the
    /// zone last set it (`sync.links`), and a delete takes every model the
    /// zone last put under it, even one a local save not pushed yet moved
    /// away (a delete wins over later changes). A to-one the zone sets to a
    /// model already deleted takes its model too.
    ///
    /// Parts of the change that this schema lacks and another schema of the
    /// zone (``zoneSchemas``) declares are kept in `sync.kept`; parts that no
    /// schema of the zone declares make the change damaged.
    @discardableResult
    package func apply(seq: Int64, device: SyncID, token: Int64, payload: [UInt8]) throws -> Applied {
        let state = try store.read { tx in try Self.readMeta(tx) }
        let own = device == state.device
        let set: SyncChangeSet
        do {
            set = try SyncChangeSet.decode(own ? try outboxEntry(token) ?? payload : payload)
        } catch let error as SyncPayloadError {
            throw DamagedChange(seq: seq, reason: error.description)
        }
        return try apply(seq: seq, set: set, own: own ? token : nil, replay: false)
    }

    /// Applies `set`, server change `seq`. A replay applies the kept part of
    /// a change applied before: the position stays, and what is still
    /// unknown stays kept.
    @discardableResult
    /// `own` is this device's save token when the change is its own.
    private func apply(seq: Int64, set: SyncChangeSet, own ownToken: Int64?, replay: Bool) throws -> Applied {
        let own = ownToken != nil
        let context = ModelContext(container)
        context.author = Self.author
        let (masks, fixedMasks) = own ? ([:], [:]) : try pendingMasks()
        var kept = SyncChangeSet()
        // No local save waits: the history this save writes is the zone's,
        // so the pushed and prepared marks move past it, and the next
        // apply does not read it again.
        let nothingPending =
            try !replay
            && store.read { tx in
                let pushed = try Self.number("pushed", tx)
                let last = try HistoryLog.lastToken(tx)
                let prepared = try Self.number("prepared", tx)
                return pushed == last && prepared == last
            }
        var applied = Applied()
        var inserted: [(SyncID, any PersistentModel)] = []
        var insertedByID: [SyncID: any PersistentModel] = [:]
        var doomed: [SyncID: (entity: Schema.Entity, row: Int64?)] = [:]
        var merged: [(SyncID, Schema.Entity, Int64)] = []
        var mergedRows: [SyncID: Int64] = [:]
        var links = Links()
        // Relationships are set once every model of the change set exists.
        var pendingLinks: [(model: any PersistentModel, entity: Schema.Entity, fields: [SyncChangeSet.Field])] = []
        func link(_ model: any PersistentModel, _ entity: Schema.Entity, _ fields: [SyncChangeSet.Field]) {
            let references = fields.filter { $0.wire == SyncChangeSet.toOne || $0.wire == SyncChangeSet.toMany }
            if !references.isEmpty { pendingLinks.append((model, entity, references)) }
        }
        func doom(_ id: SyncID, _ entity: Schema.Entity, _ row: Int64?) {
            if doomed[id] == nil { doomed[id] = (entity, row) }
        }
        for var change in set.changes {
            guard let entity = schema.entity(named: change.entity) else {
                // A kept part was checked when it was kept.
                guard replay || zoneSchemas.contains(where: { $0.entities[change.entity] != nil }) else {
                    throw DamagedChange(seq: seq, reason: "entity \(change.entity) is in no schema of the zone")
                }
                kept.changes.append(change)
                continue
            }
            if change.kind != .delete {
                let (known, unknown) = try split(change, entity, seq: seq, checked: replay)
                change.fields = known
                if !unknown.isEmpty {
                    kept.changes.append(
                        SyncChangeSet.Change(kind: .update, entity: change.entity, id: change.id, fields: unknown))
                }
            }
            let place = try store.read { tx in try Self.place(of: change.id, tx) }
            if replay && change.kind == .update && place == nil { continue }
            switch change.kind {
            case .delete:
                if case .row(let row) = place {
                    doom(change.id, entity, row)
                } else if place == nil || own {
                    doom(change.id, entity, nil)
                }
            case .insert, .update:
                if place == .deleted { continue }  // a delete wins over every change after it
                // The zone's value of each cascading to-one, masked or not.
                for field in change.fields where field.wire == SyncChangeSet.toOne {
                    guard let property = entity.properties.first(where: { $0.name == field.name }),
                        Self.cascades(property, entity, schema)
                    else { continue }
                    links.set(change.id, field.name, to: field.value.count == 16 ? SyncID(bytes: field.value) : nil)
                }
                if own { continue }
                switch place {
                case .deleted:
                    continue
                case .row(let row):
                    let model = context.model(for: identifier(entity, row))
                    guard !(model is MissingModel), !model.isDeleted else { continue }
                    // Attributes local saves changed since the last push
                    // keep their values (nil: the whole model).
                    var fields = change.fields
                    if let mask = masks[entity.name]?[row] {
                        fields = mask.map { names in fields.filter { !names.contains($0.name) } } ?? []
                    }
                    if try assign(fields, to: model, entity: entity, seq: seq) { applied.updated.append(model.persistentModelID) }
                    link(model, entity, fields)
                case nil:
                    if let model = insertedByID[change.id] {
                        // Made by this change set, or merged into a stored
                        // model, whose unpushed attributes keep their values.
                        var fields = change.fields
                        if let row = mergedRows[change.id], let mask = masks[entity.name]?[row] {
                            fields = mask.map { names in fields.filter { !names.contains($0.name) } } ?? []
                        }
                        _ = try assign(fields, to: model, entity: entity, seq: seq)
                        link(model, entity, fields)
                        continue
                    }
                    let model = try make(entity, change.fields, seq: seq)
                    // A model that matches one here on a unique constraint
                    // merges into it (SwiftData's upsert), as an update: the
                    // zone's first identifier keeps the row, this one points
                    // at it too, and attributes of local saves not pushed yet
                    // keep their values, as for any update.
                    if let row = try existingRow(matching: model, entity),
                        case let existing = context.model(for: identifier(entity, row)),
                        !(existing is MissingModel), !existing.isDeleted
                    {
                        merged.append((change.id, entity, row))
                        // Later references in this change set find it.
                        insertedByID[change.id] = existing
                        mergedRows[change.id] = row
                        var fields = change.fields
                        if let mask = masks[entity.name]?[row] {
                            fields = mask.map { names in fields.filter { !names.contains($0.name) } } ?? []
                        }
                        if try assign(fields, to: existing, entity: entity, seq: seq) {
                            applied.updated.append(existing.persistentModelID)
                        }
                        link(existing, entity, fields)
                        continue
                    }
                    context.insert(model)
                    inserted.append((change.id, model))
                    insertedByID[change.id] = model
                    link(model, entity, change.fields)
                }
            }
        }
        for (model, entity, fields) in pendingLinks where !model.isDeleted {
            try setRelationships(
                fields, of: model, entity: entity, context: context, inserted: insertedByID, masks: (masks, fixedMasks), seq: seq)
        }
        // The zone's cascades: from what this change deletes, and from
        // to-ones it points at models deleted before.
        func doomSource(_ source: SyncID) throws -> Bool {
            guard doomed[source] == nil else { return false }
            switch try store.read({ tx in try Self.place(of: source, tx) }) {
            case .row(let row)?:
                guard let (name, _) = try store.read({ tx in try Self.entry(of: source, tx) }),
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
        var work = Array(doomed.keys)
        for (source, fields) in links.changed {
            for case let target? in fields.values
            where try store.read({ tx in try Self.place(of: target, tx) }) == .deleted {
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
                row.map { context.model(for: identifier(entity, $0)) } ?? insertedByID[id]
            guard let model, !(model is MissingModel), !model.isDeleted else { continue }
            context.delete(model)
            if row != nil { applied.deleted.append(model.persistentModelID) }
        }
        let writeSyncState: (WriteTransaction) throws -> Void = { tx in
            for (id, model) in inserted where !model.isDeleted && doomed[id] == nil {
                try Self.map(id, entity: entity(of: model).name, row: model._strataState.rowID, tx)
            }
            for (id, entity, row) in merged where doomed[id] == nil { try Self.map(id, entity: entity.name, row: row, tx) }
            for (id, (entity, row)) in doomed {
                try Self.markDeleted(id, entity: entity.name, row: row, tx)
                try links.forget(id, tx)
            }
            try links.write(tx)
            if let token = ownToken {
                if let outbox = try tx.treeIfPresent(Self.outboxTree) { try tx.delete(RowKey.encode(token), in: outbox) }
                try Self.setPushed(max(token, try Self.number("pushed", tx)), tx)
            }
            if nothingPending, !own {
                let last = try HistoryLog.lastToken(tx)
                try Self.setPushed(last, tx)
                try Self.setNumber("prepared", last, tx)
            }
            if !kept.changes.isEmpty {
                let tree = try tx.treeIfPresent(Self.keptTree) ?? tx.createTree(Self.keptTree)
                try tx.put(RowKey.encode(seq), kept.encode(), in: tree)
            } else if replay, let tree = try tx.treeIfPresent(Self.keptTree) {
                try tx.delete(RowKey.encode(seq), in: tree)
            }
            if !replay { try Self.setNumber("position", seq, tx) }
        }
        try context.save(with: StateWrite(writeSyncState))
        applied.inserted = inserted.filter { !$0.1.isDeleted }.map { $0.1.persistentModelID }
        return applied

        func entity(of model: any PersistentModel) -> Schema.Entity {
            schema.entity(forType: type(of: model))!
        }
    }

    /// The sync state of an applied change, written by the save that
    /// applies it (a ``SaveParticipant``).
    private final class StateWrite: SaveParticipant {
        let write: (WriteTransaction) throws -> Void
        init(_ write: @escaping (WriteTransaction) throws -> Void) { self.write = write }
        func saveWillCommit(_ save: SaveParticipation) throws { try write(save.transaction) }
    }

    /// `change`'s fields that `entity` has, and those it lacks that another
    /// schema of the zone declares for it; a field that no schema of the zone
    /// declares makes the change damaged (unless `checked`: a kept part).
    private func split(_ change: SyncChangeSet.Change, _ entity: Schema.Entity, seq: Int64, checked: Bool) throws
        -> (known: [SyncChangeSet.Field], unknown: [SyncChangeSet.Field])
    {
        var known: [SyncChangeSet.Field] = []
        var unknown: [SyncChangeSet.Field] = []
        for field in change.fields {
            if entity.properties.contains(where: { $0.name == field.name }) {
                known.append(field)
            } else if checked
                || zoneSchemas.contains(where: {
                    guard let other = $0.entities[entity.name] else { return false }
                    return other.attributes[field.name] != nil || other.relationships[field.name] != nil
                })
            {
                unknown.append(field)
            } else {
                throw DamagedChange(seq: seq, reason: "\(entity.name).\(field.name) is in no schema of the zone")
            }
        }
        return (known, unknown)
    }

    /// The row of a stored model that `model` matches on one of its
    /// entity's unique constraints.
    private func existingRow(matching model: any PersistentModel, _ entity: Schema.Entity) throws -> Int64? {
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

    /// The outbox entry of local save `token`, if it is still there.
    private func outboxEntry(_ token: Int64) throws -> [UInt8]? {
        try store.read { tx in try tx.treeIfPresent(Self.outboxTree).flatMap { try tx.get(RowKey.encode(token), in: $0) } }
    }

    /// Whether `property` is a to-one whose target's delete takes the model
    /// with it (the inverse to-many deletes by `.cascade`).
    static func cascades(_ property: Schema.Property, _ entity: Schema.Entity, _ schema: Schema) -> Bool {
        guard let relationship = property as? Schema.Relationship, relationship.isToOneRelationship,
            let inverse = InverseGraph.inverse(of: entity.type, field: relationship.field),
            let side = schema.entity(forType: inverse.type)?.properties[inverse.field] as? Schema.Relationship
        else { return false }
        return side.deleteRule == .cascade
    }

    /// The zone's values of cascading to-ones: `sync.links` holds
    /// (target, source, field) → empty and `sync.linkOf` holds
    /// (source, field) → target. Changes are gathered, then written with the
    /// save that applies them.
    struct Links {
        static let byTarget = "sync.links"
        static let bySource = "sync.linkOf"
        /// Source → field → new target (nil: none).
        var changed: [SyncID: [String: SyncID?]] = [:]

        mutating func set(_ source: SyncID, _ field: String, to target: SyncID?) {
            changed[source, default: [:]][field] = .some(target)
        }

        /// Models whose cascading to-one the zone last pointed at `target`.
        func sources(of target: SyncID, in store: Store) throws -> [SyncID] {
            var result: [SyncID] = []
            for (source, fields) in changed where fields.values.contains(where: { $0 == target }) { result.append(source) }
            try store.read { tx in
                guard let tree = try tx.treeIfPresent(Self.byTarget) else { return }
                let cursor = try tx.cursor(tree)
                var more = try cursor.seek(target.bytes)
                while more {
                    let key = try cursor.key()
                    guard key.count > 32, Array(key[0..<16]) == target.bytes else { break }
                    let source = SyncID(bytes: Array(key[16..<32]))
                    let field = String(decoding: key[32...], as: UTF8.self)
                    // A field this change set moved elsewhere no longer counts.
                    let moved = changed[source]?[field].map { $0 != target } ?? false
                    if !moved && !result.contains(source) { result.append(source) }
                    more = try cursor.next()
                }
            }
            return result
        }

        func write(_ tx: WriteTransaction) throws {
            guard !changed.isEmpty else { return }
            let byTarget = try tx.treeIfPresent(Self.byTarget) ?? tx.createTree(Self.byTarget)
            let bySource = try tx.treeIfPresent(Self.bySource) ?? tx.createTree(Self.bySource)
            for (source, fields) in changed {
                for (field, target) in fields {
                    let sourceKey = source.bytes + Array(field.utf8)
                    if let old = try tx.get(sourceKey, in: bySource) {
                        try tx.delete(old + sourceKey, in: byTarget)
                        try tx.delete(sourceKey, in: bySource)
                    }
                    if let target {
                        try tx.put(sourceKey, target.bytes, in: bySource)
                        try tx.put(target.bytes + sourceKey, [], in: byTarget)
                    }
                }
            }
        }

        /// Drops a deleted model's own links (those pointing at it stay:
        /// their models are deleted too, or were moved).
        func forget(_ source: SyncID, _ tx: WriteTransaction) throws {
            guard let bySource = try tx.treeIfPresent(Self.bySource), let byTarget = try tx.treeIfPresent(Self.byTarget)
            else { return }
            var keys: [([UInt8], [UInt8])] = []
            let cursor = try tx.cursor(bySource)
            var more = try cursor.seek(source.bytes)
            while more {
                let key = try cursor.key()
                guard key.count >= 16, Array(key[0..<16]) == source.bytes else { break }
                keys.append((key, try cursor.value()))
                more = try cursor.next()
            }
            for (key, target) in keys {
                try tx.delete(key, in: bySource)
                try tx.delete(target + key, in: byTarget)
            }
        }
    }

    private func identifier(_ entity: Schema.Entity, _ row: Int64) -> PersistentIdentifier {
        PersistentIdentifier(storeIdentifier: store.identifier, entityName: entity.name, rowID: row)
    }

    /// The record of `fields` under this entity's field numbers; names the
    /// entity does not have are left out.
    private func record(_ fields: [SyncChangeSet.Field], entity: Schema.Entity) -> (bytes: [UInt8], fields: _FieldSet) {
        var numbered: [(Int, SyncChangeSet.Field)] = []
        for field in fields {
            guard let property = entity.properties.first(where: { $0.name == field.name }), Self.carries(property, entity)
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
    private func assign(_ fields: [SyncChangeSet.Field], to model: any PersistentModel, entity: Schema.Entity, seq: Int64) throws
        -> Bool
    {
        let (bytes, numbers) = record(fields, entity: entity)
        guard !numbers.isEmpty else { return false }
        do {
            try _RecordReader.withReader(bytes, entity: entity, row: model._strataState.rowID) { reader in
                try model._strataLoad(from: &reader, fields: numbers)
            }
        } catch {
            throw DamagedChange(seq: seq, reason: "\(entity.name): \(error)")
        }
        for number in numbers.fields { markChanged(model, field: number) }
        return true
    }

    private func markChanged<M: PersistentModel>(_ model: M, field: Int) {
        model._strataState.didChange(model, field: field)
    }

    /// Points `model`'s relationships in `fields` at their targets; a target
    /// deleted in the zone or here is left out.
    private func setRelationships(
        _ fields: [SyncChangeSet.Field], of model: any PersistentModel, entity: Schema.Entity, context: ModelContext,
        inserted: [SyncID: any PersistentModel], masks: (all: Masks, fixed: Masks), seq: Int64
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
                throw DamagedChange(
                    seq: seq, reason: "\(entity.name).\(relationship.name) refers to \(id), which the zone never held")
            }
        }
        for field in fields {
            guard let relationship = entity.properties.first(where: { $0.name == field.name }) as? Schema.Relationship
            else { continue }
            let ids = stride(from: 0, to: field.value.count, by: 16).map { SyncID(bytes: Array(field.value[$0..<$0 + 16])) }
            if relationship.isToOneRelationship {
                guard field.wire == SyncChangeSet.toOne else {
                    throw DamagedChange(seq: seq, reason: "\(entity.name).\(relationship.name) is a to-one, sent as a list")
                }
                // A target deleted here is nil for now; whether the model goes
                // with it is the zone's cascade (see `apply`), decided by the
                // zone's order, not by this store's unpushed deletes.
                let value = try ids.first.flatMap { try target($0, of: relationship) }
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
                model._strataSetRelationship(field: relationship.field, to: targets)
            }
        }
    }

    /// A new model of `entity` from `fields`.
    private func make(_ entity: Schema.Entity, _ fields: [SyncChangeSet.Field], seq: Int64) throws -> any PersistentModel {
        let (bytes, _) = record(fields, entity: entity)
        do {
            return try _RecordReader.withReader(bytes, entity: entity, row: 0) { reader in
                try entity.type.init(_strataReader: &reader)
            }
        } catch {
            throw DamagedChange(seq: seq, reason: "\(entity.name): \(error)")
        }
    }

    /// What local saves not acknowledged yet changed: entity → row → the
    /// names of the changed attributes, nil for every attribute (an insert
    /// or a delete).
    typealias Masks = [String: [Int64: Set<String>?]]

    /// The masks of every local save not acknowledged yet, and of those
    /// whose outbox entries are made already (`fixed`: their values are
    /// sent as they were then, while a save not prepared yet sends what the
    /// store holds when it is).
    func pendingMasks() throws -> (all: Masks, fixed: Masks) {
        try store.read { tx in
            let pushed = try Self.number("pushed", tx)
            let prepared = try Self.number("prepared", tx)
            let last = try HistoryLog.lastToken(tx)
            var all: Masks = [:]
            var fixed: Masks = [:]
            func add(_ entity: String, _ row: Int64, _ names: Set<String>?, fixedToo: Bool) {
                for index in fixedToo ? [0, 1] : [0] {
                    var masks = index == 0 ? all : fixed
                    if let names {
                        let existing = masks[entity]?[row]
                        if case .some(.none) = existing { continue }
                        masks[entity, default: [:]][row] = .some(names.union((existing ?? nil) ?? []))
                    } else {
                        masks[entity, default: [:]][row] = .some(nil)
                    }
                    if index == 0 { all = masks } else { fixed = masks }
                }
            }
            // The models of the upload at joining, until it is pushed: the
            // zone's order puts the upload after the changes pulled first.
            if let outbox = try tx.treeIfPresent(Self.outboxTree) {
                try tx.forEach(outbox, from: RowKey.encode(Int64.min)) { key, value in
                    guard try RowKey.decode(key) < 0 else { return true }
                    for change in try SyncChangeSet.decode(value).changes {
                        if let (entity, row) = try Self.entry(of: change.id, tx) { add(entity, row, nil, fixedToo: true) }
                    }
                    return true
                }
            }
            guard last > pushed else { return (all, fixed) }
            for raw in try HistoryLog.readRaw(tx, after: pushed, through: last) where raw.author != Self.author {
                for change in raw.changes {
                    let names: Set<String>? = change.kind == .update ? Set(change.attributes) : nil
                    add(change.entity, change.row, names, fixedToo: raw.token <= prepared)
                }
            }
            return (all, fixed)
        }
    }
}
