import Foundation
import Strata
import StrataEngine

// A zone that lost changes this store applied: deleted on the server, or
// restored from an older backup. Found at the start of each pull:
//
// - the zone's head is below this store's position, or
// - the zone's change at this store's position is not the one applied
//   there (another device's, pushed after the zone restarted).
//
// The store then joins the zone again, as a device joining with models
// does, but keeps its models' identifiers: it takes a new device
// identifier, empties its outbox (everything it holds goes up again, its
// saves not pushed yet included), moves its position to 0, and uploads
// every model it holds, with a delete for every identifier it knows to be
// deleted, so that the zone ends with what this store holds, and devices
// that still hold the same models match them by identifier instead of
// copying them. The pulled changes apply first, under the upload (the
// upload masks them, as at joining).
//
// `sync.meta` "at": the change at the position, the device (16 bytes)
// then the save token (8 bytes, RowKey); absent after a snapshot.
// `sync.meta` "rejoined": the position before (8 bytes, RowKey), the
// zone's head then (8 bytes), milliseconds since 1970 (8 bytes).

extension SyncReplica {
    /// Moves the position to `seq`, the change `device` pushed as its save
    /// `token` (nil: not known, a snapshot).
    static func setPosition(_ seq: Int64, change: (device: SyncID, token: Int64)?, _ tx: WriteTransaction) throws {
        try setNumber("position", seq, tx)
        let meta = try tx.treeIfPresent(metaTree) ?? tx.createTree(metaTree)
        if let change {
            try tx.put(Array("at".utf8), change.device.bytes + RowKey.encode(change.token), in: meta)
        } else {
            try tx.delete(Array("at".utf8), in: meta)
        }
    }

    /// The device and save token of the change at the position, when known.
    package func changeAtPosition() throws -> (device: SyncID, token: Int64)? {
        try store.read { tx in
            guard let meta = try tx.treeIfPresent(Self.metaTree), let bytes = try tx.get(Array("at".utf8), in: meta)
            else { return nil }
            guard bytes.count == 24 else {
                throw SwiftDataError(.corruptRecord, "sync.meta: the change at the position has \(bytes.count) bytes")
            }
            return (SyncID(bytes: Array(bytes[0..<16])), try RowKey.decode(Array(bytes[16...])))
        }
    }

    /// Joins the zone again after it lost changes this store applied (see
    /// the top of this file); `head` is the zone's head as read.
    package func rejoin(head: Int64, at date: Date = Date()) throws {
        try store.write { tx in
            let position = try Self.number("position", tx)
            for name in [
                Self.outboxTree, Self.keptTree, Self.restoreTree, Self.setAsideTree, Self.zoneValuesTree, Self.blobsInTree,
            ]
            where try tx.treeIfPresent(name) != nil {
                try tx.dropTree(name)
            }
            let meta = try tx.treeIfPresent(Self.metaTree) ?? tx.createTree(Self.metaTree)
            try tx.put(Array("device".utf8), SyncID.make().bytes, in: meta)
            try Self.setPosition(0, change: nil, tx)
            let last = try HistoryLog.lastToken(tx)
            try Self.setPushed(last, tx)
            try Self.setNumber("prepared", last, tx)
            let millis = Int64((date.timeIntervalSince1970 * 1000).rounded())
            try tx.put(
                Array("rejoined".utf8), RowKey.encode(position) + RowKey.encode(head) + RowKey.encode(millis), in: meta)
            try Self.prepareUpload(tx, schema: schema, again: true)
        }
        copyRestarts()
    }

    /// When this store last joined its zone again, if ever.
    static func rejoined(in tx: ReadTransaction) throws -> SyncStatus.Rejoin? {
        guard let meta = try tx.treeIfPresent(metaTree), let bytes = try tx.get(Array("rejoined".utf8), in: meta) else {
            return nil
        }
        guard bytes.count == 24 else {
            throw SwiftDataError(.corruptRecord, "sync.meta: the last rejoin has \(bytes.count) bytes")
        }
        return SyncStatus.Rejoin(
            formerPosition: try RowKey.decode(Array(bytes[0..<8])), serverHead: try RowKey.decode(Array(bytes[8..<16])),
            date: Date(timeIntervalSince1970: Double(try RowKey.decode(Array(bytes[16...]))) / 1000))
    }
}

extension SyncReplica {
    /// Forgets the store's place in its zone: every `sync.*` tree and the
    /// history hold go, in one transaction. The store's models stay; a
    /// later join (of this zone or another) uploads them as new models.
    package func leave() throws {
        try store.write { tx in
            for name in try tx.treeNames() where name.hasPrefix("sync.") { try tx.dropTree(name) }
            try HistoryLog.release(Self.author, in: tx)
        }
        if let copy = zoneCopy {
            try copy.container.erase()
            try copy.leave()
        }
    }
}
