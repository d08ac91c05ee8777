import Foundation
import Strata
import StrataEngine

// The identifier map: each model of the zone has a global identifier
// (`SyncID`, 16 bytes) that names it on every device; here it maps to the
// model's row.
//
// `sync.ids`: identifier (16 bytes) → 1, row (8 bytes, RowKey), entity name
// (UTF-8) for a model this store holds; 2, entity name for a model deleted
// (a delete wins: a later change to it is ignored).
// `sync.rows`: entity name (UTF-8), 0, row (8 bytes, RowKey) → identifier.
// A row keeps the first identifier it had: an identifier merged into it
// (a unique constraint's upsert) points at the row in `sync.ids` only.
// One exception: when a merge made here ahead of the zone ends, the row
// takes the identifier of the pulled model, the one the zone keeps.

extension SyncReplica {
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

    /// Points `id` at `row`; the row takes it as its own when it has none
    /// and `claim` is true. A pulled model merged ahead of the zone into a
    /// model that a local save not pushed yet inserted does not claim its
    /// row: that model is still apart in the zone, and goes there under an
    /// identifier of its own.
    static func map(_ id: SyncID, entity: String, row: Int64, claim: Bool = true, _ tx: WriteTransaction) throws {
        let ids = try tx.treeIfPresent(idsTree) ?? tx.createTree(idsTree)
        let rows = try tx.treeIfPresent(rowsTree) ?? tx.createTree(rowsTree)
        try tx.put(id.bytes, [1] + RowKey.encode(row) + Array(entity.utf8), in: ids)
        // The first identifier a row had stays its own: an identifier
        // merged into it (a unique constraint's upsert) points at it too.
        if claim, try tx.get(rowKey(entity, row), in: rows) == nil {
            try tx.put(rowKey(entity, row), id.bytes, in: rows)
        }
    }

    /// Forgets which identifier `row` has (its model merged into another
    /// row, which its identifier points at now).
    static func unmap(entity: String, row: Int64, _ tx: WriteTransaction) throws {
        if let rows = try tx.treeIfPresent(rowsTree) { try tx.delete(rowKey(entity, row), in: rows) }
    }

    static func markDeleted(_ id: SyncID, entity: String, row: Int64?, _ tx: WriteTransaction) throws {
        let ids = try tx.treeIfPresent(idsTree) ?? tx.createTree(idsTree)
        try tx.put(id.bytes, [2] + Array(entity.utf8), in: ids)
        if let row, let rows = try tx.treeIfPresent(rowsTree) { try tx.delete(rowKey(entity, row), in: rows) }
    }

    /// `sync.mergedRows`: a row merged away on a unique constraint (entity
    /// name, 0, RowKey) → the row it merged into (RowKey), so that the
    /// local saves not pushed yet that name the first mask the second.
    static let mergedRowsTree = "sync.mergedRows"

    static func recordMergedRow(_ entity: String, _ row: Int64, into survivor: Int64, _ tx: WriteTransaction) throws {
        let tree = try tx.treeIfPresent(mergedRowsTree) ?? tx.createTree(mergedRowsTree)
        try tx.put(rowKey(entity, row), RowKey.encode(survivor), in: tree)
    }

    /// The row that `row` of `entity` merged into, through every merge
    /// since; `row` itself when it never merged.
    static func survivingRow(_ entity: String, _ row: Int64, _ tx: ReadTransaction) throws -> Int64 {
        guard let tree = try tx.treeIfPresent(mergedRowsTree) else { return row }
        var current = row
        // Rows only merge into live rows, so a chain ends; the bound keeps
        // a damaged tree from looping.
        for _ in 0..<64 {
            guard let bytes = try tx.get(rowKey(entity, current), in: tree) else { return current }
            current = try RowKey.decode(bytes)
        }
        return current
    }
}
