import Foundation
import Strata
import StrataEngine

// Zone and device metadata. `sync.meta`: UTF-8 key → value:
// - `zone`: the zone's name (UTF-8);
// - `device`: this store's identifier in the zone (16 bytes);
// - `position`: the server sequence number of the last server change
//   applied here (8 bytes, RowKey);
// - `pushed`: the history token of the last local save the server
//   acknowledged (8 bytes, RowKey); history after it is held (`HistoryLog`'s
//   hold "sync") until it is pushed;
// - `prepared`: the history token through which local saves have outbox
//   entries (8 bytes, RowKey);
// - `schema`: the hash of the schema description (`SyncSchema`) the store
//   last synced with; a change means a migration, after which the kept
//   parts are applied;
// - `unaligned`: 1 when a change was applied while local saves waited
//   (`SyncReplica+ZoneCopy`).
// An absent number is 0.

/// The local half of sync: what a store keeps to take part in a zone, and
/// the two conversions between saves and ``SyncChangeSet``s. The transport
/// moves change sets to and from the server; everything here runs on this
/// machine, in the store's own transactions, in trees of its own (`sync.`)
/// beside the models. One file per concern, each stating its trees' format
/// at its top:
/// - this file: the zone and device metadata (`sync.meta`), joining;
/// - `SyncReplica+Identifiers`: the identifier map (`sync.ids`, `sync.rows`);
/// - `SyncReplica+Outbox`, `ChangeSetBuilder`: local saves turned into
///   change sets, kept until acknowledged (`sync.outbox`);
/// - `SyncReplica+Snapshot`: the zone's state as a snapshot, and restoring
///   from one (`sync.restore`);
/// - `SyncReplica+Apply`, `ChangeApplication`, `SyncReplica+Models`: server
///   changes applied as saves, parts a newer schema wrote kept
///   (`sync.kept`);
/// - `SyncReplica+Links`: the zone's cascades (`sync.links`, `sync.linkOf`);
/// - `SyncReplica+SetAside`: changes moved past unapplied (`sync.setAside`);
/// - `SyncReplica+ZoneCopy`: the zone's models apart from this store's
///   saves not pushed yet, in a second store, and the alignment with them.
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
    /// The zone's state apart from this store's saves not pushed yet
    /// (`SyncReplica+ZoneCopy`); nil for a schema without unique
    /// constraints, and for the copy itself.
    package var zoneCopy: SyncReplica?

    package var zoneSchemas: [SyncSchema] = [] {
        didSet { zoneCopy?.zoneSchemas = zoneSchemas }
    }

    /// `isZoneCopy`: the replica of a zone copy (`SyncReplica+ZoneCopy`),
    /// whose store keeps no history: nothing is ever saved there but the
    /// zone's changes.
    package init(container: ModelContainer, isZoneCopy: Bool = false) throws(Refusal) {
        guard container.parts.isEmpty else {
            throw Refusal("a container with several stores syncs one store per engine: name it in SyncConfiguration.store")
        }
        guard container.store.recordsHistory || isZoneCopy else {
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
        /// The zone's changes moved past without being applied.
        package var setAside: [SyncStatus.SetAsideChange] = []
        /// When the store last joined its zone again.
        package var rejoined: SyncStatus.Rejoin?
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
        state.setAside = try setAside(in: tx)
        state.rejoined = try rejoined(in: tx)
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

    static func readMeta(_ tx: ReadTransaction) throws -> State {
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

    static func number(_ key: String, _ tx: ReadTransaction) throws -> Int64 {
        guard let meta = try tx.treeIfPresent(metaTree), let bytes = try tx.get(Array(key.utf8), in: meta) else { return 0 }
        return try RowKey.decode(bytes)
    }

    /// Records that every save through `token` is pushed, and holds the
    /// history after it (the saves still to push) from `deleteHistory`.
    static func setPushed(_ token: Int64, _ tx: WriteTransaction) throws {
        try setNumber("pushed", token, tx)
        try HistoryLog.hold(author, after: token, in: tx)
    }

    static func setNumber(_ key: String, _ value: Int64, _ tx: WriteTransaction) throws {
        let meta = try tx.treeIfPresent(metaTree) ?? tx.createTree(metaTree)
        try tx.put(Array(key.utf8), RowKey.encode(value), in: meta)
    }
}
