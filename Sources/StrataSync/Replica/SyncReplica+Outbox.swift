import Foundation
import Strata
import StrataEngine

// The outbox: the local saves to push, in save order, across restarts.
//
// `sync.outbox`: history token (8 bytes, RowKey) → the change set
// (`SyncChangeSet`, format 1) to push for that save. The upload of the
// models a store held when it joined has negative tokens (-n through -1),
// so it goes before every save. An entry stays until the server
// acknowledges it (`acknowledge`, `forgetPushed`); `sync.meta`'s
// `prepared` is the history token through which saves have entries, and
// `pushed` the last one the server holds.

extension SyncReplica {
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
                    case .update:
                        try builder.upsert(
                            entity, row: change.row, only: Self.wholeConstraints(Set(change.attributes), entity))
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
    /// `again`: the store joins its zone again (``rejoin(head:at:)``): every
    /// model goes up, under the identifier it has, and every identifier
    /// known to be deleted goes up as a delete.
    static func prepareUpload(_ tx: WriteTransaction, schema: Schema, again: Bool = false) throws {
        var chunks: [[UInt8]] = []
        var builder = ChangeSetBuilder(schema: schema, tx: tx)
        builder.uploadAll = true
        if again { builder.sent = [] }
        for entity in schema.entities.sorted(by: { $0.name < $1.name }) {
            guard let tree = try tx.treeIfPresent(entity.recordTree) else { continue }
            var rows: [Int64] = []
            try tx.forEach(tree) { key, _ in
                rows.append(try RowKey.decode(key))
                return true
            }
            for row in rows {
                // A model a reference already brought in has its identifier.
                if let sent = builder.sent {
                    guard !sent.contains("\(entity.name)/\(row)") else { continue }
                } else if try id(of: entity.name, row: row, tx) != nil {
                    continue
                }
                try builder.upsert(entity, row: row, only: nil)
                if builder.set.changes.count >= uploadChunk {
                    chunks.append(builder.set.encode())
                    builder.set = SyncChangeSet()
                }
            }
        }
        if again, let ids = try tx.treeIfPresent(idsTree) {
            try tx.forEach(ids) { key, value in
                guard value.first == 2, key.count == 16 else { return true }
                builder.set.changes.append(
                    SyncChangeSet.Change(
                        kind: .delete, entity: String(decoding: value[1...], as: UTF8.self), id: SyncID(bytes: key)))
                if builder.set.changes.count >= uploadChunk {
                    chunks.append(builder.set.encode())
                    builder.set = SyncChangeSet()
                }
                return true
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
    /// the zone's next change after everything applied here. `pushed`: the
    /// change set as the server took it, for the zone copy (the outbox
    /// entry may have been readdressed since it was read for the push).
    package func acknowledge(token: Int64, seq: Int64, pushed: [UInt8]? = nil) throws {
        guard let device = try state().device, let payload = try outboxEntry(token) else {
            try store.write { tx in
                try Self.setPushed(max(token, try Self.number("pushed", tx)), tx)
                try Self.setPosition(seq, change: try Self.readMeta(tx).device.map { ($0, token) }, tx)
            }
            return
        }
        try apply(seq: seq, device: device, token: token, payload: payload, pushed: pushed)
    }

    /// The outbox entry of local save `token`, if it is still there.
    func outboxEntry(_ token: Int64) throws -> [UInt8]? {
        try store.read { tx in try tx.treeIfPresent(Self.outboxTree).flatMap { try tx.get(RowKey.encode(token), in: $0) } }
    }

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
                    var names: Set<String>? = change.kind == .update ? Set(change.attributes) : nil
                    if let changed = names, let entity = schema.entity(named: change.entity) {
                        names = Self.wholeConstraints(changed, entity)
                    }
                    // A save before the one a merge ahead of the zone
                    // came from changes, in the zone's order, a model
                    // still apart.
                    if let from = try Self.aheadFrom(change.entity, row: change.row, tx), raw.token < from {
                        continue
                    }
                    // A model merged since into another: its saves reach
                    // the zone by its identifier, which names the survivor.
                    let row = try Self.survivingRow(change.entity, change.row, tx)
                    add(change.entity, row, names, fixedToo: raw.token <= prepared)
                }
            }
            return (all, fixed)
        }
    }
}
