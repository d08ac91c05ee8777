import Foundation
import Strata
import StrataEngine

// Server changes moved past without being applied.
//
// `sync.setAside`: server sequence number (8 bytes, RowKey) → one byte (1:
// the change was this store's own save, 0: another device's), the reason's
// raw value (UTF-8), a zero byte, the message (UTF-8).

extension SyncReplica {
    static let setAsideTree = "sync.setAside"

    /// Moves the position past server change `seq` (pushed by `device` as
    /// its save `token`) without applying it, and records why. This
    /// device's own change leaves the outbox as a pushed one would: the
    /// server holds it, and the store keeps what the save did.
    package func setAside(
        seq: Int64, device: SyncID, token: Int64, reason: SyncStatus.SetAsideChange.Reason, message: String
    ) throws {
        let copy = copyInStep()
        try store.write { tx in
            let own = try Self.readMeta(tx).device == device
            if own {
                if let outbox = try tx.treeIfPresent(Self.outboxTree) { try tx.delete(RowKey.encode(token), in: outbox) }
                try Self.setPushed(max(token, try Self.number("pushed", tx)), tx)
            }
            let tree = try tx.treeIfPresent(Self.setAsideTree) ?? tx.createTree(Self.setAsideTree)
            let value = [own ? 1 : 0] + Array(reason.rawValue.utf8) + [0] + Array(message.utf8)
            try tx.put(RowKey.encode(seq), value, in: tree)
            try Self.setPosition(seq, change: (device, token), tx)
        }
        copySetsAside(copy, seq: seq, device: device, token: token)
    }

    /// The changes set aside, in the zone's order.
    static func setAside(in tx: ReadTransaction) throws -> [SyncStatus.SetAsideChange] {
        guard let tree = try tx.treeIfPresent(setAsideTree) else { return [] }
        var changes: [SyncStatus.SetAsideChange] = []
        try tx.forEach(tree) { key, value in
            let seq = try RowKey.decode(key)
            guard value.count >= 2, value[0] <= 1, let zero = value[1...].firstIndex(of: 0),
                let reason = SyncStatus.SetAsideChange.Reason(rawValue: String(decoding: value[1..<zero], as: UTF8.self))
            else { throw SwiftDataError(.corruptRecord, "\(setAsideTree): entry \(seq) does not decode") }
            changes.append(
                SyncStatus.SetAsideChange(
                    serverSequence: seq, reason: reason, message: String(decoding: value[(zero + 1)...], as: UTF8.self),
                    isOwnSave: value[0] == 1))
            return true
        }
        return changes
    }
}
