import Foundation
import Strata
import StrataEngine

// Snapshots: when the server trims a zone's changes, a device that has
// nothing to push uploads the zone's models as it holds them, and a device
// behind the trim restores from that snapshot instead of the changes.
//
// `sync.restore`: (snapshot position, 8 bytes RowKey; part number, 8 bytes
// RowKey) → the part's change set (`SyncChangeSet`, inserts only), kept
// while a snapshot downloads; dropped once it is restored, and the parts of
// any other snapshot dropped when a new one starts.

extension SyncReplica {
    /// Why the store cannot give a snapshot of the zone now.
    package enum SnapshotRefusal: Error, CustomStringConvertible {
        /// Local saves wait to be pushed: the store is not the zone's state.
        case pending
        /// The store lacks parts of the zone a newer schema wrote.
        case olderSchema
        /// The store applied changes ahead of its saves and has not been
        /// aligned with its zone copy since (`SyncReplica+ZoneCopy`): its
        /// models may not be the zone's.
        case unaligned
        package var description: String {
            switch self {
            case .pending: "local saves wait to be pushed"
            case .unaligned: "the store is not aligned with its zone copy yet"
            case .olderSchema: "this store's schema lacks entities or attributes that other devices of the zone sync"
            }
        }
    }

    /// The zone's models as this store holds them at its position, as
    /// change sets of at most ``uploadChunk`` inserts each: the snapshot
    /// that stands for the zone's changes through the position when the
    /// server trims them. Only a store with nothing to push, that keeps no
    /// parts of a newer schema, and that is aligned with its zone copy (when
    /// it keeps one), holds the zone's state.
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
            if zoneCopy != nil, try Self.number("unaligned", tx) != 0 { throw SnapshotRefusal.unaligned }
            if let kept = try tx.treeIfPresent(Self.keptTree) {
                var any = false
                try tx.forEach(kept) { _, _ in
                    any = true
                    return false
                }
                if any { throw SnapshotRefusal.olderSchema }
            }
            // Identifiers merged into a model on a unique constraint: each
            // goes as an insert of the model's values after the model's
            // own, which merges into it where the snapshot is restored, so
            // that later changes naming it find the model there too.
            var aliases: [String: [Int64: [SyncID]]] = [:]
            if let ids = try tx.treeIfPresent(Self.idsTree) {
                try tx.forEach(ids) { key, value in
                    guard value.first == 1, value.count >= 9, key.count == 16 else { return true }
                    let entity = String(decoding: value[9...], as: UTF8.self)
                    guard schema.entity(named: entity)?.uniqueGroups.isEmpty == false else { return true }
                    aliases[entity, default: [:]][try RowKey.decode(Array(value[1..<9])), default: []].append(
                        SyncID(bytes: key))
                    return true
                }
            }
            var parts: [[UInt8]] = []
            var builder = ChangeSetBuilder(schema: schema, tx: tx)
            for entity in schema.entities.sorted(by: { $0.name < $1.name }) {
                for (row, record) in try Self.records(of: entity, tx) {
                    guard let id = try Self.id(of: entity.name, row: row, tx) else { throw SnapshotRefusal.pending }
                    let fields = try builder.fields(of: record, entity: entity, row: row, only: nil)
                    builder.set.changes.append(SyncChangeSet.Change(kind: .insert, entity: entity.name, id: id, fields: fields))
                    for alias in aliases[entity.name]?[row] ?? [] where alias != id {
                        builder.set.changes.append(
                            SyncChangeSet.Change(kind: .insert, entity: entity.name, id: alias, fields: fields))
                    }
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

    /// The snapshot's inserts with each model's identifiers (the model's
    /// own, then those merged into it, all with its values) ordered so
    /// that one this store knows comes first: the model it names here
    /// takes the values, and the others merge into it. Taken first, an
    /// identifier new here would make a second model with the values that
    /// the known one is then given too.
    static func knownFirst(_ changes: [SyncChangeSet.Change], known: Set<SyncID>) -> [SyncChangeSet.Change] {
        var ordered: [SyncChangeSet.Change] = []
        ordered.reserveCapacity(changes.count)
        var start = 0
        while start < changes.count {
            var end = start + 1
            while end < changes.count, changes[end].entity == changes[start].entity,
                changes[end].fields == changes[start].fields
            {
                end += 1
            }
            let group = changes[start..<end]
            ordered += group.filter { known.contains($0.id) } + group.filter { !known.contains($0.id) }
            start = end
        }
        return ordered
    }

    /// The downloaded parts of the snapshot at `through`, in order.
    static func snapshotParts(through: Int64, _ tx: ReadTransaction) throws -> [[UInt8]] {
        guard let tree = try tx.treeIfPresent(restoreTree) else { return [] }
        var parts: [[UInt8]] = []
        try tx.forEach(tree, from: RowKey.encode(through)) { key, value in
            guard Array(key.prefix(8)) == RowKey.encode(through) else { return false }
            parts.append(value)
            return true
        }
        return parts
    }

    /// Makes the store the zone's state at `through` from the downloaded
    /// snapshot, as one save authored ``author`` that moves the position to
    /// `through`: every model of the snapshot inserted or updated (local
    /// saves not pushed yet keep their values, as for any pulled change),
    /// and every model the zone knew that the snapshot lacks deleted.
    @discardableResult
    package func restore(through: Int64) throws -> Applied {
        copyRestores(through: through)
        var set = SyncChangeSet()
        var present = Set<SyncID>()
        var live: [(id: SyncID, entity: String, row: Int64)] = []
        try store.read { tx in
            for part in try Self.snapshotParts(through: through, tx) {
                do {
                    set.changes += try SyncChangeSet.decode(part).changes
                } catch {
                    throw DamagedChange(seq: through, reason: "snapshot: \(error)")
                }
            }
            if let ids = try tx.treeIfPresent(Self.idsTree) {
                try tx.forEach(ids) { key, value in
                    if value.first == 1, value.count >= 9, key.count == 16 {
                        // An identifier of a row merged away here counts as
                        // the row it merged into: the snapshot reaches it if
                        // it reaches that one.
                        let entity = String(decoding: value[9...], as: UTF8.self)
                        let row = try Self.survivingRow(entity, try RowKey.decode(Array(value[1..<9])), tx)
                        live.append((SyncID(bytes: key), entity, row))
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
        set.changes = Self.knownFirst(set.changes, known: Set(live.map(\.id)))
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
}
