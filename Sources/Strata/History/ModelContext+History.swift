import Foundation
import StrataEngine

extension ModelContext {
    /// The history transactions `descriptor` selects, in token order (or
    /// its sort order), up to its `fetchLimit`.
    ///
    /// Each save that changed something recorded one transaction, in the
    /// save's own write transaction (unless the configuration's
    /// ``ModelConfiguration/recordsHistory`` is off). A predicate that
    /// compares with a token older than deleted history throws
    /// ``SwiftDataError/historyTokenExpired``: what happened after that
    /// token is no longer complete.
    public func fetchHistory<T: HistoryTransaction>(_ descriptor: HistoryDescriptor<T>) throws -> [T] {
        guard parts.isEmpty else {
            // The transactions of each store the predicate's tokens name
            // (of every store when it names none), oldest first.
            var all: [DefaultHistoryTransaction] = []
            for part in historyParts(descriptor) {
                all += try part.store.read { tx in
                    try Self.checkTokens(
                        in: descriptor, deletedThrough: try HistoryLog.deletedThrough(tx), store: part.store.identifier)
                    return try HistoryLog.read(tx, schema: part.container.schema, store: part.store.identifier)
                }
            }
            all.sort {
                ($0.timestamp, $0.storeIdentifier, $0.token.tokenValue) < ($1.timestamp, $1.storeIdentifier, $1.token.tokenValue)
            }
            return try select(all, descriptor)
        }
        let all = try store.read { tx in
            try Self.checkTokens(in: descriptor, deletedThrough: try HistoryLog.deletedThrough(tx))
            return try HistoryLog.read(
                tx, schema: container.schema, store: store.identifier, from: HistoryLog.lowerBound(of: descriptor.predicate))
        }
        return try select(all, descriptor)
    }

    /// Deletes the history transactions `descriptor` selects. Later
    /// fetches with a token older than the newest deleted one throw
    /// ``SwiftDataError/historyTokenExpired``. A store that syncs (StrataSync)
    /// keeps the saves not pushed yet: they are its outbox.
    public func deleteHistory<T: HistoryTransaction>(_ descriptor: HistoryDescriptor<T>) throws {
        guard parts.isEmpty else {
            // A read-only store keeps its history; the others delete theirs.
            let writable = historyParts(descriptor).filter { $0.store.allowsSave && $0.container.allowsSave }
            guard !writable.isEmpty else {
                throw SwiftDataError(.readOnlyStore, "deleteHistory on read-only stores")
            }
            for part in writable { try part.deleteHistory(descriptor) }
            return
        }
        guard store.allowsSave, container.allowsSave else {
            throw SwiftDataError(.readOnlyStore, "deleteHistory on a read-only store")
        }
        try store.write { tx in
            guard let tree = try tx.treeIfPresent(HistoryLog.transactions) else { return }
            let doomed = try select(
                try HistoryLog.read(tx, schema: container.schema, store: store.identifier), descriptor)
            guard !doomed.isEmpty else { return }
            var newest = try HistoryLog.deletedThrough(tx)
            // Transactions a holder still needs stay (a synced store's
            // saves that are not pushed yet: sync's outbox).
            let kept = try HistoryLog.deletableThrough(tx)
            for transaction in doomed {
                guard let value = (transaction as? DefaultHistoryTransaction)?.token.tokenValue, value <= kept else { continue }
                try tx.delete(RowKey.encode(value), in: tree)
                newest = max(newest, value)
            }
            let meta = try tx.treeIfPresent(HistoryLog.meta) ?? tx.createTree(HistoryLog.meta)
            try tx.put(HistoryLog.deletedKey, RowKey.encode(newest), in: meta)
        }
    }

    private func select<T: HistoryTransaction>(_ all: [DefaultHistoryTransaction], _ descriptor: HistoryDescriptor<T>) throws
        -> [T]
    {
        guard let typed = all as? [T] else {
            throw SwiftDataError(.unknownModelType, "Strata records history as DefaultHistoryTransaction, not \(T.self)")
        }
        var result = typed
        if let predicate = descriptor.predicate { result = try result.filter { try predicate.evaluate($0) } }
        if !descriptor.sortBy.isEmpty { result.sort(using: descriptor.sortBy) }
        if let limit = descriptor.fetchLimit { result = Array(result.prefix(max(0, limit))) }
        return result
    }

    /// The parts whose history `descriptor` selects from: those of the
    /// stores its predicate's tokens belong to (a token compares with
    /// transactions of its own store only), or every part.
    private func historyParts<T>(_ descriptor: HistoryDescriptor<T>) -> [ModelContext] {
        let stores = Set(Self.tokens(in: descriptor).map(\.storeIdentifier))
        guard !stores.isEmpty else { return parts }
        return parts.filter { stores.contains($0.store.identifier) }
    }

    /// The history tokens `descriptor`'s predicate holds.
    private static func tokens<T>(in descriptor: HistoryDescriptor<T>) -> [DefaultHistoryToken] {
        guard let predicate = descriptor.predicate else { return [] }
        var found: [DefaultHistoryToken] = []
        func visit(_ value: Any, depth: Int) {
            guard depth < 64 else { return }
            if let token = value as? DefaultHistoryToken {
                found.append(token)
                return
            }
            for child in Mirror(reflecting: value).children { visit(child.value, depth: depth + 1) }
        }
        visit(predicate.expression, depth: 0)
        return found
    }

    /// Throws ``SwiftDataError/historyTokenExpired`` when the predicate
    /// holds a token older than the newest deleted transaction. With
    /// `store`, only tokens of that store are checked.
    private static func checkTokens<T>(
        in descriptor: HistoryDescriptor<T>, deletedThrough: Int64, store: String? = nil
    ) throws {
        guard deletedThrough > 0 else { return }
        let expired = tokens(in: descriptor).first {
            $0.tokenValue < deletedThrough && (store == nil || $0.storeIdentifier == store)
        }
        if let expired {
            throw SwiftDataError(
                .historyTokenExpired,
                "\(expired) is older than deleted history (through token \(deletedThrough)); fetch from the start")
        }
    }
}
