import StrataEngine

// Holds on history (format: `h.holds` in HistoryLog.swift).

extension HistoryLog {
    static let holds = TreeName.historyHolds

    /// Keeps every transaction after `token` from `deleteHistory`, for
    /// `holder`, until the holder moves its hold on or releases it: what a
    /// reader of history that has not read it all yet needs (sync pushes
    /// the saves after the last one it pushed). A later hold of the same
    /// holder replaces this one.
    package static func hold(_ holder: String, after token: Int64, in tx: WriteTransaction) throws {
        let tree = try tx.treeIfPresent(holds) ?? tx.createTree(holds)
        try tx.put(Array(holder.utf8), RowKey.encode(token), in: tree)
    }

    /// `holder`'s hold, or nil when it holds nothing.
    package static func heldAfter(_ holder: String, in tx: ReadTransaction) throws -> Int64? {
        guard let tree = try tx.treeIfPresent(holds), let bytes = try tx.get(Array(holder.utf8), in: tree) else {
            return nil
        }
        return try RowKey.decode(bytes)
    }

    /// Ends `holder`'s hold.
    package static func release(_ holder: String, in tx: WriteTransaction) throws {
        guard let tree = try tx.treeIfPresent(holds) else { return }
        try tx.delete(Array(holder.utf8), in: tree)
    }

    /// The last token `deleteHistory` may delete: the lowest hold
    /// (`Int64.max` when nothing holds history).
    static func deletableThrough(_ tx: ReadTransaction) throws -> Int64 {
        guard let tree = try tx.treeIfPresent(holds) else { return .max }
        var lowest = Int64.max
        try tx.forEach(tree) { _, value in
            lowest = min(lowest, try RowKey.decode(value))
            return true
        }
        return lowest
    }
}
